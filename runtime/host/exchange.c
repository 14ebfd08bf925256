/* The exchange pool: an exchange is one request in a handler (its task and
   coroutine, its connection, its generation). Owns the generation's spare
   exchanges, reused with their coroutines, and its late list (exchanges
   whose action timed out while it waited, until the action ends). */
#include "host/exchange.h"

#include <lauxlib.h>
#include <stdlib.h>

#include "host/drive.h"
/* Exchanges and their coroutines are reused: a coroutine bound once as a
   task stays one, and a waiting handler never moves in memory. */
#define SPARE_MAX 64
exchange_t *clank_exchange_serving(lua_State *co) {
  for (clank_task_t *t = clank_task_of(co); t; t = clank_task_parent(t))
    if (t->resume == clank_drive_resume) return ((exchange_t *)t)->late ? NULL : (exchange_t *)t;
  return NULL;
}

exchange_t *clank_exchange_get(clank_gen_t *g) {
  exchange_t *x = g->spare;
  if (x) {
    g->spare = x->next;
    g->nspare--;
  } else {
    x = calloc(1, sizeof *x);
    if (x == NULL) abort(); /* nowhere to run the handler */
    lua_State *co = lua_newthread(g->L);
    x->co_ref = luaL_ref(g->L, LUA_REGISTRYINDEX);
    lua_pushboolean(g->L, 0);
    x->task.hold_slot = luaL_ref(g->L, LUA_REGISTRYINDEX);
    x->task.sched = &g->sched;
    x->task.resume = clank_drive_resume;
    x->task.on_deadline = clank_drive_timed_out;
    clank_task_bind(&x->task, co);
  }
  x->gen = g;
  x->next = NULL;
  x->serial++;
  x->waited = x->abandoned = x->streaming = x->stream_closed = x->late = 0;
  x->task.deadline_on_wait = x->task.deadline_passed = 0;
  x->task.deadline_timer = NULL;
  x->send_waiter = NULL;
  x->task.wait = NULL;
  x->task.signal_ref = 0;
  x->task.wants_signal = 1;
  x->task.cpu_ns = 0;
  x->task.signal_lazy = 0;
  x->task.exhausted = x->task.mem_over = x->task.preempted = 0;
  x->task.mem_charged = 0;
  return x;
}

/* x and its coroutine's references go; the coroutine goes with the state. */
static void exchange_release(exchange_t *x) {
  clank_task_unbind(x->task.co);
  luaL_unref(x->gen->L, LUA_REGISTRYINDEX, x->co_ref);
  luaL_unref(x->gen->L, LUA_REGISTRYINDEX, x->task.hold_slot);
  free(x);
}

static void exchange_free(exchange_t *x) {
  lua_resetthread(x->task.co); /* a failed handler's pending to-be-closed variables close now */
  exchange_release(x);
}

/* A coroutine that failed keeps its broken stack: it is not reused. */
void clank_exchange_put(exchange_t *x, int reusable) {
  clank_gen_t *g = x->gen;
  if (reusable && g->nspare < SPARE_MAX) {
    lua_settop(x->task.co, 0);
    x->next = g->spare;
    g->spare = x;
    g->nspare++;
    return;
  }
  exchange_free(x);
}

void clank_exchange_late(exchange_t *x) {
  clank_gen_t *g = x->gen;
  x->late = 1;
  x->conn = NULL;
  x->next = g->late;
  g->late = x;
}

void clank_exchange_unlate(exchange_t *x) {
  clank_gen_t *g = x->gen;
  exchange_t **p = (exchange_t **)&g->late;
  while (*p && *p != x) p = &(*p)->next;
  if (*p) *p = x->next;
  x->next = NULL;
  x->late = 0;
}

void clank_exchange_forget(clank_gen_t *g) {
  while (g->late) { /* their coroutines go with the state; nothing runs them again */
    exchange_t *x = g->late;
    g->late = x->next;
    clank_sched_cancel(&x->task);
    exchange_release(x);
  }
  while (g->spare) {
    exchange_t *x = g->spare;
    g->spare = x->next;
    exchange_free(x);
  }
  g->nspare = 0;
}
