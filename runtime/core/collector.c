/* Lua's incremental collector driven from outside (see collector.h). */
#include "core/collector.h"

#include <limits.h>

int clank_collector_step(lua_State *L) {
  if (!lua_gc(L, LUA_GCISRUNNING)) return 0;
  return lua_gc(L, LUA_GCSTEP, 0);
}

/* LUA_GCSTEP with n kilobytes adds n to what the collector owes for the
   allocation since its last step and steps once the debt is positive; Lua 5.4
   takes n as a signed count, so a negative one pays ahead. (The collector's
   own step then sets the debt afresh: credit lasts until the next step.)
   spec/unit/core/collector_test.c checks this of the Lua it is built with. */
void clank_collector_credit(lua_State *L, size_t kib) {
  if (kib == 0 || !lua_gc(L, LUA_GCISRUNNING)) return;
  lua_gc(L, LUA_GCSTEP, -(int)(kib > INT_MAX ? INT_MAX : kib));
}

size_t clank_collector_kib(lua_State *L) { return (size_t)lua_gc(L, LUA_GCCOUNT); }
