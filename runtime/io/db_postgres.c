/* clank.db.postgres: the PostgreSQL driver of clank.db (SPEC §12; the
   contract is in db.h).

   libpq in non-blocking mode on the loop. A connection's socket is watched
   with uv_poll for what libpq asks (PQconnectPoll while connecting; PQflush,
   PQconsumeInput, PQisBusy and PQgetResult while a query runs; readable while
   idle, so a connection the server closed is noticed and dropped). The host
   name is resolved with uv_getaddrinfo and given to libpq as hostaddr, since
   libpq 15 resolves names blocking; a unix socket (host=/dir) needs none
   (pg_connect.c, shared with pg_listen.c).

   Cancelling (abort, timeout): PQcancel blocks, so it runs on a thread of its
   own that reports back through a uv_async. The waiting call returns once the
   query has ended (the server's "canceling statement" error), the connection
   is idle again and the cancel's answer is in (a query that ended just before
   its cancel arrived must not leave the cancel to stop the next one); when it
   has not ended CANCEL_GRACE_MS after the cancel's answer (or CANCEL_LIMIT_MS
   after the abort), the connection is dropped, never reset on the loop.

   Prepared statements (db_postgres_stmts.c): a connection prepares a
   statement the second time it runs the same text with the same parameter
   types (PQsendPrepare, then PQsendQueryPrepared: one more round trip, once)
   and from then on only executes it, so the server parses and plans it no
   more. Texts of several commands or other than SELECT, INSERT, UPDATE,
   DELETE, MERGE, WITH, VALUES, TABLE, and queries in a failed transaction run
   unnamed (PQsendQueryParams) as before. A cached statement failing as a
   stale one would (its table altered, or deallocated by the app) is dropped
   and, outside a transaction, prepared afresh and run once more; inside one
   its error stands. The app's DEALLOCATE ALL or DISCARD ALL empties the
   cache; it dies with its connection.

   Ownership: a pool_t is a clank_db_pool_t of the shared registry (db.h),
   refcounted by the pool and conn userdata of every Lua state. A conn_t
   belongs to its pool; it is lent to one box (the conn userdata) at a time,
   and freed once dropped and its handles are closed. Every handle (poll,
   timer, resolution, cancel job) is counted in its pool, which tells the
   registry when none is left. */
#include <lauxlib.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/abort.h"
#include "io/db.h"
#include "io/db_postgres.h"
#include "io/pg_connect.h"
#include "data/json.h"
#include "core/protect.h"
#include "core/values.h"

#define POOL_MT "clank.db.PostgresPool"
#define CONN_MT "clank.db.PostgresConnection"

#define DEFAULT_SIZE 4
#define CONNECT_TIMEOUT_MS 10000
#define CANCEL_LIMIT_MS 2000 /* no answer from the cancel at all */
#define CANCEL_GRACE_MS 250  /* after the answer, the query should have ended */
#define ROLLBACK_LIMIT_MS 5000

typedef struct pool_s pool_t;
typedef struct conn_s conn_t;
typedef struct box_s box_t;
typedef struct cancel_s cancel_t;

enum { C_RESOLVING, C_CONNECTING, C_IDLE, C_BUSY, C_CANCELLING, C_ROLLBACK, C_DEAD };
enum { W_ACQUIRE, W_RUN };
enum { O_NONE, O_CONN, O_RESULT, O_ERROR, O_STOPPED };
/* A query's steps on the wire: execute; before it, prepare; before that,
   deallocate the doomed statements. */
enum { S_EXEC, S_PREPARE, S_DEALLOCATE };
/* Where an error arose, by its CONTEXT field: none (the statement itself:
   parse, analysis, plan), converting a parameter (Bind), or inside what it
   ran (a function, a trigger). */
enum { E_STATEMENT, E_PARAMETER, E_RUNNING };

struct pool_s {
  clank_db_pool_t base; /* first: the registry's part */
  uv_loop_t *loop;
  clank_pg_target_t target; /* the URL's options and password */
  int size, nconn;          /* connections open or opening, lent or not */
  int handles;              /* open handles of its connections and cancel jobs */
  int reported;             /* clank_db_pool_handles_closed was called */
  double connect_timeout;
  conn_t *conns;
  cancel_t *cancels;
  box_t *queue, *queue_tail; /* acquires waiting, FIFO */
  int dispatching, redispatch;
};

struct conn_s {
  pool_t *pool;
  PGconn *pg;
  int state;
  int lent;     /* to a box */
  int dropped;  /* out of the pool: freed once its handles are closed */
  int flushing; /* PQflush has more to send */
  int rollback_ok;
  box_t *box; /* the box whose run is in flight */
  uv_poll_t *poll;
  int poll_events; /* what poll watches while it is active */
  uv_timer_t timer;
  int timer_open;
  uv_getaddrinfo_t gai;
  int handles;
  cancel_t *cancel;
  conn_t *prev, *next;
  /* the query in flight, in memory of its own, and the statements prepared */
  clank_pg_query_t q;
  clank_pg_stmts_t stmts;
  uint64_t hash;         /* of q, when preparable */
  clank_pg_stmt_t *stmt; /* executed (S_EXEC) or being prepared (S_PREPARE); NULL: unnamed */
  int step;
  int cached;     /* stmt was prepared before this query */
  int autocommit; /* the query began outside a transaction */
  int retried;    /* run again once after a stale plan */
  int step_failed, cleared;
  int ended;        /* its results are in (a cancel's answer may still be awaited) */
  char sqlstate[6]; /* of the step's first error, */
  int err_context;  /* and where it arose: E_STATEMENT, E_PARAMETER, E_RUNNING */
};

/* The conn userdata. acquire waits on it before it has a connection. */
struct box_s {
  clank_db_wait_t wait; /* first: db.h waits on the userdata */
  pool_t *pool;         /* one ref */
  conn_t *conn;
  int released;
  int kind, exec, outcome;
  int queued;
  box_t *next;
  PGresult *res;
  char *message;
  const char *code;
  /* pool:run: one query on the first free connection, given back as soon as
     its result is in, with no Lua in between (q: the query until then) */
  int once;
  clank_pg_query_t q;
};

typedef struct pool_ud_s {
  pool_t *pool; /* NULL once closed */
} pool_ud_t;

struct cancel_s {
  uv_thread_t thread;
  uv_async_t async;
  PGcancel *cancel;
  pool_t *pool;
  conn_t *conn; /* NULL once the connection went */
  int joined;
  cancel_t *prev, *next;
};

static void dispatch(pool_t *p);
static void settle(conn_t *c);
static void on_poll(uv_poll_t *h, int status, int events);

/* ---- messages ---- */

static void box_set_error(box_t *b, const char *code, const char *msg) {
  free(b->message);
  b->message = clank_pg_scrub(&b->pool->target, msg);
  b->code = code;
  b->outcome = O_ERROR;
}

/* ---- handles ---- */

static void pool_check_closed(pool_t *p) {
  if (p->base.closed && p->handles == 0 && p->conns == NULL && !p->reported) {
    p->reported = 1;
    clank_db_pool_handles_closed(&p->base); /* may free p */
  }
}

static void conn_maybe_free(conn_t *c) {
  if (!c->dropped || c->handles > 0) return;
  pool_t *p = c->pool;
  free(c);
  pool_check_closed(p);
}

static void handle_closed(conn_t *c) {
  c->handles--;
  c->pool->handles--;
  conn_maybe_free(c);
}

static void poll_closed(uv_handle_t *h) {
  conn_t *c = h->data;
  free(h);
  handle_closed(c);
}

static void timer_closed(uv_handle_t *h) { handle_closed(h->data); }

static void poll_close(conn_t *c) {
  if (c->poll == NULL) return;
  uv_close((uv_handle_t *)c->poll, poll_closed);
  c->poll = NULL;
}

/* Watches the connection's socket for events. While connecting, libpq may
   open a new socket under the same number, so each step watches afresh. */
static int poll_watch(conn_t *c, int events) {
  int fd = PQsocket(c->pg);
  if (fd < 0) return UV_EBADF;
  if (c->poll == NULL) {
    uv_poll_t *h = malloc(sizeof *h);
    if (h == NULL) return UV_ENOMEM;
    int r = uv_poll_init_socket(c->pool->loop, h, fd);
    if (r < 0) {
      free(h);
      return r;
    }
    h->data = c;
    c->poll = h;
    c->poll_events = 0;
    c->handles++;
    c->pool->handles++;
  }
  /* Each uv_poll_start registers the socket again (two epoll_ctl calls at
     the loop's next turn, a few µs a query): an unchanged watch is kept,
     except while connecting, when the socket may be a new one. */
  if (c->state != C_CONNECTING && c->poll_events == events && uv_is_active((uv_handle_t *)c->poll))
    return 0;
  int r = uv_poll_start(c->poll, events, on_poll);
  c->poll_events = r == 0 ? events : 0;
  return r;
}

/* Closes the connection and its handles; the struct stays (lent, or until
   the handles are closed). */
static void conn_shut(conn_t *c) {
  c->state = C_DEAD;
  poll_close(c);
  if (c->timer_open) {
    c->timer_open = 0;
    uv_close((uv_handle_t *)&c->timer, timer_closed);
  }
  if (c->handles > 0 && c->gai.data == c) uv_cancel((uv_req_t *)&c->gai);
  if (c->pg) PQfinish(c->pg);
  c->pg = NULL;
  if (c->cancel) c->cancel->conn = NULL;
  c->cancel = NULL;
  /* its prepared statements went with the server's session */
  clank_pg_stmts_free(&c->stmts);
  c->stmt = NULL;
  clank_pg_query_free(&c->q);
}

/* Out of the pool for good. The caller dispatches afterwards. */
static void conn_drop(conn_t *c) {
  pool_t *p = c->pool;
  if (c->dropped) return;
  conn_shut(c);
  c->dropped = 1;
  if (c->prev)
    c->prev->next = c->next;
  else
    p->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  p->nconn--;
  conn_maybe_free(c);
}

/* ---- the queue of acquires ---- */

static void queue_push(pool_t *p, box_t *b) {
  b->queued = 1;
  b->next = NULL;
  if (p->queue_tail)
    p->queue_tail->next = b;
  else
    p->queue = b;
  p->queue_tail = b;
}

static void queue_remove(pool_t *p, box_t *b) {
  box_t **at = &p->queue, *prev = NULL;
  while (*at && *at != b) {
    prev = *at;
    at = &(*at)->next;
  }
  if (*at == NULL) return;
  *at = b->next;
  if (p->queue_tail == b) p->queue_tail = prev;
  b->queued = 0;
  b->next = NULL;
}

static box_t *queue_pop(pool_t *p) {
  box_t *b = p->queue;
  if (b) queue_remove(p, b);
  return b;
}

/* The box's outcome is set: resume its task from the loop. */
static void box_ready(box_t *b) { clank_db_wait_due(&b->wait); }

/* ---- connecting ---- */

static void connect_failed(conn_t *c, const char *msg) {
  pool_t *p = c->pool;
  box_t *b = queue_pop(p); /* the oldest waiter hears why */
  if (b) {
    box_set_error(b, "CONNECT", msg);
    box_ready(b);
  }
  conn_drop(c);
  dispatch(p);
}

static void connected(conn_t *c) {
  uv_timer_stop(&c->timer);
  if (PQsetnonblocking(c->pg, 1) != 0) {
    connect_failed(c, PQerrorMessage(c->pg));
    return;
  }
  c->state = C_IDLE;
  int r = poll_watch(c, UV_READABLE);
  if (r < 0) {
    connect_failed(c, uv_strerror(r));
    return;
  }
  dispatch(c->pool);
}

static void connect_step(conn_t *c) {
  int events = 0;
  int st = clank_pg_connect_poll(c->pg, &events);
  poll_close(c);
  if (st > 0) {
    connected(c);
    return;
  }
  if (st < 0) {
    char *msg = strdup(PQerrorMessage(c->pg));
    connect_failed(c, msg);
    free(msg);
    return;
  }
  int r = poll_watch(c, events);
  if (r < 0) connect_failed(c, uv_strerror(r));
}

/* Starts connecting (to hostaddr when resolved). Fills err on failure. */
static int start_connect(conn_t *c, const char *hostaddr, char *err, size_t errlen) {
  c->pg = clank_pg_connect_start(&c->pool->target, hostaddr, NULL, err, errlen);
  if (c->pg == NULL) return -1;
  c->state = C_CONNECTING;
  /* libpq: before the first PQconnectPoll, behave as if it asked for writing */
  int r = poll_watch(c, UV_WRITABLE);
  if (r < 0) {
    snprintf(err, errlen, "%s", uv_strerror(r));
    return -1;
  }
  return 0;
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  conn_t *c = req->data;
  req->data = NULL;
  c->handles--;
  c->pool->handles--;
  if (c->state != C_RESOLVING) { /* dropped meanwhile */
    if (res) uv_freeaddrinfo(res);
    conn_maybe_free(c);
    return;
  }
  char msg[512], ip[64];
  if (clank_pg_resolved(clank_pg_option(&c->pool->target, "host"), status, res, ip, sizeof ip, msg,
                        sizeof msg) < 0 ||
      start_connect(c, ip, msg, sizeof msg) < 0)
    connect_failed(c, msg);
}

static void on_conn_timer(uv_timer_t *t);

/* A new connection for the pool (counted at once). Returns -1 and fills err
   when it failed right away (the connection is dropped then). */
static int open_conn(pool_t *p, char *err, size_t errlen) {
  conn_t *c = calloc(1, sizeof *c);
  if (c == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  c->pool = p;
  c->next = p->conns;
  if (p->conns) p->conns->prev = c;
  p->conns = c;
  p->nconn++;
  uv_timer_init(p->loop, &c->timer);
  c->timer.data = c;
  c->timer_open = 1;
  c->handles++;
  p->handles++;
  uv_timer_start(&c->timer, on_conn_timer, (uint64_t)p->connect_timeout, 0);
  const char *host, *hostaddr;
  clank_pg_route(&p->target, &host, &hostaddr);
  if (host) {
    c->gai.data = c;
    int r = clank_pg_resolve(p->loop, &c->gai, on_resolved, host);
    if (r < 0) {
      c->gai.data = NULL;
      snprintf(err, errlen, "could not resolve host \"%s\": %s", host, uv_strerror(r));
      conn_drop(c);
      return -1;
    }
    c->handles++;
    p->handles++;
    c->state = C_RESOLVING;
    return 0;
  }
  if (start_connect(c, hostaddr, err, errlen) < 0) {
    conn_drop(c);
    return -1;
  }
  return 0;
}

/* ---- the pool hands out connections, FIFO ---- */

static conn_t *idle_conn(pool_t *p) {
  for (conn_t *c = p->conns, *next; c; c = next) {
    next = c->next;
    if (c->state != C_IDLE || c->lent) continue;
    if (PQstatus(c->pg) == CONNECTION_OK) return c;
    conn_drop(c); /* dead: the next acquire opens another */
  }
  return NULL;
}

static int opening(pool_t *p) {
  int n = 0;
  for (conn_t *c = p->conns; c; c = c->next)
    n += c->state == C_RESOLVING || c->state == C_CONNECTING;
  return n;
}

static int queue_len(pool_t *p) {
  int n = 0;
  for (box_t *b = p->queue; b; b = b->next) n++;
  return n;
}

static void once_start(conn_t *c, box_t *b);
static void conn_return(conn_t *c, int broken);

static void dispatch(pool_t *p) {
  if (p->dispatching) {
    p->redispatch = 1;
    return;
  }
  p->dispatching = 1;
  do {
    p->redispatch = 0;
    while (p->queue && !p->base.closed) {
      conn_t *c = idle_conn(p);
      if (c) {
        box_t *b = queue_pop(p);
        c->lent = 1;
        b->conn = c;
        if (b->once) {
          once_start(c, b);
          continue;
        }
        b->outcome = O_CONN;
        box_ready(b);
        continue;
      }
      if (p->nconn >= p->size || opening(p) >= queue_len(p)) break;
      char err[512];
      if (open_conn(p, err, sizeof err) < 0) {
        box_t *b = queue_pop(p);
        box_set_error(b, "CONNECT", err);
        box_ready(b);
      }
    }
  } while (p->redispatch);
  p->dispatching = 0;
}

/* ---- queries ---- */

/* A pool:run's box lets go of its connection (no Lua release comes). */
static void once_give_back(box_t *b, conn_t *c) {
  if (b == NULL || !b->once || b->conn != c) return;
  b->conn = NULL;
  c->lent = 0;
}

/* The connection failed under a query, a rollback or while idle. */
static void conn_lost(conn_t *c, const char *why) {
  pool_t *p = c->pool;
  box_t *b = c->box;
  c->box = NULL;
  if (b && b->outcome == O_NONE) {
    if (c->state == C_CANCELLING)
      b->outcome = O_STOPPED;
    else
      box_set_error(b, "CONNECTION", why);
    box_ready(b);
  }
  once_give_back(b, c); /* nobody else will */
  if (c->lent) {
    conn_shut(c); /* the box releases it */
    return;
  }
  conn_drop(c);
  dispatch(p);
}

static void keep_result(conn_t *c, PGresult *r) {
  box_t *b = c->box;
  ExecStatusType st = PQresultStatus(r);
  if (c->state == C_ROLLBACK) {
    c->rollback_ok = st == PGRES_COMMAND_OK;
    PQclear(r);
    return;
  }
  int is_error = st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE;
  if (is_error && !c->step_failed) {
    const char *code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char *context = PQresultErrorField(r, PG_DIAG_CONTEXT);
    c->step_failed = 1;
    snprintf(c->sqlstate, sizeof c->sqlstate, "%s", code ? code : "");
    /* "unnamed portal parameter $1 = '...'" (lc_messages English) */
    c->err_context = context == NULL                                 ? E_STATEMENT
                     : strstr(context, "portal parameter $") != NULL ? E_PARAMETER
                                                                     : E_RUNNING;
  }
  if (st == PGRES_COMMAND_OK && c->step == S_EXEC) {
    /* the app dropped every prepared statement of the session */
    const char *tag = PQcmdStatus(r);
    if (strcmp(tag, "DEALLOCATE ALL") == 0 || strcmp(tag, "DISCARD ALL") == 0) c->cleared = 1;
  }
  if (b == NULL || c->step == S_DEALLOCATE) {
    PQclear(r);
    return;
  }
  if (b->res && PQresultStatus(b->res) == PGRES_FATAL_ERROR && !is_error) {
    PQclear(r); /* the first error stays */
    return;
  }
  PQclear(b->res);
  b->res = r;
}

static int step_done(conn_t *c, int cancelled);

static void query_done(conn_t *c) {
  pool_t *p = c->pool;
  box_t *b = c->box;
  int was = c->state;
  c->flushing = 0;
  if (PQstatus(c->pg) != CONNECTION_OK) {
    conn_lost(c, PQerrorMessage(c->pg));
    return;
  }
  if ((was == C_BUSY || was == C_CANCELLING) && !c->ended) {
    int r = step_done(c, was == C_CANCELLING);
    if (r > 0) return; /* its next step is on its way */
    if (r < 0) {
      conn_lost(c, PQerrorMessage(c->pg));
      return;
    }
    clank_pg_query_trim(&c->q);
    c->ended = 1;
  }
  /* The query may have ended before its cancel reached the server, which
     would then stop whatever query runs next: the connection waits for the
     cancel's answer (a cancel arriving while the server awaits a command is
     ignored). */
  if (was == C_CANCELLING && c->cancel) {
    if (poll_watch(c, UV_READABLE) < 0) conn_lost(c, "cannot watch the socket");
    return;
  }
  c->box = NULL;
  uv_timer_stop(&c->timer);
  c->state = C_IDLE;
  int r = poll_watch(c, UV_READABLE);
  if (was == C_ROLLBACK) {
    if (r < 0 || !c->rollback_ok || PQtransactionStatus(c->pg) != PQTRANS_IDLE) {
      conn_drop(c);
    }
    dispatch(p);
    return;
  }
  if (b && b->outcome == O_NONE) {
    if (was == C_CANCELLING) {
      PQclear(b->res);
      b->res = NULL;
      b->outcome = O_STOPPED;
    } else {
      b->outcome = O_RESULT;
    }
    box_ready(b);
  }
  once_give_back(b, c); /* its result is in the box: the next one may go */
  if (!c->lent) settle(c);
}

/* Sends what libpq holds and watches for the answer. */
static int send_flush(conn_t *c) {
  int r = PQflush(c->pg);
  if (r < 0) return -1;
  c->flushing = r == 1;
  return poll_watch(c, UV_READABLE | (c->flushing ? UV_WRITABLE : 0)) < 0 ? -1 : 0;
}

/* ---- a query's steps: prepared statements ---- */

/* A step handed to libpq (ok) as step. 0; -1: nothing was sent (the
   connection is as it was); -2: some may have been (it is not to be trusted). */
static int step_sent(conn_t *c, int ok, int step) {
  if (!ok) return -1;
  c->step = step;
  c->step_failed = 0;
  c->err_context = E_STATEMENT;
  c->sqlstate[0] = '\0';
  return send_flush(c) < 0 ? -2 : 0;
}

static int send_unnamed(conn_t *c) {
  clank_pg_query_t *q = &c->q;
  c->stmt = NULL;
  return step_sent(
      c, PQsendQueryParams(c->pg, q->sql, q->n, q->types, q->values, q->lengths, q->formats, 0),
      S_EXEC);
}

static int send_execute(conn_t *c, clank_pg_stmt_t *st) {
  clank_pg_query_t *q = &c->q;
  char name[CLANK_PG_NAME_SIZE];
  clank_pg_stmt_name(st->id, name);
  c->stmt = st;
  return step_sent(c, PQsendQueryPrepared(c->pg, name, q->n, q->values, q->lengths, q->formats, 0),
                   S_EXEC);
}

/* Prepares the query under a new name (executed once the server made it),
   or runs it unnamed when no statement may be added now. */
static int send_prepare(conn_t *c) {
  clank_pg_query_t *q = &c->q;
  clank_pg_stmt_t *st = clank_pg_stmts_begin(&c->stmts, q, c->hash);
  if (st == NULL) return send_unnamed(c);
  char name[CLANK_PG_NAME_SIZE];
  clank_pg_stmt_name(st->id, name);
  c->stmt = st;
  int r = step_sent(c, PQsendPrepare(c->pg, name, q->sql, q->n, q->types), S_PREPARE);
  if (r == -1) {
    clank_pg_stmts_abandon(&c->stmts);
    c->stmt = NULL;
  }
  return r;
}

/* The doomed statements go in one simple query, outside a transaction only:
   were one of them gone already, its error would abort the app's transaction. */
static int send_deallocate(conn_t *c) {
  char sql[CLANK_PG_DEALLOCATE_SIZE];
  clank_pg_stmts_deallocate_sql(&c->stmts, sql);
  c->stmt = NULL;
  return step_sent(c, PQsendQuery(c->pg, sql), S_DEALLOCATE);
}

/* Sends c->q: a statement prepared before is executed; a preparable text run
   once before is prepared first; anything else runs unnamed, as every query
   did before the cache (a failed transaction answers 25P02 either way). */
static int start_query(conn_t *c) {
  clank_pg_query_t *q = &c->q;
  PGTransactionStatusType ts = PQtransactionStatus(c->pg);
  c->cached = 0;
  c->cleared = 0;
  if (ts == PQTRANS_INERROR || !clank_pg_preparable(q->sql)) return send_unnamed(c);
  c->hash = clank_pg_stmt_hash(q);
  clank_pg_stmt_t *st = clank_pg_stmts_find(&c->stmts, q, c->hash);
  if (st) {
    c->cached = 1;
    return send_execute(c, st);
  }
  if (!clank_pg_stmts_seen(&c->stmts, c->hash)) return send_unnamed(c);
  if (c->stmts.ndoomed >= CLANK_PG_DOOMED_BATCH && ts == PQTRANS_IDLE) return send_deallocate(c);
  return send_prepare(c);
}

/* c->q goes out as a new query (not a retry): start_query's answer. */
static int begin_query(conn_t *c) {
  c->autocommit = PQtransactionStatus(c->pg) == PQTRANS_IDLE;
  c->retried = 0;
  c->ended = 0;
  return start_query(c);
}

/* A pool:run's box got connection c: its query goes now. A query that
   cannot be sent is the box's error, and the connection goes back. */
static void once_start(conn_t *c, box_t *b) {
  clank_pg_query_t held = c->q; /* the box's query becomes the connection's */
  c->q = b->q;
  b->q = held;
  int sent = begin_query(c);
  if (sent < 0) {
    box_set_error(b, "CONNECTION", PQerrorMessage(c->pg));
    b->conn = NULL;
    conn_return(c, sent == -2 || PQstatus(c->pg) != CONNECTION_OK); /* a query half sent */
    box_ready(b);
    return;
  }
  b->kind = W_RUN;
  c->state = C_BUSY;
  c->box = b;
}

/* After these errors a statement prepared earlier may merely be stale, where
   running its text unprepared would have answered: 26000 (no such statement:
   the app deallocated it); from the statement itself, 0A000 (cached plan must
   not change result type) or class 42 (a parameter type the server inferred
   when it was prepared no longer fits an altered table); class 22 converting
   a parameter whose type the server inferred (an int column that became text
   refusing 'abc'). All of these come before the statement runs; the same
   codes raised by a function it ran do not. */
static int stale_plan(const conn_t *c) {
  const char *code = c->sqlstate;
  if (strcmp(code, "26000") == 0) return 1;
  if (c->err_context == E_STATEMENT)
    return strcmp(code, "0A000") == 0 || strncmp(code, "42", 2) == 0;
  if (c->err_context != E_PARAMETER || strncmp(code, "22", 2) != 0) return 0;
  for (int i = 0; i < c->q.n; i++)
    if (c->q.types[i] == 0) return 1;
  return 0;
}

static int next_step(int sent) { return sent < 0 ? -1 : 1; }

/* A step's results are in (cancelled: the query was being cancelled). 1: the
   next step is sent; 0: the query is over; -1: its next step could not be sent. */
static int step_done(conn_t *c, int cancelled) {
  clank_pg_stmts_t *s = &c->stmts;
  box_t *b = c->box;
  switch (c->step) {
    case S_DEALLOCATE: /* gone or not, they are forgotten */
      return cancelled ? 0 : next_step(send_prepare(c));
    case S_PREPARE:
      if (c->step_failed) { /* not made: its error is the answer */
        clank_pg_stmts_abandon(s);
        c->stmt = NULL;
        return 0;
      }
      c->stmt = clank_pg_stmts_commit(s);
      if (cancelled) return 0;
      if (b) {
        PQclear(b->res);
        b->res = NULL;
      }
      return next_step(send_execute(c, c->stmt));
    default: break;
  }
  clank_pg_stmt_t *st = c->stmt;
  c->stmt = NULL;
  if (c->cleared) {
    clank_pg_stmts_clear(s);
    return 0;
  }
  if (st == NULL || !c->cached || !c->step_failed || !stale_plan(c)) return 0;
  clank_pg_stmts_drop(s, st, strcmp(c->sqlstate, "26000") != 0);
  /* outside a transaction the failed statement changed nothing: prepare it afresh, once */
  if (cancelled || c->retried || !c->autocommit || b == NULL ||
      PQtransactionStatus(c->pg) != PQTRANS_IDLE)
    return 0;
  c->retried = 1;
  PQclear(b->res);
  b->res = NULL;
  return next_step(start_query(c));
}

static void io_step(conn_t *c, int events) {
  PGconn *pg = c->pg;
  if (clank_pg_pump(pg, &c->flushing, events) < 0) {
    conn_lost(c, PQerrorMessage(pg));
    return;
  }
  while (!PQisBusy(pg)) {
    PGresult *r = PQgetResult(pg);
    if (r == NULL) {
      query_done(c);
      return;
    }
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
      PQclear(r);
      conn_lost(c, "COPY is not supported");
      return;
    }
    keep_result(c, r);
  }
  if (poll_watch(c, UV_READABLE | (c->flushing ? UV_WRITABLE : 0)) < 0)
    conn_lost(c, "cannot watch the socket");
}

static void idle_input(conn_t *c) {
  if (!PQconsumeInput(c->pg) || PQstatus(c->pg) != CONNECTION_OK) {
    conn_lost(c, PQerrorMessage(c->pg));
    return;
  }
  PGnotify *n;
  while ((n = PQnotifies(c->pg)) != NULL) PQfreemem(n);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  conn_t *c = h->data;
  if (status < 0) events = UV_READABLE | UV_WRITABLE; /* libpq finds the error */
  switch (c->state) {
    case C_CONNECTING: connect_step(c); break;
    case C_BUSY:
    case C_CANCELLING:
    case C_ROLLBACK: io_step(c, events); break;
    case C_IDLE: idle_input(c); break;
    default: break;
  }
}

/* A connection back in the pool, neither lent nor busy: idle, rolled back
   first when left inside a transaction, or dropped. */
static void settle(conn_t *c) {
  pool_t *p = c->pool;
  if (c->state == C_DEAD || p->base.closed) {
    conn_drop(c);
    dispatch(p);
    return;
  }
  switch (PQtransactionStatus(c->pg)) {
    case PQTRANS_IDLE: dispatch(p); return;
    case PQTRANS_INTRANS:
    case PQTRANS_INERROR:
      if (PQsendQuery(c->pg, "ROLLBACK") && send_flush(c) == 0) {
        c->state = C_ROLLBACK;
        c->rollback_ok = 0;
        uv_timer_start(&c->timer, on_conn_timer, ROLLBACK_LIMIT_MS, 0);
        return;
      }
      /* fall through */
    default: conn_drop(c); dispatch(p);
  }
}

static void conn_return(conn_t *c, int broken) {
  pool_t *p = c->pool;
  c->lent = 0;
  if (c->state == C_BUSY || c->state == C_CANCELLING) broken = 1; /* nobody waits for it */
  c->box = NULL;
  if (broken || c->state == C_DEAD || p->base.closed) {
    conn_drop(c);
    dispatch(p);
    return;
  }
  settle(c);
}

/* ---- cancelling, off the loop ---- */

static void cancel_closed(uv_handle_t *h) {
  cancel_t *k = h->data;
  pool_t *p = k->pool;
  if (k->prev)
    k->prev->next = k->next;
  else
    p->cancels = k->next;
  if (k->next) k->next->prev = k->prev;
  free(k);
  p->handles--;
  pool_check_closed(p);
}

static void cancel_thread(void *arg) {
  cancel_t *k = arg;
  char err[256];
  PQcancel(k->cancel, err, sizeof err); /* blocks: connects to the server */
  uv_async_send(&k->async);
}

/* The cancel's answer is in: the query should end within the grace. */
static void on_cancel_answer(uv_async_t *a) {
  cancel_t *k = a->data;
  if (!k->joined) uv_thread_join(&k->thread);
  k->joined = 1;
  PQfreeCancel(k->cancel);
  k->cancel = NULL;
  conn_t *c = k->conn;
  if (c) {
    c->cancel = NULL;
    if (c->state == C_CANCELLING && c->ended)
      query_done(c); /* it was waiting for this answer */
    else if (c->state == C_CANCELLING)
      uv_timer_start(&c->timer, on_conn_timer, CANCEL_GRACE_MS, 0);
  }
  uv_close((uv_handle_t *)a, cancel_closed);
}

static void start_cancel(conn_t *c) {
  pool_t *p = c->pool;
  c->state = C_CANCELLING;
  uv_timer_start(&c->timer, on_conn_timer, CANCEL_LIMIT_MS, 0);
  cancel_t *k = calloc(1, sizeof *k);
  if (k == NULL) return; /* the limit drops the connection */
  k->cancel = PQgetCancel(c->pg);
  if (k->cancel == NULL || uv_async_init(p->loop, &k->async, on_cancel_answer) < 0) {
    if (k->cancel) PQfreeCancel(k->cancel);
    free(k);
    return;
  }
  k->async.data = k;
  k->pool = p;
  k->next = p->cancels;
  if (p->cancels) p->cancels->prev = k;
  p->cancels = k;
  p->handles++;
  if (uv_thread_create(&k->thread, cancel_thread, k) != 0) {
    k->joined = 1;
    PQfreeCancel(k->cancel);
    k->cancel = NULL;
    uv_close((uv_handle_t *)&k->async, cancel_closed);
    return;
  }
  k->conn = c;
  c->cancel = k;
}

static void on_conn_timer(uv_timer_t *t) {
  conn_t *c = t->data;
  pool_t *p = c->pool;
  char msg[128];
  switch (c->state) {
    case C_RESOLVING:
    case C_CONNECTING:
      snprintf(msg, sizeof msg, "timeout: no connection after %.0f ms", p->connect_timeout);
      connect_failed(c, msg);
      break;
    case C_CANCELLING: conn_lost(c, "the query did not stop when cancelled"); break;
    case C_ROLLBACK:
      conn_drop(c);
      dispatch(p);
      break;
    default: break;
  }
}

/* ---- the conn userdata ---- */

static box_t *check_box(lua_State *L, int idx) { return luaL_checkudata(L, idx, CONN_MT); }

/* box, nil | nil, err: what the waiting call returns (in protected mode). */
static int push_outcome(lua_State *L) {
  box_t *b = lua_touserdata(L, 1);
  lua_settop(L, 0);
  switch (b->outcome) {
    case O_CONN:
      lua_rawgeti(L, LUA_REGISTRYINDEX, b->wait.owner_ref);
      lua_pushnil(L);
      return 2;
    case O_STOPPED: return clank_db_push_stopped(L, &b->wait);
    case O_ERROR: return clank_db_push_error(L, b->code, b->message ? b->message : "", NULL);
    default: break;
  }
  const PGresult *r = b->res;
  switch (r ? PQresultStatus(r) : PGRES_FATAL_ERROR) {
    case PGRES_TUPLES_OK:
    case PGRES_COMMAND_OK:
    case PGRES_EMPTY_QUERY:
    case PGRES_SINGLE_TUPLE:
      if (b->exec == PG_EXEC) {
        clank_pg_push_exec(L, r);
      } else if (b->exec == PG_KEPT) {
        clank_pg_push_kept(L, b->res); /* which takes the result over */
        b->res = NULL;
      } else {
        clank_pg_push_rows(L, r);
      }
      lua_pushnil(L);
      return 2;
    default:
      if (r == NULL) return clank_db_push_error(L, "QUERY", "no result", NULL);
      lua_pushnil(L);
      clank_pg_push_result_error(L, r);
      return 2;
  }
}

/* A released box needs its pool no more: its ref goes now, not at __gc. */
static void box_unref_pool(box_t *b) {
  pool_t *p = b->pool;
  b->pool = NULL;
  if (p) clank_db_pool_unref(&p->base);
}

static void box_clear(box_t *b) {
  PQclear(b->res);
  b->res = NULL;
  free(b->message);
  b->message = NULL;
  b->outcome = O_NONE;
}

/* The wait is due: its outcome goes to the task, from the loop. */
static void box_due(clank_db_wait_t *w) {
  box_t *b = (box_t *)w;
  if (b->outcome == O_NONE && w->stopped) b->outcome = O_STOPPED; /* left the queue */
  lua_State *L = w->L;
  lua_State *co = clank_db_wait_target(w);
  if (co == NULL) { /* its task is gone */
    if (b->kind == W_ACQUIRE && b->conn) {
      conn_t *c = b->conn;
      b->conn = NULL;
      b->released = 1;
      conn_return(c, 0);
    }
    box_clear(b);
    if (b->released) box_unref_pool(b);
    return;
  }
  if ((b->kind == W_ACQUIRE && b->outcome != O_CONN) || b->once) b->released = 1;
  int ok = lua_checkstack(L, 4);
  if (ok) {
    lua_pushcfunction(L, push_outcome);
    lua_pushlightuserdata(L, b);
    if (clank_pcall(L, 1, 2) != LUA_OK) {
      char msg[256];
      snprintf(msg, sizeof msg, "clank.db.postgres: %s", clank_error_message(L, -1));
      lua_pop(L, 2);
      clank_db_push_error(L, "DRIVER", msg, NULL);
    }
    lua_xmove(L, co, 2);
  } else {
    lua_pushnil(co);
    lua_pushliteral(co, "clank.db.postgres: no stack left");
  }
  box_clear(b);
  if (b->released) box_unref_pool(b);
  clank_db_wait_resume(w, 2);
}

/* Abort or timeout: leave the queue, or cancel the query. Never resumes. */
static void box_stop(clank_db_wait_t *w) {
  box_t *b = (box_t *)w;
  if (b->outcome != O_NONE) return; /* its outcome is in already */
  if (b->kind == W_ACQUIRE || b->queued) {
    if (b->queued) queue_remove(b->pool, b);
    b->outcome = O_STOPPED;
    clank_db_wait_due(w);
    return;
  }
  conn_t *c = b->conn;
  if (c && c->state == C_BUSY) start_cancel(c);
}

static box_t *new_box(lua_State *L, pool_t *p) {
  box_t *b = lua_newuserdatauv(L, sizeof *b, 0);
  memset(b, 0, sizeof *b);
  b->wait.co_ref = b->wait.owner_ref = LUA_NOREF;
  b->wait.on_stop = box_stop;
  b->wait.on_due = box_due;
  luaL_setmetatable(L, CONN_MT);
  b->pool = p;
  clank_db_pool_ref(&p->base);
  return b;
}

/* conn:run's and pool:run's arguments, from index 2: sql, params (a list
   or nil), mode ("rows", "exec" or "raw": the rows as a clank.Rows),
   signal?, timeoutMs?. Raises on a bad one. */
typedef struct run_args_s {
  const char *sql;
  size_t sqllen;
  /* exec: PG_ROWS, PG_EXEC or PG_KEPT; params, signal: their index, or 0 */
  int params, exec, signal;
  double timeout;
} run_args_t;

static void check_run_args(lua_State *L, run_args_t *a) {
  static const char *const modes[] = {"rows", "exec", "raw", NULL}; /* as PG_ROWS, ... */
  a->sql = luaL_checklstring(L, 2, &a->sqllen);
  a->params = lua_isnoneornil(L, 3) ? 0 : 3;
  if (a->params) luaL_checktype(L, 3, LUA_TTABLE);
  a->exec = luaL_checkoption(L, 4, "rows", modes);
  a->signal = lua_isnoneornil(L, 5) ? 0 : 5;
  if (a->signal && clank_abort_state(L, 5) < 0) luaL_checkudata(L, 5, CLANK_ABORT_MT);
  a->timeout = luaL_optnumber(L, 6, 0);
}

static int conn_run(lua_State *L) {
  box_t *b = check_box(L, 1);
  run_args_t a;
  check_run_args(L, &a);
  if (b->released || b->conn == NULL) return luaL_error(L, "connection already released");
  if (b->wait.active) return luaL_error(L, "connection busy");
  if (strlen(a.sql) != a.sqllen) return luaL_argerror(L, 2, "SQL text with a NUL byte");
  clank_pg_check_params(L, a.params);
  lua_settop(L, 6);
  if (clank_db_check_signal(L, a.signal)) return 2;
  if (!clank_in_task(L)) return luaL_error(L, CLANK_WAIT_MESSAGE);
  conn_t *c = b->conn;
  if (c->state != C_IDLE || b->pool->base.closed)
    return clank_db_push_error(L, "CONNECTION", "the connection was lost", NULL);
  clank_pg_bind_query(L, &c->q, a.sql, a.sqllen, a.params);
  int sent = begin_query(c);
  if (sent < 0) {
    char *msg = clank_pg_scrub(&b->pool->target, PQerrorMessage(c->pg));
    lua_pushstring(L, msg ? msg : "out of memory");
    free(msg);
    if (sent == -2 || PQstatus(c->pg) != CONNECTION_OK) conn_shut(c); /* a query half sent */
    return clank_db_push_error(L, "CONNECTION", lua_tostring(L, -1), NULL);
  }
  box_clear(b);
  b->kind = W_RUN;
  b->exec = a.exec;
  c->state = C_BUSY;
  c->box = b;
  return clank_db_wait(L, &b->wait, 1, a.signal, a.timeout, NULL);
}

static int conn_release(lua_State *L) {
  box_t *b = check_box(L, 1);
  int broken = lua_toboolean(L, 2);
  if (b->released) return luaL_error(L, "connection already released");
  if (b->wait.active) return luaL_error(L, "connection busy");
  b->released = 1;
  conn_t *c = b->conn;
  b->conn = NULL;
  if (c) conn_return(c, broken);
  box_unref_pool(b);
  return 0;
}

/* conn:backendPid(): the server process serving it (for pg_stat_activity). */
static int conn_backend_pid(lua_State *L) {
  box_t *b = check_box(L, 1);
  if (b->conn == NULL || b->conn->pg == NULL) return 0;
  lua_pushinteger(L, PQbackendPID(b->conn->pg));
  return 1;
}

/* Unreleased and unreachable: its coroutine died, or its state is closing. */
static int conn_gc(lua_State *L) {
  box_t *b = lua_touserdata(L, 1);
  clank_pg_query_free(&b->q);
  if (b->pool == NULL) return 0;
  clank_db_wait_end(&b->wait);
  if (b->queued) queue_remove(b->pool, b);
  conn_t *c = b->conn;
  b->conn = NULL;
  if (c) conn_return(c, 0);
  box_clear(b);
  box_unref_pool(b);
  return 0;
}

static int conn_tostring(lua_State *L) {
  box_t *b = check_box(L, 1);
  lua_pushstring(
      L, b->released ? "clank.db.PostgresConnection (released)" : "clank.db.PostgresConnection");
  return 1;
}

/* ---- the pool userdata ---- */

static pool_ud_t *check_pool_ud(lua_State *L, int idx) { return luaL_checkudata(L, idx, POOL_MT); }

static int pool_acquire(lua_State *L) {
  pool_ud_t *u = check_pool_ud(L, 1);
  int signal = lua_isnoneornil(L, 2) ? 0 : 2;
  if (signal) luaL_checkudata(L, 2, CLANK_ABORT_MT);
  double timeout = luaL_optnumber(L, 3, 0);
  lua_settop(L, 3);
  pool_t *p = u->pool;
  if (p == NULL || p->base.closed)
    return clank_db_push_error(L, "CLOSED", "the pool is closed", NULL);
  if (clank_db_check_signal(L, signal)) return 2;
  box_t *b = new_box(L, p); /* at 4 */
  b->kind = W_ACQUIRE;
  queue_push(p, b);
  dispatch(p);
  if (b->outcome == O_CONN) { /* free at once: no wait */
    b->outcome = O_NONE;
    return 1;
  }
  if (b->outcome == O_ERROR) {
    b->released = 1;
    clank_db_push_error(L, b->code, b->message ? b->message : "", NULL);
    box_clear(b);
    box_unref_pool(b);
    return 2;
  }
  if (!clank_in_task(L)) {
    queue_remove(p, b);
    b->released = 1;
    box_unref_pool(b);
    return luaL_error(L, CLANK_WAIT_MESSAGE);
  }
  return clank_db_wait(L, &b->wait, 4, signal, timeout, NULL);
}

/* pool:run(sql, params, mode, signal?, timeoutMs?): conn:run on the first
   free connection, given back when the result is in (db.h). */
static int pool_run(lua_State *L) {
  pool_ud_t *u = check_pool_ud(L, 1);
  run_args_t a;
  check_run_args(L, &a);
  if (strlen(a.sql) != a.sqllen) return luaL_argerror(L, 2, "SQL text with a NUL byte");
  clank_pg_check_params(L, a.params);
  lua_settop(L, 6);
  pool_t *p = u->pool;
  if (p == NULL || p->base.closed)
    return clank_db_push_error(L, "CLOSED", "the pool is closed", NULL);
  if (clank_db_check_signal(L, a.signal)) return 2;
  if (!clank_in_task(L)) return luaL_error(L, CLANK_WAIT_MESSAGE);
  box_t *b = new_box(L, p); /* at 7 */
  clank_pg_bind_query(L, &b->q, a.sql, a.sqllen, a.params);
  b->kind = W_ACQUIRE;
  b->once = 1;
  b->exec = a.exec;
  queue_push(p, b);
  dispatch(p);
  if (b->outcome == O_ERROR) { /* no connection, or the query could not go */
    b->released = 1;
    clank_db_push_error(L, b->code, b->message ? b->message : "", NULL);
    box_clear(b);
    box_unref_pool(b);
    return 2;
  }
  return clank_db_wait(L, &b->wait, 7, a.signal, a.timeout, NULL);
}

/* pool:stats() -> { size, open, idle, waiting } */
static int pool_stats(lua_State *L) {
  pool_ud_t *u = check_pool_ud(L, 1);
  pool_t *p = u->pool;
  lua_createtable(L, 0, 4);
  int idle = 0;
  for (conn_t *c = p ? p->conns : NULL; c; c = c->next) idle += c->state == C_IDLE && !c->lent;
  lua_pushinteger(L, p ? p->size : 0);
  lua_setfield(L, -2, "size");
  lua_pushinteger(L, p ? p->nconn : 0);
  lua_setfield(L, -2, "open");
  lua_pushinteger(L, idle);
  lua_setfield(L, -2, "idle");
  lua_pushinteger(L, p ? queue_len(p) : 0);
  lua_setfield(L, -2, "waiting");
  return 1;
}

static int pool_close(lua_State *L) {
  pool_ud_t *u = check_pool_ud(L, 1);
  pool_t *p = u->pool;
  u->pool = NULL;
  if (p) clank_db_pool_unref(&p->base);
  return 0;
}

/* No Lua state refers to the pool any more (wait = 0), or the process ends
   (wait = 1: threads are joined). */
static void pool_shutdown(clank_db_pool_t *base, int wait) {
  pool_t *p = (pool_t *)base;
  while (p->queue) queue_pop(p); /* their states are closing */
  for (conn_t *c = p->conns, *next; c; c = next) {
    next = c->next;
    if (c->lent)
      conn_shut(c);
    else
      conn_drop(c);
  }
  for (cancel_t *k = p->cancels; k && wait; k = k->next) {
    if (uv_is_closing((uv_handle_t *)&k->async)) continue;
    if (!k->joined) uv_thread_join(&k->thread);
    k->joined = 1;
    PQfreeCancel(k->cancel);
    k->cancel = NULL;
    if (k->conn) k->conn->cancel = NULL;
    k->conn = NULL;
    uv_close((uv_handle_t *)&k->async, cancel_closed);
  }
  pool_check_closed(p);
}

static void pool_free(clank_db_pool_t *base) {
  pool_t *p = (pool_t *)base;
  clank_pg_target_free(&p->target);
  free(p);
}

/* driver.pool(url, { size = 4, connectTimeout = 10000 }) */
static int pg_pool(lua_State *L) {
  const char *url = luaL_checkstring(L, 1);
  lua_Integer size = DEFAULT_SIZE;
  lua_Number connect_timeout = CONNECT_TIMEOUT_MS;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    if (lua_getfield(L, 2, "size") != LUA_TNIL) {
      luaL_argcheck(L, lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1, 2,
                    "size: expected an integer >= 1");
      size = lua_tointeger(L, -1);
    }
    if (lua_getfield(L, 2, "connectTimeout") != LUA_TNIL) {
      luaL_argcheck(L, lua_isnumber(L, -1) && lua_tonumber(L, -1) > 0, 2,
                    "connectTimeout: expected milliseconds > 0");
      connect_timeout = lua_tonumber(L, -1);
    }
  }
  clank_db_registry_t *r = clank_db_registry_of(L); /* made before the userdata below */
  const char *key = lua_pushfstring(L, "postgres\n%s\nsize=%I;connect=%f", url, (LUAI_UACINT)size,
                                    (LUAI_UACNUMBER)connect_timeout);
  pool_ud_t *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->pool = NULL;
  luaL_setmetatable(L, POOL_MT);
  pool_t *p = (pool_t *)clank_db_pool_find(r, key);
  if (p) {
    u->pool = p;
    return 1;
  }
  clank_pg_target_t target;
  char err[512];
  if (clank_pg_target_parse(&target, url, err, sizeof err) < 0)
    return luaL_error(L, "clank.db.postgres: %s", err);
  p = calloc(1, sizeof *p);
  if (p == NULL) {
    clank_pg_target_free(&target);
    return luaL_error(L, "clank.db.postgres: out of memory");
  }
  p->loop = clank_db_registry_loop(r);
  p->target = target;
  p->size = (int)size;
  p->connect_timeout = connect_timeout;
  p->base.shutdown = pool_shutdown;
  p->base.free = pool_free;
  clank_db_pool_add(r, &p->base, key);
  u->pool = p;
  return 1;
}

static int pool_tostring(lua_State *L) {
  pool_ud_t *u = check_pool_ud(L, 1);
  lua_pushstring(L, u->pool ? "clank.db.PostgresPool" : "clank.db.PostgresPool (closed)");
  return 1;
}

static const luaL_Reg pool_methods[] = {{"acquire", pool_acquire},
                                        {"run", pool_run},
                                        {"close", pool_close},
                                        {"stats", pool_stats},
                                        {NULL, NULL}};

static const luaL_Reg conn_methods[] = {
    {"run", conn_run}, {"release", conn_release}, {"backendPid", conn_backend_pid}, {NULL, NULL}};

static const luaL_Reg driver_funcs[] = {{"pool", pg_pool}, {NULL, NULL}};

int luaopen_clank_db_postgres(lua_State *L) {
  if (luaL_newmetatable(L, POOL_MT)) {
    luaL_newlib(L, pool_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, pool_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, pool_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, CONN_MT)) {
    luaL_newlib(L, conn_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, conn_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, conn_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  luaL_newlib(L, driver_funcs);
  return 1;
}
