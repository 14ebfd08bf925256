/* PostgreSQL LISTEN/NOTIFY on the libuv loop: the cross-instance transport of
   Clank's pub/sub (several clank-run instances on one PostgreSQL).

   One connection per listener, never blocking the loop, that LISTENs on one
   channel and sends that channel's notifications in order. It knows no host
   and no Lua: it hands what happens up through the callbacks of
   clank_pglisten_events_t, as libuv does. Delivery is at most once: what is
   queued when the connection drops is lost, and a notification sent while
   a listener is reconnecting never reaches it. */
#ifndef CLANK_PG_LISTEN_H
#define CLANK_PG_LISTEN_H

#include <stddef.h>
#include <uv.h>

/* Longest payload pg_notify takes (the server's limit is under 8000 bytes). */
#define CLANK_PGLISTEN_PAYLOAD_MAX 7999
/* Most payload bytes waiting to be sent before notify refuses more. */
#define CLANK_PGLISTEN_QUEUE_MAX (1024 * 1024)

typedef struct clank_pglisten_s clank_pglisten_t;
typedef struct clank_pglisten_events_s {
  void *ud;
  /* a notification on the channel from another backend (payload not NUL-terminated) */
  void (*notified)(void *ud, const char *payload, size_t len);
  /* up=1: connected and LISTENing (at first connect and after every reconnect);
     up=0: the connection was lost or a connect attempt failed, with a one-line reason
     (the password never appears in it). Called on every change of state only
     (not once per failed retry while it stays down). */
  void (*state)(void *ud, int up, const char *reason);
} clank_pglisten_events_t;

/* Checks the URL at once (postgres://, postgresql:// or key=value conninfo; a malformed one →
   NULL with the reason in err), then connects in the background and LISTENs on `channel`
   (quoted as an identifier: any string of 1..63 bytes). While down it retries, 100 ms doubling
   to 5 s. No callback runs before this returns. A connect attempt (resolution, connection,
   LISTEN) is given the URL's connect_timeout (at least 2 s, as libpq has it) or 10 s. TCP
   keepalives (idle 10 s, interval 5 s, 3 probes) apply unless the URL sets them. */
clank_pglisten_t *clank_pglisten_open(uv_loop_t *loop, const char *url, const char *channel,
                                      clank_pglisten_events_t ev, char *err, size_t errlen);
/* Queues pg_notify(channel, payload) (payload: text of at most 7999 bytes, no NUL): sent in
   order, on the listening connection, never blocking. Returns 0, or -1 when it is down or its
   queue would hold over 1 MiB (the notification is dropped: at-most-once delivery), or the
   payload is longer than 7999 bytes or holds a NUL. Safe to call from the callbacks. */
int clank_pglisten_notify(clank_pglisten_t *l, const char *payload, size_t len);
/* 1 while connected and listening. */
int clank_pglisten_up(const clank_pglisten_t *l);
/* Stops: no callback runs after it; handles are closed through their close callbacks and the
   memory freed after the last one (uv_run must go on until then, as for any handle). Safe to
   call from the callbacks. */
void clank_pglisten_close(clank_pglisten_t *l);

#endif
