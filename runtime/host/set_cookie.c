/* set-cookie lines (RFC 6265 §4.1) from a route answer's cookies table. */
#include "host/set_cookie.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COOKIES 64

typedef struct {
  const char *s;
  size_t n;
} span_t;

static int span_cmp(const void *a, const void *b) {
  const span_t *x = a, *y = b;
  int d = memcmp(x->s, y->s, x->n < y->n ? x->n : y->n);
  return d ? d : (x->n > y->n) - (x->n < y->n);
}

/* cookie-octet: US-ASCII but CTLs, whitespace, DQUOTE, comma, semicolon and backslash. */
static int cookie_octets(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch < 0x21 || ch > 0x7e || ch == '"' || ch == ',' || ch == ';' || ch == '\\') return 0;
  }
  return 1;
}

/* path-value: any CHAR but CTLs and ";". */
static int path_value(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch < 0x20 || ch > 0x7e || ch == ';') return 0;
  }
  return n > 0;
}

typedef struct {
  const char *value, *path, *same_site;
  size_t value_len, path_len;
  int has_max_age, http_only, secure;
  lua_Integer max_age;
} cookie_t;

static const char *const fields[] = {"value",  "maxAge",   "path", "httpOnly",
                                     "secure", "sameSite", NULL};

/* Reads the cookie spec at the top of the stack into k; returns NULL or a message. */
static const char *read_spec(lua_State *co, const char *name, cookie_t *k) {
  int t = lua_gettop(co);
  k->path = "/";
  k->path_len = 1;
  k->same_site = "Lax";
  k->has_max_age = 0;
  k->http_only = 1;
  if (lua_type(co, t) == LUA_TSTRING) {
    k->value = lua_tolstring(co, t, &k->value_len);
    return NULL;
  }
  if (!lua_istable(co, t))
    return lua_pushfstring(co, "cookie %s must be a string or a table", name);
  for (lua_pushnil(co); lua_next(co, t); lua_pop(co, 1)) {
    int known = 0;
    if (lua_type(co, -2) == LUA_TSTRING)
      for (int i = 0; fields[i]; i++)
        if (strcmp(lua_tostring(co, -2), fields[i]) == 0) known = 1;
    if (!known) {
      lua_pushvalue(co, -2);
      return lua_pushfstring(co, "cookie %s has an unknown field %s", name,
                             luaL_tolstring(co, -1, NULL));
    }
  }
  /* the strings read stay alive in the spec table */
  if (lua_getfield(co, t, "value") != LUA_TSTRING)
    return lua_pushfstring(co, "cookie %s: value must be a string", name);
  k->value = lua_tolstring(co, -1, &k->value_len);
  int type = lua_getfield(co, t, "maxAge");
  if (type != LUA_TNIL) {
    int isint;
    k->max_age = lua_tointegerx(co, -1, &isint);
    if (type != LUA_TNUMBER || !isint)
      return lua_pushfstring(co, "cookie %s: maxAge must be an integer (seconds)", name);
    k->has_max_age = 1;
  }
  type = lua_getfield(co, t, "path");
  if (type != LUA_TNIL) {
    if (type != LUA_TSTRING) return lua_pushfstring(co, "cookie %s: path must be a string", name);
    k->path = lua_tolstring(co, -1, &k->path_len);
    if (!path_value(k->path, k->path_len))
      return lua_pushfstring(co, "cookie %s: path is not a valid cookie path", name);
  }
  type = lua_getfield(co, t, "httpOnly");
  if (type != LUA_TNIL) {
    if (type != LUA_TBOOLEAN)
      return lua_pushfstring(co, "cookie %s: httpOnly must be a boolean", name);
    k->http_only = lua_toboolean(co, -1);
  }
  type = lua_getfield(co, t, "secure");
  int secure_given = type != LUA_TNIL;
  if (secure_given) {
    if (type != LUA_TBOOLEAN)
      return lua_pushfstring(co, "cookie %s: secure must be a boolean", name);
    k->secure = lua_toboolean(co, -1);
  }
  type = lua_getfield(co, t, "sameSite");
  if (type == LUA_TBOOLEAN && !lua_toboolean(co, -1)) {
    k->same_site = NULL; /* sameSite = false: no attribute */
  } else if (type != LUA_TNIL) {
    const char *v = lua_tostring(co, -1);
    if (type != LUA_TSTRING || (strcmp(v, "Strict") && strcmp(v, "Lax") && strcmp(v, "None")))
      return lua_pushfstring(
          co, "cookie %s: sameSite must be \"Strict\", \"Lax\", \"None\" or false", name);
    k->same_site = v;
    if (strcmp(v, "None") == 0) {
      /* browsers drop SameSite=None without Secure */
      if (secure_given && !k->secure)
        return lua_pushfstring(co, "cookie %s: sameSite \"None\" needs secure", name);
      k->secure = 1;
    }
  }
  lua_settop(co, t);
  return NULL;
}

static void add_cookie(lua_State *co, luaL_Buffer *b, const span_t *name, const cookie_t *k) {
  luaL_addlstring(b, name->s, name->n);
  luaL_addchar(b, '=');
  luaL_addlstring(b, k->value, k->value_len);
  luaL_addstring(b, "; Path=");
  luaL_addlstring(b, k->path, k->path_len);
  if (k->has_max_age) {
    lua_pushfstring(co, "; Max-Age=%I", k->max_age);
    luaL_addvalue(b);
  }
  if (k->http_only) luaL_addstring(b, "; HttpOnly");
  if (k->secure) luaL_addstring(b, "; Secure");
  if (k->same_site) {
    luaL_addstring(b, "; SameSite=");
    luaL_addstring(b, k->same_site);
  }
}

const char *clank_write_cookies(lua_State *co, clank_conn_t *c, int idx, int secure_default) {
  span_t names[MAX_COOKIES];
  int n = 0;
  for (lua_pushnil(co); lua_next(co, idx); lua_pop(co, 1)) {
    if (lua_type(co, -2) != LUA_TSTRING) return "cookie names must be strings";
    if (n == MAX_COOKIES) return "more than 64 cookies";
    names[n].s = lua_tolstring(co, -2, &names[n].n);
    if (!clank_http_token(names[n].s, names[n].n))
      return lua_pushfstring(co, "cookie name %s is not a token", names[n].s);
    n++;
  }
  qsort(names, (size_t)n, sizeof names[0], span_cmp);
  /* each line is checked before any is written */
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < n; i++) {
      int top = lua_gettop(co);
      lua_pushlstring(co, names[i].s, names[i].n);
      lua_rawget(co, idx);
      cookie_t k;
      k.secure = secure_default;
      const char *err = read_spec(co, names[i].s, &k);
      if (err) return err;
      if (!cookie_octets(k.value, k.value_len))
        return lua_pushfstring(co, "cookie %s: value is not cookie-octets (RFC 6265)", names[i].s);
      if (pass == 1) {
        luaL_Buffer b;
        luaL_buffinit(co, &b);
        add_cookie(co, &b, &names[i], &k);
        luaL_pushresult(&b);
        size_t len;
        const char *line = lua_tolstring(co, -1, &len);
        if (clank_conn_header(c, "set-cookie", 10, line, len) != 0)
          return lua_pushfstring(co, "cookie %s is not a valid header value", names[i].s);
      }
      lua_settop(co, top);
    }
  }
  return NULL;
}
