/* core/scheduler.c's turn (preempt.h): tasks woken in one loop iteration
   share CLANK_TURN_NS of Lua time between two polls of the loop; the others
   wait for the next poll, and resume with what they woke with. Without a
   watchdog there is no turn: they run in one go, as before. Each case wakes
   a burst of tasks that then work 2 ms of CPU without waiting, and watches
   the loop's polls from a prepare handle of its own. Exit status 0 when
   every case passes; each failure prints a line. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "core/preempt.h"
#include "core/scheduler.h"

#include "../check.h"

/* ---- what the tasks call ---- */

static int sleep_k(lua_State *L, int status, lua_KContext ctx) {
  (void)L;
  (void)status;
  (void)ctx;
  return 0;
}

/* sleep0(): a wait of 0 ms, the way clank.sleep(0) waits. */
static int sleep0(lua_State *L) { return clank_sched_sleep(L, 0, sleep_k, 0); }

/* gate(): waits until open_gate resumes every waiter in one callback, as a
   poll's completions do, each with its place in line as the wait's result. */
#define GATE_MAX 512
static clank_task_t *waiting[GATE_MAX];
static int nwaiting;

static int gate_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  return lua_gettop(L); /* the value it was resumed with */
}

static int gate(lua_State *L) {
  clank_task_t *t = clank_task_of(L);
  if (t == NULL || nwaiting == GATE_MAX) return luaL_error(L, "gate: not in a task, or full");
  waiting[nwaiting++] = t;
  lua_pushlightuserdata(L, clank_sched_get(L)); /* a runtime wait */
  return lua_yieldk(L, 1, 0, gate_k);
}

static void open_gate(uv_timer_t *timer) {
  (void)timer;
  int n = nwaiting;
  nwaiting = 0;
  for (int i = 0; i < n; i++) {
    clank_task_t *t = waiting[i];
    lua_pushinteger(t->co, i + 1);
    t->resume(t, 1);
  }
}

static int spawn(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  clank_sched_spawn(L);
  return 0;
}

/* n tasks, each waking via `via` (sleep or gate), then working ms of CPU;
   returns a function that tells how many are done and how many woke with
   the wrong value. */
static const char burst_lua[] =
    "local spawn, sleep0, gate, n, ms, via = ...\n"
    "local done, wrong = 0, 0\n"
    "for i = 1, n do\n"
    "  spawn(function()\n"
    "    if via == 'gate' then\n"
    "      if gate() ~= i then wrong = wrong + 1 end\n"
    "    else\n"
    "      sleep0()\n"
    "    end\n"
    "    local t0 = os.clock()\n"
    "    while os.clock() - t0 < ms / 1000 do end\n"
    "    done = done + 1\n"
    "  end)\n"
    "end\n"
    "return function() return done, wrong end\n";

/* ---- the loop's polls ---- */

typedef struct polls_s {
  int count;
  /* uv_hrtime of the last poll (at first: of the loop's start), and the
     longest time between two */
  uint64_t last, longest;
} polls_t;

static void on_prepare(uv_prepare_t *h) {
  polls_t *p = h->data;
  uint64_t now = uv_hrtime();
  if (now - p->last > p->longest) p->longest = now - p->last;
  p->last = now;
  p->count++;
}

typedef struct outcome_s {
  int done, wrong, polls;
  double longest_ms, total_ms;
} outcome_t;

static outcome_t run_burst(int preempt, int n, int ms, const char *via) {
  outcome_t o = {0};
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  clank_sched_t *s = clank_sched_get(L); /* plain Lua: a loop of its own */
  clank_watchdog_t *w = preempt ? clank_watchdog_start() : NULL;
  s->watchdog = w;
  polls_t polls = {0};
  uv_prepare_t prepare;
  uv_prepare_init(s->loop, &prepare);
  prepare.data = &polls;
  uv_timer_t timer;
  uv_timer_init(s->loop, &timer);

  if (luaL_loadstring(L, burst_lua) != LUA_OK) {
    CHECK(0, "burst: %s", lua_tostring(L, -1));
    lua_close(L);
    return o;
  }
  lua_pushcfunction(L, spawn);
  lua_pushcfunction(L, sleep0);
  lua_pushcfunction(L, gate);
  lua_pushinteger(L, n);
  lua_pushinteger(L, ms);
  lua_pushstring(L, via);
  uint64_t t0 = uv_hrtime();
  if (lua_pcall(L, 6, 1, 0) != LUA_OK) {
    CHECK(0, "burst: %s", lua_tostring(L, -1));
    lua_close(L);
    return o;
  }
  if (strcmp(via, "gate") == 0) uv_timer_start(&timer, open_gate, 0, 0);
  uv_prepare_start(&prepare, on_prepare);
  uv_unref((uv_handle_t *)&prepare); /* the burst's timers and queue keep the loop going */
  polls.last = uv_hrtime();
  uv_run(s->loop, UV_RUN_DEFAULT);
  o.total_ms = (double)(uv_hrtime() - t0) / 1e6;
  o.polls = polls.count;
  o.longest_ms = (double)polls.longest / 1e6;
  lua_call(L, 0, 2);
  o.done = (int)lua_tointeger(L, -2);
  o.wrong = (int)lua_tointeger(L, -1);
  lua_pop(L, 2);

  uv_close((uv_handle_t *)&prepare, NULL);
  uv_close((uv_handle_t *)&timer, NULL);
  uv_run(s->loop, UV_RUN_NOWAIT);
  lua_close(L); /* closes the scheduler and its loop */
  clank_watchdog_stop(w);
  return o;
}

/* ---- the cases ---- */

#define N 150 /* 300 ms of Lua in all */
#define MS 2

static void budget_case(const char *via) {
  outcome_t o = run_burst(1, N, MS, via);
  printf("%-5s with a watchdog: %d polls, the longest %.1f ms apart, %.0f ms in all\n", via,
         o.polls, o.longest_ms, o.total_ms);
  CHECK(o.done == N, "%s: %d of %d tasks done", via, o.done, N);
  CHECK(o.wrong == 0, "%s: %d tasks woke with another's value", via, o.wrong);
  /* a turn is 5 ms and a tick or two more: 100 ms is a loose bound, a
     third of the burst in one go */
  CHECK(o.longest_ms < 100, "%s: the loop did not poll for %.1f ms", via, o.longest_ms);
  CHECK(o.polls >= 10, "%s: the loop polled %d times in a burst of %.0f ms", via, o.polls,
        o.total_ms);
}

static void no_watchdog_case(void) {
  outcome_t o = run_burst(0, N, MS, "sleep");
  printf("sleep without a watchdog: %d polls, the longest %.1f ms apart, %.0f ms in all\n", o.polls,
         o.longest_ms, o.total_ms);
  CHECK(o.done == N, "no watchdog: %d of %d tasks done", o.done, N);
  /* every task in one iteration: the whole burst's CPU between two polls */
  CHECK(o.longest_ms >= 0.8 * N * MS, "no watchdog: the longest time between polls was %.1f ms",
        o.longest_ms);
}

/* A call made from a callback of the loop (clank_sched_call: what live and pubsub do with a
   frame) cannot wait, so it is not put off when its slice ends: it runs to its end. */
typedef struct called_s {
  lua_State *L;
  int ok;
  char error[200];
  lua_Integer result;
} called_t;

static int call_in_task(lua_State *L) { return clank_sched_call(L, lua_gettop(L) - 1); }

static void call_from_loop(uv_timer_t *timer) {
  called_t *c = timer->data;
  lua_State *L = c->L;
  clank_sched_get(L)->loop_running = 1;
  lua_pushcfunction(L, call_in_task);
  if (luaL_loadstring(L, "local t0 = os.clock() while os.clock() - t0 < 0.03 do end return 42") !=
      LUA_OK)
    return;
  c->ok = lua_pcall(L, 1, 1, 0) == LUA_OK;
  if (c->ok)
    c->result = lua_tointeger(L, -1);
  else
    snprintf(c->error, sizeof c->error, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  clank_sched_get(L)->loop_running = 0;
}

static void call_case(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  clank_sched_t *s = clank_sched_get(L);
  clank_watchdog_t *w = clank_watchdog_start();
  s->watchdog = w;
  called_t c = {L, 0, "", 0};
  uv_timer_t timer;
  uv_timer_init(s->loop, &timer);
  timer.data = &c;
  uv_timer_start(&timer, call_from_loop, 0, 0);
  uv_run(s->loop, UV_RUN_DEFAULT);
  CHECK(c.ok && c.result == 42, "a 30 ms call from the loop: %s",
        c.ok ? "a wrong result" : c.error);
  printf("a 30 ms call from the loop with a watchdog: %s\n", c.ok ? "ran to its end" : c.error);
  uv_close((uv_handle_t *)&timer, NULL);
  uv_run(s->loop, UV_RUN_NOWAIT);
  lua_close(L);
  clank_watchdog_stop(w);
}

/* The waits due at once (sched's waits_at_once: what idle-time collection yields to): each
   sleep(0) and each wake counts until its task goes on; a sleep of some time does not. */
static clank_task_t *sleeper;

static int sleep50(lua_State *L) {
  sleeper = clank_task_of(L);
  return clank_sched_sleep(L, 50, sleep_k, 0);
}

static void at_once_case(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  clank_sched_t *s = clank_sched_get(L);
  sleeper = NULL;
  const char *tasks =
      "local spawn, sleep0, sleep50 = ...\n"
      "for _ = 1, 5 do spawn(function() sleep0() end) end\n"
      "spawn(function() sleep50() end)\n";
  if (luaL_loadstring(L, tasks) != LUA_OK) {
    CHECK(0, "at once: %s", lua_tostring(L, -1));
    lua_close(L);
    return;
  }
  lua_pushcfunction(L, spawn);
  lua_pushcfunction(L, sleep0);
  lua_pushcfunction(L, sleep50);
  if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
    CHECK(0, "at once: %s", lua_tostring(L, -1));
    lua_close(L);
    return;
  }
  CHECK(s->waits_at_once == 5, "five sleep(0) and a sleep(50) waiting: %zu due at once",
        s->waits_at_once);
  CHECK(sleeper != NULL && clank_sched_wake(sleeper), "the sleep(50) could not be woken");
  CHECK(s->waits_at_once == 6, "and the sleep(50) woken: %zu due at once", s->waits_at_once);
  CHECK(!clank_sched_wake(sleeper) || s->waits_at_once == 6, "woken twice: %zu due at once",
        s->waits_at_once);
  uv_run(s->loop, UV_RUN_DEFAULT);
  CHECK(s->waits_at_once == 0, "every task went on: %zu due at once", s->waits_at_once);
  printf("waits due at once: counted while they wait, none once the tasks went on\n");
  lua_close(L);
}

int main(void) {
  at_once_case();
  call_case();
  budget_case("sleep");
  budget_case("gate");
  no_watchdog_case();
  if (failures) printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
