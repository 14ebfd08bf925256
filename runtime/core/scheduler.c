/* Tasks, waits and the loop that drives them (see scheduler.h): binding a
   coroutine as a task, resuming it (CPU and memory budgets, preemption's
   ready queue, the deadline from a first wait), timers, clank_sched_call,
   and the slots users hang on a scheduler. The tasks it owns (spawned and
   joined ones) are tasks.c's. */
#include "core/scheduler.h"

#include <lauxlib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/alloc.h"
#include "core/preempt.h"
#include "core/protect.h"
#include "core/scheduler_internal.h"

/* Only its address matters: the registry key of the scheduler (a light
   userdata), read on every wait and join, so not a name to intern. */
static const char sched_key = 0;

/* ---- tasks ---- */

/* Only its address matters: the registry key of the thread → task table. */
static const char tasks_key = 0;

static void push_tasks(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &tasks_key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_newtable(L); /* weak keys: the table never keeps a thread alive */
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &tasks_key);
}

clank_task_t *clank_task_of(lua_State *co) {
  /* most often asked by the task that runs: no lookup by thread then */
  clank_sched_t *s = clank_sched_held(co);
  if (s && s->running && s->running->co == co) return s->running;
  push_tasks(co);
  lua_pushthread(co);
  lua_rawget(co, -2);
  clank_task_t *t = lua_touserdata(co, -1);
  lua_pop(co, 2);
  return t;
}

clank_task_t *clank_task_on(clank_sched_t *s, lua_State *co) {
  return s->running && s->running->co == co ? s->running : clank_task_of(co);
}

static void set_task(lua_State *co, clank_task_t *t) {
  push_tasks(co);
  lua_pushthread(co);
  if (t)
    lua_pushlightuserdata(co, t);
  else
    lua_pushnil(co);
  lua_rawset(co, -3);
  lua_pop(co, 1);
}

void clank_task_bind(clank_task_t *t, lua_State *co) {
  t->co = co;
  set_task(co, t);
}

void clank_task_unbind(lua_State *co) { set_task(co, NULL); }

int clank_in_task(lua_State *L) { return lua_isyieldable(L) && clank_task_of(L) != NULL; }

/* ---- the scheduler ---- */

static void default_log(void *ud, const char *level, const char *msg, const char *request_id) {
  (void)ud;
  (void)request_id;
  const char *debug = getenv("CLANK_DEBUG");
  if (strcmp(level, "debug") == 0 && (debug == NULL || *debug == '\0')) return;
  fprintf(stderr, "clank %s: %s\n", level, msg);
}

/* Plain lua5.4 has no host: the first use makes a loop of its own, owned by
   a userdata in the registry whose __gc closes it. */
typedef struct own_loop_s {
  clank_sched_t sched;
  uv_loop_t loop;
} own_loop_t;

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

static int own_loop_gc(lua_State *L) {
  own_loop_t *o = lua_touserdata(L, 1);
  clank_sched_cancel_all(&o->sched);
  uv_walk(&o->loop, close_walk, NULL);
  while (uv_loop_close(&o->loop) == UV_EBUSY) uv_run(&o->loop, UV_RUN_DEFAULT);
  return 0;
}

clank_sched_t *clank_sched_held(lua_State *L) {
  void *ud;
  return lua_getallocf(L, &ud) == clank_alloc ? ((clank_alloc_t *)ud)->sched : NULL;
}

clank_sched_t *clank_sched_get(lua_State *L) {
  clank_sched_t *held = clank_sched_held(L);
  if (held) return held; /* the one installed with it (generation.c) */
  lua_rawgetp(L, LUA_REGISTRYINDEX, &sched_key);
  clank_sched_t *s = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (s != NULL) return s;
  own_loop_t *o = lua_newuserdatauv(L, sizeof *o, 0);
  memset(o, 0, sizeof *o);
  uv_loop_init(&o->loop);
  o->sched.loop = &o->loop;
  lua_newtable(L);
  lua_pushcfunction(L, own_loop_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "clank.own_loop");
  clank_sched_install(L, &o->sched);
  return &o->sched;
}

void clank_sched_install(lua_State *L, clank_sched_t *s) {
  if (s->log == NULL) s->log = default_log;
  lua_pushlightuserdata(L, s);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &sched_key);
}

void clank_sched_log(lua_State *L, const char *level, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  clank_sched_t *s = clank_sched_get(L);
  clank_task_t *t = s->running;
  s->log(s->log_ud, level, msg, t && t->request_id[0] ? t->request_id : NULL);
}

/* ---- waits ---- */

static void ready_remove(clank_sched_t *s, clank_task_t *t);

static void wait_unlink(clank_wait_t *w) {
  if (w->sched) {
    if (w->prev)
      w->prev->next = w->next;
    else
      w->sched->waits = w->next;
    if (w->next) w->next->prev = w->prev;
    if (w->at_once) w->sched->waits_at_once--;
  }
  w->at_once = 0;
  if (w->task && w->task->wait == w) w->task->wait = NULL;
  w->prev = w->next = NULL;
  w->sched = NULL;
}

static void wait_closed(uv_handle_t *h) { free(h->data); }

static void wait_close(clank_wait_t *w) {
  if (w->ref > 0) luaL_unref(w->L, LUA_REGISTRYINDEX, w->ref);
  w->ref = 0;
  uv_close((uv_handle_t *)&w->timer, wait_closed);
}

static void wait_fired(uv_timer_t *t) {
  clank_wait_t *w = t->data;
  clank_task_t *task = w->task;
  wait_unlink(w);
  /* Closing first: what runs next may tear the whole loop down. The memory
     lives until the close callback. */
  uv_close((uv_handle_t *)&w->timer, wait_closed);
  if (w->fire)
    w->fire(w);
  else
    task->resume(task, 0);
  if (w->ref > 0) luaL_unref(w->L, LUA_REGISTRYINDEX, w->ref);
  w->ref = 0;
}

clank_wait_t *clank_wait_new(lua_State *L, clank_sched_t *s, double ms) {
  clank_wait_t *w = calloc(1, sizeof *w);
  if (w == NULL) luaL_error(L, "clank: out of memory");
  uv_timer_init(s->loop, &w->timer);
  w->timer.data = w;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  w->L = lua_tothread(L, -1);
  lua_pop(L, 1);
  w->sched = s;
  w->next = s->waits;
  if (s->waits) s->waits->prev = w;
  s->waits = w;
  /* The loop's clock is stale after it sat idle (a top-level call): ms count from now. It
     also counts whole milliseconds, truncated: due at now + ms, a timer could fire up to a
     millisecond short of ms. The due time is rounded up from the precise clock instead. */
  uv_update_time(s->loop);
  uint64_t due_ms = 0;
  if (ms > 0) {
    uint64_t now_ms = uv_now(s->loop);
    double precise_ms = (double)uv_hrtime() / 1e6;
    double target = ceil(precise_ms + ms);
    due_ms = target > (double)now_ms ? (uint64_t)target - now_ms : 0;
  }
  if (due_ms == 0) {
    w->at_once = 1;
    s->waits_at_once++;
  }
  uv_timer_start(&w->timer, wait_fired, due_ms, 0);
  return w;
}

void clank_sched_cancel(clank_task_t *t) {
  ready_remove(t->sched, t);
  if (t->deadline_timer) {
    clank_wait_t *a = t->deadline_timer;
    t->deadline_timer = NULL;
    wait_unlink(a);
    wait_close(a);
  }
  clank_wait_t *w = t->wait;
  if (w == NULL) return;
  wait_unlink(w);
  wait_close(w);
}

clank_wait_t *clank_sched_timer(lua_State *L, double ms, void (*fire)(clank_wait_t *), int idx) {
  clank_sched_t *s = clank_sched_get(L);
  clank_wait_t *w = clank_wait_new(L, s, ms);
  w->fire = fire;
  if (idx != 0) {
    lua_pushvalue(L, idx);
    w->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  return w;
}

void clank_sched_timer_cancel(clank_wait_t *w) {
  wait_unlink(w);
  wait_close(w);
}

int clank_sched_wake(clank_task_t *t) {
  clank_wait_t *w = t ? t->wait : NULL;
  if (w == NULL || !w->sleeping || w->task != t || uv_is_closing((uv_handle_t *)&w->timer))
    return 0;
  if (!w->at_once && w->sched) {
    w->at_once = 1;
    w->sched->waits_at_once++;
  }
  uv_timer_start(&w->timer, wait_fired, 0, 0);
  return 1;
}

int clank_sched_sleep(lua_State *L, double ms, lua_KFunction k, lua_KContext ctx) {
  clank_task_t *task = lua_isyieldable(L) ? clank_task_of(L) : NULL;
  if (task == NULL) return luaL_error(L, CLANK_WAIT_MESSAGE);
  clank_wait_t *w = clank_wait_new(L, task->sched, ms);
  w->task = task;
  w->sleeping = 1;
  task->wait = w;
  lua_pushlightuserdata(L, task->sched);
  return lua_yieldk(L, 1, ctx, k);
}

/* ---- driving a task ---- */

static lua_State *main_thread_of(lua_State *co) {
  lua_rawgeti(co, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State *m = lua_tothread(co, -1);
  lua_pop(co, 1);
  return m;
}

static int is_wait(lua_State *co, clank_sched_t *s, int st, int nres) {
  return st == LUA_YIELD && nres == 1 && lua_touserdata(co, -1) == s;
}

/* ---- preemption (preempt.h) ---- */

int clank_task_budget_error(lua_State *L, clank_task_t *t, int status) {
  if (status == LUA_OK || status == LUA_YIELD) return status;
  if (!t->exhausted && !t->mem_over && status != LUA_ERRMEM) return status;
  /* The error the hook raised may have been caught and replaced: the
     answer is the budget's. */
  lua_pop(L, 1);
  if (status == LUA_ERRMEM) t->mem_over = 1;
  t->exhausted = 1;
  clank_task_push_exhausted(L, t);
  return LUA_ERRRUN;
}

int clank_task_push_exhausted(lua_State *L, clank_task_t *t) {
  if (!t->exhausted && !t->mem_over) return 0;
  if (t->stopped) {
    clank_action_error_push(L, "ABORTED", "The server is stopping.", 503);
    return 1;
  }
  clank_action_error_push(
      L, "RESOURCE_LIMIT",
      t->mem_over ? "The request used too much memory." : "The request used too much CPU.", 503);
  return 1;
}

static void run_ready(uv_idle_t *idle);

static void ready_closed(uv_handle_t *h) { free(h); }

/* ---- the turn (preempt.h) ---- */

/* Right before the loop polls: a new turn. */
static void turn_new(uv_prepare_t *h) {
  clank_sched_t *s = h->data;
  s->turn_ns = 0;
}

static void turn_closed_cb(uv_handle_t *h) { free(h); }

/* At the first run with a watchdog, on the loop it serves (a generation
   loaded off the loop has none there); never again once closed with the
   scheduler: a task run after that (a shutdown's last completions) has the
   plain slice and is never put off, and nothing new is left on the loop. */
static void turn_open(clank_sched_t *s) {
  if (!s->turn_closed) {
    uv_prepare_t *h = malloc(sizeof *h);
    if (h) {
      uv_prepare_init(s->loop, h);
      h->data = s;
      uv_prepare_start(h, turn_new);
      uv_unref((uv_handle_t *)h); /* it never keeps the loop alive */
      s->turn_prepare = h;
    }
  }
  s->turn_ns = 0;
}

/* The turn's Lua time is over its budget: waits that end now are put off. */
static int turn_spent(clank_sched_t *s) {
  return s->turn_ns >= CLANK_TURN_NS && s->turn_prepare != NULL;
}

/* A preempted task waits behind the work that is ready now, and so does one
   whose wait ended in a spent turn (nargs: the wait's results, on its
   stack): the idle handle makes the loop poll without blocking, then
   resumes the queue. */
static void ready_push(clank_sched_t *s, clank_task_t *t, int nargs) {
  if (s->ready_idle == NULL) {
    s->ready_idle = malloc(sizeof *s->ready_idle);
    if (s->ready_idle == NULL) abort(); /* nowhere to keep a preempted task */
    uv_idle_init(s->loop, s->ready_idle);
    s->ready_idle->data = s;
  }
  t->queued = 1;
  t->ready_nargs = nargs;
  t->ready_next = NULL;
  if (s->ready_tail)
    s->ready_tail->ready_next = t;
  else
    s->ready = t;
  s->ready_tail = t;
  uv_idle_start(s->ready_idle, run_ready);
}

static void ready_remove(clank_sched_t *s, clank_task_t *t) {
  if (!t->queued) return;
  clank_task_t **p = &s->ready, *prev = NULL;
  while (*p != t) {
    prev = *p;
    p = &(*p)->ready_next;
  }
  *p = t->ready_next;
  if (s->ready_tail == t) s->ready_tail = prev;
  t->queued = 0;
  t->ready_nargs = 0;
  t->ready_next = NULL;
}

static void run_ready(uv_idle_t *idle) {
  clank_sched_t *s = idle->data;
  /* Only as many as were queued before this turn: one preempted again goes
     behind the I/O of the next. And only while the turn lasts: the rest go
     on after the loop polled (the idle handle stays, so it does not block);
     the first runs even in a spent turn, so the queue always moves. */
  int n = 0;
  for (clank_task_t *t = s->ready; t; t = t->ready_next) n++;
  for (int ran = 0; n-- > 0 && s->ready; ran++) {
    int spent = turn_spent(s);
    if (ran && spent) break;
    clank_task_t *t = s->ready;
    int nargs = t->ready_nargs;
    ready_remove(s, t);
    t->preempted = 0;
    t->ready_due = spent;
    t->resume(t, nargs);
  }
  if (s->ready == NULL) uv_idle_stop(idle);
}

/* The running task's Lua time so far, charged to it and to the turn; the
   watchdog lets go. */
static void run_pause(clank_sched_t *s, clank_task_t *t, uint64_t now) {
  t->cpu_ns += now - t->resumed_at;
  if (s->watchdog) {
    s->turn_ns += now - t->resumed_at;
    clank_watchdog_leave(s->watchdog);
  }
}

static void run_start(clank_sched_t *s, clank_task_t *t, uint64_t now) {
  t->resumed_at = now;
  if (s->watchdog == NULL) return;
  if (s->turn_prepare == NULL) turn_open(s);
  uint64_t slice = clank_slice_ns(s->turn_ns);
  if (s->cpu_limit_ns) {
    uint64_t left = t->cpu_ns < s->cpu_limit_ns ? s->cpu_limit_ns - t->cpu_ns : 0;
    if (left < slice) slice = left;
  }
  clank_watchdog_enter(s->watchdog, t->co, now + slice);
}

/* The deadline from a task's first wait (scheduler.h) passed. */
static void deadline_fired(clank_wait_t *w) {
  clank_task_t *t = w->task;
  w->task = NULL;
  t->deadline_timer = NULL;
  t->deadline_passed = 1;
  t->on_deadline(t);
}

void clank_task_hold_signal(clank_task_t *t) {
  if (!t->holder_deferred) return;
  t->holder_deferred = 0;
  lua_State *L = main_thread_of(t->co);
  lua_createtable(L, 0, 0);
  lua_rawseti(L, LUA_REGISTRYINDEX, t->hold_slot);
  t->signal_ref = t->hold_slot;
}

/* A task with a deadline from its first wait waits: it counts from now, as a
   joined child's does from the child's. */
static void arm_deadline(clank_task_t *t) {
  if (t->deadline_timer || t->deadline_passed || t->deadline_ms <= 0) return;
  lua_State *L = main_thread_of(t->co);
  clank_wait_t *w = clank_wait_new(L, t->sched, t->deadline_ms);
  w->fire = deadline_fired;
  w->task = t;
  t->deadline_timer = w;
}

/* A task whose coroutine yielded something else than a wait is a bug in the
   app (a bare coroutine.yield in a handler): it becomes an error. A task
   over its budget is never resumed: it fails with RESOURCE_LIMIT. */
int clank_task_resume(clank_task_t *t, int nargs, int *nres) {
  clank_sched_t *s = t->sched;
  if (t->exhausted || t->mem_over) {
    lua_pop(t->co, nargs);
    t->exhausted = 1;
    t->ready_due = 0;
    clank_task_push_exhausted(t->co, t);
    *nres = 1;
    return LUA_ERRRUN;
  }
  clank_task_t *outer = s->running; /* a joined child runs inside its parent's run */
  if (s->turn_ns >= CLANK_TURN_NS && outer == NULL) {
    /* The turn is spent: a wait that ends now is queued, to run after the
       loop polled. Never a first run (its driver may have passed pointers
       to its own stack), nor one the ready queue chose for this turn. */
    if (t->ready_due) {
      t->ready_due = 0;
    } else if (turn_spent(s) && lua_status(t->co) == LUA_YIELD) {
      ready_push(s, t, nargs);
      *nres = 0;
      return LUA_YIELD;
    }
  }
  uint64_t now = clank_run_clock();
  if (outer) run_pause(s, outer, now);
  t->outer = outer;
  s->running = t;
  run_start(s, t, now);
  int st = lua_resume(t->co, NULL, nargs, nres);
  now = clank_run_clock();
  run_pause(s, t, now);
  s->running = outer;
  if (outer) run_start(s, outer, now);
  if (st == LUA_YIELD) clank_task_hold_signal(t); /* it may be aborted from now on */
  if (st == LUA_YIELD && t->preempted && *nres == 0) {
    ready_push(s, t, 0);
    if (t->deadline_on_wait) arm_deadline(t);
    return LUA_YIELD;
  }
  if (is_wait(t->co, s, st, *nres)) {
    lua_pop(t->co, 1);
    if (t->deadline_on_wait) arm_deadline(t);
    return LUA_YIELD;
  }
  if (st == LUA_YIELD) {
    lua_pop(t->co, *nres);
    lua_pushliteral(t->co, "coroutine.yield in a handler: use clank.sleep or other runtime waits");
    *nres = 1;
    return LUA_ERRRUN;
  }
  return clank_task_budget_error(t->co, t, st);
}

static int resume_task(clank_task_t *t, int nargs, int *nres) {
  return clank_task_resume(t, nargs, nres);
}

typedef struct driven_s {
  clank_task_t task;
  int done, status, nres;
} driven_t;

static void driven_resume(clank_task_t *t, int nargs) {
  driven_t *d = (driven_t *)t;
  d->status = resume_task(t, nargs, &d->nres);
  if (d->status != LUA_YIELD) d->done = 1;
}

/* A coroutine for clank_sched_call, pushed on L: a spare one, or a new one. */
static lua_State *call_thread(lua_State *L, clank_sched_t *s) {
  if (s->ncall_spare == 0) return lua_newthread(L);
  int i = --s->ncall_spare;
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->call_spare_ref[i]);
  luaL_unref(L, LUA_REGISTRYINDEX, s->call_spare_ref[i]);
  return s->call_spare[i];
}

/* co (at idx of L), whose call returned, kept for the next when there is room. */
static void keep_call_thread(lua_State *L, clank_sched_t *s, lua_State *co, int idx) {
  if (s->ncall_spare == CLANK_CALL_SPARES) return;
  lua_settop(co, 0);
  lua_pushvalue(L, idx);
  s->call_spare_ref[s->ncall_spare] = luaL_ref(L, LUA_REGISTRYINDEX);
  s->call_spare[s->ncall_spare++] = co;
}

int clank_sched_call(lua_State *L, int nargs) {
  clank_sched_t *s = clank_sched_get(L);
  int base = lua_gettop(L) - nargs - 1;
  lua_State *co = call_thread(L, s);
  lua_insert(L, base + 1); /* anchor the thread below the function */
  lua_xmove(L, co, nargs + 1);
  driven_t d = {0};
  d.task.sched = s;
  d.task.resume = driven_resume;
  clank_task_bind(&d.task, co);
  driven_resume(&d.task, nargs);
  /* Called from the loop (a callback), it cannot be put off behind other work: preempted, it
     runs on at once; only a wait is an error here. */
  while (!d.done && d.task.preempted && s->loop_running) {
    ready_remove(s, &d.task);
    d.task.preempted = 0;
    d.task.ready_due = 1; /* in a spent turn too */
    driven_resume(&d.task, 0);
  }
  if (!d.done && s->loop_running) {
    clank_sched_cancel(&d.task);
    clank_task_unbind(co);
    lua_resetthread(co);
    return luaL_error(L, CLANK_WAIT_MESSAGE);
  }
  while (!d.done) {
    s->loop_running = 1;
    uv_run(s->loop, UV_RUN_ONCE);
    s->loop_running = 0;
  }
  clank_task_unbind(co);
  if (d.status != LUA_OK) {
    lua_xmove(co, L, 1);
    lua_resetthread(co);
    return lua_error(L); /* the same error object: tables keep their identity */
  }
  lua_xmove(co, L, d.nres);
  keep_call_thread(L, s, co, base + 1);
  lua_remove(L, base + 1);
  return d.nres;
}

void clank_sched_retire(clank_sched_t *s) {
  clank_tasks_retire(s);
  for (clank_wait_t *w = s->waits, *next; w; w = next) {
    next = w->next;
    if (w->retire == NULL) continue;
    wait_unlink(w);
    w->retire(w);
    wait_close(w);
  }
}

void clank_sched_cancel_all(clank_sched_t *s) {
  while (s->ready) ready_remove(s, s->ready);
  if (s->ready_idle) {
    uv_close((uv_handle_t *)s->ready_idle, ready_closed);
    s->ready_idle = NULL;
  }
  if (s->turn_prepare) {
    uv_close((uv_handle_t *)s->turn_prepare, turn_closed_cb);
    s->turn_prepare = NULL;
    s->turn_closed = 1;
  }
  s->turn_ns = 0;
  clank_tasks_drop(s);
  while (s->ncall_spare > 0) {
    int i = --s->ncall_spare;
    luaL_unref(s->call_spare[i], LUA_REGISTRYINDEX, s->call_spare_ref[i]);
  }
  while (s->waits) {
    clank_wait_t *w = s->waits;
    wait_unlink(w);
    wait_close(w);
  }
  for (int i = 0; i < CLANK_SCHED_SLOTS; i++) {
    clank_sched_slot_t *slot = &s->slots[i];
    if (slot->key && slot->data && slot->close) slot->close(s, slot->data);
  }
}

void *clank_sched_slot(clank_sched_t *s, const void *key) {
  for (int i = 0; i < CLANK_SCHED_SLOTS; i++)
    if (s->slots[i].key == key) return s->slots[i].data;
  return NULL;
}

void clank_sched_set_slot(clank_sched_t *s, const void *key, void *data,
                          void (*close)(clank_sched_t *s, void *data)) {
  clank_sched_slot_t *free_slot = NULL;
  for (int i = 0; i < CLANK_SCHED_SLOTS; i++) {
    if (s->slots[i].key == key) {
      s->slots[i].data = data;
      s->slots[i].close = close;
      return;
    }
    if (s->slots[i].key == NULL && free_slot == NULL) free_slot = &s->slots[i];
  }
  if (data == NULL) return;
  if (free_slot == NULL) abort(); /* more users than CLANK_SCHED_SLOTS: a build error */
  *free_slot = (clank_sched_slot_t){key, data, close};
}
