/* Where a parsed request goes (SPEC §2 dispatch order): the bridge, the
   runtime's own paths, views, the app's routes, else 404. */
#ifndef CLANK_DISPATCH_H
#define CLANK_DISPATCH_H

#include "http/server.h"

struct clank_gen_s;

/* At the end of the header block. Returns 1 when the body should be read for
   a handler, 0 when the request was answered early (the body is discarded). */
int clank_dispatch_head(clank_conn_t *c);
/* At the end of the message: runs the handler chosen at the header block.
   Returns 1 while the handler waits (the connection pauses), else 0. */
int clank_dispatch_message(clank_conn_t *c);
/* The connection goes away while its handler waits. */
void clank_dispatch_abandon(clank_conn_t *c);
/* The client closed its side while its handler waits (the answer is still
   written, in case it only half-closed). */
void clank_dispatch_client_gone(clank_conn_t *c);
/* The connection closes before its request reached a handler: lets go of
   the generation it held. */
void clank_dispatch_release(clank_conn_t *c);
/* A retired generation's bound passed: its requests are dropped (their
   connections closed) so its state can close. */
void clank_dispatch_drop(clank_server_t *s, struct clank_gen_s *g);
/* Frees the generation's spare exchanges (before it closes). */
void clank_dispatch_forget(struct clank_gen_s *g);

#endif
