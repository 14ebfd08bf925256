/* clank.fetch's keep-alive pool and TLS contexts (fetch_pool.h); owns the
   idle connections and the sweep timer, closed with the scheduler. */
#include "io/fetch_pool.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#define POOL_KEY "clank.fetch.pool"
#define POOL_IDLE_MAX 16   /* idle connections per origin */
#define POOL_IDLE_MS 30000 /* an idle connection's life */
#define POOL_SWEEP_MS 5000 /* how often the pool looks */

typedef struct clank_fetch_tls_s {
  char *ca; /* NULL: the system store */
  int verify;
  clank_tls_ctx_t *ctx;
  struct clank_fetch_tls_s *next;
} tls_entry_t;

typedef clank_fetch_pool_t pool_t;

static void pool_unlink(pool_t *p, clank_client_t *c) {
  for (clank_client_t **at = &p->idle; *at; at = &(*at)->next)
    if (*at == c) {
      *at = c->next;
      c->next = NULL;
      return;
    }
}

static int same_origin(const clank_client_t *c, const char *host, int port, clank_tls_ctx_t *ctx) {
  return c->port == port && c->tls_ctx == ctx && strcmp(c->host, host) == 0;
}

static void sweep(uv_timer_t *t) {
  pool_t *p = t->data;
  uint64_t now = uv_now(p->loop);
  clank_client_t **at = &p->idle;
  while (*at) {
    clank_client_t *c = *at;
    if (c->closing || now - c->idle_since >= POOL_IDLE_MS) {
      *at = c->next;
      c->next = NULL;
      clank_client_close(c);
    } else {
      at = &c->next;
    }
  }
  if (p->idle == NULL) uv_timer_stop(&p->sweep);
}

/* An idle connection that may carry another request, or NULL. */
clank_client_t *clank_fetch_pool_take(pool_t *p, const char *host, int port, clank_tls_ctx_t *ctx) {
  for (clank_client_t *c = p->idle; c; c = c->next)
    if (!c->closing && same_origin(c, host, port, ctx)) {
      pool_unlink(p, c);
      return c;
    }
  return NULL;
}

/* An idle connection closed itself (the peer closed it, or sent out of turn). */
static void pool_lost(clank_client_t *c) { pool_unlink(c->data, c); }

void clank_fetch_pool_put(pool_t *p, clank_client_t *c) {
  int same = 0;
  for (clank_client_t *x = p->idle; x; x = x->next)
    if (same_origin(x, c->host, c->port, c->tls_ctx)) same++;
  if (same >= POOL_IDLE_MAX) {
    clank_client_close(c);
    return;
  }
  clank_client_idle(c, pool_lost, p);
  c->idle_since = uv_now(p->loop);
  c->next = p->idle;
  p->idle = c;
  if (!uv_is_active((uv_handle_t *)&p->sweep))
    uv_timer_start(&p->sweep, sweep, POOL_SWEEP_MS, POOL_SWEEP_MS);
}

static void pool_free(uv_handle_t *h) {
  pool_t *p = h->data;
  while (p->tls) {
    tls_entry_t *e = p->tls;
    p->tls = e->next;
    clank_tls_ctx_free(e->ctx); /* sessions still open keep their own reference */
    free(e->ca);
    free(e);
  }
  free(p);
}

/* Only its address matters: the scheduler slot of the pool, closed by
   clank_sched_cancel_all. */
static const char pool_slot = 0;

/* The generation closes (clank_sched_cancel_all) or its Lua state does. */
static void pool_close(pool_t *p) {
  if (p->box) *p->box = NULL;
  if (clank_sched_slot(p->sched, &pool_slot) == p)
    clank_sched_set_slot(p->sched, &pool_slot, NULL, NULL);
  if (p->abandon) p->abandon(p);
  while (p->idle) {
    clank_client_t *c = p->idle;
    p->idle = c->next;
    c->next = NULL;
    clank_client_close(c);
  }
  uv_close((uv_handle_t *)&p->sweep, pool_free);
}

static void sched_fetch_close(clank_sched_t *s, void *pool) {
  (void)s;
  pool_close(pool);
}

static int pool_gc(lua_State *L) {
  pool_t **box = lua_touserdata(L, 1);
  if (*box) pool_close(*box);
  return 0;
}

clank_fetch_pool_t *clank_fetch_pool_of(lua_State *L, void (*abandon)(clank_fetch_pool_t *p)) {
  pool_t **box;
  if (lua_getfield(L, LUA_REGISTRYINDEX, POOL_KEY) == LUA_TUSERDATA) {
    box = lua_touserdata(L, -1);
    lua_pushnil(L); /* as many values as the other branch leaves */
  } else {
    box = lua_newuserdatauv(L, sizeof *box, 0);
    *box = NULL;
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, pool_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, POOL_KEY);
  }
  lua_pop(L, 2);
  if (*box) return *box;
  pool_t *p = calloc(1, sizeof *p);
  if (p == NULL) luaL_error(L, "clank.fetch: out of memory");
  p->sched = clank_sched_get(L);
  p->loop = p->sched->loop;
  uv_timer_init(p->loop, &p->sweep);
  uv_unref((uv_handle_t *)&p->sweep);
  p->sweep.data = p;
  p->abandon = abandon;
  p->box = box;
  *box = p;
  clank_sched_set_slot(p->sched, &pool_slot, p, sched_fetch_close);
  return p;
}

clank_tls_ctx_t *clank_fetch_pool_tls(lua_State *L, pool_t *p, const char *ca, int verify,
                                      char *err, size_t errlen) {
  for (tls_entry_t *e = p->tls; e; e = e->next)
    if (e->verify == verify && (e->ca == NULL ? ca == NULL : ca && strcmp(e->ca, ca) == 0))
      return e->ctx;
  clank_tls_ctx_t *ctx = clank_tls_ctx_new(ca, verify, err, errlen);
  if (ctx == NULL) return NULL;
  tls_entry_t *e = calloc(1, sizeof *e);
  if (e == NULL || (ca && (e->ca = strdup(ca)) == NULL)) {
    free(e);
    clank_tls_ctx_free(ctx);
    luaL_error(L, "clank.fetch: out of memory");
  }
  e->verify = verify;
  e->ctx = ctx;
  e->next = p->tls;
  p->tls = e;
  return ctx;
}
