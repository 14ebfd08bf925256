/* The one protected call and its message handler (protect.h); owns nothing
   but the traceback it keeps beside an error. */
#include "core/protect.h"

#include <lauxlib.h>

/* Registry slots: the last error seen by the handler and its traceback. The
   error is kept as a value, so the text is found again only for that very
   error (a string compares by value, a table by identity). */
static const char LAST_ERROR = 'e';
static const char LAST_TRACEBACK = 't';

const char *clank_error_message(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TSTRING || lua_type(L, idx) == LUA_TNUMBER) {
    lua_pushstring(L, lua_tostring(L, idx));
  } else if (luaL_callmeta(L, idx, "__tostring")) {
    if (!lua_isstring(L, -1)) {
      lua_pop(L, 1);
      lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, idx));
    }
  } else {
    lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, idx));
  }
  return lua_tostring(L, -1);
}

int clank_traceback_handler(lua_State *L) {
  lua_settop(L, 1);
  const char *msg = clank_error_message(L, 1);
  luaL_traceback(L, L, msg, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &LAST_TRACEBACK);
  lua_pop(L, 1);
  lua_pushvalue(L, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &LAST_ERROR);
  return 1;
}

int clank_pcall(lua_State *L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs; /* the function's slot */
  lua_pushcfunction(L, clank_traceback_handler);
  lua_insert(L, base);
  int status = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  return status;
}

const char *clank_error_text(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &LAST_ERROR);
  int same = lua_rawequal(L, -1, idx);
  lua_pop(L, 1);
  if (same) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &LAST_TRACEBACK);
    if (lua_isstring(L, -1)) return lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return clank_error_message(L, idx);
}
