/* A route answer's cookies (SPEC §15) as set-cookie header lines. */
#ifndef CLANK_SET_COOKIE_H
#define CLANK_SET_COOKIE_H

#include <lua.h>

#include "http/server.h"

/* Writes one set-cookie line per entry of the cookies table at idx:
   name = value string, or name = { value, maxAge?, path = "/", httpOnly = true,
   secure = secure_default, sameSite = "Lax" }, in name order. Returns NULL, or
   a message (on co's stack) naming what is wrong, with nothing more written. */
const char *clank_write_cookies(lua_State *co, clank_conn_t *c, int idx, int secure_default);

#endif
