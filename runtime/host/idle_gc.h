/* Collection in idle time (issue 29). Lua collects as it allocates: a cycle,
   once started, is paid for by the allocations that follow, so a burst of
   work that meets one (a publish re-rendering a thousand sessions) pays for
   marking and sweeping the whole heap inside it, and the garbage of sessions
   that hibernated stays in a quiet server's heap, counted by the memory cap,
   for as long as nothing allocates. Instead, the host runs cycles in slices
   while its loop has nothing else to do:
   - a cycle starts once the heap grew half again over what the last cycle
     left (before Lua's own, at twice), or once sessions hibernated;
   - a slice runs when the loop spent at most half its time since the last
     one on other work and no task waits to go on (preempted, or its sleep(0)
     or wake due): it steps the cycle for 1 ms, then on while no I/O nor task
     is waiting, 8 ms at most;
   - between slices the allocation of the work that comes does no collection
     work (core/collector.h's credit) until the heap reaches twice what the
     last cycle left (or a third more than when the cycle started, if that is
     more), where Lua's own pace takes over again.
   While no cycle runs, the same slices fault in a large heap's room ahead
   (core/alloc.h's clank_alloc_populate), a few MiB each, growing the heap
   first when its top's room is short (clank_alloc_ahead), armed after any
   turn of the loop in which the heap grew or its room ran short; while one
   runs, each of its slices does one huge page of that first. */
#ifndef CLANK_HOST_IDLE_GC_H
#define CLANK_HOST_IDLE_GC_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct clank_host_s;

typedef struct clank_idle_gc_s {
  uv_timer_t slices;
  uv_check_t heap_watch; /* arms the slices when the heap's room ahead is short or to fault in */
  uint64_t generation;   /* the app's generation (metrics' count) these fields are of */
  size_t base_kib;       /* the heap the last cycle left (or the least seen since) */
  size_t hold_kib;       /* the heap up to which this cycle gives credit */
  /* a cycle did not complete within its slices: growth no longer starts one in this
     generation (an app that switched to the generational collector never completes one) */
  int gave_up;
  uint64_t seen;          /* the hibernations counted at the last tick */
  uint64_t started_from;  /* and when the last cycle started */
  uint64_t ended_at;      /* loop time the last cycle ended (0: none ran yet) */
  uint64_t cycle_ns;      /* the time this cycle's slices took */
  uint64_t last_cycle_ms; /* and the last one's */
  unsigned left;          /* slices this cycle may still take */
  uint64_t looked_at;     /* when a slice last looked at the loop (uv_hrtime) */
  uint64_t waited;        /* the loop's idle time then (uv_metrics_idle_time) */
  uint64_t sliced;        /* how long the slice since took */
  int running;
} clank_idle_gc_t;

/* Sets up the slices' timer and the heap's watch (unreferenced: they never
   keep the loop alive). */
void clank_idle_gc_init(struct clank_host_s *h);
/* About once a second (host.c's tick): starts a cycle when the heap grew half
   again over what the last one left, or when sessions hibernated since the
   last one started but none since the last tick and the last one ended long
   enough ago (ten times what its slices took, 1 s at least). */
void clank_idle_gc_tick(struct clank_host_s *h);

#endif
