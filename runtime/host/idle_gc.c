/* Collection in idle time (see idle_gc.h). */
#include "host/idle_gc.h"

#include <lua.h>
#include <poll.h>

#include "core/alloc.h"
#include "core/collector.h"
#include "host/host.h"

/* A slice steps the cycle for SLICE_MIN_NS even when I/O is waiting (a
   server with light steady traffic never has an empty loop), then on while
   nothing is (no I/O, no task waiting to go on), up to SLICE_MAX_NS. It
   runs when the loop spent at most half its time since the last one on
   other work and no task waits to go on (a publish that just came wakes its
   sessions' tasks: a slice run before them delayed every push by its
   length): the next one PERIOD_MS later, or 1 ms later when nothing came
   meanwhile. */
#define SLICE_MIN_NS 1000000u
#define SLICE_MAX_NS 8000000u
#define PERIOD_MS 10u
/* A cycle starts when the heap is GROWTH_NUM / GROWTH_DEN of what the last
   one left; Lua's own starts at twice (its default pause), where the credit
   given between slices ends too. */
#define GROWTH_NUM 3u
#define GROWTH_DEN 2u
#define HOLD_FACTOR 2u
/* After sessions hibernated the next cycle starts no sooner than this many
   times the last one's slices took after it (and 1 s): sessions that keep
   hibernating cost the core about a tenth. */
#define AGAIN_FACTOR 10u
#define AGAIN_MIN_MS 1000u
/* A cycle ends after this many slices even if it did not complete: one over
   a heap of gigabytes completes well within them. */
#define MAX_SLICES 6000u
/* A slice that faults in the heap's room ahead (core/alloc.h) does this much
   at most: a few huge pages (well under a millisecond each on bare metal;
   several where a hypervisor backs the memory on first touch). */
#define POPULATE_BYTES ((size_t)4 << 20)
/* While a cycle runs, each of its slices does this much of that first: a cycle over a large
   heap can span many bursts, and the heap's growth in them was left to their own faults (a
   fifth of the CPU of those of a publish to a thousand sessions). */
#define POPULATE_BESIDE_CYCLE ((size_t)2 << 20)

static void slice(uv_timer_t *t);

/* Whether tasks wait to go on at once (core/scheduler.h): a publish wakes its sessions' tasks
   so (each one's sleep(0)), not by I/O. Timers due later, such as a thousand connections'
   pings, are not work waiting: counted, they would keep slices from ever running. */
static int tasks_waiting(const clank_gen_t *g) {
  return g->sched.ready != NULL || g->sched.waits_at_once > 0;
}

/* Whether the loop has work waiting: I/O, or tasks. */
static int work_waiting(clank_host_t *h) {
  struct pollfd p = {.fd = uv_backend_fd(&h->loop), .events = POLLIN};
  return poll(&p, 1, 0) > 0 || tasks_waiting(h->gen);
}

/* The slices' measure of the loop starts now. */
static void look_from_now(clank_host_t *h) {
  clank_idle_gc_t *c = &h->idle_gc;
  c->looked_at = uv_hrtime();
  c->waited = uv_metrics_idle_time(&h->loop);
  c->sliced = 0;
}

/* Whether the loop spent more than half its time since the last look on
   work other than the slices (host.c has libuv count the time it waits). */
static int loop_busy(clank_host_t *h) {
  clank_idle_gc_t *c = &h->idle_gc;
  uint64_t now = uv_hrtime(), idle = uv_metrics_idle_time(&h->loop);
  uint64_t span = now - c->looked_at, other = span - (idle - c->waited) - c->sliced;
  if (other > span) other = 0; /* the clocks' rounding */
  c->looked_at = now;
  c->waited = idle;
  c->sliced = 0;
  return other > span / 2;
}

/* Ends the cycle, completed or not (one cut short counts as ending now). */
static void stop(clank_host_t *h, int completed) {
  clank_idle_gc_t *c = &h->idle_gc;
  uv_timer_stop(&c->slices);
  c->running = 0;
  c->ended_at = uv_now(&h->loop);
  c->last_cycle_ms = c->cycle_ns / 1000000u;
  if (completed) {
    h->metrics->idle_collections++;
    c->base_kib = clank_collector_kib(h->gen->L);
  }
}

static void collect(clank_host_t *h, uint64_t ahead_ns);

/* The heap's room ahead is short, or to fault in. */
static int room_to_do(const clank_alloc_t *a) {
  return clank_alloc_short(a) || clank_alloc_unpopulated(a) > 0;
}

/* The heap's room ahead grown when short, and up to most bytes of it faulted in → the time it
   took. */
static uint64_t ahead(clank_gen_t *g, size_t most) {
  if (!room_to_do(&g->alloc)) return 0;
  uint64_t began = uv_hrtime();
  clank_alloc_ahead(&g->alloc);
  clank_alloc_populate(&g->alloc, most);
  return uv_hrtime() - began;
}

/* Idle work, when the loop is idle: the cycle's steps after a little of the
   heap's room ahead, or else that room, grown when short and faulted in
   (what the next burst writes to; a cycle that completes frees blocks the
   next burst takes instead, and its collection of what sessions that
   hibernated let go is not put off). */
static void slice(uv_timer_t *t) {
  clank_host_t *h = t->data;
  clank_idle_gc_t *c = &h->idle_gc;
  clank_gen_t *g = h->gen;
  if (g == NULL || h->torn_down) {
    if (c->running) stop(h, 0);
    return;
  }
  if (loop_busy(h) || tasks_waiting(g)) {
    uv_timer_start(&c->slices, slice, PERIOD_MS, 0);
    return;
  }
  if (c->running) {
    collect(h, ahead(g, POPULATE_BESIDE_CYCLE));
  } else if (room_to_do(&g->alloc)) {
    c->sliced = ahead(g, POPULATE_BYTES);
    uv_timer_start(&c->slices, slice, 1, 0); /* (1 ms: see collect) */
  }
}

/* A slice of the cycle's steps (after ahead_ns of the heap's room). */
static void collect(clank_host_t *h, uint64_t ahead_ns) {
  clank_idle_gc_t *c = &h->idle_gc;
  clank_gen_t *g = h->gen;
  if (c->generation != h->metrics->generation || !lua_gc(g->L, LUA_GCISRUNNING)) {
    stop(h, 0);
    return;
  }
  if (c->left == 0) {
    c->gave_up = 1;
    stop(h, 0);
    return;
  }
  size_t hold = c->hold_kib;
  if (clank_collector_kib(g->L) >= hold) { /* Lua's pace took the cycle over */
    stop(h, 0);
    return;
  }
  c->left--;
  uint64_t now = uv_hrtime(), least = now + SLICE_MIN_NS, until = now + SLICE_MAX_NS, at;
  int came = 0;
  do {
    if (clank_collector_step(g->L)) {
      stop(h, 1);
      return;
    }
    at = uv_hrtime();
  } while (at < least || (at < until && !(came = work_waiting(h))));
  c->cycle_ns += at - now;
  c->sliced = ahead_ns + (at - now);
  /* what the work until the next slice allocates leaves the cycle to idle time */
  size_t kib = clank_collector_kib(g->L);
  if (hold > kib) clank_collector_credit(g->L, hold - kib);
  /* 1 ms, not 0: the loop polls for I/O before the next slice (a timer due at
     once would run again before it) */
  uv_timer_start(&c->slices, slice, came ? PERIOD_MS : 1, 0);
}

/* After each turn of the loop: the heap's room ahead is short, or to fault in. */
static void watch_heap(uv_check_t *w) {
  clank_host_t *h = w->data;
  clank_idle_gc_t *c = &h->idle_gc;
  if (h->gen == NULL || h->torn_down || c->running || uv_is_active((uv_handle_t *)&c->slices))
    return;
  if (!room_to_do(&h->gen->alloc)) return;
  look_from_now(h);
  uv_timer_start(&c->slices, slice, PERIOD_MS, 0);
}

void clank_idle_gc_init(clank_host_t *h) {
  clank_idle_gc_t *c = &h->idle_gc;
  uv_timer_init(&h->loop, &c->slices);
  c->slices.data = h;
  uv_unref((uv_handle_t *)&c->slices);
  uv_check_init(&h->loop, &c->heap_watch);
  c->heap_watch.data = h;
  uv_check_start(&c->heap_watch, watch_heap);
  uv_unref((uv_handle_t *)&c->heap_watch);
}

static void start(clank_host_t *h, size_t kib) {
  clank_idle_gc_t *c = &h->idle_gc;
  /* a heap already past twice the base grew at Lua's pace, whose cycle may be under way:
     the rest of it is left to idle time too, while the heap grows by a third at most */
  c->hold_kib = c->base_kib * HOLD_FACTOR;
  if (kib / 3 * 4 > c->hold_kib) c->hold_kib = kib / 3 * 4;
  c->started_from = h->metrics->hibernations;
  c->cycle_ns = 0;
  c->running = 1;
  c->left = MAX_SLICES;
  look_from_now(h);
  uv_timer_start(&c->slices, slice, PERIOD_MS, 0);
}

/* Hibernations settled since the last cycle, which ended long enough ago. */
static int hibernated(clank_host_t *h, uint64_t now) {
  clank_idle_gc_t *c = &h->idle_gc;
  uint64_t hibernations = h->metrics->hibernations;
  /* sessions that hibernate together (opened together) do so over some seconds: the cycle
     starts once a tick found none more, so that it collects them all */
  int settled = hibernations == c->seen;
  c->seen = hibernations;
  if (!settled || hibernations == c->started_from) return 0;
  uint64_t again = c->last_cycle_ms * AGAIN_FACTOR;
  return !c->ended_at || now - c->ended_at >= (again > AGAIN_MIN_MS ? again : AGAIN_MIN_MS);
}

void clank_idle_gc_tick(clank_host_t *h) {
  clank_idle_gc_t *c = &h->idle_gc;
  clank_gen_t *g = h->gen;
  if (g == NULL || h->torn_down) return;
  uint64_t now = uv_now(&h->loop);
  size_t kib = clank_collector_kib(g->L);
  if (c->generation != h->metrics->generation) { /* a new state: what it holds is its base */
    c->generation = h->metrics->generation;
    c->base_kib = kib;
    c->gave_up = 0;
  }
  if (kib < c->base_kib) c->base_kib = kib; /* Lua's own cycles collected */
  int grown = !c->gave_up && kib >= c->base_kib / GROWTH_DEN * GROWTH_NUM;
  if (hibernated(h, now) || grown) {
    if (!c->running && lua_gc(g->L, LUA_GCISRUNNING)) start(h, kib);
  }
}
