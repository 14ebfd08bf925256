#include "lua/values.h"

#include <lauxlib.h>

/* Only its address matters; it is never written. */
static const char null_tag = 0;

void clank_push_null(lua_State *L) { lua_pushlightuserdata(L, (void *)&null_tag); }

int clank_is_null(lua_State *L, int idx) {
  return lua_type(L, idx) == LUA_TLIGHTUSERDATA && lua_touserdata(L, idx) == &null_tag;
}

void clank_push_array_mt(lua_State *L) {
  if (luaL_getmetatable(L, CLANK_ARRAY_MT) == LUA_TNIL) {
    lua_pop(L, 1);
    luaL_newmetatable(L, CLANK_ARRAY_MT);
  }
}

void clank_mark_array(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  clank_push_array_mt(L);
  lua_setmetatable(L, idx);
}

int clank_is_marked_array(lua_State *L, int idx) {
  if (!lua_getmetatable(L, idx)) return 0;
  luaL_getmetatable(L, CLANK_ARRAY_MT);
  int marked = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return marked;
}
