/* Streamed answers: a handler sends the head now and the body in chunks
   while it keeps running (server-sent events for MCP's elicit mode). */
#include <lauxlib.h>
#include <llhttp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "exchange.h"
#include "http/response.h"

#define WRITER_MT "clank.StreamWriter"

typedef struct writer_s {
  exchange_t *x; /* NULL once its exchange ended */
} writer_t;

/* The connection a writer may still write to, or NULL. */
static clank_conn_t *writer_conn(writer_t *w) {
  exchange_t *x = w->x;
  if (x == NULL || x->stream_closed || x->abandoned || x->conn->closing) return NULL;
  return x->conn;
}

static int writer_write(lua_State *L) {
  writer_t *w = luaL_checkudata(L, 1, WRITER_MT);
  size_t n;
  const char *s = luaL_checklstring(L, 2, &n);
  clank_conn_t *c = writer_conn(w);
  if (c == NULL) {
    lua_pushboolean(L, 0);
    return 1;
  }
  if (n > 0 && w->x->streaming == STREAM_CHUNKED) { /* an empty chunk would end the stream */
    char size[24];
    int k = snprintf(size, sizeof size, "%zx\r\n", n);
    clank_buf_append(&c->out, size, (size_t)k);
    clank_buf_append(&c->out, s, n);
    clank_buf_append(&c->out, "\r\n", 2);
    clank_conn_flush(c);
  } else if (n > 0) {
    clank_buf_append(&c->out, s, n);
    clank_conn_flush(c);
  }
  lua_pushboolean(L, 1);
  return 1;
}

void clank_stream_finish(exchange_t *x) {
  if (!x->streaming || x->stream_closed) return;
  x->stream_closed = 1;
  clank_conn_t *c = x->conn;
  if (!x->abandoned && !c->closing && x->streaming == STREAM_CHUNKED) {
    clank_buf_appends(&c->out, "0\r\n\r\n");
    clank_conn_flush(c);
  }
}

static int writer_close(lua_State *L) {
  writer_t *w = luaL_checkudata(L, 1, WRITER_MT);
  if (w->x) clank_stream_finish(w->x);
  return 0;
}

static const luaL_Reg writer_methods[] = {
  {"write", writer_write},
  {"close", writer_close},
  {NULL, NULL}
};

static int header_ok(const char *s, size_t n, int name) {
  if (n == 0 && name) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch < 0x20 || ch == 0x7f || (name && (ch == ':' || ch == ' '))) return 0;
  }
  return 1;
}

int clank_stream_begin(lua_State *L) {
  lua_settop(L, 2);
  lua_Integer status = luaL_checkinteger(L, 1);
  luaL_argcheck(L, status >= 200 && status <= 599, 1, "status must be from 200 to 599");
  exchange_t *x = exchange_of(L);
  if (x == NULL || x->streaming) return luaL_error(L, "stream: only once, from the request's own handler");
  clank_conn_t *c = x->conn;
  writer_t *w = lua_newuserdatauv(L, sizeof *w, 0);
  w->x = x;
  if (luaL_newmetatable(L, WRITER_MT)) {
    luaL_newlib(L, writer_methods);
    lua_setfield(L, -2, "__index");
  }
  lua_setmetatable(L, -2);
  /* the exchange forgets the writer when it ends (see clank_stream_forget) */
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, x);
  x->streaming = STREAM_PLAIN;
  if (x->abandoned || c->closing) return 1;

  clank_request_t *r = &c->req;
  int http10 = r->http_minor == 0;
  clank_response_meta_t m = {.status = (int)status, .keep_alive = !http10 && clank_conn_keep_alive(c)};
  if (!m.keep_alive) c->close_after = 1;
  size_t mark = c->out.len;
  clank_response_begin(&c->out, &m, clank_server_date(c->server));
  if (lua_istable(L, 2)) {
    for (lua_pushnil(L); lua_next(L, 2); lua_pop(L, 1)) {
      size_t kn, vn;
      const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &kn) : NULL;
      const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &vn) : NULL;
      if (!k || !v || !header_ok(k, kn, 1) || !header_ok(v, vn, 0) ||
          !strcasecmp(k, "content-length") || !strcasecmp(k, "transfer-encoding") ||
          !strcasecmp(k, "connection")) {
        c->out.len = mark;
        x->streaming = 0;
        return luaL_error(L, "stream: bad header %s", k ? k : "(not a string)");
      }
      clank_buf_append(&c->out, k, kn);
      clank_buf_append(&c->out, ": ", 2);
      clank_buf_append(&c->out, v, vn);
      clank_buf_append(&c->out, "\r\n", 2);
    }
  }
  /* HTTP/1.0 has no chunks: the body then ends with the connection. */
  if (!http10) {
    clank_buf_appends(&c->out, "transfer-encoding: chunked\r\n");
    x->streaming = STREAM_CHUNKED;
  }
  clank_buf_appends(&c->out, "\r\n");
  c->answered = 1;
  clank_log_access(c->server->log, llhttp_method_name((llhttp_method_t)r->method),
                   clank_request_url(r), r->url_len, (int)status, 0, uv_hrtime() - r->started_ns);
  clank_conn_flush(c);
  lua_pushvalue(L, 3);
  return 1;
}

void clank_stream_forget(exchange_t *x, lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, x) == LUA_TUSERDATA) {
    writer_t *w = lua_touserdata(L, -1);
    w->x = NULL;
    lua_pushnil(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, x);
  }
  lua_pop(L, 1);
}
