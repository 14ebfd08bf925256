/* The tasks a scheduler owns (scheduler.h): spawned ones (clank.spawn,
   spawnThen) and children joined with a time limit (clank_sched_join), with
   the spare coroutines kept for the next. Owns their coroutines' registry
   refs, their done functions and the spares list. */
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "core/protect.h"
#include "core/scheduler.h"
#include "core/scheduler_internal.h"

static int resume_task(clank_task_t *t, int nargs, int *nres) {
  return clank_task_resume(t, nargs, nres);
}

/* ---- tasks the scheduler owns (spawned, and joined children) ---- */

/* An owned task's coroutine is anchored by a registry ref; the scheduler's
   list lets a closing generation drop the ones still waiting. */
typedef struct owned_s {
  clank_task_t task;
  int co_ref;
  int spawned; /* by clank.spawn (a reload drops it), not a joined child */
  /* clank_sched_spawn_then: the function told once the task ended, however
     it ended (0: none); released unsaid when the task is dropped */
  int done_ref;
  struct owned_s *prev, *next;
} owned_t;

static lua_State *main_thread(lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State *m = lua_tothread(L, -1);
  lua_pop(L, 1);
  return m;
}

/* Spawned tasks and joined children come and go with every action a bridge
   runs: their coroutines are kept (bound as tasks) for the next one. */
#define SPARE_MAX 32

typedef struct join_s join_t;
static size_t owned_size(void);

static owned_t *owned_new(lua_State *L, clank_sched_t *s, void (*resume)(clank_task_t *, int)) {
  owned_t *o = s->spare;
  if (o) {
    s->spare = o->next;
    s->nspare--;
    lua_State *co = o->task.co;
    int ref = o->co_ref;
    memset(o, 0, owned_size());
    o->task.co = co;
    o->co_ref = ref;
  } else {
    o = calloc(1, owned_size());
    if (o == NULL) luaL_error(L, "clank: out of memory");
    lua_State *co = lua_newthread(L);
    o->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    clank_task_bind(&o->task, co);
  }
  o->task.sched = s;
  o->task.resume = resume;
  owned_t *head = (owned_t *)s->spawned;
  o->next = head;
  if (head) head->prev = o;
  s->spawned = &o->task;
  return o;
}

static void owned_release(owned_t *o) {
  lua_State *L = main_thread(o->task.co);
  clank_task_unbind(o->task.co);
  luaL_unref(L, LUA_REGISTRYINDEX, o->co_ref);
  free(o);
}

/* reusable: its coroutine ended (returned, or failed and was reset). */
static void owned_free(owned_t *o, int reusable) {
  clank_sched_t *s = o->task.sched;
  if (o->done_ref > 0) luaL_unref(main_thread(o->task.co), LUA_REGISTRYINDEX, o->done_ref);
  o->done_ref = 0;
  if (o->task.signal_ref > 0 && !o->task.signal_borrowed)
    luaL_unref(main_thread(o->task.co), LUA_REGISTRYINDEX, o->task.signal_ref);
  o->task.signal_ref = 0;
  o->task.signal_borrowed = 0;
  if (o->prev)
    o->prev->next = o->next;
  else
    s->spawned = o->next ? &o->next->task : NULL;
  if (o->next) o->next->prev = o->prev;
  clank_sched_cancel(&o->task);
  if (reusable && s->nspare < SPARE_MAX) {
    lua_settop(o->task.co, 0);
    o->prev = NULL;
    o->next = s->spare;
    s->spare = o;
    s->nspare++;
    return;
  }
  owned_release(o);
}

/* Logs the error on top of a task that failed (and pops it), with the
   traceback its protected call kept, else its message. The main thread does
   the work: a dead coroutine may not call a __tostring. */
static void log_task_error(lua_State *co, const char *what) {
  lua_State *m = main_thread(co);
  if (!lua_checkstack(m, 4)) {
    clank_sched_log(co, "error", "%s (no stack left to describe the error)", what);
    lua_pop(co, 1);
    return;
  }
  lua_xmove(co, m, 1);
  clank_sched_log(m, "error", "%s: %s", what, clank_error_text(m, -1));
  lua_pop(m, 2);
}

/* ---- a child task joined with a time limit ---- */

struct join_s {
  owned_t owned;        /* the child */
  clank_task_t *parent; /* NULL once the parent stopped waiting */
  clank_wait_t *timer;
  uint64_t cpu_start; /* the parent's Lua time when the child started: one budget */
};

/* The child's Lua time counts for the parent's request. */
static void join_charge(join_t *j, clank_task_t *parent) {
  parent->cpu_ns += j->owned.task.cpu_ns - j->cpu_start;
}

static size_t owned_size(void) { return sizeof(join_t); }

/* Moves the child's outcome onto the parent's stack: ok, value-or-error. */
static void join_deliver(lua_State *co, lua_State *p, int st, int nres) {
  lua_pushboolean(p, st == LUA_OK);
  if (st == LUA_OK && nres == 0) lua_pushnil(co);
  lua_xmove(co, p, 1);
  lua_settop(co, 0);
}

static void join_child_resume(clank_task_t *t, int nargs) {
  join_t *j = (join_t *)t;
  int nres;
  int st = resume_task(t, nargs, &nres);
  if (st == LUA_YIELD) return;
  clank_task_t *parent = j->parent;
  if (parent == NULL) {
    /* the parent gave up (timeout): nobody wants the result */
    if (st != LUA_OK) log_task_error(t->co, "an action that timed out failed later");
    if (st != LUA_OK) lua_resetthread(t->co);
    owned_free(&j->owned, !j->owned.task.exhausted);
    return;
  }
  if (j->timer) clank_sched_timer_cancel(j->timer);
  join_charge(j, parent);
  join_deliver(t->co, parent->co, st, nres);
  if (st != LUA_OK) lua_resetthread(t->co);
  owned_free(&j->owned, !j->owned.task.exhausted);
  parent->resume(parent, 2);
}

static void join_timed_out(clank_wait_t *w) {
  join_t *j = (join_t *)w->task; /* the timer's task field carries the join */
  w->task = NULL;
  j->timer = NULL;
  clank_task_t *parent = j->parent;
  j->parent = NULL;
  clank_task_t *child = &j->owned.task;
  if (child->signal_borrowed) { /* the parent goes on, and may end before the child */
    lua_rawgeti(w->L, LUA_REGISTRYINDEX, child->signal_ref);
    child->signal_ref = luaL_ref(w->L, LUA_REGISTRYINDEX);
    child->signal_borrowed = 0;
  }
  lua_pushnil(parent->co);
  lua_pushliteral(parent->co, "timeout");
  parent->resume(parent, 2);
}

int clank_sched_join(lua_State *L, int nargs, double ms, lua_KFunction k, lua_KContext ctx) {
  return clank_sched_join_in(L, lua_isyieldable(L) ? clank_task_of(L) : NULL, nargs, ms, k, ctx);
}

int clank_sched_join_in(lua_State *L, clank_task_t *parent, int nargs, double ms, lua_KFunction k,
                        lua_KContext ctx) {
  if (parent == NULL || !lua_isyieldable(L)) return luaL_error(L, CLANK_WAIT_MESSAGE);
  join_t *j = (join_t *)owned_new(L, parent->sched, join_child_resume);
  lua_State *co = j->owned.task.co;
  lua_xmove(L, co, nargs + 1);
  j->parent = parent;
  j->owned.task.cpu_ns = j->cpu_start = parent->cpu_ns;
  j->owned.task.signal_lazy = parent->signal_lazy;
  memcpy(j->owned.task.request_id, parent->request_id, sizeof parent->request_id);
  clank_task_hold_signal(parent);
  if (parent->signal_ref > 0 && !parent->signal_borrowed) {
    /* the child (an action's handler) sees the request's signal, through
       the parent's ref while the parent waits for it */
    j->owned.task.signal_ref = parent->signal_ref;
    j->owned.task.signal_borrowed = 1;
  } else if (parent->signal_ref > 0) { /* a ref the parent itself borrows: one of its own */
    lua_rawgeti(L, LUA_REGISTRYINDEX, parent->signal_ref);
    j->owned.task.signal_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  /* The child runs first, up to its first wait or its end. */
  int nres;
  int st = resume_task(&j->owned.task, nargs, &nres);
  if (st != LUA_YIELD) {
    join_charge(j, parent);
    join_deliver(co, L, st, nres);
    if (st != LUA_OK) lua_resetthread(co);
    owned_free(&j->owned, !j->owned.task.exhausted);
    return k(L, LUA_OK, ctx);
  }
  if (ms > 0) {
    j->timer = clank_wait_new(L, parent->sched, ms);
    j->timer->fire = join_timed_out;
    j->timer->task = (clank_task_t *)j;
  }
  lua_pushlightuserdata(L, parent->sched);
  return lua_yieldk(L, 1, ctx, k);
}

/* ---- spawned tasks ---- */

static int protected_body_k(lua_State *L, int status, lua_KContext ctx) {
  (void)ctx;
  if (status != LUA_OK && status != LUA_YIELD) return lua_error(L); /* the same value */
  return lua_gettop(L) - 1;
}

/* A spawned task's body: protected_body(fn) calls fn under the one message
   handler, so its error's traceback is kept before the coroutine dies. */
static int protected_body(lua_State *L) {
  lua_pushcfunction(L, clank_traceback_handler);
  lua_insert(L, 1);
  int status = lua_pcallk(L, lua_gettop(L) - 2, LUA_MULTRET, 1, 0, protected_body_k);
  return protected_body_k(L, status, 0);
}

clank_task_t *clank_task_parent(clank_task_t *t) {
  return t && t->resume == join_child_resume ? ((join_t *)t)->parent : NULL;
}

int clank_task_awaited(clank_task_t *t) {
  if (t == NULL) return 0;
  if (t->resume == join_child_resume) return ((join_t *)t)->parent != NULL;
  return t->deadline_on_wait && !t->deadline_passed;
}

/* The done function of a task that ended runs as a task of its own, from the
   loop: a chain of tasks each starting the next from its done never nests. */
static void done_fire(clank_wait_t *w) {
  lua_rawgeti(w->L, LUA_REGISTRYINDEX, w->ref);
  clank_sched_spawn(w->L);
}

static void spawned_resume(clank_task_t *t, int nargs) {
  int nres;
  int st = resume_task(t, nargs, &nres);
  if (st == LUA_YIELD) return;
  if (st != LUA_OK) {
    log_task_error(t->co, "spawned task failed");
    lua_resetthread(t->co);
  }
  lua_settop(t->co, 0);
  owned_t *o = (owned_t *)t;
  if (o->done_ref > 0) {
    lua_State *m = main_thread(t->co);
    lua_rawgeti(m, LUA_REGISTRYINDEX, o->done_ref);
    clank_sched_timer(m, 0, done_fire, lua_gettop(m));
    lua_pop(m, 1);
  }
  owned_free(o, !t->exhausted);
}

/* Only its address matters: the registry key of the deferred spawns' list. */
static const char deferred_key = 0;

void clank_sched_run_deferred(lua_State *L) {
  clank_sched_t *s = clank_sched_get(L);
  s->defer_spawn = 0;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &deferred_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  lua_pushnil(L);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &deferred_key);
  lua_Integer n = luaL_len(L, -1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, -1, i);
    clank_sched_spawn(L);
  }
  lua_pop(L, 1);
}

void clank_sched_spawn(lua_State *L) {
  if (clank_sched_get(L)->defer_spawn) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &deferred_key) != LUA_TTABLE) {
      lua_pop(L, 1);
      lua_newtable(L);
      lua_pushvalue(L, -1);
      lua_rawsetp(L, LUA_REGISTRYINDEX, &deferred_key);
    }
    lua_insert(L, -2);
    lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
    lua_pop(L, 1);
    return;
  }
  owned_t *o = owned_new(L, clank_sched_get(L), spawned_resume);
  o->spawned = 1;
  lua_pushcfunction(L, protected_body);
  lua_insert(L, -2);
  lua_xmove(L, o->task.co, 2);
  spawned_resume(&o->task, 1);
}

static void spawn_watched(lua_State *L, int kept, int signal_ref) {
  clank_sched_t *s = clank_sched_get(L);
  if (s->defer_spawn) luaL_error(L, "clank.spawn: cannot watch a task while the app loads");
  owned_t *o = owned_new(L, s, spawned_resume);
  o->spawned = !kept;
  o->task.signal_ref = signal_ref;
  o->done_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushcfunction(L, protected_body);
  lua_insert(L, -2);
  lua_xmove(L, o->task.co, 2);
  spawned_resume(&o->task, 1);
}

void clank_sched_spawn_then(lua_State *L) { spawn_watched(L, 0, 0); }

void clank_sched_spawn_kept(lua_State *L) {
  int signal_ref = 0;
  if (lua_isnil(L, -1))
    lua_pop(L, 1);
  else
    signal_ref = luaL_ref(L, LUA_REGISTRYINDEX); /* released with the task (owned_free) */
  spawn_watched(L, 1, signal_ref);
}

void clank_tasks_retire(clank_sched_t *s) {
  for (owned_t *o = (owned_t *)s->spawned, *next; o; o = next) {
    next = o->next;
    if (o->spawned) owned_free(o, 0);
  }
}

void clank_tasks_drop(clank_sched_t *s) {
  while (s->spawned) owned_free((owned_t *)s->spawned, 0);
  while (s->spare) {
    owned_t *o = s->spare;
    s->spare = o->next;
    owned_release(o);
  }
  s->nspare = 0;
}
