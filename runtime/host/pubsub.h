/* Topics beyond one Lua state (issue 28). clank.publish delivers in its own
   state (lua/clank/pubsub.lua) and hands each publish here through
   clank.core.relay, which this module installs in the current generation
   when there is anyone else to tell:
   - the other workers of --workers N: a datagram to the master, which sends
     it on to every other worker (host/master.c);
   - the other instances on one PostgreSQL (--pubsub URL, CLANK_PUBSUB_URL or
     app.pubsub): NOTIFY on a channel named after the app, heard by every
     instance's LISTEN (io/pg_listen.h).
   Publishes of one loop turn go out together, as records "topic[ payload]\n"
   (a topic has no space and canonical JSON no newline); to PostgreSQL, those
   of the turns within 2 ms of the last notification go in the next one. What comes in is
   given to the current generation's pubsub.receive. Delivery is at most
   once: what a full buffer or a PostgreSQL outage drops only delays a view,
   since views read their state in load; after an outage every subscribed
   session re-loads (pubsub.resync). */
#ifndef CLANK_PUBSUB_H
#define CLANK_PUBSUB_H

#include <stddef.h>

#include "host/master.h"

#define CLANK_TOPICS_DGRAM (64 * 1024) /* the longest datagram between workers */
#define CLANK_TOPICS_BUFFER (1 << 20)  /* the send buffer each end of it asks for */

struct clank_host_s;
struct clank_gen_s;

/* A fresh instance id: CLANK_INSTANCE_ID hex digits and a NUL; 0, or -1. */
int clank_pubsub_instance(char out[CLANK_INSTANCE_ID + 1]);

/* Opens what h relays through: the worker's datagram socket (h->worker) and
   the PostgreSQL listener (url: NULL or "" for none). Returns 0, or -1 with
   the reason in err (a malformed URL). */
int clank_pubsub_start(struct clank_host_s *h, const char *url, char *err, size_t errlen);
/* Installs clank.core.relay's closure in g (a generation loaded or switched in). */
void clank_pubsub_attach(struct clank_host_s *h, struct clank_gen_s *g);
/* Why topics do not reach every instance now (health's "degraded"), as a JSON
   string with its quotes, NUL-terminated; or NULL. */
const char *clank_pubsub_trouble(const struct clank_host_s *h);
/* Stops relaying; the handles close with the loop's others (teardown's walk). */
void clank_pubsub_stop(struct clank_host_s *h);
/* After the loop closed: frees what is left. */
void clank_pubsub_free(struct clank_host_s *h);

#endif
