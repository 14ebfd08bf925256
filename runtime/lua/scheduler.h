/* How the C modules reach the loop that drives their coroutines.
   A Lua state has one scheduler: clank-run installs its generation's, and
   plain lua5.4 (specs, scripts) gets one with a loop of its own. A coroutine
   the runtime drives is a task, found through a registry table keyed by the
   thread (not lua_getextraspace, which plain lua5.4 leaves uninitialised and
   other hosts may use). Only tasks may wait. */
#ifndef CLANK_SCHEDULER_H
#define CLANK_SCHEDULER_H

#include <lua.h>
#include <uv.h>

typedef struct clank_sched_s clank_sched_t;
typedef struct clank_task_s clank_task_t;
typedef struct clank_wait_s clank_wait_t;

struct clank_task_s {
  clank_sched_t *sched;
  lua_State *co;
  /* Resumes co with nargs values on its stack (a wait is over). */
  void (*resume)(clank_task_t *t, int nargs);
  clank_wait_t *wait; /* the pending wait, if any */
};

/* One suspended task waiting on a timer. Freed in the timer's close callback. */
struct clank_wait_s {
  uv_timer_t timer;
  clank_task_t *task;
  clank_sched_t *sched;
  clank_wait_t *prev, *next;
};

struct clank_sched_s {
  uv_loop_t *loop;
  int loop_running; /* the host is inside uv_run: never re-enter it */
  clank_wait_t *waits; /* pending, so a closing generation can cancel them */
};

/* The task running co, or NULL. */
clank_task_t *clank_task_of(lua_State *co);
void clank_task_bind(clank_task_t *t, lua_State *co);
void clank_task_unbind(lua_State *co);

/* The scheduler of this Lua state; in plain lua5.4 one is made on first use. */
clank_sched_t *clank_sched_get(lua_State *L);
void clank_sched_install(lua_State *L, clank_sched_t *s);
/* Suspends the running task for ms (its resume runs afterwards). Call as
   `return clank_sched_sleep(L, ms, k)` from a lua_CFunction; raises the SPEC §1
   message outside a task. */
int clank_sched_sleep(lua_State *L, double ms, lua_KFunction k);
/* Cancels every pending wait (closing their timers). */
void clank_sched_cancel_all(clank_sched_t *s);
/* Cancels the wait of one task, if any. */
void clank_sched_cancel(clank_task_t *t);

#endif
