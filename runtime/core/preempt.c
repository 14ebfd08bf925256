/* The watchdog thread and the hook it sets (see preempt.h). */
#include "core/preempt.h"

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <stdlib.h>
#include <uv.h>

#include "core/scheduler.h"

/* How often the hook runs once set: a few microseconds of Lua. */
#define HOOK_COUNT 1000
/* How often the watchdog looks: the slice's granularity. Rare wakeups keep
   it off the loop's core. */
#define TICK_NS (5 * 1000000ull)

/* The running coroutine's state, one atomic word between the two threads:
   the loop's thread moves IDLE -> RUNNING -> IDLE around each resume; the
   watchdog moves RUNNING -> HOOKING -> HOOKED while it sets the hook, and
   the loop's thread waits out HOOKING before it lets go. No lock on the
   request path: a resume costs a store and a compare-and-swap. */
enum { IDLE, RUNNING, HOOKING, HOOKED };

struct clank_watchdog_s {
  uv_thread_t thread;
  uv_mutex_t mu; /* only for the watchdog's sleep and its stop */
  uv_cond_t wake;
  int stop;
  atomic_int state;
  atomic_int stopping;       /* SIGINT or SIGTERM came */
  lua_State *co;             /* running on the loop's thread, while not IDLE */
  _Atomic uint64_t deadline; /* when co is interrupted */
};

static void hook(lua_State *L, lua_Debug *ar);

/* From RUNNING: the hook goes on co, unless the run ended meanwhile. */
static void interrupt(clank_watchdog_t *w) {
  int expected = RUNNING;
  if (!atomic_compare_exchange_strong(&w->state, &expected, HOOKING)) return;
  lua_sethook(w->co, hook, LUA_MASKCOUNT, HOOK_COUNT);
  atomic_store(&w->state, HOOKED);
}

static void watch(void *arg) {
  clank_watchdog_t *w = arg;
  uv_mutex_lock(&w->mu);
  while (!w->stop) {
    uv_cond_timedwait(&w->wake, &w->mu, TICK_NS);
    if (atomic_load(&w->state) == RUNNING &&
        (atomic_load(&w->stopping) || clank_run_clock() >= atomic_load(&w->deadline)))
      interrupt(w);
  }
  uv_mutex_unlock(&w->mu);
}

clank_watchdog_t *clank_watchdog_start(void) {
  clank_watchdog_t *w = calloc(1, sizeof *w);
  if (w == NULL) return NULL;
  atomic_init(&w->state, IDLE);
  atomic_init(&w->stopping, 0);
  atomic_init(&w->deadline, 0);
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

/* ---- signals ---- */

/* The watchdog the process's SIGINT/SIGTERM handlers tell, and the handlers
   they replaced (libuv's, which still run). Written before the handlers are
   installed, cleared before the watchdog goes. */
static clank_watchdog_t *signalled;
static struct sigaction chained[2];

static void on_stop_signal(int signum, siginfo_t *info, void *ctx) {
  clank_watchdog_t *w = signalled;
  if (w) atomic_store(&w->stopping, 1);
  struct sigaction *old = &chained[signum == SIGTERM];
  if (old->sa_flags & SA_SIGINFO) {
    if (old->sa_sigaction) old->sa_sigaction(signum, info, ctx);
  } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN && old->sa_handler) {
    old->sa_handler(signum);
  }
}

void clank_watchdog_take_signals(clank_watchdog_t *w) {
  if (w == NULL || signalled) return;
  signalled = w;
  const int signums[2] = {SIGINT, SIGTERM};
  for (int i = 0; i < 2; i++) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_stop_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    sigaction(signums[i], &sa, &chained[i]);
  }
}

int clank_watchdog_stopping(clank_watchdog_t *w) { return atomic_load(&w->stopping); }

void clank_watchdog_stop(clank_watchdog_t *w) {
  if (w == NULL) return;
  if (signalled == w) { /* the process is ending: a signal now has its default effect */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signalled = NULL;
  }
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
  w->co = co;
  atomic_store_explicit(&w->deadline, deadline, memory_order_relaxed);
  atomic_store_explicit(&w->state, RUNNING, memory_order_release);
}

void clank_watchdog_leave(clank_watchdog_t *w) {
  int s = atomic_load(&w->state);
  for (;;) {
    if (s == HOOKING) { /* the watchdog is setting the hook: a few instructions */
      s = atomic_load(&w->state);
      continue;
    }
    if (atomic_compare_exchange_weak(&w->state, &s, IDLE)) break;
  }
  /* The coroutine is suspended or dead now: it is safe to touch it here. */
  if (s == HOOKED) lua_sethook(w->co, NULL, 0, 0);
}

void clank_watchdog_poke(clank_watchdog_t *w, lua_State *co) {
  if (w->co == co) interrupt(w);
}

/* On the loop's thread, every HOOK_COUNT instructions of an interrupted
   run. Coroutines an app makes inside a hooked one inherit the hook: they
   never yield here (their resume would see a stray yield), they only count. */
static void hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  clank_sched_t *s = clank_sched_get(L);
  clank_task_t *t = s->running;
  if (t == NULL) return;
  uint64_t now = clank_run_clock();
  if (s->watchdog && clank_watchdog_stopping(s->watchdog) && (L != t->co || !lua_isyieldable(L)))
    t->stopped = 1; /* the loop must see the signal: where it can yield, it is preempted */
  if (t->stopped || (s->cpu_limit_ns && t->cpu_ns + (now - t->resumed_at) >= s->cpu_limit_ns) ||
      t->mem_over) {
    /* Uncatchable: from here on every instruction raises it again, so a
       pcall that caught it fails at its next step. */
    t->exhausted = 1;
    lua_sethook(L, hook, LUA_MASKCOUNT, 1);
    clank_task_push_exhausted(L, t);
    lua_error(L);
  }
  /* The slice run_start gave it: the turn's Lua time is the same as then. */
  if (L == t->co && now - t->resumed_at >= clank_slice_ns(s->turn_ns) && lua_isyieldable(L)) {
    t->preempted = 1;
    lua_yield(L, 0);
  }
}
