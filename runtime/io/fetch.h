/* clank.fetch's C side (SPEC §12): requests over the pool of fetch_pool.h. */
#ifndef CLANK_FETCH_H
#define CLANK_FETCH_H

#include <lua.h>

int luaopen_clank_fetch_core(lua_State *L);

#endif
