/* PostgreSQL LISTEN/NOTIFY on the libuv loop (pg_listen.h).

   libpq in non-blocking mode, reached as clank.db.postgres reaches it
   (pg_connect.c): a host name is resolved with uv_getaddrinfo, then
   PQconnectStartParams and PQconnectPoll are driven by a uv_poll on the
   socket, under one timer for the whole attempt. Once connected it sends
   LISTEN and is up when that succeeds.

   While up the socket is always watched for reading (notifications, the
   results of our pg_notify, the server going away) and for writing only
   while libpq holds unsent bytes or a notification waits to be sent: one
   pg_notify at a time, the next once the previous result is in, so they go
   out in order on the listening connection.

   Any failure tears the connection down, drops the queue and waits on the
   same timer before the next attempt, 100 ms doubling to 5 s. The state
   callback hears only changes, so a listener that stays down is reported
   once.

   Callbacks may call close: every place that runs one checks for it
   afterwards and touches nothing more. The struct is freed once closed and
   its last handle or look-up has called back. */
#include "io/pg_listen.h"

#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/pg_connect.h"

#define CHANNEL_MAX 63 /* NAMEDATALEN - 1: a longer name the server would truncate */
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000
#define CONNECT_TIMEOUT_MS 10000
#define CONNECT_TIMEOUT_MIN_S 2 /* libpq's own floor for connect_timeout */
#define NOTIFY_SQL "SELECT pg_notify($1, $2)"

enum {
  S_WAITING,   /* for the timer: the first attempt, or the next after a failure */
  S_RESOLVING, /* the host name */
  S_CONNECTING,
  S_LISTENING, /* LISTEN sent, its result not in yet */
  S_UP,
  S_CLOSED
};

typedef struct pending_s {
  struct pending_s *next;
  size_t len;
  char payload[]; /* NUL-terminated: libpq reads text parameters up to the NUL */
} pending_t;

/* A look-up of its own, so that one abandoned (timeout, close) can still
   call back while the next attempt resolves again. */
typedef struct resolve_s {
  uv_getaddrinfo_t req;
  clank_pglisten_t *l;
} resolve_t;

struct clank_pglisten_s {
  uv_loop_t *loop;
  clank_pglisten_events_t ev;
  clank_pg_target_t target;
  char *channel;
  char *listen_sql; /* LISTEN "channel" */
  uint64_t connect_timeout_ms, backoff_ms;
  int state;
  int told; /* the last state the callback heard: -1 none yet, 0 down, 1 up */
  PGconn *pg;
  uv_poll_t *poll;
  uv_timer_t timer;     /* the attempt's deadline, or the wait before the next */
  resolve_t *resolving; /* the look-up the attempt waits for */
  int handles;          /* handles and look-ups still to call back */
  int listen_failed;    /* a result of LISTEN was an error */
  int in_flight;        /* a pg_notify awaits its result */
  int flushing;         /* libpq holds bytes not yet sent */
  pending_t *queue, *queue_tail;
  size_t queued; /* payload bytes in the queue */
};

static void on_poll(uv_poll_t *h, int status, int events);
static void on_timer(uv_timer_t *t);

/* An idle listener sends nothing, so without keepalives a server gone
   silent (a host down, a cable out) would go unnoticed for the kernel's two
   hours; with them, within about 25 s. libpq ignores them on a unix socket. */
static const char *const keepalive_defaults[] = {
    "keepalives_idle", "10", "keepalives_interval", "5", "keepalives_count", "3", NULL};

/* ---- freeing ---- */

static void drop_queue(clank_pglisten_t *l) {
  for (pending_t *p = l->queue, *next; p; p = next) {
    next = p->next;
    free(p);
  }
  l->queue = l->queue_tail = NULL;
  l->queued = 0;
}

static void maybe_free(clank_pglisten_t *l) {
  if (l->state != S_CLOSED || l->handles > 0) return;
  clank_pg_target_free(&l->target);
  free(l->channel);
  free(l->listen_sql);
  free(l);
}

static void handle_closed(uv_handle_t *h) {
  clank_pglisten_t *l = h->data;
  if (h != (uv_handle_t *)&l->timer) free(h);
  l->handles--;
  maybe_free(l);
}

static void poll_close(clank_pglisten_t *l) {
  if (l->poll == NULL) return;
  uv_close((uv_handle_t *)l->poll, handle_closed);
  l->poll = NULL;
}

/* Watches the socket for events. While connecting libpq may open another
   socket under the same number, so each step of it watches afresh. */
static int poll_watch(clank_pglisten_t *l, int events) {
  int fd = PQsocket(l->pg);
  if (fd < 0) return UV_EBADF;
  if (l->poll == NULL) {
    uv_poll_t *h = malloc(sizeof *h);
    if (h == NULL) return UV_ENOMEM;
    int r = uv_poll_init_socket(l->loop, h, fd);
    if (r < 0) {
      free(h);
      return r;
    }
    h->data = l;
    l->poll = h;
    l->handles++;
  }
  return uv_poll_start(l->poll, events, on_poll);
}

/* The connection and what hangs on it, gone; the timer stays. The poll is
   closed before PQfinish closes the socket under it. */
static void drop_connection(clank_pglisten_t *l) {
  poll_close(l);
  if (l->pg) PQfinish(l->pg);
  l->pg = NULL;
  if (l->resolving) { /* its callback frees it */
    uv_cancel((uv_req_t *)&l->resolving->req);
    l->resolving = NULL;
  }
  drop_queue(l);
  l->in_flight = l->flushing = 0;
}

/* ---- telling the host ---- */

/* The message scrubbed of the password, on one line. */
static char *one_line(const clank_pglisten_t *l, const char *msg) {
  char *s = clank_pg_scrub(&l->target, msg);
  if (s == NULL) return NULL;
  char *w = s;
  int gap = 0;
  for (const char *r = s; *r; r++) {
    if (*r == ' ' || *r == '\n' || *r == '\t' || *r == '\r') {
      gap = w > s;
      continue;
    }
    if (gap) *w++ = ' ';
    gap = 0;
    *w++ = *r;
  }
  *w = '\0';
  return s;
}

/* Returns 0, or -1 when the callback closed the listener. */
static int tell(clank_pglisten_t *l, int up, const char *reason) {
  if (l->told == up) return 0;
  l->told = up;
  if (l->ev.state) l->ev.state(l->ev.ud, up, reason);
  return l->state == S_CLOSED ? -1 : 0;
}

/* The attempt failed or the connection was lost: wait, then try again. */
static void down(clank_pglisten_t *l, const char *why) {
  char *reason = one_line(l, why); /* why may be libpq's, freed with the connection */
  drop_connection(l);
  l->state = S_WAITING;
  uv_timer_start(&l->timer, on_timer, l->backoff_ms, 0);
  l->backoff_ms = l->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : l->backoff_ms * 2;
  tell(l, 0, reason ? reason : "out of memory");
  free(reason);
}

/* ---- connecting ---- */

static void connected(clank_pglisten_t *l) {
  if (PQsetnonblocking(l->pg, 1) != 0 || !PQsendQuery(l->pg, l->listen_sql)) {
    down(l, PQerrorMessage(l->pg));
    return;
  }
  l->state = S_LISTENING;
  l->listen_failed = 0;
  int r = PQflush(l->pg);
  if (r < 0) {
    down(l, PQerrorMessage(l->pg));
    return;
  }
  l->flushing = r == 1;
  r = poll_watch(l, UV_READABLE | (l->flushing ? UV_WRITABLE : 0));
  if (r < 0) down(l, uv_strerror(r));
}

static void connect_step(clank_pglisten_t *l) {
  int events = 0;
  int st = clank_pg_connect_poll(l->pg, &events);
  poll_close(l);
  if (st > 0) {
    connected(l);
    return;
  }
  if (st < 0) {
    down(l, PQerrorMessage(l->pg));
    return;
  }
  int r = poll_watch(l, events);
  if (r < 0) down(l, uv_strerror(r));
}

static void start_connect(clank_pglisten_t *l, const char *hostaddr) {
  char err[512];
  l->pg = clank_pg_connect_start(&l->target, hostaddr, keepalive_defaults, err, sizeof err);
  if (l->pg == NULL) {
    down(l, err);
    return;
  }
  l->state = S_CONNECTING;
  /* libpq: before the first PQconnectPoll, behave as if it asked for writing */
  int r = poll_watch(l, UV_WRITABLE);
  if (r < 0) down(l, uv_strerror(r));
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  resolve_t *rs = req->data;
  clank_pglisten_t *l = rs->l;
  int current = l->resolving == rs;
  free(rs);
  l->handles--;
  if (!current) { /* abandoned: timed out, or closed */
    if (res) uv_freeaddrinfo(res);
    maybe_free(l);
    return;
  }
  l->resolving = NULL;
  char ip[64], err[512];
  if (clank_pg_resolved(clank_pg_option(&l->target, "host"), status, res, ip, sizeof ip, err,
                        sizeof err) < 0) {
    down(l, err);
    return;
  }
  start_connect(l, ip);
}

static void attempt(clank_pglisten_t *l) {
  uv_timer_start(&l->timer, on_timer, l->connect_timeout_ms, 0);
  const char *host, *hostaddr;
  clank_pg_route(&l->target, &host, &hostaddr);
  if (host == NULL) {
    start_connect(l, hostaddr);
    return;
  }
  resolve_t *rs = malloc(sizeof *rs);
  if (rs == NULL) {
    down(l, "out of memory");
    return;
  }
  rs->l = l;
  rs->req.data = rs;
  int r = clank_pg_resolve(l->loop, &rs->req, on_resolved, host);
  if (r < 0) {
    free(rs);
    char err[512];
    snprintf(err, sizeof err, "could not resolve host \"%s\": %s", host, uv_strerror(r));
    down(l, err);
    return;
  }
  l->handles++;
  l->resolving = rs;
  l->state = S_RESOLVING;
}

static void on_timer(uv_timer_t *t) {
  clank_pglisten_t *l = t->data;
  char msg[128];
  switch (l->state) {
    case S_WAITING: attempt(l); break;
    case S_RESOLVING:
    case S_CONNECTING:
    case S_LISTENING:
      snprintf(msg, sizeof msg, "timeout: not listening after %llu ms",
               (unsigned long long)l->connect_timeout_ms);
      down(l, msg);
      break;
    default: break;
  }
}

/* ---- up: results, notifications, sending ---- */

/* Reads the results libpq has whole. Returns 0, or -1 when the listener
   went down or was closed. */
static int take_results(clank_pglisten_t *l) {
  PGconn *pg = l->pg;
  if (l->state == S_LISTENING) {
    while (!PQisBusy(pg)) {
      PGresult *r = PQgetResult(pg);
      if (r != NULL) {
        l->listen_failed |= PQresultStatus(r) != PGRES_COMMAND_OK;
        PQclear(r);
        continue;
      }
      if (l->listen_failed) {
        char msg[512];
        snprintf(msg, sizeof msg, "LISTEN failed: %s", PQerrorMessage(pg));
        down(l, msg);
        return -1;
      }
      uv_timer_stop(&l->timer);
      l->state = S_UP;
      l->backoff_ms = BACKOFF_FIRST_MS;
      return tell(l, 1, NULL);
    }
    return 0;
  }
  /* A failed pg_notify (a payload the server refuses) is dropped, like any
     notification that does not make it. */
  while (l->in_flight && !PQisBusy(pg)) {
    PGresult *r = PQgetResult(pg);
    if (r == NULL) l->in_flight = 0;
    PQclear(r);
  }
  return 0;
}

/* Hands over the notifications libpq has read, but our own. Returns 0, or
   -1 when a callback closed the listener. */
static int deliver(clank_pglisten_t *l) {
  PGnotify *n;
  while ((n = PQnotifies(l->pg)) != NULL) {
    int own = n->be_pid == PQbackendPID(l->pg);
    if (!own && l->ev.notified) l->ev.notified(l->ev.ud, n->extra, strlen(n->extra));
    PQfreemem(n);
    if (l->state == S_CLOSED) return -1;
  }
  return 0;
}

/* Sends the oldest waiting notification. Returns 0, or -1 when it went down. */
static int send_next(clank_pglisten_t *l) {
  pending_t *p = l->queue;
  l->queue = p->next;
  if (l->queue == NULL) l->queue_tail = NULL;
  l->queued -= p->len;
  const char *values[2] = {l->channel, p->payload};
  int sent = PQsendQueryParams(l->pg, NOTIFY_SQL, 2, NULL, values, NULL, NULL, 0);
  free(p);
  int r = sent ? PQflush(l->pg) : -1;
  if (r < 0) {
    down(l, PQerrorMessage(l->pg));
    return -1;
  }
  l->in_flight = 1;
  l->flushing = r == 1;
  return 0;
}

static int wants_to_write(const clank_pglisten_t *l) {
  return l->flushing || (l->state == S_UP && !l->in_flight && l->queue != NULL);
}

static void io_step(clank_pglisten_t *l, int events) {
  PGconn *pg = l->pg;
  if (clank_pg_pump(pg, &l->flushing, events) < 0) {
    down(l, PQerrorMessage(pg));
    return;
  }
  if (take_results(l) < 0 || deliver(l) < 0) return;
  if (PQstatus(pg) != CONNECTION_OK) {
    down(l, PQerrorMessage(pg));
    return;
  }
  if (l->state == S_UP && !l->in_flight && !l->flushing && l->queue && send_next(l) < 0) return;
  int r = poll_watch(l, UV_READABLE | (wants_to_write(l) ? UV_WRITABLE : 0));
  if (r < 0) down(l, uv_strerror(r));
}

static void on_poll(uv_poll_t *h, int status, int events) {
  clank_pglisten_t *l = h->data;
  if (status < 0) events = UV_READABLE | UV_WRITABLE; /* libpq finds the error */
  switch (l->state) {
    case S_CONNECTING: connect_step(l); break;
    case S_LISTENING:
    case S_UP: io_step(l, events); break;
    default: break;
  }
}

/* ---- the API ---- */

/* LISTEN "channel", with the quotes inside doubled. */
static char *listen_sql(const char *channel) {
  char *sql = malloc(sizeof "LISTEN \"\"" + 2 * strlen(channel));
  if (sql == NULL) return NULL;
  char *w = sql + sprintf(sql, "LISTEN \"");
  for (const char *r = channel; *r; r++) {
    if (*r == '"') *w++ = '"';
    *w++ = *r;
  }
  strcpy(w, "\"");
  return sql;
}

/* The URL's connect_timeout as libpq reads it (whole seconds, 2 at least),
   or ours when it sets none: an attempt without a limit could wait forever
   on a server that drops packets. */
static uint64_t connect_timeout_ms(const clank_pg_target_t *t) {
  const char *v = clank_pg_option(t, "connect_timeout");
  long s = v ? strtol(v, NULL, 10) : 0;
  if (s <= 0) return CONNECT_TIMEOUT_MS;
  return (uint64_t)(s < CONNECT_TIMEOUT_MIN_S ? CONNECT_TIMEOUT_MIN_S : s) * 1000;
}

clank_pglisten_t *clank_pglisten_open(uv_loop_t *loop, const char *url, const char *channel,
                                      clank_pglisten_events_t ev, char *err, size_t errlen) {
  if (url == NULL) {
    snprintf(err, errlen, "no URL");
    return NULL;
  }
  size_t chlen = channel ? strlen(channel) : 0;
  if (chlen < 1 || chlen > CHANNEL_MAX) {
    snprintf(err, errlen, "the channel must be 1 to %d bytes long", CHANNEL_MAX);
    return NULL;
  }
  clank_pglisten_t *l = calloc(1, sizeof *l);
  if (l == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (clank_pg_target_parse(&l->target, url, err, errlen) < 0) {
    free(l);
    return NULL;
  }
  l->channel = strdup(channel);
  l->listen_sql = listen_sql(channel);
  int r = l->channel && l->listen_sql ? uv_timer_init(loop, &l->timer) : UV_ENOMEM;
  if (r < 0) {
    snprintf(err, errlen, "%s", uv_strerror(r));
    clank_pg_target_free(&l->target);
    free(l->channel);
    free(l->listen_sql);
    free(l);
    return NULL;
  }
  l->loop = loop;
  l->ev = ev;
  l->told = -1;
  l->state = S_WAITING;
  l->backoff_ms = BACKOFF_FIRST_MS;
  l->connect_timeout_ms = connect_timeout_ms(&l->target);
  l->timer.data = l;
  l->handles = 1;
  /* the first attempt from the loop, so that no callback runs before open returns */
  uv_timer_start(&l->timer, on_timer, 0, 0);
  return l;
}

int clank_pglisten_notify(clank_pglisten_t *l, const char *payload, size_t len) {
  if (l->state != S_UP || len > CLANK_PGLISTEN_PAYLOAD_MAX) return -1;
  if (len > 0 && memchr(payload, '\0', len)) return -1; /* payload may be NULL when empty */
  if (l->queued + len > CLANK_PGLISTEN_QUEUE_MAX) return -1;
  pending_t *p = malloc(sizeof *p + len + 1);
  if (p == NULL) return -1;
  p->next = NULL;
  p->len = len;
  if (len > 0) memcpy(p->payload, payload, len);
  p->payload[len] = '\0';
  if (l->queue_tail)
    l->queue_tail->next = p;
  else
    l->queue = p;
  l->queue_tail = p;
  l->queued += len;
  /* Sent from the poll callback once the socket is writable, never from
     here: a failure found while sending would call back into the caller. A
     failure to watch is found by the next read, which always is watched. */
  if (!l->in_flight && !l->flushing) uv_poll_start(l->poll, UV_READABLE | UV_WRITABLE, on_poll);
  return 0;
}

int clank_pglisten_up(const clank_pglisten_t *l) { return l->state == S_UP; }

void clank_pglisten_close(clank_pglisten_t *l) {
  if (l == NULL || l->state == S_CLOSED) return;
  drop_connection(l);
  l->state = S_CLOSED;
  uv_close((uv_handle_t *)&l->timer, handle_closed);
}
