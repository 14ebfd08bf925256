/* ActionError, the runtime's error type (SPEC §4): raised by the core (a
   task over its budget), the agent contract and apps alike; clank.action
   exposes its constructor. */
#include "core/error.h"

#include <lauxlib.h>

int clank_has_metatable(lua_State *L, int idx, const char *mt) {
  if (!lua_istable(L, idx) || !lua_getmetatable(L, idx)) return 0;
  luaL_getmetatable(L, mt);
  int same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same;
}

static int action_error_tostring(lua_State *L) {
  lua_getfield(L, 1, "code");
  lua_getfield(L, 1, "message");
  lua_pushfstring(L, "%s: %s", luaL_optstring(L, -2, "?"), luaL_optstring(L, -1, ""));
  return 1;
}

void clank_action_error_metatable(lua_State *L) {
  if (luaL_newmetatable(L, CLANK_ACTION_ERROR_MT)) {
    lua_pushcfunction(L, action_error_tostring);
    lua_setfield(L, -2, "__tostring");
  }
}

void clank_action_error_push(lua_State *L, const char *code, const char *message, int status) {
  lua_createtable(L, 0, 4);
  lua_pushstring(L, code);
  lua_setfield(L, -2, "code");
  lua_pushstring(L, message);
  lua_setfield(L, -2, "message");
  lua_pushinteger(L, status);
  lua_setfield(L, -2, "status");
  clank_action_error_metatable(L);
  lua_setmetatable(L, -2);
}

int clank_action_error_is(lua_State *L, int idx) {
  return clank_has_metatable(L, idx, CLANK_ACTION_ERROR_MT);
}
