/* The one protected call (STYLE: every Lua call from a libuv callback goes
   through it). Its message handler leaves the error value as it is, so
   tables (ValidationError, ActionError) keep their identity and messages stay
   free of stack dumps; the traceback is kept beside it, as data, for the log. */
#ifndef CLANK_PROTECT_H
#define CLANK_PROTECT_H

#include <lua.h>

/* The message handler: returns its argument unchanged and records the
   error's text with a traceback as the state's last traceback. */
int clank_traceback_handler(lua_State *L);

/* lua_pcall with clank_traceback_handler under the function and its nargs
   arguments; the handler is removed again whatever happens. */
int clank_pcall(lua_State *L, int nargs, int nresults);

/* Pushes the text to log for the error at idx: its last recorded traceback
   when it belongs to this error, else its message (tostring, or a
   description of a non-string value). Returns the pushed string. */
const char *clank_error_text(lua_State *L, int idx);

/* Pushes the error's plain message (no traceback). Returns it. */
const char *clank_error_message(lua_State *L, int idx);

#endif
