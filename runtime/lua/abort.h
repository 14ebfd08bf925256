/* clank.AbortSignal: signal.aborted, signal.reason, signal:onAbort(fn) (SPEC §4). */
#ifndef CLANK_ABORT_H
#define CLANK_ABORT_H

#include <lua.h>

#define CLANK_ABORT_MT "clank.AbortSignal"

/* Pushes a new signal, not aborted. */
void clank_abort_push(lua_State *L);
/* Aborts the signal at idx with reason (once; later calls do nothing) and
   runs its listeners, each protected: a failing listener is logged. */
void clank_abort_fire(lua_State *L, int idx, const char *reason);

#endif
