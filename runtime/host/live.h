/* The live channel of SPEC §11: a view session's WebSocket (RFC 6455),
   framed by wslay over a connection the HTTP layer upgraded, bound to the
   generation's clank.live object (lua/clank/live), which owns the sessions. */
#ifndef CLANK_LIVE_H
#define CLANK_LIVE_H

#include "http/server.h"

struct clank_host_s;
struct clank_gen_s;
typedef struct clank_live_s clank_live_t;

/* At the header block of GET /__clank/sessions/:id/live: answers 403 (Origin),
   400 or 426 (not a WebSocket handshake) and returns 0, or returns 1 when
   the upgrade may go ahead. */
int clank_live_check(clank_conn_t *c, struct clank_gen_s *g);
/* The Origin rules of SPEC §5 for the live paths (pages aside): answers 403
   and returns 0 when the request's Origin is refused. */
int clank_live_origin(clank_conn_t *c, struct clank_gen_s *g);
/* At the end of that request: answers 101, takes the connection and hands
   the session to the generation's live object (the inspector's when
   inspector is set, SPEC §16). request_idx: the Lua request
   table on g's main stack. */
void clank_live_accept(clank_conn_t *c, struct clank_host_s *h, struct clank_gen_s *g,
                       const char *id, size_t id_len, int request_idx, int inspector);
/* From on_head, after clank_live_check: upgrades only to close at once with
   `code` (1013: the session's worker is restarting, SPEC §13). */
void clank_live_refuse(clank_conn_t *c, uint16_t code, const char *reason);
/* The connection closes: the session goes idle, the channel is freed. */
void clank_live_closed(clank_live_t *live);
/* A reload switched generations: every channel on `from` moves to `to`,
   whose live object mounts the session afresh and sends `reload`. */
void clank_live_move(struct clank_host_s *h, struct clank_gen_s *from, struct clank_gen_s *to);
/* A reload failed and the running generation stays: its live object tells
   the open pages err (file:line first, then the traceback) when in
   development (live:appFailed). */
void clank_live_app_failed(struct clank_host_s *h, const char *err);
/* Stopping: every channel closes with 1012 (the client reconnects). */
void clank_live_stop(struct clank_host_s *h);
/* A served stylesheet changed: every live page re-fetches its stylesheets. */
void clank_live_css(struct clank_host_s *h);
/* Once a second: the current generation's live object ends idle sessions. */
void clank_live_tick(struct clank_host_s *h);

#endif
