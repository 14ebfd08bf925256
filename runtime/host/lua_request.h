/* The Lua request table of SPEC §2: { method, url, path, query, headers,
   body, scheme }. */
#ifndef CLANK_LUA_REQUEST_H
#define CLANK_LUA_REQUEST_H

#include <lua.h>

#include "agent/bridge.h"
#include "http/request.h"

/* The held slot of the host (core/scheduler.h), after the agent layer's. */
enum {
  CLANK_HELD_MAKER_MT = CLANK_HELD_AGENT_END, /* the metatable of requests kept as bytes */
  CLANK_HELD_HOST_END
};
_Static_assert(CLANK_HELD_HOST_END <= CLANK_HELD_MAX, "more held slots than CLANK_HELD_MAX");

void clank_lua_request_push(lua_State *L, const clank_request_t *r);

/* The request's and a route answer's field names held as Lua strings, so the request path never
   interns a C string: clank_names_push pushes their table (name → at its index) and returns its
   stack index; CLANK_NAME_META holds the requests' metatable. */
enum {
  CLANK_NAME_METHOD = 1,
  CLANK_NAME_URL,
  CLANK_NAME_PATH,
  CLANK_NAME_QUERY,
  CLANK_NAME_HEADERS,
  CLANK_NAME_BODY,
  CLANK_NAME_SCHEME,
  CLANK_NAME_PARAMS,
  CLANK_NAME_SCHEME_VALUE, /* request.scheme: "http", or the public origin's (SPEC §13) */
  CLANK_NAME_STATUS,
  CLANK_NAME_COOKIES,
  CLANK_NAME_STREAM,
  CLANK_NAME_META
};
int clank_names_push(lua_State *L);
/* clank_lua_request_push with the names' table at index names. */
void clank_lua_request_push_in(lua_State *L, const clank_request_t *r, int names);
/* [request, value] → request[name] = value (raw), the value popped; the
   names' table at index names. */
void clank_lua_request_set_in(lua_State *L, int names, int name);
/* Pushes a copy of r that makes its request table when called (with no
   arguments), for a handler that may never look at it. */
void clank_lua_request_push_maker(lua_State *L, const clank_request_t *r);

#endif
