/* The watchdog thread and the hook it sets (see preempt.h). */
#include "lua/preempt.h"

#include <stdlib.h>
#include <uv.h>

#include "lua/scheduler.h"

/* How often the hook runs once set: a few microseconds of Lua. */
#define HOOK_COUNT 1000
/* How often the watchdog looks: the slice's granularity. */
#define TICK_NS (2 * 1000000ull)

struct clank_watchdog_s {
  uv_thread_t thread;
  uv_mutex_t mu;
  uv_cond_t wake;
  int stop;
  lua_State *co;     /* running on the loop's thread now, or NULL */
  uint64_t deadline; /* when co is interrupted */
  int hooked;        /* the hook is set on co */
};

static void hook(lua_State *L, lua_Debug *ar);

/* Called with mu held. */
static void set_hook(clank_watchdog_t *w) {
  lua_sethook(w->co, hook, LUA_MASKCOUNT, HOOK_COUNT);
  w->hooked = 1;
}

static void watch(void *arg) {
  clank_watchdog_t *w = arg;
  uv_mutex_lock(&w->mu);
  while (!w->stop) {
    uv_cond_timedwait(&w->wake, &w->mu, TICK_NS);
    if (w->co && !w->hooked && uv_hrtime() >= w->deadline) set_hook(w);
  }
  uv_mutex_unlock(&w->mu);
}

clank_watchdog_t *clank_watchdog_start(void) {
  clank_watchdog_t *w = calloc(1, sizeof *w);
  if (w == NULL) return NULL;
  if (uv_mutex_init(&w->mu) != 0) goto no_mutex;
  if (uv_cond_init(&w->wake) != 0) goto no_cond;
  if (uv_thread_create(&w->thread, watch, w) != 0) goto no_thread;
  return w;
no_thread:
  uv_cond_destroy(&w->wake);
no_cond:
  uv_mutex_destroy(&w->mu);
no_mutex:
  free(w);
  return NULL;
}

void clank_watchdog_stop(clank_watchdog_t *w) {
  if (w == NULL) return;
  uv_mutex_lock(&w->mu);
  w->stop = 1;
  uv_cond_signal(&w->wake);
  uv_mutex_unlock(&w->mu);
  uv_thread_join(&w->thread);
  uv_cond_destroy(&w->wake);
  uv_mutex_destroy(&w->mu);
  free(w);
}

void clank_watchdog_enter(clank_watchdog_t *w, lua_State *co, uint64_t deadline) {
  uv_mutex_lock(&w->mu);
  w->co = co;
  w->deadline = deadline;
  w->hooked = 0;
  uv_mutex_unlock(&w->mu);
}

void clank_watchdog_leave(clank_watchdog_t *w) {
  uv_mutex_lock(&w->mu);
  lua_State *co = w->co;
  int hooked = w->hooked;
  w->co = NULL;
  w->hooked = 0;
  uv_mutex_unlock(&w->mu);
  /* The coroutine is suspended or dead now: it is safe to touch it here. */
  if (hooked) lua_sethook(co, NULL, 0, 0);
}

void clank_watchdog_poke(clank_watchdog_t *w, lua_State *co) {
  uv_mutex_lock(&w->mu);
  if (w->co == co && !w->hooked) set_hook(w);
  uv_mutex_unlock(&w->mu);
}

/* On the loop's thread, every HOOK_COUNT instructions of an interrupted
   run. Coroutines an app makes inside a hooked one inherit the hook: they
   never yield here (their resume would see a stray yield), they only count. */
static void hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  clank_sched_t *s = clank_sched_get(L);
  clank_task_t *t = s->running;
  if (t == NULL) return;
  uint64_t now = uv_hrtime();
  if ((s->cpu_limit_ns && t->cpu_ns + (now - t->resumed_at) >= s->cpu_limit_ns) || t->mem_over) {
    /* Uncatchable: from here on every instruction raises it again, so a
       pcall that caught it fails at its next step. */
    t->exhausted = 1;
    lua_sethook(L, hook, LUA_MASKCOUNT, 1);
    clank_task_push_exhausted(L, t);
    lua_error(L);
  }
  if (L == t->co && now - t->resumed_at >= CLANK_SLICE_NS && lua_isyieldable(L)) {
    t->preempted = 1;
    lua_yield(L, 0);
  }
}
