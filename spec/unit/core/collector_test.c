/* core/collector.c: a cycle's steps driven from outside, and credit that
   keeps the allocation which follows from finishing the cycle (what the host
   relies on to leave a cycle to idle time). This is Lua's behaviour as much as
   ours: a Lua that took a negative step as anything but credit fails here.
   Exit status 0 when every case passes; each failure prints a line. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>

#include "../check.h"
#include "core/collector.h"

/* A state holding about 25 MiB of small tables, fully collected. */
static lua_State *big_state(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  if (luaL_dostring(L, "kept = {} for i = 1, 300000 do kept[i] = { i } end") != LUA_OK)
    fprintf(stderr, "setup: %s\n", lua_tostring(L, -1));
  lua_gc(L, LUA_GCCOLLECT);
  return L;
}

static int finalized(lua_State *L) {
  lua_getglobal(L, "finalized");
  int b = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return b;
}

/* About 9 MiB of tables, none kept. */
static void allocate_garbage(lua_State *L) {
  if (luaL_dostring(L, "for i = 1, 150000 do local t = { i, i } end") != LUA_OK)
    fprintf(stderr, "allocate: %s\n", lua_tostring(L, -1));
}

/* A big state, an unreachable table whose finalizer sets the global
   finalized (the cycle that collects it ends after the finalizer ran), and
   one step: a cycle started. */
static lua_State *started_cycle(void) {
  lua_State *L = big_state();
  if (luaL_dostring(L,
                    "finalized = false\n"
                    "setmetatable({}, { __gc = function() finalized = true end })") != LUA_OK)
    fprintf(stderr, "garbage: %s\n", lua_tostring(L, -1));
  CHECK(!finalized(L), "the finalizer has not run yet");
  CHECK(!clank_collector_step(L), "one step does not complete a cycle over 25 MiB");
  return L;
}

/* Without credit, the allocation after a step finishes the cycle (so the
   credit case below can fail). */
static void allocation_finishes_a_cycle(void) {
  lua_State *L = started_cycle();
  allocate_garbage(L);
  CHECK(finalized(L), "9 MiB allocated after a step finish the cycle: the finalizer ran");
  lua_close(L);
}

static void credit_leaves_the_cycle_to_steps(void) {
  lua_State *L = started_cycle();
  clank_collector_credit(L, 64 * 1024);
  allocate_garbage(L);
  CHECK(!finalized(L), "with 64 MiB of credit, 9 MiB allocated do no collection work");
  int steps = 0, completed = 0;
  while (!completed && steps < 100000) {
    completed = clank_collector_step(L);
    steps++;
  }
  CHECK(completed && steps > 1, "steps complete the cycle (after %d)", steps);
  CHECK(finalized(L), "and its finalizer ran");
  lua_close(L);
}

static void a_stopped_collector_stays_stopped(void) {
  lua_State *L = big_state();
  lua_gc(L, LUA_GCSTOP);
  size_t before = clank_collector_kib(L);
  CHECK(!clank_collector_step(L), "a step of a stopped collector completes nothing");
  clank_collector_credit(L, 1024);
  CHECK(!lua_gc(L, LUA_GCISRUNNING), "the collector the app stopped stays stopped");
  CHECK(clank_collector_kib(L) >= before, "and collected nothing (%zu KiB, %zu before)",
        clank_collector_kib(L), before);
  lua_close(L);
}

int main(void) {
  allocation_finishes_a_cycle();
  credit_leaves_the_cycle_to_steps();
  a_stopped_collector_stays_stopped();
  printf("unit/core/collector: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
