/* clank.AbortSignal: signal.aborted, signal.reason, signal:onAbort(fn) (SPEC §4). */
#ifndef CLANK_ABORT_H
#define CLANK_ABORT_H

#include <lua.h>

#define CLANK_ABORT_MT "clank.AbortSignal"

/* Pushes a new signal, not aborted. */
void clank_abort_push(lua_State *L);
/* Aborts the signal at idx with reason (once; later calls do nothing) and
   runs its listeners, each protected: a failing listener is logged. idx may
   also be a holder (below): its signal aborts, or, not made yet, is made
   aborted with the first reason when it is. */
void clank_abort_fire(lua_State *L, int idx, const char *reason);

/* A lazy signal: any table may hold one (a request's ctx does), made when
   first asked for, under a key of this module's. The value on top, when it
   is a holder, is replaced with its signal (made now); any other value is
   left as it is. */
void clank_abort_resolve(lua_State *L);

#endif
