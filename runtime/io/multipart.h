/* clank.multipart: request:form()'s multipart parser (util/multipart.c) for Lua. */
#ifndef CLANK_IO_MULTIPART_H
#define CLANK_IO_MULTIPART_H

#include <lua.h>

int luaopen_clank_multipart(lua_State *L);

#endif
