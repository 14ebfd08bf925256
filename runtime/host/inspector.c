/* /__clank/inspector (SPEC §16): the access rule, the rings of recent
   requests and reloads, and the inspector object of a generation. */
#include "host/inspector.h"

#include <arpa/inet.h>
#include <lauxlib.h>
#include <llhttp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "host/generation.h"
#include "host/host.h"
#include "core/protect.h"

#define INSPECTOR_KEY "clank.inspector" /* registry: the generation's inspector object */
#define SESSIONS "/__clank/sessions/"

/* ---- who may see it ---- */

static int loopback_peer(clank_conn_t *c) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0) return 0;
  if (ss.ss_family == AF_INET)
    return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
  if (ss.ss_family != AF_INET6) return 0;
  const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
  if (IN6_IS_ADDR_LOOPBACK(a)) return 1;
  return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
}

int clank_inspector_allowed(clank_conn_t *c, const char *inspector_host) {
  const char *name;
  size_t len, n;
  clank_target_t t;
  clank_request_target(&c->req, &t);
  if (clank_request_host(&c->req, &t, &name, &len, &n) <= 0 || n == 0) return 0;
  /* opened on purpose for one Host, wherever the request comes from */
  if (inspector_host && strlen(inspector_host) == n && strncasecmp(inspector_host, name, n) == 0)
    return 1;
  return clank_http_is_loopback(name, n) && loopback_peer(c);
}

int clank_inspector_jobs_path(const char *p, size_t n) {
  size_t k = sizeof CLANK_INSPECTOR_JOBS - 1;
  return n >= k && memcmp(p, CLANK_INSPECTOR_JOBS, k) == 0 && (n == k || p[k] == '/');
}

int clank_inspector_path(const char *p, size_t n) {
  if (n == sizeof "/__clank/inspector" - 1 && memcmp(p, "/__clank/inspector", n) == 0) return 1;
  if (clank_inspector_jobs_path(p, n)) return 1;
  /* the inspector's session ids are its tokens behind "i." (tokens are base64url) */
  return n > sizeof SESSIONS + 1 && memcmp(p, SESSIONS "i.", sizeof SESSIONS + 1) == 0;
}

/* ---- the rings ---- */

/* The path without its query string; the token of /__clank/sessions/<token>/...
   is a bearer credential, so it is never kept. */
static void keep_path(char *out, const char *p, size_t n) {
  size_t k = sizeof SESSIONS - 1, o = 0;
  if (n > k && memcmp(p, SESSIONS, k) == 0) {
    const char *slash = memchr(p + k, '/', n - k);
    size_t rest = slash ? n - (size_t)(slash - p) : 0;
    o = (size_t)snprintf(out, CLANK_INSPECTOR_PATH + 1, SESSIONS "<redacted>%.*s", (int)rest,
                         slash ? slash : "");
  } else {
    o = n < CLANK_INSPECTOR_PATH ? n : CLANK_INSPECTOR_PATH;
    memmove(out, p, o); /* a call: memcpy of a size known to be small is a slow `rep movs` */
  }
  out[o < CLANK_INSPECTOR_PATH ? o : CLANK_INSPECTOR_PATH] = '\0';
}

void clank_inspector_record(clank_inspector_log_t *log, clank_conn_t *c, const clank_target_t *t,
                            int status, uint64_t ns) {
  const clank_request_t *r = &c->req;
  clank_inspector_request_t *e = &log->requests[log->next_request];
  log->next_request = (log->next_request + 1) % CLANK_INSPECTOR_KEEP;
  if (log->nrequests < CLANK_INSPECTOR_KEEP) log->nrequests++;
  const char *method = llhttp_method_name((llhttp_method_t)r->method);
  size_t mn = strnlen(method, sizeof e->method - 1); /* snprintf cost more than the rest */
  memcpy(e->method, method, mn);
  e->method[mn] = '\0';
  keep_path(e->path, t->path ? t->path : "", t->path ? t->path_len : 0);
  memcpy(e->id, r->id, sizeof e->id); /* a fixed size: no `rep movs` (keep_path) */
  e->id[r->id_len] = '\0';
  e->status = status;
  e->ms = (double)ns / 1e6;
  e->at = (int64_t)time(NULL);
}

void clank_inspector_reload(clank_inspector_log_t *log, int ok, uint64_t ns, const char *note) {
  clank_inspector_reload_t *e = &log->reloads[log->next_reload];
  log->next_reload = (log->next_reload + 1) % CLANK_INSPECTOR_KEEP;
  if (log->nreloads < CLANK_INSPECTOR_KEEP) log->nreloads++;
  e->ok = ok;
  e->ms = (double)ns / 1e6;
  e->at = (int64_t)time(NULL);
  size_t n = note ? strcspn(note, "\n") : 0;
  snprintf(e->note, sizeof e->note, "%.*s", (int)n, note ? note : "");
}

/* ---- the Lua side ---- */

/* log() → { requests = {...}, reloads = {...} }, newest first. Upvalue 1: the host. */
static int push_log(lua_State *L) {
  const clank_inspector_log_t *log =
      &((clank_host_t *)lua_touserdata(L, lua_upvalueindex(1)))->inspector;
  lua_createtable(L, 0, 2);
  lua_createtable(L, log->nrequests, 0);
  for (int i = 0; i < log->nrequests; i++) {
    const clank_inspector_request_t *e =
        &log->requests[(log->next_request - 1 - i + 2 * CLANK_INSPECTOR_KEEP) %
                       CLANK_INSPECTOR_KEEP];
    lua_createtable(L, 0, 6);
    lua_pushstring(L, e->method);
    lua_setfield(L, -2, "method");
    lua_pushstring(L, e->path);
    lua_setfield(L, -2, "path");
    lua_pushstring(L, e->id);
    lua_setfield(L, -2, "id");
    lua_pushinteger(L, e->status);
    lua_setfield(L, -2, "status");
    lua_pushnumber(L, e->ms);
    lua_setfield(L, -2, "ms");
    lua_pushinteger(L, (lua_Integer)e->at);
    lua_setfield(L, -2, "at");
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "requests");
  lua_createtable(L, log->nreloads, 0);
  for (int i = 0; i < log->nreloads; i++) {
    const clank_inspector_reload_t *e =
        &log->reloads[(log->next_reload - 1 - i + 2 * CLANK_INSPECTOR_KEEP) % CLANK_INSPECTOR_KEEP];
    lua_createtable(L, 0, 4);
    lua_pushstring(L, e->ok ? "ok" : "failed");
    lua_setfield(L, -2, "result");
    lua_pushnumber(L, e->ms);
    lua_setfield(L, -2, "ms");
    lua_pushinteger(L, (lua_Integer)e->at);
    lua_setfield(L, -2, "at");
    if (e->note[0]) {
      lua_pushstring(L, e->note);
      lua_setfield(L, -2, "note");
    }
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "reloads");
  return 1;
}

/* [app, host, limits...] → require("clank.inspector").new{ app, log, limits } */
static int make(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "clank.inspector");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "new");
  lua_createtable(L, 0, 3);
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, "app");
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, push_log, 1);
  lua_setfield(L, -2, "log");
  lua_createtable(L, 0, 2);
  lua_pushvalue(L, 3);
  lua_setfield(L, -2, "idleMs");
  lua_pushvalue(L, 4);
  lua_setfield(L, -2, "maxIdle");
  lua_setfield(L, -2, "limits");
  lua_call(L, 1, 1);
  return 1;
}

int clank_inspector_existing(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, INSPECTOR_KEY) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  return 0;
}

void clank_inspector_push(clank_host_t *h, clank_gen_t *g) {
  lua_State *L = g->L;
  if (lua_getfield(L, LUA_REGISTRYINDEX, INSPECTOR_KEY) != LUA_TNIL) return;
  lua_pop(L, 1);
  lua_pushcfunction(L, make);
  lua_rawgeti(L, LUA_REGISTRYINDEX, g->app_ref);
  lua_pushlightuserdata(L, h);
  lua_pushinteger(L, (lua_Integer)h->opts.limits.live_idle_ms);
  lua_pushinteger(L, (lua_Integer)h->opts.limits.live_max_idle);
  if (clank_pcall(L, 4, 1) != LUA_OK) {
    clank_log_msg(&h->log, "error", "inspector: cannot load: %s", clank_error_text(L, -1));
    lua_pop(L, 1);
    lua_pushnil(L);
    return;
  }
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, INSPECTOR_KEY);
}

void clank_inspector_push_jobs(clank_host_t *h, clank_gen_t *g) {
  clank_inspector_push(h, g);
  if (lua_istable(g->L, -1)) {
    lua_getfield(g->L, -1, "jobs");
    lua_remove(g->L, -2);
  }
}
