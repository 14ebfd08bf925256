/* Preemption (SPEC §13's isolation): no handler can stop the server.

   A watchdog thread watches the task the loop is running. Once its run
   passes the time slice (10 ms) or its request's CPU budget, the watchdog
   sets a count hook on the task's coroutine — the one Lua API call meant
   for another context (lua.c's SIGINT handler does the same) — and the hook,
   back on the loop's thread, yields the coroutine (the scheduler resumes it
   from its ready queue once the loop served the others) or, over budget,
   raises RESOURCE_LIMIT on every tick until the task's run ends. Runs
   shorter than the slice never see a hook: the request path pays two
   uncontended mutex operations per resume and nothing per instruction.

   Where the stack cannot yield (inside table.sort's comparator, a gsub
   callback, require, a runtime lua_pcall, an app's own coroutine) the hook
   keeps counting, so preemption is "about 10 ms where the stack allows"; a
   single C call (string.rep of a huge count) cannot be interrupted.

   The slice bounds one task; the turn bounds many. A fan-out (a publish to a
   thousand views) wakes a thousand tasks in one loop iteration (the timers
   that fired, the completions of one poll), and each short run back to back
   would keep the loop from polling for seconds. So the scheduler counts the
   Lua time of the turn, since its last poll (a uv_prepare handle zeroes it
   right before each): a run gets what is left of CLANK_TURN_NS as its slice
   (at least CLANK_TURN_MIN_NS); once the turn is spent, a task whose wait
   ends goes to the ready queue instead of running, and the ready queue
   stops (after one task, so it always moves) and lets the loop poll. The
   turn counts tasks' Lua time only, not the C around them. Without a
   watchdog there is no turn: everything runs as it comes. */
#ifndef CLANK_PREEMPT_H
#define CLANK_PREEMPT_H

#include <lua.h>
#include <stdint.h>
#include <time.h>

#define CLANK_SLICE_NS (10 * 1000000ull)
/* Lua time between two polls of the loop. Half a slice: with the watchdog's
   tick and the coarse clock's 4 ms a turn runs over by up to about one more
   tick, so a fan-out of short tasks lets the loop poll about as often as one
   long task does (every ~10 ms), at the cost of a non-blocking poll per turn. */
#define CLANK_TURN_NS (5 * 1000000ull)
/* A run's slice when the turn is (nearly) spent: enough for a short task to
   end, so a spent turn still makes progress; the watchdog's tick rounds it up. */
#define CLANK_TURN_MIN_NS (1 * 1000000ull)

/* The slice of a run that starts when the turn has spent turn_ns. */
static inline uint64_t clank_slice_ns(uint64_t turn_ns) {
  uint64_t left = turn_ns < CLANK_TURN_NS ? CLANK_TURN_NS - turn_ns : 0;
  if (left < CLANK_TURN_MIN_NS) left = CLANK_TURN_MIN_NS;
  return left < CLANK_SLICE_NS ? left : CLANK_SLICE_NS;
}

/* The clock of slices and CPU budgets: the coarse monotonic one (a few ms
   of resolution, a few ns to read); its ticks land on runs in proportion
   to their length, so budgets add up right over many short runs. */
static inline uint64_t clank_run_clock(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct clank_watchdog_s clank_watchdog_t;

/* Starts the watchdog thread; NULL when it cannot (no preemption then). */
clank_watchdog_t *clank_watchdog_start(void);
void clank_watchdog_stop(clank_watchdog_t *w);

/* co starts running on the loop's thread; the watchdog interrupts it at
   deadline (uv_hrtime). */
void clank_watchdog_enter(clank_watchdog_t *w, lua_State *co, uint64_t deadline);
/* co stopped running: a hook the watchdog set on it is removed. */
void clank_watchdog_leave(clank_watchdog_t *w);
/* Interrupts co now, if it is the one running (the allocator found it over
   its memory share). */
void clank_watchdog_poke(clank_watchdog_t *w, lua_State *co);

/* SIGINT and SIGTERM also reach the watchdog (their handlers, libuv's, are
   chained): a run that cannot yield is interrupted at once and stopped, so
   the loop sees the signal within the watchdog's tick, not at the end of the
   CPU budget. One watchdog per process gets them (signals are the process's). */
void clank_watchdog_take_signals(clank_watchdog_t *w);
int clank_watchdog_stopping(clank_watchdog_t *w);

#endif
