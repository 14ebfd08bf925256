/* The router (SPEC §15): owns an app's route table, reads it from app.routes,
   parses "METHOD /path" patterns into segments, matches a request's path
   (a static segment beats a parameter, a parameter beats a wildcard),
   decodes params, and lists a path's methods for a 405. What a valid route
   is, clank.app says (lua/clank/app.lua); nothing here checks it again. */
#include "host/router.h"

#include <lauxlib.h>
#include <llhttp.h>
#include <stdlib.h>
#include <string.h>

#include "agent/bridge.h"
#include "host/lua_request.h"

/* ---- building ---- */

/* The llhttp method named name[0..n), or -1: the names are llhttp's own. */
static int method_named(const char *name, size_t n) {
#define METHOD(num, id, text) \
  if (n == sizeof #text - 1 && memcmp(name, #text, n) == 0) return num;
  HTTP_METHOD_MAP(METHOD)
#undef METHOD
  return -1;
}

/* A path with a segment that starts with ':' or '*' is a pattern. */
static int is_pattern(const char *p, size_t n) {
  for (size_t i = 0; i + 1 < n; i++)
    if (p[i] == '/' && (p[i + 1] == ':' || p[i + 1] == '*')) return 1;
  return 0;
}

/* A pattern's segments: ":name" a parameter, "*name" the rest of the path. */
static int parse_pattern(clank_route_t *r) {
  const char *p = r->path;
  size_t n = r->path_len;
  int nsegs = 0;
  for (size_t i = 0; i < n; i++) nsegs += p[i] == '/';
  r->segs = calloc((size_t)nsegs + 1, sizeof *r->segs);
  if (r->segs == NULL) return -1;
  for (size_t i = 0; i < n;) {
    size_t start = i + 1, end = start;
    while (end < n && p[end] != '/') end++;
    clank_seg_t *seg = &r->segs[r->nsegs++];
    seg->kind = start == end      ? CLANK_SEG_LITERAL
                : p[start] == ':' ? CLANK_SEG_PARAM
                : p[start] == '*' ? CLANK_SEG_REST
                                  : CLANK_SEG_LITERAL;
    int sigil = seg->kind != CLANK_SEG_LITERAL;
    seg->text = p + start + sigil;
    seg->len = end - start - (size_t)sigil;
    i = end;
  }
  return 0;
}

/* Room for one more route in *list; NULL when memory ran out. */
static clank_route_t *grow(clank_route_t **list, int *n, int *cap) {
  if (*n == *cap) {
    int want = *cap ? *cap * 2 : 8;
    clank_route_t *more = realloc(*list, (size_t)want * sizeof *more);
    if (more == NULL) return NULL;
    *list = more;
    *cap = want;
  }
  clank_route_t *r = &(*list)[(*n)++];
  memset(r, 0, sizeof *r);
  return r;
}

clank_route_t *clank_router_add(clank_router_t *rt, const char *key, size_t key_len) {
  const char *space = memchr(key, ' ', key_len);
  int method = space ? method_named(key, (size_t)(space - key)) : -1;
  if (method < 0 || space + 1 == key + key_len || space[1] != '/') return NULL;
  const char *path = space + 1;
  size_t path_len = key_len - (size_t)(path - key);
  char *copy = malloc(path_len + 1);
  if (copy == NULL) return NULL;
  memcpy(copy, path, path_len);
  copy[path_len] = '\0';
  int pattern = is_pattern(path, path_len);
  clank_route_t *r = pattern ? grow(&rt->patterns, &rt->npatterns, &rt->cap_patterns)
                             : grow(&rt->routes, &rt->nroutes, &rt->cap_routes);
  if (r == NULL) {
    free(copy);
    return NULL;
  }
  r->method = method;
  r->path = copy;
  r->path_len = path_len;
  r->handler_ref = LUA_NOREF;
  if (pattern && parse_pattern(r) != 0) return NULL; /* freed with the router */
  return r;
}

/* [app] → app.routes, each { handler = fn, bodyLimit?, crossSite? } or a function. */
void clank_router_read(lua_State *L, clank_router_t *rt) {
  if (lua_getfield(L, -1, "routes") != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
    size_t key_len = 0;
    const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &key_len) : "";
    clank_route_t *r = clank_router_add(rt, key, key_len);
    if (r && lua_istable(L, -1)) {
      lua_Integer limit = 0;
      if (lua_getfield(L, -1, "bodyLimit") == LUA_TNUMBER) limit = lua_tointeger(L, -1);
      r->body_limit = limit > 0 ? (size_t)limit : 0;
      lua_getfield(L, -2, "crossSite");
      r->cross_site = lua_toboolean(L, -1);
      lua_getfield(L, -3, "handler");
      lua_replace(L, -4);
      lua_pop(L, 2);
    }
    if (r == NULL || !lua_isfunction(L, -1)) /* changed after clank.app checked it */
      luaL_error(L, "route '%s' was not accepted by clank.app", key);
    lua_Debug ar;
    lua_pushvalue(L, -1);
    lua_getinfo(L, ">u", &ar); /* a C function is a vararg one */
    r->takes_request = ar.isvararg || ar.nparams >= 1;
    lua_pushvalue(L, -1);
    r->handler_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  lua_pop(L, 1);
}

void clank_router_free(clank_router_t *rt) {
  for (int i = 0; i < rt->nroutes; i++) free((char *)rt->routes[i].path);
  free(rt->routes);
  for (int i = 0; i < rt->npatterns; i++) {
    free((char *)rt->patterns[i].path);
    free(rt->patterns[i].segs);
  }
  free(rt->patterns);
  memset(rt, 0, sizeof *rt);
}

/* ---- matching ---- */

/* Whether path matches the pattern r; with fn, tells it each parameter's
   span: a parameter is one segment, not empty; the rest is what follows its
   slash (possibly nothing). No allocation. */
static int walk_params(const clank_route_t *r, const char *p, size_t n,
                       void (*fn)(void *ud, const clank_seg_t *seg, const char *v, size_t len),
                       void *ud) {
  size_t i = 0;
  for (int s = 0; s < r->nsegs; s++) {
    const clank_seg_t *seg = &r->segs[s];
    if (i >= n || p[i] != '/') return 0;
    i++;
    if (seg->kind == CLANK_SEG_REST) {
      if (fn) fn(ud, seg, p + i, n - i);
      return 1;
    }
    const char *slash = memchr(p + i, '/', n - i);
    size_t end = slash ? (size_t)(slash - p) : n;
    if (seg->kind == CLANK_SEG_LITERAL
            ? end - i != seg->len || memcmp(p + i, seg->text, seg->len) != 0
            : end == i)
      return 0;
    if (fn && seg->kind == CLANK_SEG_PARAM) fn(ud, seg, p + i, end - i);
    i = end;
  }
  return i == n;
}

/* Precedence, segment by segment: a literal beats a parameter, a parameter
   beats the rest. */
static int more_specific(const clank_route_t *a, const clank_route_t *b) {
  for (int s = 0; s < a->nsegs && s < b->nsegs; s++)
    if (a->segs[s].kind != b->segs[s].kind) return a->segs[s].kind < b->segs[s].kind;
  return 0;
}

const clank_route_t *clank_router_find(const clank_router_t *rt, int method, const char *path,
                                       size_t path_len) {
  for (int i = 0; i < rt->nroutes; i++) {
    const clank_route_t *r = &rt->routes[i];
    if (r->method == method && r->path_len == path_len && memcmp(r->path, path, path_len) == 0)
      return r;
  }
  if (rt->npatterns == 0) return NULL;
  const clank_route_t *best = NULL;
  for (int i = 0; i < rt->npatterns; i++) {
    const clank_route_t *r = &rt->patterns[i];
    if (r->method == method && walk_params(r, path, path_len, NULL, NULL) &&
        (best == NULL || more_specific(r, best)))
      best = r;
  }
  return best;
}

/* The methods of the routes path matches, a bit each (llhttp's methods are
   fewer than 64). */
static unsigned long long methods_of(const clank_router_t *rt, const char *path, size_t path_len) {
  unsigned long long set = 0;
  for (int i = 0; i < rt->nroutes; i++) {
    const clank_route_t *r = &rt->routes[i];
    if (r->path_len == path_len && memcmp(r->path, path, path_len) == 0) set |= 1ull << r->method;
  }
  for (int i = 0; i < rt->npatterns; i++)
    if (walk_params(&rt->patterns[i], path, path_len, NULL, NULL))
      set |= 1ull << rt->patterns[i].method;
  if (set & (1ull << HTTP_GET)) set |= 1ull << HTTP_HEAD; /* HEAD is answered like GET */
  return set;
}

size_t clank_router_allow(const clank_router_t *rt, const char *path, size_t path_len, char *out,
                          size_t outlen) {
  unsigned long long set = methods_of(rt, path, path_len);
  size_t k = 0;
  if (outlen > 0) out[0] = '\0';
  const char *last = ""; /* the names in order: each round writes the least one after last */
  for (;;) {
    const char *next = NULL;
    for (int m = 0; m < 64; m++)
      if (set & (1ull << m)) {
        const char *name = llhttp_method_name((llhttp_method_t)m);
        if (strcmp(name, last) > 0 && (next == NULL || strcmp(name, next) < 0)) next = name;
      }
    if (next == NULL) return k;
    size_t len = strlen(next), sep = k ? 2 : 0;
    if (k + sep + len < outlen) {
      memcpy(out + k, ", ", sep);
      memcpy(out + k + sep, next, len + 1);
      k += sep + len;
    }
    last = next;
  }
}

static void check_param(void *ud, const clank_seg_t *seg, const char *v, size_t n) {
  (void)seg;
  if (clank_uri_decode(v, n, NULL) == CLANK_URI_BAD) *(int *)ud = 0;
}

int clank_route_params_valid(const clank_route_t *r, const char *path, size_t path_len) {
  int valid = 1;
  if (r->segs) walk_params(r, path, path_len, check_param, &valid);
  return valid;
}

/* [params] → params[name] = the value decoded (kept as it is when it does not decode) */
static void set_param(void *ud, const clank_seg_t *seg, const char *v, size_t n) {
  lua_State *L = ud;
  lua_pushlstring(L, seg->text, seg->len);
  luaL_Buffer b;
  char *out = luaL_buffinitsize(L, &b, n);
  size_t k = clank_uri_decode(v, n, out);
  luaL_pushresultsize(&b, k == CLANK_URI_BAD ? 0 : k);
  if (k == CLANK_URI_BAD) { /* kept as it is */
    lua_pop(L, 1);
    lua_pushlstring(L, v, n);
  }
  lua_rawset(L, -3);
}

void clank_route_set_params(lua_State *L, int names, const clank_route_t *r, const char *path,
                            size_t path_len) {
  lua_rawgeti(L, names, CLANK_NAME_PARAMS);
  lua_createtable(L, 0, r->segs ? r->nsegs : 0);
  if (r->segs) walk_params(r, path, path_len, set_param, L);
  lua_rawset(L, -3);
}

int clank_router_reserved(const char *p, size_t n, int has_views) {
  return clank_bridge_reserved_path(p, n, has_views);
}
