/* The C modules of `require "clank"`, as one luaL_Reg table (like Lua's
   linit.c): the top of the Lua library, above every layer it registers. */
#ifndef CLANK_MODULES_H
#define CLANK_MODULES_H

#include <lua.h>

/* clank.core (core.c): the runtime's own functions. */
int luaopen_clank_core(lua_State *L);

/* Registers every C module in package.preload, so `require` finds them
   inside clank-run without searching the file system. */
void clank_preload_modules(lua_State *L);

#endif
