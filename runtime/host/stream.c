/* Streamed answers: a handler sends the head now and the body in chunks
   while it keeps running (server-sent events for MCP's elicit mode, a
   route's `stream = function(send)`). A chunk that leaves the connection
   holding CLANK_STREAM_HIGH of unsent output suspends its task until the
   output drains (SPEC §13): a client that does not read slows the producer
   down instead of growing its buffer. */
#include <lauxlib.h>

#include "host/dispatch.h"
#include "host/exchange.h"
#include "host/respond.h"

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

/* After the wait: whether the connection is still there to write to. */
static int write_resumed(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  writer_t *w = (writer_t *)ctx;
  lua_pushboolean(L, writer_conn(w) != NULL);
  return 1;
}

/* Writes the chunk at idx; true, or false once the client is gone. Waits
   (in a task) while the connection's output is full. */
static int write_chunk(lua_State *L, writer_t *w, int idx) {
  size_t n;
  const char *s = luaL_checklstring(L, idx, &n);
  clank_conn_t *c = writer_conn(w);
  if (c == NULL) {
    lua_pushboolean(L, 0);
    return 1;
  }
  clank_conn_stream_chunk(c, s, n);
  c = writer_conn(w);
  clank_task_t *t = clank_task_of(L);
  if (c && t && w->x->send_waiter == NULL && clank_in_task(L) && clank_conn_stream_full(c)) {
    w->x->send_waiter = t;
    lua_pushlightuserdata(L, t->sched);
    return lua_yieldk(L, 1, (lua_KContext)w, write_resumed);
  }
  lua_pushboolean(L, c != NULL);
  return 1;
}

static int writer_write(lua_State *L) {
  writer_t *w = luaL_checkudata(L, 1, WRITER_MT);
  return write_chunk(L, w, 2);
}

/* send(chunk): a route's writer, as a function. */
static int route_send(lua_State *L) {
  writer_t *w = luaL_checkudata(L, lua_upvalueindex(1), WRITER_MT);
  return write_chunk(L, w, 1);
}

void clank_stream_wake(exchange_t *x) {
  clank_task_t *t = x->send_waiter;
  if (t == NULL) return;
  x->send_waiter = NULL;
  t->resume(t, 0);
}

void clank_stream_finish(exchange_t *x) {
  if (!x->streaming || x->stream_closed) return;
  x->stream_closed = 1;
  clank_conn_t *c = x->conn;
  if (!x->abandoned && !c->closing) clank_conn_stream_end(c);
}

static int writer_close(lua_State *L) {
  writer_t *w = luaL_checkudata(L, 1, WRITER_MT);
  if (w->x) clank_stream_finish(w->x);
  return 0;
}

static const luaL_Reg writer_methods[] = {
    {"write", writer_write}, {"close", writer_close}, {NULL, NULL}};

/* Pushes a writer for x, which forgets it when it ends (clank_stream_forget). */
static void push_writer(lua_State *L, exchange_t *x) {
  writer_t *w = lua_newuserdatauv(L, sizeof *w, 0);
  w->x = x;
  if (luaL_newmetatable(L, WRITER_MT)) {
    luaL_newlib(L, writer_methods);
    lua_setfield(L, -2, "__index");
  }
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, x);
}

void clank_stream_route_begin(lua_State *co, exchange_t *x, int idx) {
  (void)idx;
  clank_conn_t *c = x->conn;
  x->streaming = 1;
  if (!x->abandoned && !c->closing) clank_conn_stream_start(c);
  if (c->req.method == HTTP_HEAD) x->stream_closed = 1; /* the head is all it gets */
  push_writer(co, x);
  lua_pushcclosure(co, route_send, 1);
}

int clank_stream_begin(lua_State *L) {
  lua_settop(L, 2);
  lua_Integer status = luaL_checkinteger(L, 1);
  luaL_argcheck(L, status >= 200 && status <= 599, 1, "status must be from 200 to 599");
  exchange_t *x = clank_exchange_serving(L); /* the handler's, or an action it runs */
  if (x == NULL || x->streaming)
    return luaL_error(L, "stream: only once, from the request's own handler");
  clank_conn_t *c = x->conn;
  push_writer(L, x);
  if (x->abandoned || c->closing) {
    x->streaming = 1;
    return 1;
  }

  const clank_request_t *r = &c->req;
  if (r->http_major == 1 && r->http_minor == 0) c->close_after = 1; /* the body ends with it */
  clank_conn_begin(c, (int)status);
  if (lua_istable(L, 2)) clank_write_headers(L, c, 2, NULL);
  x->streaming = 1;
  clank_conn_stream_start(c);
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
