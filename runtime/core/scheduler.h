/* How the C modules reach the loop that drives their coroutines.
   A Lua state has one scheduler: clank-run installs its generation's, and
   plain lua5.4 (specs, scripts) gets one with a loop of its own. A coroutine
   the runtime drives is a task, found through a registry table keyed by the
   thread (not lua_getextraspace, which plain lua5.4 leaves uninitialised and
   other hosts may use). Only tasks may wait; a wait yields one value, the
   scheduler's address, so a driver can tell it from a stray coroutine.yield. */
#ifndef CLANK_SCHEDULER_H
#define CLANK_SCHEDULER_H

#include <lua.h>
#include <stdint.h>
#include <uv.h>

typedef struct clank_sched_s clank_sched_t;
typedef struct clank_task_s clank_task_t;
typedef struct clank_wait_s clank_wait_t;

/* clank_sched_t's held: registry refs of values a hot path reads each time.
   The core owns the first; each layer above claims the ones after the layer
   below it (agent/bridge.h, host/lua_request.h), so every index is a
   constant and the core names none of its users. */
enum {
  CLANK_HELD_ARRAY_MT, /* values.c: the array metatable */
  CLANK_HELD_CORE_END
};
#define CLANK_HELD_MAX 8

/* What a user above the core hangs on a scheduler (clank.db's registry,
   clank.fetch's pool), found by the address of a key of the user's own;
   close, when set, runs from clank_sched_cancel_all. */
#define CLANK_SCHED_SLOTS 4
#define CLANK_CALL_SPARES 4
typedef struct clank_sched_slot_s {
  const void *key;
  void *data;
  void (*close)(clank_sched_t *s, void *data);
} clank_sched_slot_t;

struct clank_task_s {
  clank_sched_t *sched;
  lua_State *co;
  /* Resumes co with nargs values on its stack (a wait is over). */
  void (*resume)(clank_task_t *t, int nargs);
  clank_wait_t *wait; /* the pending timer wait, if any */
  /* registry ref of the task's abort signal, 0 when none; or of its holder
     (abort.h: a bridge's ctx), whose signal is made when first read */
  int signal_ref;
  int wants_signal; /* its driver aborts the signal (the client went away) */
  /* A registry slot the driver keeps for the task's life (0: none), false
     while unused: a request's signal holder is put there for the request
     (then signal_ref names it), with no ref taken and released per request. */
  int hold_slot;
  /* SPEC §13's isolation: Lua time spent by this request or run (waits do
     not count), when the running stretch began, and what the preemption
     hook decided. */
  uint64_t cpu_ns;
  uint64_t resumed_at;
  unsigned preempted : 1;   /* the hook yielded it: it waits in the ready queue */
  unsigned exhausted : 1;   /* over its CPU or memory budget: never resumed again */
  unsigned mem_over : 1;    /* the allocator charged it past its share of the cap */
  unsigned stopped : 1;     /* SIGINT/SIGTERM came while it ran where it could not yield */
  unsigned signal_lazy : 1; /* its signal was made at its first wait (a route's): no deadline */
  /* signal_ref is its joined parent's, not a ref of its own: the parent
     waits for it, so the ref lives as long as the child needs it (a child
     the parent stops waiting for takes a ref of its own then). */
  unsigned signal_borrowed : 1;
  /* Its signal's holder (abort.h) is not made yet: nothing could take it
     so far (a handler that gets no ctx). clank_task_hold_signal makes it in
     hold_slot before anything can: the task's first yield (aborts come only
     while it waits), currentSignal, a join. */
  unsigned holder_deferred : 1;
  unsigned queued : 1;
  /* Taken off the ready queue in a turn already spent: this resume runs
     anyway (each turn resumes at least one queued task). */
  unsigned ready_due : 1;
  /* Values on co's stack for its resume from the ready queue: a wait's
     results when the turn was spent as it ended (0 when it was preempted). */
  int ready_nargs;
  clank_task_t *ready_next;
  clank_task_t *outer; /* the task whose run this one's nested in (a joined child) */
  size_t mem_charged;  /* bytes allocated while it ran */
  /* A deadline that starts at the task's first wait (the bridge's inline
     action: its timeout counts from then, and a driver that can answer it
     from outside sets on_deadline): once deadline_on_wait is set, the timer
     is armed when the task first yields; at the deadline deadline_passed is
     set and on_deadline called, and the run's later end is the driver's to
     drop. */
  void (*on_deadline)(clank_task_t *t);
  clank_wait_t *deadline_timer;
  double deadline_ms;
  unsigned deadline_on_wait : 1;
  unsigned deadline_passed : 1;
  char request_id[65]; /* x-request-id of the request it serves ("" when none) */
};

/* A timer owned by the scheduler: it resumes a task, or calls fire. Freed in
   the timer's close callback; cancelled with its scheduler. */
struct clank_wait_s {
  uv_timer_t timer;
  clank_task_t *task;
  void (*fire)(clank_wait_t *w);
  lua_State *L;                    /* the main thread, for fire */
  int ref;                         /* a registry ref fire needs, released with the wait */
  void (*retire)(clank_wait_t *w); /* on reload, instead of waiting on (clank.timeout) */
  int sleeping;                    /* clank.sleep's: clank_sched_wake may end it early */
  int at_once;                     /* due at once (counted in sched's waits_at_once) */
  clank_sched_t *sched;
  clank_wait_t *prev, *next;
};

/* request_id: the x-request-id of the request the running task serves, or NULL. */
typedef void (*clank_log_fn)(void *ud, const char *level, const char *msg, const char *request_id);

struct clank_sched_s {
  uv_loop_t *loop;
  int loop_running; /* inside uv_run: never re-enter it */
  clank_wait_t *waits;
  /* Of those, the ones due at once (a sleep(0), a wake): tasks that go on in the loop's next
     turn (a publish's thousand sessions), work waiting that is not I/O (host/idle_gc.c). */
  size_t waits_at_once;
  clank_task_t *spawned; /* tasks made by clank.spawn or joined (a list through their own field) */
  void *spare;           /* finished ones, their coroutines kept for the next */
  int nspare;
  /* clank_sched_call's coroutines that returned, kept for the next call (a live message
     makes one call each), each anchored by a registry ref */
  lua_State *call_spare[CLANK_CALL_SPARES];
  int call_spare_ref[CLANK_CALL_SPARES];
  int ncall_spare;
  clank_log_fn log;
  void *log_ud;
  clank_sched_slot_t slots[CLANK_SCHED_SLOTS];
  /* Isolation (preempt.h): the watchdog that interrupts long runs (NULL: no
     preemption, as in plain lua5.4), the CPU budget per request or run
     (0: none), the task running now, and tasks preempted or put off, to
     resume. */
  struct clank_watchdog_s *watchdog;
  uint64_t cpu_limit_ns;
  clank_task_t *running;
  clank_task_t *ready, *ready_tail;
  uv_idle_t *ready_idle;
  /* The turn (preempt.h): Lua time run since the loop last polled, zeroed by
     turn_prepare right before each poll (NULL: not opened yet, or closed with
     the scheduler, which then has no turn budget). */
  uint64_t turn_ns;
  uv_prepare_t *turn_prepare;
  int turn_closed;
  int defer_spawn; /* loading off the loop: clank.spawn waits for clank_sched_run_deferred */
  /* Values the request path reads each time, held per state: registry refs
     (0: not made yet; they go with the state), read with one lua_rawgeti
     instead of a lookup by address. */
  int held[CLANK_HELD_MAX];
};

/* Resumes t's coroutine with nargs values and returns LUA_YIELD while it
   waits (a runtime wait; or preempted, or woken from a wait once the loop's
   turn was spent (preempt.h): then the scheduler resumes it later through
   t->resume, with no values or with the nargs values left on co's stack),
   else its status with nres results (an error object on top). Every driver
   resumes its task through this; a task that never ran (a fresh coroutine)
   is never put off, so its first resume may pass pointers to the stack. */
int clank_task_resume(clank_task_t *t, int nargs, int *nres);
/* The over-budget error (RESOURCE_LIMIT, 503) when t ran out of CPU or
   memory, pushed on L; 0 when t is within its budget. */
int clank_task_push_exhausted(lua_State *L, clank_task_t *t);
/* A run of t ended with status, its error on top of L: when t went over its
   budget (or ran out of memory), the error is replaced by the budget's and
   LUA_ERRRUN returned; else status, the stack as it was. */
int clank_task_budget_error(lua_State *L, clank_task_t *t, int status);
/* Makes the signal holder t deferred (holder_deferred), as the bridge would
   have: an empty table in t's hold_slot, named by signal_ref. */
void clank_task_hold_signal(clank_task_t *t);

/* The task waiting for t, when t is a joined child (clank_sched_join: an
   action run for a request), else NULL. */
clank_task_t *clank_task_parent(clank_task_t *t);
/* 1 when the action t runs is still waited for: a joined child whose parent
   waits, or an inline action (clank_task_t.deadline_on_wait) not timed out. */
int clank_task_awaited(clank_task_t *t);
/* The task running co, or NULL. */
clank_task_t *clank_task_of(lua_State *co);
/* The same, found without a lookup when co is the coroutine s runs now. */
clank_task_t *clank_task_on(clank_sched_t *s, lua_State *co);
void clank_task_bind(clank_task_t *t, lua_State *co);
void clank_task_unbind(lua_State *co);
/* 1 when L is a task that may yield here. */
int clank_in_task(lua_State *L);

/* The scheduler of this Lua state; in plain lua5.4 one is made on first use. */
clank_sched_t *clank_sched_get(lua_State *L);
/* The scheduler of a state clank-run made, found without a lookup (its
   allocator knows it), or NULL (plain lua5.4): for held[] on hot paths. */
clank_sched_t *clank_sched_held(lua_State *L);
void clank_sched_install(lua_State *L, clank_sched_t *s);
/* A reload replaced this scheduler's generation: spawned tasks are dropped
   and timers with a retire callback run it (clank.timeout aborts with
   reason "reload"); handlers in flight keep their waits. */
void clank_sched_retire(clank_sched_t *s);
/* Cancels every pending wait and drops spawned tasks (a closing generation). */
void clank_sched_cancel_all(clank_sched_t *s);
void clank_sched_cancel(clank_task_t *t);

/* SPEC §1: what waiting outside a runtime coroutine raises. */
#define CLANK_WAIT_MESSAGE "clank.sleep: cannot wait here (not in a handler coroutine)"

/* Suspends the running task for ms. Call as `return clank_sched_sleep(L, ms, k, ctx)`
   from a lua_CFunction; raises the SPEC §1 message outside a task. */
int clank_sched_sleep(lua_State *L, double ms, lua_KFunction k, lua_KContext ctx);
/* A timer calling fire(w) after ms, holding the value at idx (0: none) in w->ref. */
clank_wait_t *clank_sched_timer(lua_State *L, double ms, void (*fire)(clank_wait_t *), int idx);
void clank_sched_timer_cancel(clank_wait_t *w);
/* Ends t's clank.sleep now (t resumes from the loop, as when the time is up):
   1, or 0 when t is not sleeping. A queue's waiting consumer is woken so. */
int clank_sched_wake(clank_task_t *t);

/* Calls the function below nargs arguments on L's stack in a task and returns
   the number of results it pushed; errors are raised again as they are.
   Inside a task it is a plain call (the caller must use lua_callk itself);
   elsewhere a new task runs and, when it waits, the loop runs until it
   finishes — or, when the loop is already running, the SPEC §1 error. */
int clank_sched_call(lua_State *L, int nargs);

/* Runs the function below nargs arguments in a child task, and suspends the
   calling task until it finishes or ms pass (ms <= 0: no limit). Resumes the
   caller's continuation k with, on top: true and the result; false and the
   error; or nothing but the string "timeout" as the only value after a nil. */
int clank_sched_join(lua_State *L, int nargs, double ms, lua_KFunction k, lua_KContext ctx);
/* The same, for a caller that knows its task (clank_task_of(L), NULL for none). */
int clank_sched_join_in(lua_State *L, clank_task_t *parent, int nargs, double ms, lua_KFunction k,
                        lua_KContext ctx);

/* clank.spawn: runs the function at top in a task of its own (or, while
   defer_spawn is set, keeps it for clank_sched_run_deferred). */
void clank_sched_spawn(lua_State *L);
/* The same for [fn, done] at top: done runs, as a task of its own from the
   loop, once fn's task ended in any way (returned, failed, or was stopped
   over its budget), never when a reload or a closing generation dropped it.
   Raises while the app loads off the loop. */
void clank_sched_spawn_then(lua_State *L);
/* The same for [fn, done, signal] at top, for work that must finish even
   when a reload replaces the generation (a durable job): the task is not
   dropped by a reload (only by a closing generation), and signal (or nil)
   is its abort signal, the one its waits watch (core.currentSignal). The
   caller keeps the retired generation open meanwhile (core.hold). */
void clank_sched_spawn_kept(lua_State *L);
/* Starts the spawns kept while defer_spawn was set, in order. */
void clank_sched_run_deferred(lua_State *L);

/* Registry key of count(what, ...), clank-run's counter of runtime events
   (clank.core.count; absent elsewhere, where counting does nothing). */
#define CLANK_COUNT_EVENT_KEY "clank.count_event"
/* Registry key of relay(topic, payload_text?), which tells a publish to the
   other workers and instances (clank.core.relay; host/pubsub.h installs it
   when there are any). */
#define CLANK_RELAY_KEY "clank.relay"
/* Registry key of hold(delta, ms), which keeps a retired generation open for
   durable jobs still running in it (clank.core.hold; clank-run installs it). */
#define CLANK_HOLD_KEY "clank.hold"
/* Registry key of the jobs runner (clank.jobs.runner), which clank-run starts
   when the generation serves and stops when the process stops: a table with
   start() and stop(ms), both plain calls. */
#define CLANK_JOBS_KEY "clank.jobs"

/* The data hung on s under key, or NULL. */
void *clank_sched_slot(clank_sched_t *s, const void *key);
/* Hangs data (NULL: takes it down) on s under key; raises nothing, aborts
   when all CLANK_SCHED_SLOTS are taken (a build with more users than slots). */
void clank_sched_set_slot(clank_sched_t *s, const void *key, void *data,
                          void (*close)(clank_sched_t *s, void *data));

/* A log line through the host (stderr in plain lua5.4). */
void clank_sched_log(lua_State *L, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
