/* How the C modules reach the loop that drives their coroutines. The host
   (a generation in clank-run) installs one scheduler per Lua state; the
   modules never see the host itself. */
#ifndef CLANK_SCHEDULER_H
#define CLANK_SCHEDULER_H

#include <lua.h>
#include <uv.h>

typedef struct clank_sched_s clank_sched_t;
typedef struct clank_wait_s clank_wait_t;

/* One suspended coroutine waiting on a timer. Freed in the timer's close callback. */
struct clank_wait_s {
  uv_timer_t timer;
  lua_State *co;
  clank_sched_t *sched;
  clank_wait_t *prev, *next;
};

struct clank_sched_s {
  uv_loop_t *loop;
  /* Resumes a runtime coroutine with nargs values on its stack. */
  void (*resume)(clank_sched_t *s, lua_State *co, int nargs);
  clank_wait_t *waits; /* pending, so a closing generation can cancel them */
};

/* The scheduler of this Lua state, or NULL outside clank-run. */
clank_sched_t *clank_sched_get(lua_State *L);
void clank_sched_install(lua_State *L, clank_sched_t *s);
/* A coroutine the runtime drives has a non-NULL pointer in its
   lua_getextraspace (the host's exchange); only those may wait. A wait
   yields one value, the scheduler's address. */
/* Cancels every pending wait (closing their timers). */
void clank_sched_cancel_all(clank_sched_t *s);

#endif
