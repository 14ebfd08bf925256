/* Lua base functions served faster (base.h). */
#include "core/base.h"

#include <lauxlib.h>

/* Upvalue t + 1 holds the name of type t (LUA_TNIL is 0, LUA_TTHREAD the last). */
static int type_of(lua_State *L) {
  int t = lua_type(L, 1);
  luaL_argcheck(L, t != LUA_TNONE, 1, "value expected");
  lua_pushvalue(L, lua_upvalueindex(t + 1));
  return 1;
}

void clank_base_install(lua_State *L) {
  for (int t = LUA_TNIL; t < LUA_NUMTYPES; t++) lua_pushstring(L, lua_typename(L, t));
  lua_pushcclosure(L, type_of, LUA_NUMTYPES);
  lua_setglobal(L, "type");
}
