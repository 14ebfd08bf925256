/* Dispatch (SPEC §2): the HTTP server's handler table. At a request's
   header block it walks the dispatch order (a table of rows below: the
   inspector and the manual, the Host rules, another worker's session, MCP, the bridge, the
   runtime's own paths, views, the app's routes, static folders, 405, 404)
   and either answers or holds the route the request takes; at its end it
   starts the route's coroutine (drive.c) on an exchange (exchange.c). Owns
   what a connection keeps between the two (clank_conn_state_t). */
#include "host/dispatch.h"

#include <lauxlib.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "host/csrf.h"
#include "host/docs.h"
#include "host/drive.h"
#include "host/exchange.h"
#include "host/host.h"
#include "host/inspector.h"
#include "host/live.h"
#include "host/lua_request.h"
#include "host/handoff.h"
#include "host/metrics.h"
#include "host/respond.h"
#include "host/router.h"
#include "host/static.h"
#include "agent/bridge.h"
#include "core/protect.h"
#include "util/bytes.h"

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
  if (clank_http_is_loopback(v, name_len)) return 1;
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
    clank_write_response(L, c, g, lua_gettop(L));
    lua_pushboolean(L, 1);
    return 1;
  }
  clank_lua_request_push(L, &c->req); /* 4 */
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
  clank_write_response(L, c, g, lua_gettop(L));
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
    clank_answer_stopped(c, 500, "INTERNAL_ERROR", "Internal server error.");
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

/* The request table the header block made, with the body now, or a new one. */
static void push_request_in(lua_State *co, clank_conn_t *c, clank_gen_t *g, int names) {
  clank_conn_state_t *st = c->data;
  if (st->lua_request == 0) {
    clank_lua_request_push_in(co, &c->req, names);
    return;
  }
  lua_rawgeti(co, LUA_REGISTRYINDEX, st->lua_request);
  luaL_unref(g->L, LUA_REGISTRYINDEX, st->lua_request);
  st->lua_request = 0;
  if (c->req.body.len > 0) {
    lua_pushlstring(co, c->req.body.data, c->req.body.len);
    clank_lua_request_set_in(co, names, CLANK_NAME_BODY);
  }
}

static void push_request(lua_State *co, clank_conn_t *c, clank_gen_t *g) {
  int names = clank_push_names(co, g);
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

/* The inspector's page, live channels and jobs' page (SPEC §16) take these pseudo-routes. */
static const clank_route_t inspector_page_route = {.handler_ref = LUA_NOREF};
static const clank_route_t inspector_live_route = {.handler_ref = LUA_NOREF};
static const clank_route_t inspector_jobs_route = {.handler_ref = LUA_NOREF};

/* /__clank/inspector, /__clank/sessions/i.<token>/... and /__clank/inspector/jobs...: 404 for
   whoever may not see them (they do not exist for them), whatever the Host rules say. The jobs'
   page takes GET; what is under it, POST: its Retry and Cancel forms, which change the app's
   data, so they are under the CSRF rule of app routes too (SPEC §15) — the access rule says who
   may ask, this one that no other site's page asks in their name. */
static int inspector_head(clank_conn_t *c, clank_host_t *h, clank_gen_t *g, const char *p,
                          size_t n) {
  const clank_route_t *route = NULL;
  int get = c->req.method == HTTP_GET || c->req.method == HTTP_HEAD;
  if (!clank_inspector_allowed(c, h->opts.inspector_host)) {
    route = NULL;
  } else if (clank_span_is(p, n, "/__clank/inspector")) {
    if (get) route = &inspector_page_route;
  } else if (clank_inspector_jobs_path(p, n)) {
    int page = clank_span_is(p, n, CLANK_INSPECTOR_JOBS);
    if (page ? get : c->req.method == HTTP_POST) {
      if (!page && !clank_csrf_check(c, g)) return CLANK_HTTP_ANSWERED;
      c->body_limit = 4096; /* a form with a button: nothing to read */
      route = &inspector_jobs_route;
    }
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

/* The manual (issue 34) takes this pseudo-route. */
static const clank_route_t docs_route = {.handler_ref = LUA_NOREF};

/* /__clank/docs and its pages: the inspector's rule (404 for whoever may
   not see it), GET and HEAD. */
static int docs_head(clank_conn_t *c, clank_host_t *h, clank_gen_t *g) {
  if (!clank_inspector_allowed(c, h->opts.inspector_host)) {
    clank_conn_text(c, 404, "Not found.");
    return CLANK_HTTP_ANSWERED;
  }
  if (c->req.method != HTTP_GET && c->req.method != HTTP_HEAD) {
    clank_conn_answer(c, 405, "content-type: text/plain; charset=utf-8\r\nallow: GET, HEAD\r\n",
                      "Method not allowed.", sizeof "Method not allowed." - 1);
    return CLANK_HTTP_ANSWERED;
  }
  int next = hold(c, g, &docs_route);
  ((clank_conn_state_t *)c->data)->kind = CLANK_KIND_RUNTIME;
  return next;
}

/* ---- the dispatch order ---- */

/* What the rows read of a request's header block, and what a row's match
   found for its handler. */
typedef struct head_s {
  clank_host_t *h;
  clank_gen_t *g;
  clank_target_t t; /* the request's target, parsed once */
  const char *path;
  size_t path_len;
  int method;
  int reserved;               /* a path the runtime answers itself (the routes row) */
  int owner, live;            /* the worker that owns the session (the handoff row) */
  const clank_route_t *route; /* the route found (the live and routes rows) */
} head_t;

/* A row: when match says the request is its, handle answers it
   (CLANK_HTTP_ANSWERED) or holds a route (CLANK_HTTP_READ_BODY, hold). */
typedef struct row_s {
  int (*match)(clank_conn_t *c, head_t *hd);
  int (*handle)(clank_conn_t *c, head_t *hd);
} row_t;

static int is_mcp(const head_t *hd) {
  return clank_span_is(hd->path, hd->path_len, "/__clank/mcp");
}

/* /__clank/inspector and its sessions (SPEC §16), before the Host rules. */
static int match_inspector(clank_conn_t *c, head_t *hd) {
  (void)c;
  return clank_inspector_path(hd->path, hd->path_len);
}
static int handle_inspector(clank_conn_t *c, head_t *hd) {
  return inspector_head(c, hd->h, hd->g, hd->path, hd->path_len);
}

/* The manual (issue 34), before the Host rules as the inspector. */
static int match_docs(clank_conn_t *c, head_t *hd) {
  (void)c;
  return clank_docs_path(hd->path, hd->path_len);
}
static int handle_docs(clank_conn_t *c, head_t *hd) { return docs_head(c, hd->h, hd->g); }

/* A Host the rules of SPEC §13 refuse: 403, and a warning naming the Host and what lets it in
   (the agents' JSON answers have no room for the hint; the same Host is logged once per 10 s). */
static int match_foreign_host(clank_conn_t *c, head_t *hd) {
  return !host_allowed(hd->h, hd->g, c, &hd->t);
}
static int handle_foreign_host(clank_conn_t *c, head_t *hd) {
  const char *host = "";
  size_t n = 0, name_len;
  clank_request_host(&c->req, &hd->t, &host, &n, &name_len);
  int shown = n > 200 ? 200 : (int)n;
  clank_log_request(&hd->h->log, clank_conn_request_id(c), "warn",
                    "Host %.*s not allowed (403): add its origin (http://%.*s or https://%.*s) to "
                    "the app's allowedOrigins, start with --public-origin ORIGIN behind a TLS "
                    "proxy, or with --allow-any-host behind a proxy that checks it",
                    shown, host, shown, host, shown, host);
  clank_answer_host_forbidden(c, hd->path, hd->path_len);
  return CLANK_HTTP_ANSWERED;
}

/* A session another worker owns goes there (SPEC §13). */
static int match_handoff(clank_conn_t *c, head_t *hd) {
  if (!hd->h->worker) return 0;
  hd->live = 0;
  hd->owner = clank_handoff_owner(hd->h, hd->path, hd->path_len, &c->req, &hd->live);
  return hd->owner >= 0;
}
static int handle_handoff(clank_conn_t *c, head_t *hd) {
  return clank_handoff(c, hd->owner, hd->live);
}

/* /__clank/mcp (SPEC §6). */
static int match_mcp(clank_conn_t *c, head_t *hd) {
  (void)c;
  return is_mcp(hd);
}
static int handle_mcp(clank_conn_t *c, head_t *hd) {
  c->body_limit = (size_t)hd->g->bridge_max_bytes;
  return hold(c, hd->g, &hd->g->mcp_route);
}

/* app.auth's paths: its sign-in pages and endpoints (issue 30) and its
   OAuth authorization server with the metadata MCP hosts discover it by
   (issue 31). An unsafe method is under the origin rule of app routes
   (SPEC §15), so no other site can post a sign-in or consent form; the
   token, revocation and registration endpoints, which no cookie reaches
   and which browser-based clients call from their own origin, are not. */
static int is_auth_path(const char *p, size_t n) {
  return clank_span_starts(p, n, "/__clank/auth/") || clank_span_starts(p, n, "/__clank/oauth/") ||
         clank_span_starts(p, n, "/.well-known/oauth-protected-resource") ||
         clank_span_is(p, n, "/.well-known/oauth-authorization-server") ||
         clank_span_is(p, n, "/.well-known/openid-configuration");
}
static int cookieless_endpoint(const char *p, size_t n) {
  return clank_span_is(p, n, "/__clank/oauth/token") ||
         clank_span_is(p, n, "/__clank/oauth/revoke") ||
         clank_span_is(p, n, "/__clank/oauth/register");
}
static int match_auth(clank_conn_t *c, head_t *hd) {
  (void)c;
  return hd->g->auth_route.handler_ref != LUA_NOREF && is_auth_path(hd->path, hd->path_len);
}
static int handle_auth(clank_conn_t *c, head_t *hd) {
  int m = hd->method;
  int unsafe = m == HTTP_POST || m == HTTP_PUT || m == HTTP_PATCH || m == HTTP_DELETE;
  if (unsafe && !cookieless_endpoint(hd->path, hd->path_len) && !clank_csrf_check(c, hd->g))
    return CLANK_HTTP_ANSWERED;
  c->body_limit = (size_t)hd->g->bridge_max_bytes;
  return hold(c, hd->g, &hd->g->auth_route);
}

/* The bridge (SPEC §5): answered at the header block when it can be. */
static int match_bridge(clank_conn_t *c, head_t *hd) {
  (void)c;
  return clank_router_bridge_path(hd->path, hd->path_len);
}
static int handle_bridge(clank_conn_t *c, head_t *hd) {
  if (bridge_answers_early(c, hd->g)) return CLANK_HTTP_ANSWERED;
  c->body_limit = (size_t)hd->g->bridge_max_bytes;
  return hold(c, hd->g, &hd->g->bridge_route);
}

/* The browser client script (SPEC §11). */
static int match_client(clank_conn_t *c, head_t *hd) {
  (void)c;
  return clank_span_starts(hd->path, hd->path_len, "/__clank/client.");
}
static int handle_client(clank_conn_t *c, head_t *hd) {
  clank_answer_client(c, hd->path, hd->path_len);
  return CLANK_HTTP_ANSWERED;
}

/* /__clank/health and /__clank/metrics (SPEC §15). */
static int match_metrics(clank_conn_t *c, head_t *hd) {
  (void)c;
  return clank_metrics_path(hd->path, hd->path_len);
}
static int handle_metrics(clank_conn_t *c, head_t *hd) {
  clank_metrics_serve(c, hd->h, hd->path, hd->path_len);
  return CLANK_HTTP_ANSWERED;
}

/* Views' pages, surfaces and live channel (SPEC §11). */
static int match_views(clank_conn_t *c, head_t *hd) {
  (void)c;
  if (hd->g->live_ref == LUA_NOREF) return 0;
  hd->route = live_path(hd->g, hd->method, hd->path, hd->path_len);
  return hd->route != NULL;
}
static int handle_views(clank_conn_t *c, head_t *hd) {
  clank_gen_t *g = hd->g;
  if (hd->route == &g->live_route && !clank_live_check(c, g)) return CLANK_HTTP_ANSWERED;
  if (hd->route == &g->live_http_route && !clank_live_origin(c, g)) return CLANK_HTTP_ANSWERED;
  c->body_limit = (size_t)g->bridge_max_bytes;
  return hold(c, g, hd->route);
}

/* The app's routes (SPEC §15), HEAD answered by a GET route. */
static int match_route(clank_conn_t *c, head_t *hd) {
  (void)c;
  const clank_router_t *rt = &hd->g->router;
  hd->reserved = clank_router_reserved(hd->path, hd->path_len, hd->g->has_views);
  if (hd->reserved) return 0;
  hd->route = clank_router_find(rt, hd->method, hd->path, hd->path_len);
  if (hd->route == NULL && hd->method == HTTP_HEAD)
    hd->route = clank_router_find(rt, HTTP_GET, hd->path, hd->path_len);
  return hd->route != NULL;
}
static int handle_route(clank_conn_t *c, head_t *hd) {
  const clank_route_t *route = hd->route;
  if (route->segs && !clank_route_params_valid(route, hd->path, hd->path_len)) {
    clank_conn_text(c, 400, "Bad request."); /* where decodeURIComponent throws */
    return CLANK_HTTP_ANSWERED;
  }
  if (route->body_limit) c->body_max = route->body_limit;
  int m = hd->method;
  int unsafe = m == HTTP_POST || m == HTTP_PUT || m == HTTP_PATCH || m == HTTP_DELETE;
  if (unsafe && !route->cross_site && !clank_csrf_check(c, hd->g)) return CLANK_HTTP_ANSWERED;
  return hold(c, hd->g, route);
}

/* app.static's folders (SPEC §15): GET and HEAD. */
static int match_static(clank_conn_t *c, head_t *hd) {
  (void)c;
  return (hd->method == HTTP_GET || hd->method == HTTP_HEAD) &&
         clank_static_match(hd->g, hd->path, hd->path_len);
}
static int handle_static(clank_conn_t *c, head_t *hd) {
  return hold(c, hd->g, &hd->g->static_route);
}

/* A path some route has with other methods only, and no static file: 405
   with allow. */
static int match_not_allowed(clank_conn_t *c, head_t *hd) {
  (void)c;
  char allow[96];
  return !hd->reserved && !clank_static_match(hd->g, hd->path, hd->path_len) &&
         clank_router_allow(&hd->g->router, hd->path, hd->path_len, allow, sizeof allow) > 0;
}
static int handle_not_allowed(clank_conn_t *c, head_t *hd) {
  clank_answer_not_allowed(c, &hd->g->router, hd->path, hd->path_len);
  return CLANK_HTTP_ANSWERED;
}

/* GET/HEAD /favicon.ico, which browsers ask for on every page, when the app has no route for
   it and no folder prefix took it: an app.static folder's favicon.ico, else 204. */
static const clank_route_t favicon_route = {.handler_ref = LUA_NOREF};
static int match_favicon(clank_conn_t *c, head_t *hd) {
  (void)c;
  return (hd->method == HTTP_GET || hd->method == HTTP_HEAD) &&
         clank_span_is(hd->path, hd->path_len, "/favicon.ico");
}
static int handle_favicon(clank_conn_t *c, head_t *hd) {
  int next = hold(c, hd->g, &favicon_route);
  ((clank_conn_state_t *)c->data)->kind = CLANK_KIND_STATIC;
  return next;
}

/* Anything else. */
static int match_any(clank_conn_t *c, head_t *hd) {
  (void)c, (void)hd;
  return 1;
}
static int handle_not_found(clank_conn_t *c, head_t *hd) {
  (void)hd;
  clank_conn_text(c, 404, "Not found.");
  return CLANK_HTTP_ANSWERED;
}

/* SPEC §2's order: the first row whose match takes the request handles it. */
static const row_t dispatch_order[] = {
    {match_inspector, handle_inspector},       /* 404 to whoever may not see it, Host or not */
    {match_docs, handle_docs},                 /* the same */
    {match_foreign_host, handle_foreign_host}, /* DNS rebinding defence (SPEC §13) */
    {match_handoff, handle_handoff},           /* --workers: the session's owner */
    {match_mcp, handle_mcp},
    {match_auth, handle_auth},
    {match_bridge, handle_bridge},
    {match_client, handle_client},
    {match_metrics, handle_metrics},
    {match_views, handle_views},
    {match_route, handle_route},
    {match_static, handle_static},
    {match_not_allowed, handle_not_allowed},
    {match_favicon, handle_favicon},
    {match_any, handle_not_found},
};

static int on_head(clank_conn_t *c) {
  clank_host_t *h = c->server->data;
  head_t hd; /* each row sets what it finds before it reads it */
  hd.h = h;
  hd.g = h->gen;
  clank_request_target(&c->req, &hd.t);
  hd.path = hd.t.path;
  hd.path_len = hd.t.path_len;
  hd.method = c->req.method;
  ((clank_conn_state_t *)c->data)->bridge_passed = NULL;
  for (const row_t *row = dispatch_order;; row++)
    if (row->match(c, &hd)) return row->handle(c, &hd);
}

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
  if (route == &docs_route) {
    clank_target_t t;
    clank_request_target(&c->req, &t);
    int waits = clank_docs_serve(c, t.path, t.path_len);
    g->inflight--;
    clank_host_gen_idle(h, g);
    return waits;
  }
  if (route == &g->static_route || route == &favicon_route) {
    clank_target_t t;
    clank_request_target(&c->req, &t);
    int waits =
        route == &favicon_route
            ? clank_static_favicon(c, g)
            : clank_static_serve(c, clank_static_match(g, t.path, t.path_len), t.path, t.path_len);
    g->inflight--;
    clank_host_gen_idle(h, g);
    return waits;
  }
  exchange_t *x = clank_exchange_get(g);
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
  int names = bridge || unread ? 0 : clank_push_names(co, g);
  int takes_x = route == &g->bridge_route; /* the entries that take the exchange */
  if (route == &g->bridge_route) {
    lua_pushcfunction(co, clank_drive_bridge_entry);
    if (!bridge) lua_pushcfunction(co, clank_bridge_handle_task);
    lua_rawgeti(co, LUA_REGISTRYINDEX, g->bridge_ref);
  } else if (route == &g->mcp_route) {
    lua_pushcfunction(co, clank_drive_mcp_entry);
    lua_rawgeti(co, LUA_REGISTRYINDEX, g->mcp_env_ref);
  } else if (route == &inspector_page_route) {
    lua_pushcfunction(co, clank_drive_page_entry); /* the inspector's own page (SPEC §16) */
    clank_inspector_push(h, g);
    lua_xmove(g->L, co, 1);
  } else if (route == &inspector_jobs_route) {
    lua_pushcfunction(co, clank_drive_route_entry); /* its handler: request → response */
    clank_inspector_push_jobs(h, g);
    lua_xmove(g->L, co, 1);
    takes_x = 1;
  } else if (route == &g->page_route || route == &g->live_http_route) {
    lua_pushcfunction(
        co, route == &g->page_route ? clank_drive_page_entry : clank_drive_live_http_entry);
    lua_rawgeti(co, LUA_REGISTRYINDEX, g->live_ref);
  } else {
    lua_pushcfunction(co, clank_drive_route_entry);
    lua_rawgeti(co, LUA_REGISTRYINDEX, route->handler_ref);
    takes_x = 1;
  }
  if (bridge || unread)
    lua_pushnil(co); /* the bridge's maker only if Lua may read it, its table only if Lua does */
  else
    push_request_in(co, c, g, names);
  if (route == &g->auth_route) { /* for its limits on guessing, per client address */
    char peer[64];
    size_t n = clank_conn_peer_address(c, peer, sizeof peer);
    /* Behind a proxy on this machine (--public-origin) every client has the proxy's
       address, which clank-run cannot see past (it never trusts X-Forwarded-*): a limit
       on it would let anyone lock everyone out. The per-account limit holds; the proxy
       limits per client (deploy/nginx.conf). */
    int loopback = clank_http_is_loopback(peer, n) || (n == 3 && memcmp(peer, "::1", 3) == 0);
    if (n > 0 && h->opts.public_origin_len && loopback) n = 0;
    if (n > 0) {
      lua_pushlstring(co, peer, n);
      lua_setfield(co, -2, "remoteAddress");
    }
  }
  if (route->path && !unread) { /* an app route: request.params */
    clank_target_t t;
    clank_request_target(&c->req, &t);
    clank_route_set_params(co, names, route, t.path, t.path_len);
  }
  /* the jobs' page is the runtime's: the app's context (its sign-in) has no say */
  if (g->context_ref != LUA_NOREF && route != &g->auth_route && route != &inspector_jobs_route)
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
  if (!clank_drive_run(x, nargs)) return 0;
  x->waited = 1;
  st->exchange = x;
  clank_conn_hold(c);
  return 1;
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
    clank_drive_client_gone(st->exchange);
    clank_stream_wake(st->exchange); /* its send returns false */
  }
  if (st->live) clank_live_closed(st->live);
  release_gen(c);
}

const clank_http_handler_t clank_dispatch_handler = {
    .on_head = on_head,
    .on_body_too_large = clank_answer_too_large,
    .on_message = on_message,
    .on_close = on_close,
    .on_writable = on_writable,
    .on_detach = clank_handoff_detached,
};
