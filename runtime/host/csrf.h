/* The CSRF rule for the app's routes (SPEC §15). */
#ifndef CLANK_CSRF_H
#define CLANK_CSRF_H

#include "host/generation.h"
#include "http/server.h"

/* Whether a request for a route of an unsafe method (POST, PUT, PATCH,
   DELETE) may go on: not `sec-fetch-site: cross-site`, and an Origin, when
   there is one, that is the server's or in allowedOrigins. When it may not,
   the 403 is written. */
int clank_csrf_check(clank_conn_t *c, clank_gen_t *g);

/* Whether the request's Origin passes bridge.checkOrigin (SPEC §5, the one
   source of the rule) under the app's allowedOrigins; with bridge_rules,
   also the bridge's requireOrigin. A failing check is logged, naming what. */
int clank_origin_allowed(clank_conn_t *c, clank_gen_t *g, int bridge_rules, const char *what);

#endif
