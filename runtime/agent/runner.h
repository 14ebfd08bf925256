/* clank.runner (SPEC §7): actionRunner's signals and revisions, in C. */
#ifndef CLANK_RUNNER_H
#define CLANK_RUNNER_H

#include <lua.h>

int luaopen_clank_runner(lua_State *L);

#endif
