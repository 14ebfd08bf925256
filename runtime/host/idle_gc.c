/* Collection in slices after sessions hibernated (see idle_gc.h). */
#include "host/idle_gc.h"

#include <lua.h>

#include "host/host.h"

#define SLICE_NS 1000000u  /* a slice's Lua time at most */
#define SLICE_EVERY_MS 10u /* so a cycle takes at most a tenth of the core */
/* The next cycle starts no sooner than this many times the last one's length
   after it (and 1 s): sessions that keep hibernating cost the core about 1 %. */
#define AGAIN_FACTOR 10u
#define AGAIN_MIN_MS 1000u
/* A cycle stops after this many slices even if it did not complete: one over
   a heap of gigabytes completes well within them, and a state the app
   switched to the generational collector never reports one. */
#define MAX_SLICES 6000u

/* Ends the cycle, completed or not (one cut short counts as ending now). */
static void stop(clank_host_t *h) {
  clank_idle_gc_t *c = &h->idle_gc;
  uv_timer_stop(&c->slices);
  c->running = 0;
  c->ended_at = uv_now(&h->loop);
}

static void slice(uv_timer_t *t) {
  clank_host_t *h = t->data;
  clank_idle_gc_t *c = &h->idle_gc;
  clank_gen_t *g = h->gen;
  if (g == NULL || h->torn_down || c->left == 0 || !lua_gc(g->L, LUA_GCISRUNNING)) {
    stop(h);
    return;
  }
  c->left--;
  uint64_t until = uv_hrtime() + SLICE_NS;
  do {
    if (lua_gc(g->L, LUA_GCSTEP, 0)) { /* the cycle completed */
      h->metrics->idle_collections++;
      stop(h);
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
  uint64_t hibernations = h->metrics->hibernations, now = uv_now(&h->loop);
  /* sessions that hibernate together (opened together) do so over some seconds: the cycle
     starts once a tick found none more, so that it collects them all */
  int settled = hibernations == c->seen;
  c->seen = hibernations;
  if (c->running || g == NULL || h->torn_down || !settled || hibernations == c->started_from)
    return;
  uint64_t again = (c->ended_at - c->started_at) * AGAIN_FACTOR;
  if (c->ended_at && now - c->ended_at < (again > AGAIN_MIN_MS ? again : AGAIN_MIN_MS)) return;
  c->started_from = hibernations;
  c->started_at = now;
  c->running = 1;
  c->left = MAX_SLICES;
  uv_timer_start(&c->slices, slice, SLICE_EVERY_MS, SLICE_EVERY_MS);
}
