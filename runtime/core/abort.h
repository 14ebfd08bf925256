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

/* 1 when the value at idx is an aborted signal, 0 when it is one not
   aborted, -1 when it is no signal. */
int clank_abort_state(lua_State *L, int idx);
/* signal:onAbort(fn) for the signal at idx and the function on top (popped):
   called at once when the signal is aborted already. Raises when idx holds
   no signal. */
void clank_abort_listen(lua_State *L, int idx);

/* A lazy signal: any table may hold one (a request's ctx does), made when
   first asked for, under a key of this module's. The value on top, when it
   is a holder, is replaced with its signal (made now); any other value is
   left as it is. */
void clank_abort_resolve(lua_State *L);

/* Pushes the running task's signal, the one the runtime's waits watch: a
   request's ctx.signal, which an action's task inherits; a route's, made now
   at its first asking (its driver aborts it when the client goes away); or
   nil outside a task or in one without a signal (clank.spawn's). Returns 1
   when the signal aborts at a deadline of its own (an action's, at its
   timeout), else 0. clank.core.currentSignal, and C waits (clank.password). */
int clank_abort_push_current(lua_State *L);

#endif
