/* clank.bridge seen from C: clank-run answers early (before the body) and
   runs the rest of handle() in a request's task. */
#ifndef CLANK_BRIDGE_H
#define CLANK_BRIDGE_H

#include <lua.h>

#define CLANK_BRIDGE_MT "clank.Bridge"
/* actionTimeout when the app gives none (ms); Lua sees it as
   clank.bridge.DEFAULT_ACTION_TIMEOUT. */
#define CLANK_BRIDGE_DEFAULT_ACTION_TIMEOUT 30000

/* [bridge, request] → the early answer (a response table) or nil when the
   body is needed. Runs steps 1–7 as far as they go without the body. Never
   waits. */
int clank_bridge_head(lua_State *L);
/* [bridge, request, context source] → the response table; the context
   source is a table, a function(request) run only when an action runs, or
   nil. Must run in a task. */
int clank_bridge_handle_task(lua_State *L);
/* Pushes the manifest's canonical JSON: the bytes GET /manifest serves. */
void clank_bridge_push_manifest(lua_State *L, int idx);
/* Pushes the name → action table, and the contract hash (the etag's 16 hex digits). */
void clank_bridge_push_actions(lua_State *L, int idx);
void clank_bridge_push_contract_hash(lua_State *L, int idx);
/* Pushes run(action, input, ctx): an action run as the bridge runs it (the
   signal, the timeout), giving true, output / false, error / nil, "timeout". */
void clank_bridge_push_runner(lua_State *L, int idx);
/* The bridge's maxRequestBytes. */
long long clank_bridge_max_bytes(lua_State *L, int idx);

/* SPEC §2: the paths the runtime answers itself (the bridge, /__clank/,
   views), where no app route can live. bridge.isReservedPath in Lua. */
int clank_bridge_reserved_path(const char *p, size_t n, int has_views);

int luaopen_clank_bridge(lua_State *L);

#endif
