/* core/base.c's type: what Lua's own type answers, for a value of every type and for
   each of them in a call, and the same error for no argument. Lua's own, kept before the
   replacement, is the oracle. Exit status 0 when every case passes; each failure prints a
   line. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <string.h>

#include "core/base.h"

#include "../check.h"

/* Runs chunk, which returns one string, and checks it is want. */
static void check_chunk(lua_State *L, const char *chunk, const char *want) {
  int rc = luaL_dostring(L, chunk);
  const char *got = lua_tostring(L, -1);
  CHECK(rc == LUA_OK && got && strcmp(got, want) == 0, "%s\n  gave %s, want %s", chunk,
        got ? got : "(not a string)", want);
  lua_settop(L, 0);
}

int main(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lua_getglobal(L, "type");
  lua_setglobal(L, "lua_type"); /* Lua's own */
  clank_base_install(L);
  check_chunk(L, "return tostring(type ~= lua_type)", "true");
  /* a value of each of Lua's nine types, and a string that is a type's name */
  const char *values =
      "local values = { nil, false, true, 0, 1.5, 'nil', {}, print, type,"
      "  coroutine.create(function() end), io.stdout, string.byte }"
      "local names = {}"
      "for i = 1, 12 do"
      "  names[#names + 1] = type(values[i]) .. '=' .. lua_type(values[i])"
      "end";
  char chunk[1024];
  snprintf(chunk, sizeof chunk, "%s return table.concat(names, ' ')", values);
  check_chunk(L, chunk,
              "nil=nil boolean=boolean boolean=boolean number=number number=number "
              "string=string table=table function=function function=function thread=thread "
              "userdata=userdata function=function");
  /* a light userdata (LUA_TLIGHTUSERDATA), and the names are the very strings */
  lua_pushlightuserdata(L, L);
  lua_setglobal(L, "light");
  check_chunk(L, "return type(light) .. tostring(type(light) == lua_type(light))", "userdatatrue");
  /* no argument: the same error as Lua's own (nil is an argument, none is not), whose message
     names the function as the caller does */
  check_chunk(L,
              "local _, mine = pcall(type); local _, its = pcall(lua_type);"
              "mine, its = mine:gsub(\"'type'\", \"'?'\"), its:gsub(\"'lua_type'\", \"'?'\");"
              "return mine == its and mine or (mine .. ' / ' .. its)",
              "bad argument #1 to '?' (value expected)");
  check_chunk(L, "local _, e = pcall(function() return type() end); return (e:gsub('^.-:1: ', ''))",
              "bad argument #1 to 'type' (value expected)");
  check_chunk(L, "return select('#', type(nil, 2)) .. type(nil, 2)", "1nil");
  lua_close(L);
  if (failures) fprintf(stderr, "%d of %d checks failed\n", failures, checks);
  return failures != 0;
}
