/* Collection in slices after sessions hibernated (see idle_gc.h). */
#include "host/idle_gc.h"

#include <lua.h>

#include "host/host.h"

#define SLICE_NS 1000000u  /* a slice's Lua time at most */
#define SLICE_EVERY_MS 10u /* so a cycle takes at most a tenth of the core */
/* and the next starts no sooner than this after one completed: sessions
   that keep hibernating on a busy server cost a cycle every ten seconds or
   so, a few percent of the core over a heap of gigabytes */
#define AGAIN_AFTER_MS 10000u
/* A cycle stops after this many slices even if it did not complete: one over
   a heap of gigabytes completes well within them, and a state the app
   switched to the generational collector never reports one. */
#define MAX_SLICES 6000u

static void stop(clank_idle_gc_t *c) {
  uv_timer_stop(&c->slices);
  c->running = 0;
}

static void slice(uv_timer_t *t) {
  clank_host_t *h = t->data;
  clank_idle_gc_t *c = &h->idle_gc;
  clank_gen_t *g = h->gen;
  if (g == NULL || h->torn_down || c->left == 0 || !lua_gc(g->L, LUA_GCISRUNNING)) {
    stop(c);
    return;
  }
  c->left--;
  uint64_t until = uv_hrtime() + SLICE_NS;
  do {
    if (lua_gc(g->L, LUA_GCSTEP, 0)) { /* the cycle completed */
      stop(c);
      c->ended_at = uv_now(&h->loop);
      return;
    }
  } while (uv_hrtime() < until);
}

void clank_idle_gc_init(clank_host_t *h) {
  clank_idle_gc_t *c = &h->idle_gc;
  uv_timer_init(&h->loop, &c->slices);
  c->slices.data = h;
  uv_unref((uv_handle_t *)&c->slices);
}

void clank_idle_gc_tick(clank_host_t *h) {
  clank_idle_gc_t *c = &h->idle_gc;
  clank_gen_t *g = h->gen;
  uint64_t hibernations = h->metrics->hibernations;
  if (c->running || g == NULL || h->torn_down || hibernations == c->hibernations) return;
  if (c->ended_at && uv_now(&h->loop) - c->ended_at < AGAIN_AFTER_MS) return;
  c->hibernations = hibernations;
  c->running = 1;
  c->left = MAX_SLICES;
  uv_timer_start(&c->slices, slice, SLICE_EVERY_MS, SLICE_EVERY_MS);
}
