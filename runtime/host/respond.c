/* Answers: the runtime's own (its envelopes, the client script, 403, 405,
   413, and the answer of a request stopped or failed), and the writing of a
   route's Lua response table (status, headers, cookies, body) or of the
   bridge's answer given as C values. Everything the host writes as a
   response, but static files and streams' chunks, is written here. */
#include "host/respond.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "client/client_js.h"
#include "host/host.h"
#include "host/router.h"
#include "host/set_cookie.h"
#include "agent/bridge_envelope.h"
#include "data/json.h"

/* ---- the runtime's own envelopes ---- */

/* Writes the bridge's failure envelope (agent/bridge_envelope.h, its one
   writer), with extra header lines (NULL: none). */
void clank_answer_envelope(clank_conn_t *c, int status, const char *code, const char *message,
                           const char *extra) {
  clank_buf_t body = {0};
  if (clank_bridge_envelope(&body, code, message) != 0) {
    clank_buf_free(&body); /* out of memory, or a message not in UTF-8 */
    clank_bridge_envelope(&body, "INTERNAL_ERROR", "Internal server error.");
  }
  clank_conn_begin(c, status);
  clank_conn_header_raw(c, CLANK_BRIDGE_ENVELOPE_HEADERS);
  if (extra) clank_conn_header_raw(c, extra);
  clank_conn_body(c, body.data ? body.data : "", body.len);
  clank_buf_free(&body);
}

void clank_answer_failure(clank_conn_t *c, int status, const char *code, const char *message) {
  clank_answer_envelope(c, status, code, message, NULL);
}

/* A request whose handler was stopped (over its budget: 503) or failed
   outside any envelope of its own (500), answered in its path's format:
   every answer on an agent path keeps its JSON envelope (SPEC §13). */
void clank_answer_stopped(clank_conn_t *c, int status, const char *code, const char *message) {
  clank_target_t t;
  clank_request_target(&c->req, &t);
  const char *extra = status == 503 ? "retry-after: 1\r\n" : NULL;
  if (clank_span_is(t.path, t.path_len, "/__clank/mcp")) {
    clank_buf_t body = {0};
    int failed = clank_buf_appends(&body, "{\"error\":{\"code\":-32603,\"message\":\"") ||
                 clank_json_escape(&body, message, strlen(message)) ||
                 clank_buf_appends(&body, "\"},\"id\":null,\"jsonrpc\":\"2.0\"}");
    if (!failed) {
      clank_conn_begin(c, status);
      clank_conn_header_raw(c, CLANK_BRIDGE_ENVELOPE_HEADERS);
      if (extra) clank_conn_header_raw(c, extra);
      clank_conn_body(c, body.data, body.len);
    } else {
      clank_conn_text(c, status, message);
    }
    clank_buf_free(&body);
  } else if (clank_router_bridge_path(t.path, t.path_len) ||
             clank_span_starts(t.path, t.path_len, "/__clank/")) {
    clank_answer_envelope(c, status, code, message, extra);
  } else {
    clank_conn_begin(c, status);
    clank_conn_header_raw(c, "content-type: text/plain; charset=utf-8\r\n");
    if (extra) clank_conn_header_raw(c, extra);
    clank_conn_body(c, message, strlen(message));
  }
}

/* MCP's 403 for a foreign Host (SPEC §6): a JSON-RPC error. */
void clank_answer_rpc_forbidden(clank_conn_t *c) {
  static const char body[] =
      "{\"error\":{\"code\":-32600,\"message\":\"Cross-origin agent request rejected.\"},"
      "\"id\":null,\"jsonrpc\":\"2.0\"}";
  clank_conn_answer(c, 403, "content-type: application/json\r\n", body, sizeof body - 1);
}

/* The bridge's 413 while a body streams in (SPEC §5 step 7). */
void clank_answer_too_large(clank_conn_t *c) {
  char message[80];
  snprintf(message, sizeof message, "Request body exceeds %zu bytes.", c->body_limit);
  clank_answer_failure(c, 413, "PAYLOAD_TOO_LARGE", message);
}
/* 403 for a Host the rules of SPEC §13 refuse, in its path's format. */
void clank_answer_host_forbidden(clank_conn_t *c, const char *path, size_t path_len) {
  if (clank_span_is(path, path_len, "/__clank/mcp"))
    clank_answer_rpc_forbidden(c);
  else if (clank_router_bridge_path(path, path_len) ||
           clank_span_starts(path, path_len, "/__clank/"))
    clank_answer_failure(c, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.");
  else
    clank_conn_text(c, 403,
                    "Host not allowed. Add its origin to allowedOrigins, start with "
                    "--public-origin ORIGIN behind a TLS proxy, or with --allow-any-host "
                    "behind a proxy that checks it.");
}

/* /__clank/client.<hash>.js: the browser client, from the binary; any other
   hash is 404, so an old page never runs a new script. */
void clank_answer_client(clank_conn_t *c, const char *p, size_t n) {
  char path[64];
  snprintf(path, sizeof path, "/__clank/client.%s.js", clank_client_js_hash);
  if (!clank_span_is(p, n, path) || (c->req.method != HTTP_GET && c->req.method != HTTP_HEAD)) {
    clank_conn_text(c, 404, "Not found.");
    return;
  }
  clank_conn_answer(c, 200,
                    "content-type: text/javascript; charset=utf-8\r\n"
                    "cache-control: public, max-age=31536000, immutable\r\n",
                    clank_client_js, clank_client_js_len);
}

/* A path some route has with other methods only: 405 with allow (SPEC §15). */
int clank_answer_not_allowed(clank_conn_t *c, const clank_router_t *rt, const char *path,
                             size_t n) {
  char allow[96], lines[160];
  if (clank_router_allow(rt, path, n, allow, sizeof allow) == 0) return 0;
  snprintf(lines, sizeof lines, "content-type: text/plain; charset=utf-8\r\nallow: %s\r\n", allow);
  clank_conn_answer(c, 405, lines, "Method not allowed.", sizeof "Method not allowed." - 1);
  return 1;
}

/* ---- the route's answer ---- */

/* Raises after undoing the partly written response. */
static int bad_response(lua_State *co, clank_conn_t *c, const char *what) {
  clank_conn_cancel(c);
  return luaL_error(co, "bad route response: %s", what);
}

static void write_header(lua_State *co, clank_conn_t *c, const char *name, size_t name_len,
                         int vidx) {
  size_t vlen;
  if (lua_type(co, vidx) != LUA_TSTRING && lua_type(co, vidx) != LUA_TNUMBER)
    bad_response(co, c, "header values must be strings, numbers or lists of them");
  const char *v = lua_tolstring(co, vidx, &vlen);
  if (clank_conn_header(c, name, name_len, v, vlen) != 0)
    bad_response(co, c, lua_pushfstring(co, "header %s is not allowed or not valid", name));
}

void clank_write_headers(lua_State *co, clank_conn_t *c, int headers, int *has_type) {
  for (lua_pushnil(co); lua_next(co, headers); lua_pop(co, 1)) {
    size_t name_len;
    if (lua_type(co, -2) != LUA_TSTRING) bad_response(co, c, "header names must be strings");
    const char *name = lua_tolstring(co, -2, &name_len);
    if (has_type && name_len == 12 && !strcasecmp(name, "content-type")) *has_type = 1;
    if (lua_istable(co, -1)) {
      lua_Integer n = luaL_len(co, -1);
      for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(co, -1, i);
        write_header(co, c, name, name_len, lua_gettop(co));
        lua_pop(co, 1);
      }
    } else {
      write_header(co, c, name, name_len, lua_gettop(co));
    }
  }
}

/* Bodies at least this long are written from the Lua string itself. */
#define BODY_REF_MIN (16 * 1024)

/* The writer is done with a body it was lent (clank_conn_body_ref). */
static void release_body(void *ud, uintptr_t token) {
  clank_gen_t *g = ud;
  luaL_unref(g->L, LUA_REGISTRYINDEX, (int)token);
  g->inflight--;
  clank_host_gen_idle(g->host, g);
}

static void write_head(lua_State *co, clank_conn_t *c, int idx, int names, int status,
                       const char *default_type);

/* A route response's status (raises unless an integer from 200 to 599). */
static int route_status(lua_State *co, int idx, int names) {
  clank_get_named(co, names, idx, CLANK_NAME_STATUS);
  int isint;
  lua_Integer status = lua_tointegerx(co, -1, &isint);
  if (!isint || status < 200 || status > 599)
    luaL_error(co, "bad route response: status must be an integer from 200 to 599");
  lua_pop(co, 1);
  return (int)status;
}

/* Writes { status, headers?, body? } (at idx) into the connection's output;
   raises (with nothing written) when the table is not a valid response.
   names: the field names' table (clank_names_push), or 0. */
void clank_write_response_in(lua_State *co, clank_conn_t *c, clank_gen_t *g, int idx, int names) {
  if (!lua_istable(co, idx))
    luaL_error(co, "bad route response: expected a table { status, headers?, body? }, got %s",
               luaL_typename(co, idx));
  idx = lua_absindex(co, idx);
  if (names == 0) names = clank_push_names(co, g);
  int status = route_status(co, idx, names);
  if (c->closing) return;

  int body_idx = lua_gettop(co) + 1;
  clank_get_named(co, names, idx, CLANK_NAME_BODY);
  const char *body = "";
  size_t body_len = 0;
  int json = 0;
  if (lua_type(co, body_idx) == LUA_TSTRING) {
    body = lua_tolstring(co, body_idx, &body_len);
  } else if (lua_type(co, body_idx) == LUA_TTABLE) {
    clank_buf_reset(&g->scratch);
    clank_json_encode(co, body_idx, 0, &g->scratch);
    body = g->scratch.data;
    body_len = g->scratch.len;
    json = 1;
  } else if (!lua_isnil(co, body_idx)) {
    luaL_error(co, "bad route response: body must be a string or a table, got %s",
               luaL_typename(co, body_idx));
  }

  write_head(
      co, c, idx, names, status,
      json ? "content-type: application/json\r\n" : "content-type: text/plain; charset=utf-8\r\n");
  if (body_len >= BODY_REF_MIN && !json) {
    /* held once, by a registry ref, until written (SPEC §13) */
    lua_pushvalue(co, body_idx);
    int ref = luaL_ref(co, LUA_REGISTRYINDEX);
    g->host = c->server->data;
    g->inflight++; /* the string lives in g's state: g stays until it is written */
    clank_conn_body_ref(c, body, body_len, release_body, g, (uintptr_t)ref);
  } else {
    clank_conn_body(c, body, body_len);
  }
}

void clank_write_response(lua_State *co, clank_conn_t *c, clank_gen_t *g, int idx) {
  clank_write_response_in(co, c, g, idx, 0);
}

/* The head of { status, headers?, cookies? } at idx: the status line, the
   headers and cookies, and default_type when the headers gave none. */
static void write_head(lua_State *co, clank_conn_t *c, int idx, int names, int status,
                       const char *default_type) {
  clank_conn_begin(c, status);
  int has_type = 0;
  if (clank_get_named(co, names, idx, CLANK_NAME_HEADERS) == LUA_TTABLE) {
    clank_write_headers(co, c, lua_gettop(co), &has_type);
  } else if (!lua_isnil(co, -1)) {
    bad_response(co, c, "headers must be a table");
  }
  lua_pop(co, 1);
  if (clank_get_named(co, names, idx, CLANK_NAME_COOKIES) == LUA_TTABLE) {
    /* secure by default behind --public-origin https://... (SPEC §13) */
    const clank_host_t *h = c->server->data;
    const char *err = clank_write_cookies(co, c, lua_gettop(co), h->opts.public_https);
    if (err) bad_response(co, c, err);
  } else if (!lua_isnil(co, -1)) {
    bad_response(co, c, "cookies must be a table");
  }
  lua_pop(co, 1);
  if (!has_type) clank_conn_header_raw(c, default_type);
}

/* A streamed answer { status, headers?, cookies?, stream } at idx (SPEC
   §15): the head now; pushes send for the stream function. */
void clank_write_stream_head(lua_State *co, exchange_t *x, int idx, int names) {
  clank_conn_t *c = x->conn;
  int status = route_status(co, idx, names);
  if (!c->closing && !x->abandoned) {
    if (c->req.http_major == 1 && c->req.http_minor == 0) c->close_after = 1; /* ends with it */
    write_head(co, c, idx, names, status, "content-type: text/plain; charset=utf-8\r\n");
  }
  clank_stream_route_begin(co, x, idx);
}

/* The bridge's answer given as C values: no response table. Returns -1,
   the answer cancelled, when its CORS origin is not a valid header value. */
int clank_put_answer(clank_conn_t *c, const clank_bridge_answer_t *a) {
  if (c->closing) return 0;
  clank_conn_begin(c, a->status);
  if (a->len > 0) clank_conn_header_raw(c, "content-type: application/json\r\n");
  if (a->cache) clank_conn_header(c, "cache-control", 13, a->cache, strlen(a->cache));
  if (a->cors_origin) {
    if (clank_conn_header(c, "access-control-allow-origin", 27, a->cors_origin, a->cors_len) != 0) {
      clank_conn_cancel(c);
      return -1;
    }
    clank_conn_header_raw(c, "vary: Origin\r\n");
  }
  if (a->len == 0) clank_conn_header_raw(c, "content-type: text/plain; charset=utf-8\r\n");
  clank_conn_body(c, a->body, a->len);
  return 0;
}

/* The same, written by the driver outside the request's coroutine. */
void clank_put_answer_outside(clank_conn_t *c, const clank_bridge_answer_t *a) {
  if (clank_put_answer(c, a) != 0)
    clank_answer_stopped(c, 500, "INTERNAL_ERROR", "Internal server error.");
}
