/* render_core.sameProps(before, props, deep [, count]) → whether a component's props equal last
   time's (lua/clank/ui/memo.lua): a live list compares every row's props on every change, so
   the loop is here. props has no metatable and the same fields as before, each the same value
   (1 and 1.0 are not: they render apart), or tables or functions deep(a, b, 1) finds equal.
   count, when given, is how many fields before has (memo counts them once, when it copies). */
#include <lauxlib.h>

#include "render/render_internal.h"

int clank_render_same_raw(lua_State *L, int a, int b) {
  if (!lua_rawequal(L, a, b)) return 0;
  return lua_type(L, a) != LUA_TNUMBER || lua_isinteger(L, a) == lua_isinteger(L, b);
}

/* The values at a and b, both present (see clank_render_same_fields). */
static int same_value(lua_State *L, int a, int b, const clank_same_fields_t *how) {
  if (clank_render_same_raw(L, a, b)) return 1; /* the common case */
  int ta = lua_type(L, a);
  if ((ta != LUA_TTABLE && ta != LUA_TFUNCTION) || ta != lua_type(L, b)) return 0;
  if (ta == LUA_TFUNCTION && how->any_function) return 1;
  lua_pushvalue(L, how->deep);
  lua_pushvalue(L, a);
  lua_pushvalue(L, b);
  lua_pushinteger(L, how->depth);
  lua_call(L, 3, 1);
  int yes = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return yes;
}

int clank_render_same_fields(lua_State *L, int a, int b, const clank_same_fields_t *how) {
  luaL_checkstack(L, 8, "sameProps");
  int top = lua_gettop(L);
  lua_Integer n = 0;
  lua_pushnil(L);
  while (lua_next(L, b)) { /* key at top + 1, value at top + 2 */
    lua_pushvalue(L, top + 1);
    if (lua_rawget(L, a) == LUA_TNIL || !same_value(L, top + 2, top + 3, how)) {
      lua_settop(L, top);
      return 0;
    }
    lua_settop(L, top + 1);
    n++;
  }
  if (how->count >= 0) return n == how->count;
  lua_pushnil(L);
  while (lua_next(L, a)) {
    lua_pop(L, 1);
    if (--n < 0) {
      lua_settop(L, top);
      return 0;
    }
  }
  return n == 0;
}

int clank_render_same_props(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  clank_same_fields_t how = {.deep = 3, .depth = 1, .count = -1};
  if (!lua_isnoneornil(L, 4)) how.count = luaL_checkinteger(L, 4);
  lua_settop(L, 3);
  if (lua_getmetatable(L, 2)) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lua_pushboolean(L, clank_render_same_fields(L, 1, 2, &how));
  return 1;
}
