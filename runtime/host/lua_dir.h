/* Where the Lua side of `require "clank"` is (SPEC §16), and the manual. */
#ifndef CLANK_HOST_LUA_DIR_H
#define CLANK_HOST_LUA_DIR_H

#include <lua.h>
#include <stddef.h>

/* $CLANK_LUA_DIR; else relative to the executable: an install
   (<prefix>/bin → <prefix>/share/clank/lua) or a build inside the source
   tree (<src>/build → <src>/lua) or any build folder (<build>/lua, the
   build folder's link to it), else /usr/share/clank/lua. */
void clank_find_lua_dir(char *out, size_t n);

/* The reference manual (the doc folder's Markdown, served at /__clank/docs): $CLANK_DOC_DIR;
   else as above, <prefix>/share/clank/doc, <build>/doc or <src>/doc, else
   /usr/share/clank/doc. */
void clank_find_doc_dir(char *out, size_t n);

/* Puts <dir>/?.lua;<dir>/?/init.lua in front of package.path. */
void clank_prepend_lua_dir(lua_State *L, const char *dir);

#endif
