/* The Lua request table of SPEC §2: { method, url, path, query, headers,
   body, scheme }. */
#ifndef CLANK_LUA_REQUEST_H
#define CLANK_LUA_REQUEST_H

#include <lua.h>

#include "http/request.h"

void clank_request_push(lua_State *L, const clank_request_t *r);
/* Pushes a copy of r that makes its request table when called (with no
   arguments), for a handler that may never look at it. */
void clank_request_push_maker(lua_State *L, const clank_request_t *r);

#endif
