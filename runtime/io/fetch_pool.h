/* clank.fetch's keep-alive pool and TLS contexts (SPEC §12), one per Lua
   state: at most 16 idle connections per origin (host, port and TLS
   settings), each kept at most 30 s. The scheduler closes it with its
   generation (clank_sched_cancel_all), or the state's __gc does. */
#ifndef CLANK_FETCH_POOL_H
#define CLANK_FETCH_POOL_H

#include <lua.h>
#include <uv.h>

#include "http/client.h"
#include "core/scheduler.h"

typedef struct clank_fetch_pool_s clank_fetch_pool_t;

struct clank_fetch_pool_s {
  uv_loop_t *loop;
  clank_sched_t *sched;
  clank_fetch_pool_t **box; /* the registry's userdata, emptied when the pool closes first */
  uv_timer_t sweep;
  clank_client_t *idle; /* through c->next */
  void *live;           /* the user's exchanges in flight */
  /* The pool closes: the user lets go of every exchange in live. */
  void (*abandon)(clank_fetch_pool_t *p);
  struct clank_fetch_tls_s *tls;
};

/* This state's pool, made on first use. */
clank_fetch_pool_t *clank_fetch_pool_of(lua_State *L, void (*abandon)(clank_fetch_pool_t *p));
/* An idle connection to that origin (out of the pool), or NULL. */
clank_client_t *clank_fetch_pool_take(clank_fetch_pool_t *p, const char *host, int port,
                                      clank_tls_ctx_t *ctx);
/* A connection that may carry another request: kept idle, or closed past the cap. */
void clank_fetch_pool_put(clank_fetch_pool_t *p, clank_client_t *c);
/* The TLS context for these settings (made once), or NULL with err set. */
clank_tls_ctx_t *clank_fetch_pool_tls(lua_State *L, clank_fetch_pool_t *p, const char *ca,
                                      int verify, char *err, size_t errlen);

#endif
