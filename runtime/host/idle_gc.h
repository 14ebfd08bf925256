/* Collection after sessions let their trees go (issue 29: hold less per
   session). Lua collects as it allocates, so the trees of sessions that
   hibernated stay in the heap as garbage for as long as the server is quiet:
   counted by the memory cap and clank_lua_memory_bytes, and collected, if
   ever, by a stop-the-world collection once the cap is near. Instead, a tick
   after sessions hibernated starts a cycle that runs in slices of at most a
   millisecond every 10 ms until it completes. */
#ifndef CLANK_HOST_IDLE_GC_H
#define CLANK_HOST_IDLE_GC_H

#include <stdint.h>
#include <uv.h>

struct clank_host_s;

typedef struct clank_idle_gc_s {
  uv_timer_t slices;
  uint64_t seen;         /* the hibernations counted at the last tick */
  uint64_t started_from; /* and when the last cycle started */
  uint64_t started_at;   /* loop times the last cycle started and completed */
  uint64_t ended_at;     /* (0: none ran yet) */
  unsigned left;         /* slices this cycle may still take */
  int running;
} clank_idle_gc_t;

/* Sets up the timer (unreferenced: it never keeps the loop alive). */
void clank_idle_gc_init(struct clank_host_s *h);
/* About once a second (host.c's tick): starts a cycle when sessions
   hibernated since the last one started but none since the last tick, and
   the last one completed long enough ago (ten times its length, 1 s at
   least): a server where sessions keep hibernating collects by allocating. */
void clank_idle_gc_tick(struct clank_host_s *h);

#endif
