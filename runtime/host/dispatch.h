/* Dispatch (SPEC §2 dispatch order): the bridge, the runtime's own paths,
   views, the app's routes, else 404. It is the HTTP server's handler table:
   the server hands it each request's header block and message. */
#ifndef CLANK_DISPATCH_H
#define CLANK_DISPATCH_H

#include <lua.h>

#include "http/server.h"
#include "agent/bridge.h"

struct clank_gen_s;
struct clank_route_s;
struct exchange_s;

/* What dispatch keeps for a connection: the server's data slot. */
typedef struct clank_conn_state_s {
  const struct clank_route_s *route; /* chosen at the header block */
  struct clank_gen_s *gen;           /* the generation it belongs to, held until the handler runs */
  int lua_request;                   /* registry ref (in gen's state) of the request table the
                                        header block already made, 0 when none */
  struct exchange_s *exchange;       /* the handler in flight, if any */
  struct clank_live_s *live;         /* the live channel it became, if any */
  unsigned char kind;                /* metrics: its kind (host/metrics.h), 0: by path */
  unsigned char handoff_to;          /* the worker it is being handed to, + 1 (host/handoff.h) */
  /* What clank_bridge_head_passes found at the header block (NULL: nothing),
     valid while the request has as many headers as then (no trailers). */
  const void *bridge_passed;
  int bridge_nheaders;
  /* The view it was found on (bridge_view in dispatch.c), read again at the
     message when the head's bytes have not moved since (no body in it). */
  clank_bridge_view_t bridge_view;
  const char *bridge_head;
} clank_conn_state_t;

extern const clank_http_handler_t clank_dispatch_handler;

/* A retired generation's bound passed: its requests are dropped (their
   connections closed) so its state can close. */
void clank_dispatch_drop(clank_server_t *s, struct clank_gen_s *g);
/* After the loop ended: frees what connections still held. */
void clank_dispatch_free_leftovers(clank_server_t *s);

#endif
