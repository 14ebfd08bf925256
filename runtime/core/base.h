/* Lua base functions that a generation's state serves faster than Lua's own. */
#ifndef CLANK_BASE_H
#define CLANK_BASE_H

#include <lua.h>

/* Replaces the global `type` (after luaL_openlibs, before any module keeps it in a local) with
   one that answers the same names, held as upvalues: Lua's own pushes each name from its C
   string, a lookup in the string cache and a strcmp on every call. Same results and the same
   error for a missing argument. */
void clank_base_install(lua_State *L);

#endif
