/* The Lua request table of SPEC §2, made from a parsed request. */
#include "host/lua_request.h"

#include <lauxlib.h>
#include <llhttp.h>
#include <string.h>

#include "core/scheduler.h"
#include "util/bytes.h"

/* application/x-www-form-urlencoded decoding, as URLSearchParams does it:
   '+' is a space, a bad escape stays as it is. */
static void push_form_decoded(lua_State *L, const char *s, size_t n) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '+') {
      luaL_addchar(&b, ' ');
    } else if (c == '%' && clank_percent_byte(s, n, i) >= 0) {
      luaL_addchar(&b, (char)clank_percent_byte(s, n, i));
      i += 2;
    } else {
      luaL_addchar(&b, c);
    }
  }
  luaL_pushresult(&b);
}

static void push_query(lua_State *L, const char *q, size_t n) {
  lua_newtable(L);
  size_t i = 0;
  while (i < n) {
    size_t end = i;
    while (end < n && q[end] != '&') end++;
    if (end > i) {
      const char *eq = memchr(q + i, '=', end - i);
      size_t klen = eq ? (size_t)(eq - (q + i)) : end - i;
      push_form_decoded(L, q + i, klen);
      if (eq)
        push_form_decoded(L, eq + 1, (size_t)(q + end - (eq + 1)));
      else
        lua_pushliteral(L, "");
      lua_rawset(L, -3); /* the last value wins */
    }
    i = end + 1;
  }
}

/* The header names most requests carry, held in the names' table after
   CLANK_NAME_META, shortest first: pushing a held one is an array read, not
   the hashing and lookup of a new string. */
#define HELD(s) \
  { s, sizeof s - 1 }
static const struct {
  const char *name;
  size_t len;
} held_header[] = {HELD("host"),
                   HELD("accept"),
                   HELD("cookie"),
                   HELD("origin"),
                   HELD("referer"),
                   HELD("upgrade"),
                   HELD("connection"),
                   HELD("user-agent"),
                   HELD("content-type"),
                   HELD("x-request-id"),
                   HELD("cache-control"),
                   HELD("authorization"),
                   HELD("if-none-match"),
                   HELD("content-length"),
                   HELD("sec-fetch-site"),
                   HELD("sec-fetch-mode"),
                   HELD("sec-fetch-dest"),
                   HELD("mcp-session-id"),
                   HELD("accept-encoding"),
                   HELD("accept-language"),
                   HELD("if-modified-since"),
                   HELD("x-clank-confirmation")};
#define NHELD ((int)(sizeof held_header / sizeof held_header[0]))

/* The names' table index of a held header name, or 0. */
static int held_index(const char *name, size_t len) {
  for (int i = 0; i < NHELD && held_header[i].len <= len; i++)
    if (held_header[i].len == len && memcmp(held_header[i].name, name, len) == 0)
      return CLANK_NAME_META + 1 + i;
  return 0;
}

static void push_headers(lua_State *L, const clank_request_t *r, int names) {
  lua_createtable(L, 0, r->nheaders);
  for (int i = 0; i < r->nheaders; i++) {
    const clank_header_t *h = &r->headers[i];
    const char *name = r->head.data + h->name_off;
    int held = held_index(name, h->name_len);
    if (held)
      lua_rawgeti(L, names, held);
    else
      lua_pushlstring(L, name, h->name_len);
    lua_pushvalue(L, -1);
    if (i > 0 && lua_rawget(L, -3) == LUA_TSTRING) {
      /* repeated: joined with ", " */
      lua_pushliteral(L, ", ");
      lua_pushlstring(L, r->head.data + h->value_off, h->value_len);
      lua_concat(L, 3);
    } else {
      lua_pop(L, 1);
      lua_pushlstring(L, r->head.data + h->value_off, h->value_len);
    }
    lua_rawset(L, -3);
  }
}

/* __index of a request: require("clank.request").index(request, key), which
   answers request:form(), request:json() and the lazy request.cookies. */
static int request_index(lua_State *L) {
  lua_settop(L, 2);
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, "clank.request") != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "clank.request");
    lua_call(L, 1, 1);
  }
  lua_getfield(L, -1, "index");
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_call(L, 2, 1);
  return 1;
}

/* Only its address matters: the registry key of the names' table: the
   fields' and the held headers' names (strings made once per Lua state, so
   no field is set or read by a C string, whose interning costs more than the
   table's own work) and the requests' metatable. */
static const char names_key = 0;

static const char *const name_text[] = {
    [CLANK_NAME_METHOD] = "method",     [CLANK_NAME_URL] = "url",
    [CLANK_NAME_PATH] = "path",         [CLANK_NAME_QUERY] = "query",
    [CLANK_NAME_HEADERS] = "headers",   [CLANK_NAME_BODY] = "body",
    [CLANK_NAME_SCHEME] = "scheme",     [CLANK_NAME_PARAMS] = "params",
    [CLANK_NAME_SCHEME_VALUE] = "http", [CLANK_NAME_STATUS] = "status",
    [CLANK_NAME_COOKIES] = "cookies",   [CLANK_NAME_STREAM] = "stream",
};

int clank_names_push(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &names_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, CLANK_NAME_META + NHELD, 0);
    for (int i = 1; i < CLANK_NAME_META; i++) {
      lua_pushstring(L, name_text[i]);
      lua_rawseti(L, -2, i);
    }
    /* behind a TLS proxy every request is https (--public-origin, SPEC §13) */
    clank_sched_t *s = clank_sched_held(L);
    const clank_bridge_public_t *pub = s ? clank_bridge_public_of(s) : NULL;
    if (pub && pub->origin && strncmp(pub->origin, "https:", 6) == 0) {
      lua_pushliteral(L, "https");
      lua_rawseti(L, -2, CLANK_NAME_SCHEME_VALUE);
    }
    for (int i = 0; i < NHELD; i++) {
      lua_pushlstring(L, held_header[i].name, held_header[i].len);
      lua_rawseti(L, -2, CLANK_NAME_META + 1 + i);
    }
    lua_createtable(L, 0, 1); /* the requests' metatable */
    lua_pushcfunction(L, request_index);
    lua_setfield(L, -2, "__index");
    lua_rawseti(L, -2, CLANK_NAME_META);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &names_key);
  }
  return lua_gettop(L);
}

void clank_lua_request_set_in(lua_State *L, int names, int name) {
  lua_rawgeti(L, names, name);
  lua_insert(L, -2);
  lua_rawset(L, -3);
}

void clank_lua_request_push_in(lua_State *L, const clank_request_t *r, int n) {
  /* presized for every field it gets: with params (a route's) and a body
     there are 8, which still fit without a rehash */
  lua_createtable(L, 0, 6 + (r->body.len > 0) + 1);
  lua_rawgeti(L, n, CLANK_NAME_META);
  lua_setmetatable(L, -2);
  lua_rawgeti(L, n, CLANK_NAME_METHOD);
  lua_pushstring(L, llhttp_method_name((llhttp_method_t)r->method));
  lua_rawset(L, -3);
  lua_pushlstring(L, r->head.data, r->url_len);
  lua_rawgeti(L, n, CLANK_NAME_URL);
  lua_pushvalue(L, -2);
  lua_rawset(L, -4);
  clank_target_t t;
  clank_request_target(r, &t);
  if (t.path != r->head.data || t.path_len != r->url_len) { /* else the url is the path */
    lua_pop(L, 1);
    lua_pushlstring(L, t.path, t.path_len);
  }
  clank_lua_request_set_in(L, n, CLANK_NAME_PATH);
  lua_rawgeti(L, n, CLANK_NAME_QUERY); /* the key first: no rotation after */
  push_query(L, t.query, t.query_len);
  lua_rawset(L, -3);
  lua_rawgeti(L, n, CLANK_NAME_HEADERS);
  push_headers(L, r, n);
  lua_rawset(L, -3);
  if (r->body.len > 0) {
    lua_rawgeti(L, n, CLANK_NAME_BODY);
    lua_pushlstring(L, r->body.data, r->body.len);
    lua_rawset(L, -3);
  }
  lua_rawgeti(L, n, CLANK_NAME_SCHEME);
  lua_rawgeti(L, n, CLANK_NAME_SCHEME_VALUE);
  lua_rawset(L, -3);
}

void clank_lua_request_push(lua_State *L, const clank_request_t *r) {
  int n = clank_names_push(L);
  clank_lua_request_push_in(L, r, n);
  lua_replace(L, n);
}

/* A request kept as bytes until Lua asks for its table. */
typedef struct maker_s {
  int method, nheaders;
  uint32_t url_len;
  size_t head_len, body_len;
  clank_header_t headers[]; /* then the head's bytes, then the body's */
} maker_t;

/* Only its address matters: the registry key of the makers' metatable. */
static const char maker_mt_key = 0;

/* __call: the request table, made from the copy as from the parsed request. */
static int maker_call(lua_State *L) {
  const maker_t *m = lua_touserdata(L, 1);
  clank_request_t parsed, *r = &parsed; /* the fields clank_lua_request_push reads */
  r->method = m->method;
  r->nheaders = m->nheaders;
  r->url_len = m->url_len;
  memcpy(r->headers, m->headers, sizeof m->headers[0] * (size_t)m->nheaders);
  r->head.data = (char *)(m->headers + m->nheaders);
  r->head.len = r->head.cap = m->head_len;
  r->body.data = r->head.data + m->head_len;
  r->body.len = r->body.cap = m->body_len;
  clank_lua_request_push(L, r);
  return 1;
}

void clank_lua_request_push_maker(lua_State *L, const clank_request_t *r) {
  size_t headers = sizeof r->headers[0] * (size_t)r->nheaders;
  maker_t *m = lua_newuserdatauv(L, sizeof *m + headers + r->head.len + r->body.len, 0);
  m->method = r->method;
  m->nheaders = r->nheaders;
  m->url_len = r->url_len;
  m->head_len = r->head.len;
  m->body_len = r->body.len;
  memcpy(m->headers, r->headers, headers);
  char *bytes = (char *)(m->headers + r->nheaders);
  if (r->head.len) memcpy(bytes, r->head.data, r->head.len);
  if (r->body.len) memcpy(bytes + r->head.len, r->body.data, r->body.len);
  /* in clank-run, held by the scheduler too: one array read, no hashing */
  clank_sched_t *s = clank_sched_held(L);
  if (s && s->held[CLANK_HELD_MAKER_MT]) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->held[CLANK_HELD_MAKER_MT]);
    lua_setmetatable(L, -2);
    return;
  }
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &maker_mt_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, maker_call);
    lua_setfield(L, -2, "__call");
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &maker_mt_key);
  }
  if (s) {
    lua_pushvalue(L, -1);
    s->held[CLANK_HELD_MAKER_MT] = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  lua_setmetatable(L, -2);
}
