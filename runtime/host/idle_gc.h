/* Collection after sessions let their trees go (issue 29: hold less per
   session). Lua collects as it allocates, so the trees of sessions that
   hibernated stay in the heap as garbage for as long as the server is quiet:
   counted by the memory cap and clank_lua_memory_bytes, and collected, if
   ever, by a stop-the-world collection once the cap is near. Instead, a tick
   that finds new hibernations starts a cycle that runs in slices of at most
   a millisecond every 10 ms until it completes. */
#ifndef CLANK_HOST_IDLE_GC_H
#define CLANK_HOST_IDLE_GC_H

#include <stdint.h>
#include <uv.h>

struct clank_host_s;

typedef struct clank_idle_gc_s {
  uv_timer_t slices;
  uint64_t hibernations; /* the count the last cycle started from */
  uint64_t ended_at;     /* loop time the last cycle completed (0: none yet) */
  unsigned left;         /* slices this cycle may still take */
  int running;
} clank_idle_gc_t;

/* Sets up the timer (unreferenced: it never keeps the loop alive). */
void clank_idle_gc_init(struct clank_host_s *h);
/* About once a second (host.c's tick): starts a cycle when sessions
   hibernated since the last one started, and it completed over 10 s ago. */
void clank_idle_gc_tick(struct clank_host_s *h);

#endif
