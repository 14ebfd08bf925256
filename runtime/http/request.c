#include "http/request.h"

#include <lauxlib.h>
#include <llhttp.h>
#include <stdlib.h>
#include <strings.h>

void clank_request_reset(clank_request_t *r) {
  clank_buf_reset(&r->head);
  clank_buf_reset(&r->body);
  r->url_len = 0;
  r->nheaders = 0;
  r->headers[0] = (clank_header_t){0};
  r->header_bytes = 0;
  r->method = HTTP_GET;
  r->http_major = 1;
  r->http_minor = 1;
}

void clank_request_free(clank_request_t *r) {
  clank_buf_free(&r->head);
  clank_buf_free(&r->body);
}

void clank_request_target(const clank_request_t *r, clank_target_t *t) {
  const char *u = r->head.data;
  size_t n = r->url_len;
  *t = (clank_target_t){.path = u};
  size_t scheme = n >= 7 && strncasecmp(u, "http://", 7) == 0    ? 7
                  : n >= 8 && strncasecmp(u, "https://", 8) == 0 ? 8
                                                                 : 0;
  if (scheme) {
    const char *auth = u + scheme;
    size_t rest = n - scheme, alen = 0;
    while (alen < rest && auth[alen] != '/' && auth[alen] != '?') alen++;
    t->authority = auth;
    t->authority_len = alen;
    u = auth + alen;
    n = rest - alen;
  }
  const char *q = memchr(u, '?', n);
  t->path = u;
  t->path_len = q ? (size_t)(q - u) : n;
  if (q) {
    t->query = q + 1;
    t->query_len = n - t->path_len - 1;
  }
  if (t->path_len == 0) {
    t->path = "/";
    t->path_len = 1;
  }
}

const clank_header_t *clank_request_header(const clank_request_t *r, const char *name,
                                           size_t name_len, int *count) {
  const clank_header_t *first = NULL;
  int n = 0;
  for (int i = 0; i < r->nheaders; i++) {
    const clank_header_t *h = &r->headers[i];
    if (h->name_len == name_len && memcmp(r->head.data + h->name_off, name, name_len) == 0) {
      if (!first) first = h;
      n++;
    }
  }
  if (count) *count = n;
  return first;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* application/x-www-form-urlencoded decoding, as URLSearchParams does it:
   '+' is a space, a bad escape stays as it is. */
static void push_form_decoded(lua_State *L, const char *s, size_t n) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '+') {
      luaL_addchar(&b, ' ');
    } else if (c == '%' && i + 2 < n && hexval((unsigned char)s[i + 1]) >= 0 && hexval((unsigned char)s[i + 2]) >= 0) {
      luaL_addchar(&b, (char)(hexval((unsigned char)s[i + 1]) * 16 + hexval((unsigned char)s[i + 2])));
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

static void push_headers(lua_State *L, const clank_request_t *r) {
  lua_createtable(L, 0, r->nheaders);
  for (int i = 0; i < r->nheaders; i++) {
    const clank_header_t *h = &r->headers[i];
    lua_pushlstring(L, r->head.data + h->name_off, h->name_len);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, -3) == LUA_TSTRING) {
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

void clank_request_push(lua_State *L, const clank_request_t *r) {
  lua_createtable(L, 0, 7);
  lua_pushstring(L, llhttp_method_name((llhttp_method_t)r->method));
  lua_setfield(L, -2, "method");
  lua_pushlstring(L, r->head.data, r->url_len);
  lua_setfield(L, -2, "url");
  clank_target_t t;
  clank_request_target(r, &t);
  lua_pushlstring(L, t.path, t.path_len);
  lua_setfield(L, -2, "path");
  push_query(L, t.query, t.query_len);
  lua_setfield(L, -2, "query");
  push_headers(L, r);
  lua_setfield(L, -2, "headers");
  if (r->body.len > 0) {
    lua_pushlstring(L, r->body.data, r->body.len);
    lua_setfield(L, -2, "body");
  }
  lua_pushliteral(L, "http");
  lua_setfield(L, -2, "scheme");
}
