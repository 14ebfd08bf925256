/* render_core.sameProps(before, props, deep [, count]) → whether a component's props equal last
   time's (lua/clank/ui/memo.lua): a live list compares every row's props on every change, so
   the loop is here. props has no metatable and the same fields as before, each the same value
   (1 and 1.0 are not: they render apart), or tables or functions deep(a, b, 1) finds equal.
   count, when given, is how many fields before has (memo counts them once, when it copies). */
#include <lauxlib.h>

#include "render/render_internal.h"

/* The values at a and b, both present: equal as memo.lua counts it. */
static int same_value(lua_State *L, int a, int b, int deep) {
  int ta = lua_type(L, a);
  if (lua_rawequal(L, a, b)) /* the common case, one call: only 1 and 1.0 differ still */
    return ta != LUA_TNUMBER || lua_isinteger(L, a) == lua_isinteger(L, b);
  if ((ta != LUA_TTABLE && ta != LUA_TFUNCTION) || ta != lua_type(L, b)) return 0;
  lua_pushvalue(L, deep);
  lua_pushvalue(L, a);
  lua_pushvalue(L, b);
  lua_pushinteger(L, 1);
  lua_call(L, 3, 1);
  int yes = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return yes;
}

int clank_render_same_props(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  int counted = !lua_isnoneornil(L, 4);
  lua_Integer count = counted ? luaL_checkinteger(L, 4) : 0;
  lua_settop(L, 3);
  if (lua_getmetatable(L, 2)) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lua_Integer n = 0;
  lua_pushnil(L);
  while (lua_next(L, 2)) { /* key at 4, value at 5 */
    lua_pushvalue(L, 4);
    if (lua_rawget(L, 1) == LUA_TNIL || !same_value(L, 5, 6, 3)) {
      lua_pushboolean(L, 0);
      return 1;
    }
    lua_settop(L, 4);
    n++;
  }
  if (counted) {
    lua_pushboolean(L, n == count);
    return 1;
  }
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    lua_pop(L, 1);
    if (--n < 0) {
      lua_pushboolean(L, 0);
      return 1;
    }
  }
  lua_pushboolean(L, n == 0);
  return 1;
}
