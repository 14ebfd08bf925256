/* What scheduler.c and tasks.c share, and no one else: the core's own. */
#ifndef CLANK_SCHEDULER_INTERNAL_H
#define CLANK_SCHEDULER_INTERNAL_H

#include "core/scheduler.h"

/* A timer of s's list (fire or task set by the caller), started for ms. */
clank_wait_t *clank_wait_new(lua_State *L, clank_sched_t *s, double ms);
/* A reload: the spawned tasks are dropped (joined children go on). */
void clank_tasks_retire(clank_sched_t *s);
/* A closing generation: every owned task and spare coroutine goes. */
void clank_tasks_drop(clank_sched_t *s);

#endif
