/* Dispatch (SPEC §2): reserved paths, then the app's routes, each run in a
   coroutine the loop resumes; the route's answer becomes the response. */
#include "host/dispatch.h"

#include <arpa/inet.h>
#include <lauxlib.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client/client_js.h"
#include "host/csrf.h"
#include "host/exchange.h"
#include "host/host.h"
#include "host/inspector.h"
#include "host/live.h"
#include "host/lua_request.h"
#include "host/handoff.h"
#include "host/metrics.h"
#include "host/set_cookie.h"
#include "host/static.h"
#include "core/abort.h"
#include "agent/bridge.h"
#include "data/json.h"
#include "core/protect.h"
#include "util/bytes.h"

/* Exchanges and their coroutines are reused: a coroutine bound once as a
   task stays one, and a waiting handler never moves in memory. */
#define SPARE_MAX 64

static void resume_task(clank_task_t *t, int nargs);
static void action_timed_out(clank_task_t *t);

exchange_t *clank_exchange_serving(lua_State *co) {
  for (clank_task_t *t = clank_task_of(co); t; t = clank_task_parent(t))
    if (t->resume == resume_task) return ((exchange_t *)t)->late ? NULL : (exchange_t *)t;
  return NULL;
}

static exchange_t *exchange_get(clank_gen_t *g) {
  exchange_t *x = g->spare;
  if (x) {
    g->spare = x->next;
    g->nspare--;
  } else {
    x = calloc(1, sizeof *x);
    if (x == NULL) abort(); /* nowhere to run the handler */
    lua_State *co = lua_newthread(g->L);
    x->co_ref = luaL_ref(g->L, LUA_REGISTRYINDEX);
    lua_pushboolean(g->L, 0);
    x->task.hold_slot = luaL_ref(g->L, LUA_REGISTRYINDEX);
    x->task.sched = &g->sched;
    x->task.resume = resume_task;
    x->task.on_deadline = action_timed_out;
    clank_task_bind(&x->task, co);
  }
  x->gen = g;
  x->next = NULL;
  x->serial++;
  x->waited = x->abandoned = x->streaming = x->stream_closed = x->late = 0;
  x->task.deadline_on_wait = x->task.deadline_passed = 0;
  x->task.deadline_timer = NULL;
  x->send_waiter = NULL;
  x->task.wait = NULL;
  x->task.signal_ref = 0;
  x->task.wants_signal = 1;
  x->task.cpu_ns = 0;
  x->task.signal_lazy = 0;
  x->task.exhausted = x->task.mem_over = x->task.preempted = 0;
  x->task.mem_charged = 0;
  return x;
}

/* x and its coroutine's references go; the coroutine goes with the state. */
static void exchange_release(exchange_t *x) {
  clank_task_unbind(x->task.co);
  luaL_unref(x->gen->L, LUA_REGISTRYINDEX, x->co_ref);
  luaL_unref(x->gen->L, LUA_REGISTRYINDEX, x->task.hold_slot);
  free(x);
}

static void exchange_free(exchange_t *x) {
  lua_resetthread(x->task.co); /* a failed handler's pending to-be-closed variables close now */
  exchange_release(x);
}

/* Whether x's coroutine may serve again after it ended with st. */
static int reusable(const exchange_t *x, int st) {
  return st == LUA_OK && !x->task.exhausted && !x->task.mem_over;
}

/* A coroutine that failed keeps its broken stack: it is not reused. */
static void exchange_put(exchange_t *x, int reusable) {
  clank_gen_t *g = x->gen;
  if (reusable && g->nspare < SPARE_MAX) {
    lua_settop(x->task.co, 0);
    x->next = g->spare;
    g->spare = x;
    g->nspare++;
    return;
  }
  exchange_free(x);
}

static void release_gen(clank_conn_t *c);

void clank_dispatch_drop(clank_server_t *s, clank_gen_t *g) {
  for (clank_conn_t *c = s->conns, *next; c; c = next) {
    next = c->next;
    clank_conn_state_t *st = c->data;
    if (st->gen == g) {
      release_gen(c);
      clank_conn_close(c);
    }
    if (!c->closing && clank_conn_refers_to(c, g)) clank_conn_close(c); /* a body of g's */
    exchange_t *x = st->exchange;
    if (x && x->gen == g) {
      g->inflight--;
      st->exchange = NULL;
      if (!c->closing) clank_conn_close(c);
      clank_sched_cancel(&x->task);
      free(x); /* its coroutine goes with the state; nothing runs it again */
      clank_conn_release(c);
    }
  }
}

void clank_dispatch_free_leftovers(clank_server_t *s) {
  for (clank_conn_t *c = s->conns; c; c = c->next) {
    clank_conn_state_t *st = c->data;
    free(st->exchange);
    st->exchange = NULL;
  }
  clank_server_free_all(s);
}

void clank_dispatch_forget(clank_gen_t *g) {
  while (g->late) { /* their coroutines go with the state; nothing runs them again */
    exchange_t *x = g->late;
    g->late = x->next;
    clank_sched_cancel(&x->task);
    exchange_release(x);
  }
  while (g->spare) {
    exchange_t *x = g->spare;
    g->spare = x->next;
    exchange_free(x);
  }
  g->nspare = 0;
}

/* ---- the header block ---- */

/* DNS rebinding defence (SPEC §13), on every listener: the Host must be a
   loopback name, the listener's own address, --inspector's host, a host of
   allowedOrigins or --public-origin's; --allow-any-host leaves it to a
   proxy in front. */
static int host_allowed(const clank_host_t *h, const clank_gen_t *g, const clank_conn_t *c,
                        const clank_target_t *t) {
  const char *v;
  size_t n, name_len;
  if (h->opts.allow_any_host) return 1;
  int named = clank_request_host(&c->req, t, &v, &n, &name_len);
  if (named == 0) return 1; /* HTTP/1.0 */
  if (named < 0) return 0;
  if (clank_host_is_loopback(v, name_len)) return 1;
  for (int i = 0; i < g->nallowed_hosts; i++)
    if (strlen(g->allowed_hosts[i]) == n && strncasecmp(g->allowed_hosts[i], v, n) == 0) return 1;
  const clank_options_t *o = &h->opts;
  if (o->public_origin_len && o->public_origin_len - o->public_host_at == n &&
      strncasecmp(o->public_origin + o->public_host_at, v, n) == 0)
    return 1;
  const char *inspector = h->opts.inspector_host;
  if (inspector && strlen(inspector) == name_len && strncasecmp(inspector, v, name_len) == 0)
    return 1;
  return clank_host_names_address(v, name_len, c->server->addr);
}

static void write_response(lua_State *co, clank_conn_t *c, clank_gen_t *g, int idx);

/* ---- the runtime's own envelopes ---- */

/* The bridge's failure envelope {"error":{"code","message"},"ok":false}. */
static void answer_failure(clank_conn_t *c, int status, const char *code, const char *message) {
  char body[256];
  int n = snprintf(body, sizeof body,
                   "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"},\"ok\":false}", code, message);
  clank_conn_answer(c, status, "content-type: application/json\r\ncache-control: no-store\r\n",
                    body, (size_t)n);
}

/* A request whose handler was stopped (over its budget: 503) or failed
   outside any envelope of its own (500), answered in its path's format:
   every answer on an agent path keeps its JSON envelope (SPEC §13). */
static void answer_stopped(clank_conn_t *c, int status, const char *code, const char *message) {
  clank_target_t t;
  clank_request_target(&c->req, &t);
  const char *extra = status == 503 ? "retry-after: 1\r\n" : "";
  char type[96], body[256];
  snprintf(type, sizeof type, "content-type: application/json\r\ncache-control: no-store\r\n%s",
           extra);
  int n;
  if (clank_span_is(t.path, t.path_len, "/__clank/mcp"))
    n = snprintf(body, sizeof body,
                 "{\"error\":{\"code\":-32603,\"message\":\"%s\"},\"id\":null,\"jsonrpc\":\"2.0\"}",
                 message);
  else if (clank_router_bridge_path(t.path, t.path_len) ||
           clank_span_starts(t.path, t.path_len, "/__clank/"))
    n = snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"},\"ok\":false}",
                 code, message);
  else {
    snprintf(type, sizeof type, "content-type: text/plain; charset=utf-8\r\n%s", extra);
    n = snprintf(body, sizeof body, "%s", message);
  }
  clank_conn_answer(c, status, type, body, (size_t)n);
}

/* MCP's 403 for a foreign Host (SPEC §6): a JSON-RPC error. */
static void answer_rpc_forbidden(clank_conn_t *c) {
  static const char body[] =
      "{\"error\":{\"code\":-32600,\"message\":\"Cross-origin agent request rejected.\"},"
      "\"id\":null,\"jsonrpc\":\"2.0\"}";
  clank_conn_answer(c, 403, "content-type: application/json\r\n", body, sizeof body - 1);
}

/* The bridge's 413 while a body streams in (SPEC §5 step 7). */
static void body_too_large(clank_conn_t *c) {
  char message[80];
  snprintf(message, sizeof message, "Request body exceeds %zu bytes.", c->body_limit);
  answer_failure(c, 413, "PAYLOAD_TOO_LARGE", message);
}

/* What the bridge's checks read, straight from the parsed request: no
   request table. 0 when a header they read is repeated (the request table
   joins those: the table's reading is then the one). One pass over the
   headers fills every span. */
static int bridge_view(const clank_conn_t *c, clank_bridge_view_t *v) {
  const clank_request_t *r = &c->req;
  clank_target_t t;
  clank_request_target(r, &t);
  v->method = llhttp_method_name((llhttp_method_t)r->method);
  v->path = (clank_bridge_span_t){t.path, t.path_len};
  /* as the request table says: https behind --public-origin https://... (SPEC §13) */
  v->scheme = ((const clank_host_t *)c->server->data)->opts.public_https
                  ? (clank_bridge_span_t){"https", 5}
                  : (clank_bridge_span_t){"http", 4};
  v->body = (clank_bridge_span_t){r->body.len > 0 ? r->body.data : NULL, r->body.len};
  v->passed = NULL;
  v->origin = v->host = v->sec_fetch_site = v->confirmation = v->content_type = v->content_length =
      v->if_none_match = (clank_bridge_span_t){NULL, 0};
  for (int i = 0; i < r->nheaders; i++) {
    const clank_header_t *h = &r->headers[i];
    const char *name = r->head.data + h->name_off;
    clank_bridge_span_t *s = NULL;
    switch (h->name_len) {
      case 4: s = memcmp(name, "host", 4) == 0 ? &v->host : NULL; break;
      case 6: s = memcmp(name, "origin", 6) == 0 ? &v->origin : NULL; break;
      case 12: s = memcmp(name, "content-type", 12) == 0 ? &v->content_type : NULL; break;
      case 13: s = memcmp(name, "if-none-match", 13) == 0 ? &v->if_none_match : NULL; break;
      case 14:
        s = memcmp(name, "sec-fetch-site", 14) == 0   ? &v->sec_fetch_site
            : memcmp(name, "content-length", 14) == 0 ? &v->content_length
                                                      : NULL;
        break;
      case 20: s = memcmp(name, "x-clank-confirmation", 20) == 0 ? &v->confirmation : NULL; break;
      default: break;
    }
    if (s == NULL) continue;
    if (s->p) return 0;
    *s = (clank_bridge_span_t){clank_header_value(r, h), h->value_len};
  }
  return 1;
}

/* [conn, gen, bridge] → the bridge's early answer written, or nothing: runs
   steps 1–7 of SPEC §5 before the body is read. */
static int bridge_head(lua_State *L) {
  clank_conn_t *c = lua_touserdata(L, 1);
  clank_gen_t *g = lua_touserdata(L, 2);
  clank_bridge_view_t v;
  if (bridge_view(c, &v)) { /* the request table waits for the handler */
    lua_pushcfunction(L, clank_bridge_head_view);
    lua_pushvalue(L, 3);
    lua_pushlightuserdata(L, &v);
    lua_call(L, 2, 1);
    if (lua_isnil(L, -1)) {
      lua_pushboolean(L, 0);
      return 1;
    }
    write_response(L, c, g, lua_gettop(L));
    lua_pushboolean(L, 1);
    return 1;
  }
  clank_request_push(L, &c->req); /* 4 */
  lua_pushcfunction(L, clank_bridge_head);
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 4);
  lua_call(L, 2, 1);
  if (lua_isnil(L, -1)) {
    /* kept for the handler: the body joins it at the end of the message */
    lua_pushvalue(L, 4);
    ((clank_conn_state_t *)c->data)->lua_request = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushboolean(L, 0);
    return 1;
  }
  write_response(L, c, g, lua_gettop(L));
  lua_pushboolean(L, 1);
  return 1;
}

/* Answers at the header block when the bridge can; returns 1 when it did. */
static int bridge_answers_early(clank_conn_t *c, clank_gen_t *g) {
  lua_State *L = g->L;
  clank_bridge_view_t v;
  lua_rawgeti(L, LUA_REGISTRYINDEX, g->bridge_ref);
  const void *passed = bridge_view(c, &v) ? clank_bridge_head_passes(L, -1, &v) : NULL;
  lua_pop(L, 1);
  if (passed) { /* the common case: no call into Lua, and the handler need not check again */
    clank_conn_state_t *st = c->data;
    st->bridge_passed = passed;
    st->bridge_nheaders = c->req.nheaders;
    st->bridge_view = v;
    st->bridge_head = c->req.head.data;
    return 0;
  }
  lua_pushcfunction(L, bridge_head);
  lua_pushlightuserdata(L, c);
  lua_pushlightuserdata(L, g);
  lua_rawgeti(L, LUA_REGISTRYINDEX, g->bridge_ref);
  int answered = 1;
  if (clank_pcall(L, 3, 1) != LUA_OK) {
    clank_log_msg(&((clank_host_t *)c->server->data)->log, "error", "the bridge failed: %s",
                  clank_error_text(L, -1));
    lua_pop(L, 1);
    answer_stopped(c, 500, "INTERNAL_ERROR", "Internal server error.");
  } else {
    answered = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  return answered;
}

/* The request will reach a handler of g: g must outlive a reload until it does. */
static int hold(clank_conn_t *c, clank_gen_t *g, const clank_route_t *route) {
  clank_conn_state_t *st = c->data;
  st->route = route;
  st->gen = g;
  st->kind = (unsigned char)clank_metrics_route_kind(g, route);
  g->inflight++;
  return CLANK_HTTP_READ_BODY;
}

/* clank_names_push, by an integer ref: a registry array slot is found faster
   than a hashed key. */
static int push_names(lua_State *co, clank_gen_t *g) {
  if (g->names_ref <= 0) {
    clank_names_push(co);
    g->names_ref = luaL_ref(co, LUA_REGISTRYINDEX);
  }
  lua_rawgeti(co, LUA_REGISTRYINDEX, g->names_ref);
  return lua_gettop(co);
}

/* The request table the header block made, with the body now, or a new one. */
static void push_request_in(lua_State *co, clank_conn_t *c, clank_gen_t *g, int names) {
  clank_conn_state_t *st = c->data;
  if (st->lua_request == 0) {
    clank_request_push_in(co, &c->req, names);
    return;
  }
  lua_rawgeti(co, LUA_REGISTRYINDEX, st->lua_request);
  luaL_unref(g->L, LUA_REGISTRYINDEX, st->lua_request);
  st->lua_request = 0;
  if (c->req.body.len > 0) {
    lua_pushlstring(co, c->req.body.data, c->req.body.len);
    clank_request_set_in(co, names, CLANK_NAME_BODY);
  }
}

static void push_request(lua_State *co, clank_conn_t *c, clank_gen_t *g) {
  int names = push_names(co, g);
  push_request_in(co, c, g, names);
  lua_remove(co, names);
}

/* The connection closes before its request reached a handler: lets go of
   the generation it held. */
static void release_gen(clank_conn_t *c) {
  clank_conn_state_t *st = c->data;
  clank_gen_t *g = st->gen;
  if (g == NULL) return;
  if (st->lua_request) {
    luaL_unref(g->L, LUA_REGISTRYINDEX, st->lua_request);
    st->lua_request = 0;
  }
  st->gen = NULL;
  g->inflight--;
  clank_host_gen_idle(c->server->data, g);
}

/* The paths of SPEC §11 an app with views has: its pages, the agents'
   surface endpoints and the live channel. */
static const clank_route_t *live_path(clank_gen_t *g, int method, const char *p, size_t n) {
  int get = method == HTTP_GET || method == HTTP_HEAD;
  if (get && (clank_span_is(p, n, "/") ||
              (clank_span_starts(p, n, "/views/") && n > 7 && !memchr(p + 7, '/', n - 7))))
    return &g->page_route;
  if (clank_span_starts(p, n, "/__clank/sessions/") && n > 23 &&
      clank_span_is(p + n - 5, 5, "/live") && !memchr(p + 18, '/', n - 23))
    return &g->live_route;
  if (clank_span_starts(p, n, "/__clank/views/") || clank_span_starts(p, n, "/__clank/sessions/"))
    return &g->live_http_route;
  return NULL;
}

/* /__clank/client.<hash>.js: the browser client, from the binary; any other
   hash is 404, so an old page never runs a new script. */
static void serve_client(clank_conn_t *c, const char *p, size_t n) {
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
static int method_not_allowed(clank_conn_t *c, clank_gen_t *g, const char *path, size_t n) {
  char allow[96], lines[160];
  if (clank_router_allow(&g->router, path, n, allow, sizeof allow) == 0) return 0;
  snprintf(lines, sizeof lines, "content-type: text/plain; charset=utf-8\r\nallow: %s\r\n", allow);
  clank_conn_answer(c, 405, lines, "Method not allowed.", sizeof "Method not allowed." - 1);
  return 1;
}

/* The inspector's page and live channels (SPEC §16) take these pseudo-routes. */
static const clank_route_t inspector_page_route = {.handler_ref = LUA_NOREF};
static const clank_route_t inspector_live_route = {.handler_ref = LUA_NOREF};

/* /__clank/inspector and /__clank/sessions/i.<token>/...: 404 for whoever may
   not see it (it does not exist for them), whatever the Host rules say. */
static int inspector_head(clank_conn_t *c, clank_host_t *h, clank_gen_t *g, const char *p,
                          size_t n) {
  const clank_route_t *route = NULL;
  int get = c->req.method == HTTP_GET || c->req.method == HTTP_HEAD;
  if (!clank_inspector_allowed(c, h->opts.inspector_host)) {
    route = NULL;
  } else if (clank_span_is(p, n, "/__clank/inspector")) {
    if (get) route = &inspector_page_route;
  } else if (n > 23 && clank_span_is(p + n - 5, 5, "/live") && !memchr(p + 18, '/', n - 23)) {
    if (!clank_live_check(c, g)) return CLANK_HTTP_ANSWERED;
    route = &inspector_live_route;
  }
  if (route == NULL) {
    clank_conn_text(c, 404, "Not found.");
    return CLANK_HTTP_ANSWERED;
  }
  int next = hold(c, g, route);
  ((clank_conn_state_t *)c->data)->kind =
      route == &inspector_live_route ? CLANK_KIND_LIVE : CLANK_KIND_RUNTIME;
  return next;
}

static int on_head(clank_conn_t *c) {
  clank_host_t *h = c->server->data;
  clank_gen_t *g = h->gen;
  clank_request_t *r = &c->req;
  ((clank_conn_state_t *)c->data)->bridge_passed = NULL;
  clank_target_t t;
  clank_request_target(r, &t);
  const char *path = t.path;
  size_t path_len = t.path_len;
  int mcp = clank_span_is(path, path_len, "/__clank/mcp");
  if (clank_inspector_path(path, path_len)) return inspector_head(c, h, g, path, path_len);
  if (!host_allowed(h, g, c, &t)) {
    if (mcp)
      answer_rpc_forbidden(c);
    else if (clank_router_bridge_path(path, path_len) ||
             clank_span_starts(path, path_len, "/__clank/"))
      answer_failure(c, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.");
    else
      clank_conn_text(c, 403,
                      "Host not allowed. Add its origin to allowedOrigins, start with "
                      "--public-origin ORIGIN behind a TLS proxy, or with --allow-any-host "
                      "behind a proxy that checks it.");
    return CLANK_HTTP_ANSWERED;
  }
  if (h->worker) { /* a session another worker owns goes there (SPEC §13) */
    int live = 0;
    int owner = clank_handoff_owner(h, path, path_len, r, &live);
    if (owner >= 0) return clank_handoff(c, owner, live);
  }
  if (mcp) {
    c->body_limit = (size_t)g->bridge_max_bytes;
    return hold(c, g, &g->mcp_route);
  }
  if (clank_router_bridge_path(path, path_len)) {
    if (bridge_answers_early(c, g)) return CLANK_HTTP_ANSWERED;
    c->body_limit = (size_t)g->bridge_max_bytes;
    return hold(c, g, &g->bridge_route);
  }
  if (clank_span_starts(path, path_len, "/__clank/client.")) {
    serve_client(c, path, path_len);
    return CLANK_HTTP_ANSWERED;
  }
  if (clank_metrics_serve(c, h, path, path_len)) return CLANK_HTTP_ANSWERED;
  if (g->live_ref != LUA_NOREF) {
    const clank_route_t *live = live_path(g, r->method, path, path_len);
    if (live == &g->live_route && !clank_live_check(c, g)) return CLANK_HTTP_ANSWERED;
    if (live == &g->live_http_route && !clank_live_origin(c, g)) return CLANK_HTTP_ANSWERED;
    if (live) {
      c->body_limit = (size_t)g->bridge_max_bytes;
      return hold(c, g, live);
    }
  }
  const clank_route_t *route = NULL;
  int reserved = clank_router_reserved(path, path_len, g->has_views);
  if (!reserved) {
    route = clank_router_find(&g->router, r->method, path, path_len);
    if (route == NULL && r->method == HTTP_HEAD)
      route = clank_router_find(&g->router, HTTP_GET, path, path_len);
  }
  if (route && route->segs && !clank_route_params_valid(route, path, path_len)) {
    clank_conn_text(c, 400, "Bad request."); /* where decodeURIComponent throws */
    return CLANK_HTTP_ANSWERED;
  }
  if (route == NULL && (r->method == HTTP_GET || r->method == HTTP_HEAD) &&
      clank_static_match(g, path, path_len))
    route = &g->static_route;
  if (route == NULL && !reserved && !clank_static_match(g, path, path_len) &&
      method_not_allowed(c, g, path, path_len))
    return CLANK_HTTP_ANSWERED;
  if (route == NULL) {
    clank_conn_text(c, 404, "Not found.");
    return CLANK_HTTP_ANSWERED;
  }
  if (route->body_limit) c->body_max = route->body_limit;
  int unsafe = r->method == HTTP_POST || r->method == HTTP_PUT || r->method == HTTP_PATCH ||
               r->method == HTTP_DELETE;
  if (unsafe && !route->cross_site && !clank_csrf_check(c, g)) return CLANK_HTTP_ANSWERED;
  return hold(c, g, route);
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

/* Reads t[name] (t at idx) as lua_getfield does, without interning a C string. */
static int get_named(lua_State *co, int names, int idx, int name) {
  lua_rawgeti(co, names, name);
  return lua_gettable(co, idx);
}

/* Writes { status, headers?, body? } (at idx) into the connection's output;
   raises (with nothing written) when the table is not a valid response.
   names: the field names' table (clank_names_push), or 0. */
static void write_response_in(lua_State *co, clank_conn_t *c, clank_gen_t *g, int idx, int names) {
  if (!lua_istable(co, idx))
    luaL_error(co, "bad route response: expected a table { status, headers?, body? }, got %s",
               luaL_typename(co, idx));
  idx = lua_absindex(co, idx);
  if (names == 0) names = push_names(co, g);
  get_named(co, names, idx, CLANK_NAME_STATUS);
  int isint;
  lua_Integer status = lua_tointegerx(co, -1, &isint);
  if (!isint || status < 200 || status > 599)
    luaL_error(co, "bad route response: status must be an integer from 200 to 599");
  lua_pop(co, 1);
  if (c->closing) return;

  int body_idx = lua_gettop(co) + 1;
  get_named(co, names, idx, CLANK_NAME_BODY);
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
      co, c, idx, names, (int)status,
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

static void write_response(lua_State *co, clank_conn_t *c, clank_gen_t *g, int idx) {
  write_response_in(co, c, g, idx, 0);
}

/* The head of { status, headers?, cookies? } at idx: the status line, the
   headers and cookies, and default_type when the headers gave none. */
static void write_head(lua_State *co, clank_conn_t *c, int idx, int names, int status,
                       const char *default_type) {
  clank_conn_begin(c, status);
  int has_type = 0;
  if (get_named(co, names, idx, CLANK_NAME_HEADERS) == LUA_TTABLE) {
    clank_write_headers(co, c, lua_gettop(co), &has_type);
  } else if (!lua_isnil(co, -1)) {
    bad_response(co, c, "headers must be a table");
  }
  lua_pop(co, 1);
  if (get_named(co, names, idx, CLANK_NAME_COOKIES) == LUA_TTABLE) {
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
static void write_stream_head(lua_State *co, exchange_t *x, int idx, int names) {
  clank_conn_t *c = x->conn;
  get_named(co, names, idx, CLANK_NAME_STATUS);
  int isint;
  lua_Integer status = lua_tointegerx(co, -1, &isint);
  if (!isint || status < 200 || status > 599)
    luaL_error(co, "bad route response: status must be an integer from 200 to 599");
  lua_pop(co, 1);
  if (!c->closing && !x->abandoned) {
    if (c->req.http_major == 1 && c->req.http_minor == 0) c->close_after = 1; /* ends with it */
    write_head(co, c, idx, names, (int)status, "content-type: text/plain; charset=utf-8\r\n");
  }
  clank_stream_route_begin(co, x, idx);
}

/* A continuation's context: the exchange (no lookup of the coroutine's
   task) and the step, in the pointer's low bits. */
#define STEP_MASK 3
static lua_KContext step_ctx(exchange_t *x, int step) { return (lua_KContext)x | step; }
static exchange_t *step_exchange(lua_KContext ctx) { return (exchange_t *)(ctx & ~STEP_MASK); }

/* The coroutine's body: [handler, request (nil for a handler that takes no
   parameter), context fn or nil] →
   ctx = context(request); response = handler(request, ctx); write it.
   Every step is a continuation, so each may wait. */
static int route_step(lua_State *co, int status, lua_KContext k) {
  (void)status;
  exchange_t *x = step_exchange(k);
  switch (k & STEP_MASK) {
    case 0:
      if (!lua_isnil(co, 3)) {
        lua_pushvalue(co, 3);
        lua_pushvalue(co, 2);
        lua_callk(co, 1, 1, step_ctx(x, 1), route_step);
      } else if (lua_isnil(co, 2)) {
        lua_pushnil(co); /* a handler without parameters: no request, no ctx */
      } else {
        lua_newtable(co);
      }
      /* fallthrough */
    case 1:
      lua_pushvalue(co, 1);
      lua_pushvalue(co, 2);
      lua_pushvalue(co, 4);
      lua_callk(co, 2, 1, step_ctx(x, 2), route_step);
      /* fallthrough */
    case 2: {
      if (!lua_istable(co, 5)) write_response(co, x->conn, x->gen, 5); /* raises */
      int names = push_names(co, x->gen);                              /* 6 */
      if (get_named(co, names, 5, CLANK_NAME_STREAM) == LUA_TNIL) {
        write_response_in(co, x->conn, x->gen, 5, names);
        return 0;
      }
      if (!lua_isfunction(co, 7)) luaL_error(co, "bad route response: stream must be a function");
      write_stream_head(co, x, 5, names);
      lua_remove(co, names);
      lua_callk(co, 1, 0, step_ctx(x, 3), route_step); /* stream(send) */
    }
      /* fallthrough */
    default: clank_stream_finish(x); return 0;
  }
}

/* [handler, request, context fn or nil, exchange] */
static int route_entry(lua_State *co) {
  exchange_t *x = lua_touserdata(co, 4);
  lua_settop(co, 3);
  return route_step(co, LUA_OK, step_ctx(x, 0));
}

/* The bridge's answer given as C values: no response table. Returns -1,
   the answer cancelled, when its CORS origin is not a valid header value. */
static int put_answer(clank_conn_t *c, const clank_bridge_answer_t *a) {
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
static void put_answer_outside(clank_conn_t *c, const clank_bridge_answer_t *a) {
  if (put_answer(c, a) != 0) answer_stopped(c, 500, "INTERNAL_ERROR", "Internal server error.");
}

/* The bridge's answer written: given as C values, or the response table on top. */
static int bridge_answer(lua_State *co, exchange_t *x) {
  if (x->answer.status) {
    if (put_answer(x->conn, &x->answer) != 0)
      luaL_error(
          co, "bad route response: header access-control-allow-origin is not allowed or not valid");
  } else {
    write_response(co, x->conn, x->gen, lua_gettop(co));
  }
  return 0;
}

/* clank_bridge_handle_view_task's run ended, waits or not (its done). */
static int bridge_done(lua_State *co, clank_bridge_answer_t *a) {
  exchange_t *x = (exchange_t *)(void *)((char *)a - offsetof(exchange_t, answer));
  if (x->late) return 0; /* answered 504 at the action timeout */
  return bridge_answer(co, x);
}

/* A request the bridge reads as a table (clank_bridge_handle_task): its
   action runs in a joined child, never inline, so it is never late. */
static int bridge_step(lua_State *co, int status, lua_KContext k) {
  (void)status;
  exchange_t *x = step_exchange(k);
  if ((k & STEP_MASK) == 0) { /* called where it lies, its arguments above it */
    x->answer.status = 0;
    lua_callk(co, lua_gettop(co) - 1, 1, step_ctx(x, 1), bridge_step);
  }
  return bridge_answer(co, x);
}

/* The bridge's answer->push_request: the request's maker, made only when
   Lua may read the request (before the run's first wait: the request is
   as it was read). */
static void push_bridge_request(lua_State *co, clank_bridge_answer_t *a) {
  exchange_t *x = (exchange_t *)(void *)((char *)a - offsetof(exchange_t, answer));
  clank_request_push_maker(co, &x->conn->req);
}

/* [bridge, request or maker or nil, context fn or nil, view, answer, exchange]:
   clank_bridge_handle_view_task, right here, its answer written by its
   done; or [clank_bridge_handle_task, bridge, request, context fn or nil,
   exchange]. */
static int bridge_entry(lua_State *co) {
  exchange_t *x = lua_touserdata(co, -1);
  lua_pop(co, 1);
  if (lua_gettop(co) == 5) {
    x->answer.done = bridge_done;
    x->answer.push_request = push_bridge_request;
    return clank_bridge_handle_view_task(co);
  }
  x->answer.done = NULL;
  x->answer.push_request = NULL;
  return bridge_step(co, LUA_OK, step_ctx(x, 0));
}

/* /__clank/mcp: [env, request, context fn] → require("clank.mcp").handle(request, env);
   its answer, unless it streamed one. */
static int mcp_step(lua_State *co, int status, lua_KContext step) {
  (void)status;
  if (step == 0) {
    lua_getglobal(co, "require");
    lua_pushliteral(co, "clank.mcp");
    lua_callk(co, 1, 1, 1, mcp_step);
  }
  if (step <= 1) {
    lua_getfield(co, -1, "handle");
    lua_pushvalue(co, 2);
    lua_pushvalue(co, 1);
    lua_callk(co, 2, 1, 2, mcp_step);
  }
  exchange_t *x = exchange_of(co);
  if (x->streaming)
    clank_stream_finish(x);
  else
    write_response(co, x->conn, x->gen, lua_gettop(co));
  return 0;
}

static int mcp_entry(lua_State *co) { return mcp_step(co, LUA_OK, 0); }

/* Views (SPEC §11): [live, request, context] → live:page(request) or
   live:http(request), which run the app's context themselves. */
static int live_step(lua_State *co, int status, lua_KContext method) {
  (void)status;
  if (method != 0) {
    lua_getfield(co, 1, method == 1 ? "page" : "http");
    lua_pushvalue(co, 1);
    lua_pushvalue(co, 2);
    lua_callk(co, 2, 1, 0, live_step);
  }
  exchange_t *x = exchange_of(co);
  write_response(co, x->conn, x->gen, lua_gettop(co));
  return 0;
}

static int page_entry(lua_State *co) { return live_step(co, LUA_OK, 1); }
static int live_http_entry(lua_State *co) { return live_step(co, LUA_OK, 2); }

/* The live channel: answered at once, no handler coroutine. */
static void accept_live(clank_conn_t *c, clank_host_t *h, clank_gen_t *g, int inspector) {
  clank_target_t t;
  clank_request_target(&c->req, &t);
  size_t skip = sizeof "/__clank/sessions/" - 1 + (inspector ? 2 : 0); /* "i." */
  const char *id = t.path + skip;
  size_t id_len = t.path_len - skip - 5;
  lua_State *L = g->L;
  push_request(L, c, g);
  clank_live_accept(c, h, g, id, id_len, lua_gettop(L), inspector);
  lua_pop(L, 1);
  g->inflight--; /* the channel holds the generation itself */
  clank_host_gen_idle(h, g);
}

/* ---- running and finishing ---- */

/* The signal's holder or signal of x is let go: the hold slot is kept. */
static void drop_signal(exchange_t *x) {
  if (x->task.signal_ref == x->task.hold_slot) { /* a bridge's ctx: the slot is kept */
    lua_pushboolean(x->gen->L, 0);
    lua_rawseti(x->gen->L, LUA_REGISTRYINDEX, x->task.hold_slot);
  } else if (x->task.signal_ref) {
    luaL_unref(x->gen->L, LUA_REGISTRYINDEX, x->task.signal_ref);
  }
  x->task.signal_ref = 0;
  x->task.holder_deferred = 0; /* nothing took it: never made */
}

/* x's request is over for the generation: a retired one may go now. */
static void request_over(exchange_t *x) {
  if (x->gen->alloc.pressure) clank_host_memory_check(x->host, x->gen);
  x->gen->inflight--;
  clank_host_gen_idle(x->host, x->gen);
}

/* The connection c, held while its exchange waited, goes on to its next request. */
static void conn_goes_on(clank_conn_t *c) {
  ((clank_conn_state_t *)c->data)->exchange = NULL;
  clank_conn_resume(c);
  clank_conn_release(c);
}

static void finish(exchange_t *x, int reusable) {
  if (x->task.deadline_timer) clank_sched_cancel(&x->task);
  request_over(x);
  if (x->streaming) {
    clank_stream_finish(x);
    clank_stream_forget(x, x->gen->L);
  }
  drop_signal(x);
  clank_conn_t *c = x->conn;
  int waited = x->waited;
  exchange_put(x, reusable);
  if (waited) conn_goes_on(c); /* else on_message_complete goes on by itself */
}

/* The action the bridge runs inline in x waited past its timeout (SPEC §5
   step 8): the bridge's 504 goes out now and the connection moves on, as
   it did when the action ran in a child task; x stays with its coroutine,
   in the generation's late list, until the action ends (late_end). */
static void action_timed_out(clank_task_t *t) {
  exchange_t *x = (exchange_t *)t;
  clank_conn_t *c = x->conn;
  clank_gen_t *g = x->gen;
  if (!x->abandoned) {
    clank_bridge_timeout_answer(&x->answer);
    put_answer_outside(c, &x->answer);
  }
  x->late = 1;
  x->conn = NULL;
  x->next = g->late;
  g->late = x;
  request_over(x);
  conn_goes_on(c);
  if (t->signal_ref) { /* after the answer: a listener may end the action at once */
    lua_rawgeti(g->L, LUA_REGISTRYINDEX, t->signal_ref);
    clank_abort_fire(g->L, -1, "timeout");
    lua_pop(g->L, 1);
  }
}

/* The coroutine of a late exchange ended: it is taken off the late list
   and reused (its action's end was dropped by the bridge). */
static void late_end(exchange_t *x, int st) {
  clank_gen_t *g = x->gen;
  exchange_t **p = (exchange_t **)&g->late;
  while (*p && *p != x) p = &(*p)->next;
  if (*p) *p = x->next;
  x->next = NULL;
  if (st != LUA_OK) {
    lua_State *co = x->task.co;
    x->host->log.request_id = x->task.request_id;
    clank_log_msg(&x->host->log, "error", "an action that timed out failed later: %s",
                  lua_tostring(co, -1) ? lua_tostring(co, -1) : "(an error object)");
    x->host->log.request_id = NULL;
  }
  drop_signal(x);
  x->late = 0;
  exchange_put(x, reusable(x, st));
}

/* A coroutine's error, with the traceback of where it was raised. */
static void log_failure(exchange_t *x, lua_State *co) {
  clank_request_t *r = &x->conn->req;
  const char *msg = clank_error_message(co, -1);
  luaL_traceback(co, co, msg, 0);
  x->host->log.request_id = x->task.request_id;
  clank_log_msg(&x->host->log, "error", "route %s %.*s failed: %s",
                llhttp_method_name((llhttp_method_t)r->method), (int)r->url_len,
                clank_request_url(r), lua_tostring(co, -1));
  x->host->log.request_id = NULL;
}

/* The action the bridge ran inline in x failed where its run could not
   catch the error (a bare coroutine.yield in the handler, a resume refused
   over the task's budget): answered and logged as the bridge answers and
   logs a failed action. */
static void action_failed(exchange_t *x, lua_State *co) {
  lua_State *L = x->gen->L;
  clank_conn_t *c = x->conn;
  x->task.deadline_on_wait = 0;
  lua_pushcfunction(L, clank_bridge_failed);
  lua_rawgeti(L, LUA_REGISTRYINDEX, x->gen->bridge_ref);
  lua_pushvalue(co, -1);
  lua_xmove(co, L, 1);
  lua_pushlightuserdata(L, &x->answer);
  int ok = lua_pcall(L, 3, 1, 0) == LUA_OK;
  if (!ok || lua_isstring(L, -1)) {
    x->host->log.request_id = x->task.request_id;
    clank_log_msg(&x->host->log, "error",
                  ok ? "action failed: %s" : "answering a failed action failed: %s",
                  lua_tostring(L, -1) ? lua_tostring(L, -1) : "(an error object)");
    x->host->log.request_id = NULL;
  }
  lua_pop(L, 1);
  if (x->abandoned || c->closing || c->answered) return;
  if (ok)
    put_answer_outside(c, &x->answer);
  else
    answer_stopped(c, 500, "INTERNAL_ERROR", "Internal server error.");
}

/* The log line of a request stopped over its budget: its target as the
   access log writes it, a view session's token redacted. */
static void log_stopped(exchange_t *x, clank_conn_t *c, const char *message) {
  const char *url = clank_request_url(&c->req), *prefix = x->host->log.credential_prefix;
  size_t n = c->req.url_len, k = prefix ? strlen(prefix) : 0;
  const char *method = llhttp_method_name((llhttp_method_t)c->req.method);
  x->host->log.request_id = x->task.request_id;
  if (k && n > k && memcmp(url, prefix, k) == 0) {
    const char *slash = memchr(url + k, '/', n - k);
    int rest = slash ? (int)(n - (size_t)(slash - url)) : 0;
    clank_log_msg(&x->host->log, "error", "route %s %.*s<redacted>%.*s stopped: %s", method, (int)k,
                  url, rest, slash ? slash : "", message);
  } else {
    clank_log_msg(&x->host->log, "error", "route %s %.*s stopped: %s", method, (int)n, url,
                  message);
  }
  x->host->log.request_id = NULL;
}

/* Resumes the coroutine; returns 1 while it waits. */
static int run(exchange_t *x, int nargs);
static void resume_task(clank_task_t *t, int nargs) { run((exchange_t *)t, nargs); }

static int run(exchange_t *x, int nargs) {
  lua_State *co = x->task.co;
  int nres;
  int st = clank_task_resume(&x->task, nargs, &nres);
  if (st == LUA_YIELD) return 1;
  if (x->late) {
    late_end(x, st);
    return 0;
  }
  if (st != LUA_OK && x->task.deadline_on_wait) {
    action_failed(x, co);
  } else if (st != LUA_OK) {
    clank_conn_t *c = x->conn;
    int exhausted = x->task.exhausted;
    if (exhausted) { /* the RESOURCE_LIMIT ActionError: its message is the answer */
      lua_getfield(co, -1, "message");
      log_stopped(x, c, lua_tostring(co, -1));
    } else {
      log_failure(x, co);
    }
    if (!x->abandoned && !c->closing && !c->answered) {
      if (exhausted)
        answer_stopped(c, 503, "RESOURCE_LIMIT", lua_tostring(co, -1));
      else
        answer_stopped(c, 500, "INTERNAL_ERROR", "Internal server error.");
    } else if (x->streaming && !x->stream_closed && !c->closing) {
      x->stream_closed = 1; /* no last chunk: the client must not take it for whole */
      clank_conn_close(c);
    }
  }
  finish(x, reusable(x, st));
  return 0;
}

static int on_message(clank_conn_t *c) {
  clank_host_t *h = c->server->data;
  clank_conn_state_t *st = c->data;
  clank_gen_t *g = st->gen; /* held since the header block: it may be a retired one now */
  st->gen = NULL;           /* the exchange holds it from here */
  const clank_route_t *route = st->route;
  if (route == &g->live_route || route == &inspector_live_route) {
    accept_live(c, h, g, route == &inspector_live_route);
    return 0;
  }
  if (route == &g->static_route) {
    clank_target_t t;
    clank_request_target(&c->req, &t);
    int waits =
        clank_static_serve(c, clank_static_match(g, t.path, t.path_len), t.path, t.path_len);
    g->inflight--;
    clank_host_gen_idle(h, g);
    return waits;
  }
  exchange_t *x = exchange_get(g);
  x->conn = c;
  x->host = h;
  const char *id = clank_conn_request_id(c);
  /* the whole array, a fixed size: a byte count the compiler knows is
     small becomes a `rep movs`, whose start-up cost more than this copy */
  memcpy(x->task.request_id, id, sizeof x->task.request_id);
  lua_State *co = x->task.co;
  clank_bridge_view_t view; /* read before the handler's first wait only */
  int bridge = 0;
  if (route == &g->bridge_route && st->lua_request == 0) {
    if (st->bridge_passed && st->bridge_nheaders == c->req.nheaders &&
        st->bridge_head == c->req.head.data) { /* the header block's view, with the body now */
      view = st->bridge_view;
      view.body =
          (clank_bridge_span_t){c->req.body.len > 0 ? c->req.body.data : NULL, c->req.body.len};
      bridge = 1;
    } else {
      bridge = bridge_view(c, &view);
    }
  }
  if (bridge && st->bridge_nheaders == c->req.nheaders) view.passed = st->bridge_passed;
  st->bridge_passed = NULL;
  /* an app route whose handler takes no parameter, with no context function
     to give it to either: nothing can read the request */
  int unread =
      route->path && !route->takes_request && g->context_ref == LUA_NOREF && st->lua_request == 0;
  /* for the request and its params, removed before the run */
  int names = bridge || unread ? 0 : push_names(co, g);
  int takes_x = route == &g->bridge_route; /* the entries that take the exchange */
  if (route == &g->bridge_route) {
    lua_pushcfunction(co, bridge_entry);
    if (!bridge) lua_pushcfunction(co, clank_bridge_handle_task);
    lua_rawgeti(co, LUA_REGISTRYINDEX, g->bridge_ref);
  } else if (route == &g->mcp_route) {
    lua_pushcfunction(co, mcp_entry);
    lua_rawgeti(co, LUA_REGISTRYINDEX, g->mcp_env_ref);
  } else if (route == &inspector_page_route) {
    lua_pushcfunction(co, page_entry); /* the inspector's own page (SPEC §16) */
    clank_inspector_push(h, g);
    lua_xmove(g->L, co, 1);
  } else if (route == &g->page_route || route == &g->live_http_route) {
    lua_pushcfunction(co, route == &g->page_route ? page_entry : live_http_entry);
    lua_rawgeti(co, LUA_REGISTRYINDEX, g->live_ref);
  } else {
    lua_pushcfunction(co, route_entry);
    lua_rawgeti(co, LUA_REGISTRYINDEX, route->handler_ref);
    takes_x = 1;
  }
  if (bridge || unread)
    lua_pushnil(co); /* the bridge's maker only if Lua may read it, its table only if Lua does */
  else
    push_request_in(co, c, g, names);
  if (route->path && !unread) { /* an app route: request.params */
    clank_target_t t;
    clank_request_target(&c->req, &t);
    clank_route_set_params(co, names, route, t.path, t.path_len);
  }
  if (g->context_ref != LUA_NOREF)
    lua_rawgeti(co, LUA_REGISTRYINDEX, g->context_ref);
  else
    lua_pushnil(co);
  int nargs = 3 + (route == &g->bridge_route && !bridge); /* handle_task first */
  if (bridge) {
    lua_pushlightuserdata(co, &view);
    lua_pushlightuserdata(co, &x->answer);
    nargs += 2;
  }
  if (takes_x) {
    lua_pushlightuserdata(co, x);
    nargs++;
  }
  if (names) lua_remove(co, names);
  if (!run(x, nargs)) return 0;
  x->waited = 1;
  st->exchange = x;
  clank_conn_hold(c);
  return 1;
}

/* The client went away (a reset, a failed write: not a half-close) while
   its handler waits: its signal aborts with reason "disconnected". */
static void client_gone(exchange_t *x) {
  if (x->task.signal_ref) {
    lua_State *L = x->gen->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, x->task.signal_ref);
    clank_abort_fire(L, -1, "disconnected");
    lua_pop(L, 1);
  }
}

/* A stream's output drained: its waiting send goes on. */
static void on_writable(clank_conn_t *c) {
  exchange_t *x = ((clank_conn_state_t *)c->data)->exchange;
  if (x) clank_stream_wake(x);
}

/* The connection goes away: a waiting handler's signal aborts, a held
   generation is let go. */
static void on_close(clank_conn_t *c) {
  clank_conn_state_t *st = c->data;
  if (st->exchange) {
    st->exchange->abandoned = 1;
    client_gone(st->exchange);
    clank_stream_wake(st->exchange); /* its send returns false */
  }
  if (st->live) clank_live_closed(st->live);
  release_gen(c);
}

const clank_http_handler_t clank_dispatch_handler = {
    .on_head = on_head,
    .on_body_too_large = body_too_large,
    .on_message = on_message,
    .on_close = on_close,
    .on_writable = on_writable,
    .on_detach = clank_handoff_detached,
};
