/* Answers (respond.c): the runtime's own, and a route's Lua response table
   written through the connection's response writer. */
#ifndef CLANK_RESPOND_H
#define CLANK_RESPOND_H

#include <lauxlib.h>
#include <lua.h>

#include "host/exchange.h"
#include "host/generation.h"
#include "host/lua_request.h"
#include "http/server.h"
#include "agent/bridge.h"

/* ---- the runtime's own answers ---- */

/* The bridge's failure envelope {"error":{"code","message"},"ok":false},
   written by its one writer (agent/bridge_envelope.h), with extra header
   lines (NULL: none). */
void clank_answer_envelope(clank_conn_t *c, int status, const char *code, const char *message,
                           const char *extra);
void clank_answer_failure(clank_conn_t *c, int status, const char *code, const char *message);
/* A request whose handler was stopped (503) or failed outside any envelope
   of its own (500), in its path's format (SPEC §13). */
void clank_answer_stopped(clank_conn_t *c, int status, const char *code, const char *message);
/* MCP's 403 for a foreign Host (SPEC §6): a JSON-RPC error. */
void clank_answer_rpc_forbidden(clank_conn_t *c);
/* 403 for a Host the rules of SPEC §13 refuse, in path's format. */
void clank_answer_host_forbidden(clank_conn_t *c, const char *path, size_t path_len);
/* The bridge's 413 while a body streams in (the server's on_body_too_large). */
void clank_answer_too_large(clank_conn_t *c);
/* /__clank/client.<hash>.js: the browser client, or 404 for another hash. */
void clank_answer_client(clank_conn_t *c, const char *path, size_t path_len);
/* 405 with allow when some route of rt has path with other methods (SPEC
   §15): returns 1 when it answered, else 0 (nothing written). */
int clank_answer_not_allowed(clank_conn_t *c, const clank_router_t *rt, const char *path,
                             size_t path_len);

/* ---- the route's answer ---- */

/* clank_names_push, by an integer ref: a registry array slot is found faster
   than a hashed key. Returns its index. */
static inline int clank_push_names(lua_State *co, clank_gen_t *g) {
  if (g->names_ref <= 0) {
    clank_names_push(co);
    g->names_ref = luaL_ref(co, LUA_REGISTRYINDEX);
  }
  lua_rawgeti(co, LUA_REGISTRYINDEX, g->names_ref);
  return lua_gettop(co);
}

/* Reads t[name] (t at idx) as lua_getfield does, without interning a C string. */
static inline int clank_get_named(lua_State *co, int names, int idx, int name) {
  lua_rawgeti(co, names, name);
  return lua_gettable(co, idx);
}

/* Writes { status, headers?, cookies?, body? } (at idx) into the connection's
   output; raises (with nothing written) when the table is not a valid
   response. names: the field names' table (clank_push_names), or 0. */
void clank_write_response_in(lua_State *co, clank_conn_t *c, clank_gen_t *g, int idx, int names);
void clank_write_response(lua_State *co, clank_conn_t *c, clank_gen_t *g, int idx);
/* A streamed answer { status, headers?, cookies?, stream } at idx (SPEC
   §15): the head now; pushes send for the stream function. */
void clank_write_stream_head(lua_State *co, exchange_t *x, int idx, int names);
/* Writes a Lua headers table (name → value or list of values) through the
   response writer; raises on a bad name or value, undoing the answer.
   *has_type is set when a content-type was among them. */
void clank_write_headers(lua_State *L, clank_conn_t *c, int idx, int *has_type);
/* The bridge's answer given as C values: no response table. Returns -1,
   the answer cancelled, when its CORS origin is not a valid header value. */
int clank_put_answer(clank_conn_t *c, const clank_bridge_answer_t *a);
/* The same, written by the driver outside the request's coroutine: a 500
   instead when it cannot be. */
void clank_put_answer_outside(clank_conn_t *c, const clank_bridge_answer_t *a);

#endif
