/* ActionError, the runtime's error type (SPEC §4): a table with code,
   message, status (and details), whose metatable is registry[CLANK_ACTION_ERROR_MT]. */
#ifndef CLANK_ERROR_H
#define CLANK_ERROR_H

#include <lua.h>

#define CLANK_ACTION_ERROR_MT "clank.ActionError"

/* Pushes clank.ActionError(code, message, status); details stay nil. */
void clank_action_error_push(lua_State *L, const char *code, const char *message, int status);
int clank_action_error_is(lua_State *L, int idx);
/* Pushes the metatable of ActionErrors (made on first use). */
void clank_action_error_metatable(lua_State *L);
/* 1 when the value at idx is a table whose metatable is registry[mt]. */
int clank_has_metatable(lua_State *L, int idx, const char *mt);

#endif
