/* The C modules of `require "clank"`, as one luaL_Reg table (like Lua's linit.c). */
#ifndef CLANK_MODULES_H
#define CLANK_MODULES_H

#include <lua.h>

int luaopen_clank_core(lua_State *L);
int luaopen_clank_json(lua_State *L);
int luaopen_clank_schema(lua_State *L);
int luaopen_clank_action(lua_State *L);
int luaopen_clank_runner(lua_State *L);
int luaopen_clank_bridge(lua_State *L);
int luaopen_clank_render_core(lua_State *L);
int luaopen_clank_db_sqlite(lua_State *L);
int luaopen_clank_db_postgres(lua_State *L);
int luaopen_clank_fetch_core(lua_State *L);
int luaopen_clank_multipart(lua_State *L);

/* Registers every C module in package.preload, so `require` finds them
   inside clank-run without searching the file system. */
void clank_preload_modules(lua_State *L);

#endif
