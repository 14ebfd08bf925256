/* host/router.c against SPEC §15, case by case: which route a request takes
   (a static segment beats a parameter, a parameter beats a wildcard), params
   percent-decoded (*rest without its leading slash), bad escapes refused,
   405 allow lists, the reserved paths of SPEC §2. Expected results are
   written by hand from the spec, not taken from the code. Exit status 0
   when every case passes; each failure prints a line. */
#include <lauxlib.h>
#include <llhttp.h>
#include <lualib.h>
#include <stdio.h>
#include <string.h>

#include "host/lua_request.h"
#include "host/router.h"

static int failures;

static void fail(const char *what, const char *got, const char *want) {
  printf("FAIL %s: got \"%s\", want \"%s\"\n", what, got, want);
  failures++;
}

/* The routes every case runs against: key → their index in this list. */
static const char *const keys[] = {
    "GET /tasks",        "POST /tasks",      "GET /tasks/new",       "GET /tasks/:id",
    "DELETE /tasks/:id", "GET /files/*rest", "GET /files/:name/raw", "PUT /a/:x/b/:y",
    "GET /a/:x/b/*rest", "OPTIONS /opts",    "HEAD /head-only",
};
#define NKEYS (sizeof keys / sizeof keys[0])
static const clank_route_t *added[NKEYS];

static const struct {
  int method;
  const char *path;
  const char *want; /* the key of the route it takes, or NULL */
} finds[] = {
    {HTTP_GET, "/tasks", "GET /tasks"},
    {HTTP_POST, "/tasks", "POST /tasks"},
    {HTTP_GET, "/tasks/new", "GET /tasks/new"}, /* static beats param */
    {HTTP_GET, "/tasks/42", "GET /tasks/:id"},
    {HTTP_DELETE, "/tasks/42", "DELETE /tasks/:id"},
    {HTTP_DELETE, "/tasks/new", "DELETE /tasks/:id"}, /* no static DELETE there */
    {HTTP_GET, "/files/a/b.txt", "GET /files/*rest"},
    {HTTP_GET, "/files/", "GET /files/*rest"},          /* the rest may be empty */
    {HTTP_GET, "/files/x/raw", "GET /files/:name/raw"}, /* param beats wildcard */
    {HTTP_GET, "/files/x/raw/more", "GET /files/*rest"},
    {HTTP_PUT, "/a/1/b/2", "PUT /a/:x/b/:y"},
    {HTTP_GET, "/a/1/b/2/3", "GET /a/:x/b/*rest"},
    {HTTP_GET, "/tasks/", NULL}, /* a parameter is never empty */
    {HTTP_GET, "/tasks/1/2", NULL},
    {HTTP_POST, "/tasks/42", NULL},
    {HTTP_GET, "/Tasks", NULL}, /* case matters */
    {HTTP_GET, "/tasks/x/", NULL},
    {HTTP_GET, "/files", NULL},
    {HTTP_HEAD, "/tasks", NULL}, /* HEAD by a GET route is dispatch's, not the router's */
    {HTTP_HEAD, "/head-only", "HEAD /head-only"},
};

static const struct {
  const char *path;
  const char *name;
  const char *want; /* params[name] */
} params[] = {
    {"/tasks/42", "id", "42"},
    {"/tasks/a%20b", "id", "a b"},
    {"/tasks/%E2%82%AC", "id", "\xE2\x82\xAC"},
    {"/tasks/a+b", "id", "a+b"}, /* '+' is no space in a path */
    {"/tasks/%2F", "id", "/"},
    {"/files/a/b.txt", "rest", "a/b.txt"}, /* without its leading slash */
    {"/files/", "rest", ""},
    {"/files/a%2Fb/c%20d", "rest", "a/b/c d"},
    {"/a/x%41/b/y", "x", "xA"},
    {"/a/x/b/y/z", "rest", "y/z"},
};

static const struct {
  const char *path;
  int valid;
} escapes[] = {
    {"/tasks/ok", 1},
    {"/tasks/%41", 1},
    {"/tasks/%zz", 0},
    {"/tasks/%4", 0},
    {"/tasks/%", 0},
    {"/tasks/%C3", 0}, /* a cut UTF-8 */
    {"/tasks/%ED%A0%80", 0},
    /* a surrogate */ {"/tasks/%C0%AF", 0}, /* overlong */
    {"/tasks/%F4%90%80%80", 0},
    /* past U+10FFFF */ {"/files/a/%zz", 0},
    {"/files/a/%41", 1},
};

static const struct {
  const char *path;
  const char *want; /* the allow list, "" when no route has the path */
} allows[] = {
    {"/tasks", "GET, HEAD, POST"},
    {"/tasks/42", "DELETE, GET, HEAD"},
    {"/tasks/new", "DELETE, GET, HEAD"},
    {"/opts", "OPTIONS"},
    {"/head-only", "HEAD"},
    {"/a/1/b/2", "GET, HEAD, PUT"}, /* *rest takes "2" too */
    {"/a/1/b/2/3", "GET, HEAD"},
    {"/nothing", ""},
    {"/tasks/1/2", ""},
};

static const struct {
  const char *path;
  int has_views, want;
} reserved[] = {
    {"/manifest", 0, 1},
    {"/.well-known/clank", 0, 1},
    {"/actions/x", 0, 1},
    {"/actions/", 0, 1},
    {"/__clank/mcp", 0, 1},
    {"/__clank/anything", 0, 1},
    {"/views/list", 0, 1},
    {"/", 1, 1},
    {"/", 0, 0},
    {"/tasks", 1, 0},
    {"/actionsx", 0, 0},
    {"/manifest/x", 0, 0},
    {"/viewsx", 1, 0},
};

static const char *const refused[] = {"BREW /x", "GET", "GET ", "GET x", "get /x", "/x"};

static const char *key_of(const clank_route_t *r) {
  for (size_t i = 0; i < NKEYS; i++)
    if (added[i] == r) return keys[i];
  return r ? "(a route not added)" : "NULL";
}

int main(void) {
  clank_router_t rt = {0};
  for (size_t i = 0; i < NKEYS; i++) {
    added[i] = clank_router_add(&rt, keys[i], strlen(keys[i]));
    if (added[i] == NULL) fail("add", "NULL", keys[i]);
  }
  /* add may move routes while the table grows: look them up again */
  for (size_t i = 0; i < NKEYS; i++) {
    const char *space = strchr(keys[i], ' ');
    const clank_route_t *list = NULL;
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
      list = pass ? rt.patterns : rt.routes;
      n = pass ? rt.npatterns : rt.nroutes;
      for (int k = 0; k < n; k++)
        if (strcmp(list[k].path, space + 1) == 0 &&
            strncmp(llhttp_method_name((llhttp_method_t)list[k].method), keys[i],
                    (size_t)(space - keys[i])) == 0)
          added[i] = &list[k];
    }
  }

  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    clank_router_t other = {0};
    if (clank_router_add(&other, refused[i], strlen(refused[i])) != NULL)
      fail(refused[i], "added", "refused");
    clank_router_free(&other);
  }

  for (size_t i = 0; i < sizeof finds / sizeof finds[0]; i++) {
    const clank_route_t *r =
        clank_router_find(&rt, finds[i].method, finds[i].path, strlen(finds[i].path));
    const char *got = key_of(r), *want = finds[i].want ? finds[i].want : "NULL";
    char what[96];
    snprintf(what, sizeof what, "find %s %s", llhttp_method_name(finds[i].method), finds[i].path);
    if (strcmp(got, want) != 0) fail(what, got, want);
  }

  lua_State *L = luaL_newstate();
  lua_newtable(L); /* 1: the field names' table, as clank_names_push's */
  lua_pushliteral(L, "params");
  lua_rawseti(L, 1, CLANK_NAME_PARAMS);
  for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
    const char *path = params[i].path;
    const clank_route_t *r = clank_router_find(&rt, HTTP_GET, path, strlen(path));
    if (r == NULL) r = clank_router_find(&rt, HTTP_PUT, path, strlen(path));
    char what[96];
    snprintf(what, sizeof what, "params.%s of %s", params[i].name, path);
    if (r == NULL) {
      fail(what, "no route", params[i].want);
      continue;
    }
    lua_newtable(L); /* the request */
    clank_route_set_params(L, 1, r, path, strlen(path));
    lua_getfield(L, -1, "params");
    lua_getfield(L, -1, params[i].name);
    const char *got = lua_tostring(L, -1);
    if (got == NULL || strcmp(got, params[i].want) != 0)
      fail(what, got ? got : "nil", params[i].want);
    lua_settop(L, 1);
  }
  lua_close(L);

  for (size_t i = 0; i < sizeof escapes / sizeof escapes[0]; i++) {
    const char *path = escapes[i].path;
    const clank_route_t *r = clank_router_find(&rt, HTTP_GET, path, strlen(path));
    char what[96];
    snprintf(what, sizeof what, "params of %s valid", path);
    if (r == NULL)
      fail(what, "no route", "a route");
    else if (clank_route_params_valid(r, path, strlen(path)) != escapes[i].valid)
      fail(what, escapes[i].valid ? "no" : "yes", escapes[i].valid ? "yes" : "no");
  }

  for (size_t i = 0; i < sizeof allows / sizeof allows[0]; i++) {
    char out[96], what[96];
    size_t n = clank_router_allow(&rt, allows[i].path, strlen(allows[i].path), out, sizeof out);
    snprintf(what, sizeof what, "allow for %s", allows[i].path);
    if (strcmp(out, allows[i].want) != 0 || n != strlen(allows[i].want))
      fail(what, out, allows[i].want);
  }

  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
    const char *p = reserved[i].path;
    char what[96];
    snprintf(what, sizeof what, "%s reserved (views: %d)", p, reserved[i].has_views);
    if (clank_router_reserved(p, strlen(p), reserved[i].has_views) != reserved[i].want)
      fail(what, reserved[i].want ? "no" : "yes", reserved[i].want ? "yes" : "no");
  }

  clank_router_free(&rt);
  if (failures) printf("%d router cases failed\n", failures);
  return failures != 0;
}
