/* Lua's incremental collector driven from outside its allocations (the host
   runs a cycle's steps while its loop is idle: host/idle_gc.c).

   Lua pays for a cycle as it allocates: once a cycle started, each allocated
   kilobyte marks or sweeps a fixed amount of the heap (its step multiplier),
   so a burst of allocation that meets a cycle in progress finishes it there,
   however much of it idle time could have done. Credit keeps a burst from
   doing so: the next kilobytes allocated do no collection work. */
#ifndef CLANK_COLLECTOR_H
#define CLANK_COLLECTOR_H

#include <lua.h>
#include <stddef.h>

/* One basic step of the incremental collector (starting a cycle if none
   runs): 1 when it completed the cycle. A collector the app stopped stays
   stopped: 0 and nothing done. */
int clank_collector_step(lua_State *L);

/* The next kib kilobytes L allocates do no collection work (until a step or
   a full collection sets the collector's own pace again). */
void clank_collector_credit(lua_State *L, size_t kib);

/* The kilobytes L's heap holds. */
size_t clank_collector_kib(lua_State *L);

#endif
