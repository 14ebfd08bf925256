/* Driving a request's coroutine (drive.c): the entries it runs, its
   resumption, its end. */
#ifndef CLANK_DRIVE_H
#define CLANK_DRIVE_H

#include <lua.h>

#include "host/exchange.h"

/* The coroutine bodies, one for each kind of route, called with what
   on_message pushed (dispatch.c):
   an app route: [handler, request or nil, context fn or nil, exchange]; */
int clank_drive_route_entry(lua_State *co);
/* the bridge: [bridge, request or maker or nil, context fn or nil, view,
   answer, exchange] or [handle_task, bridge, request, context fn or nil,
   exchange]; */
int clank_drive_bridge_entry(lua_State *co);
/* /__clank/mcp: [env, request, context fn]; */
int clank_drive_mcp_entry(lua_State *co);
/* views (SPEC §11): [live, request, context], live:page or live:http. */
int clank_drive_page_entry(lua_State *co);
int clank_drive_live_http_entry(lua_State *co);

/* Resumes x's coroutine with nargs values; returns 1 while it waits, 0 once
   it ended (answered, its exchange back in the pool). */
int clank_drive_run(exchange_t *x, int nargs);
/* The task's resume (clank_task_t.resume) and on_deadline of every exchange. */
void clank_drive_resume(clank_task_t *t, int nargs);
void clank_drive_timed_out(clank_task_t *t);
/* The client went away while x's handler waits: its signal aborts. */
void clank_drive_client_gone(exchange_t *x);

#endif
