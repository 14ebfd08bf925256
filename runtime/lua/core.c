/* clank.core: the runtime's own functions (version, waiting). */
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "lua/modules.h"
#include "lua/scheduler.h"
#include "lua/abort.h"
#include "lua/values.h"

static int sleep_done(lua_State *L, int status, lua_KContext ctx) {
  (void)L; (void)status; (void)ctx;
  return 0;
}

static double check_ms(lua_State *L, int arg) {
  lua_Number ms = luaL_checknumber(L, arg);
  luaL_argcheck(L, ms >= 0 && ms <= 2147483647.0, arg, "expected milliseconds from 0 to 2^31-1");
  return ms;
}

/* clank.sleep(ms): suspends the calling task. */
static int core_sleep(lua_State *L) { return clank_sched_sleep(L, check_ms(L, 1), sleep_done, 0); }

static void timeout_fired(clank_wait_t *w) {
  lua_rawgeti(w->L, LUA_REGISTRYINDEX, w->ref);
  clank_abort_fire(w->L, -1, "timeout");
  lua_pop(w->L, 1);
}

/* clank.timeout(ms): an abort signal that aborts after ms, reason "timeout". */
static int core_timeout(lua_State *L) {
  double ms = check_ms(L, 1);
  clank_abort_push(L);
  clank_sched_timer(L, ms, timeout_fired, lua_gettop(L));
  return 1;
}

/* clank.spawn(fn): fn runs in a task of its own, cancelled with its generation. */
static int core_spawn(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  clank_sched_spawn(L);
  return 0;
}

static int core_array(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  clank_mark_array(L, 1);
  return 1;
}

static const luaL_Reg core_funcs[] = {
  {"sleep", core_sleep},
  {"timeout", core_timeout},
  {"spawn", core_spawn},
  {"array", core_array},
  {NULL, NULL}
};

int luaopen_clank_core(lua_State *L) {
  luaL_newlib(L, core_funcs);
  lua_pushliteral(L, CLANK_VERSION);
  lua_setfield(L, -2, "version");
  clank_push_null(L);
  lua_setfield(L, -2, "null");
  return 1;
}
