/* Health and metrics (SPEC §15): counters the host owns, kept without
   allocation or Lua on the request path, and the two answers written in C —
   GET /__clank/health (JSON) and GET /__clank/metrics (Prometheus text 0.0.4). */
#ifndef CLANK_METRICS_H
#define CLANK_METRICS_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

#include "http/server.h"
#include "util/buf.h"

/* What a request was, for clank_requests_total{kind}. 0 is "other", so a
   connection's zeroed state starts there. */
enum {
  CLANK_KIND_OTHER,
  CLANK_KIND_BRIDGE,
  CLANK_KIND_MCP,
  CLANK_KIND_ROUTE,
  CLANK_KIND_PAGE,
  CLANK_KIND_LIVE,
  CLANK_KIND_STATIC,
  CLANK_KIND_RUNTIME,
  CLANK_KIND_COUNT
};

enum { CLANK_LISTENER_NONE, CLANK_LISTENER_UP, CLANK_LISTENER_DOWN };

#define CLANK_METRICS_STATUS_MIN 100
#define CLANK_METRICS_STATUS_MAX 599
#define CLANK_METRICS_BUCKETS 13     /* 0.001 … 10, then +Inf */
#define CLANK_METRICS_ACTIONS 256    /* action names kept (new ones past it are not counted) */
#define CLANK_METRICS_ACTION_NAME 64 /* longest action name counted */
#define CLANK_METRICS_QUEUES 16      /* job queues counted by name; the rest as queue="other" */
#define CLANK_METRICS_QUEUE_NAME 64  /* longest queue name kept (longer ones are "other") */

/* How a job's run ended (clank_jobs_total{state}): done, failed (it runs
   again later) or dead (its last attempt failed). */
enum { CLANK_JOB_DONE, CLANK_JOB_FAILED, CLANK_JOB_DEAD, CLANK_JOB_ENDS };

typedef struct clank_metrics_action_s {
  char name[CLANK_METRICS_ACTION_NAME];
  uint8_t len;
  uint64_t ok, error;
} clank_metrics_action_t;

/* The runs of one job queue: how they ended, and how long they took (the
   request histogram's buckets). */
typedef struct clank_metrics_queue_s {
  char name[CLANK_METRICS_QUEUE_NAME];
  uint8_t len;
  uint64_t runs[CLANK_JOB_ENDS];
  uint64_t buckets[CLANK_METRICS_BUCKETS]; /* not cumulative here; +Inf is the last */
  uint64_t duration_ns;
} clank_metrics_queue_t;

typedef struct clank_metrics_s {
  uint64_t started_ns; /* for uptime */
  uint64_t generation; /* 1 at start-up, +1 for every reload that switched */
  /* requests by kind and exact status: a fixed table, emitted where nonzero */
  uint64_t requests[CLANK_KIND_COUNT][CLANK_METRICS_STATUS_MAX - CLANK_METRICS_STATUS_MIN + 1];
  uint64_t buckets[CLANK_METRICS_BUCKETS]; /* not cumulative here; +Inf is the last */
  uint64_t duration_ns, count;
  uint64_t reloads_ok, reloads_failed;
  uint64_t published, delivered, rerenders; /* topics (issue 28), counted by clank.core.count */
  uint64_t hibernations, wakes;             /* live sessions letting their trees go, and back */
  uint64_t idle_collections;                /* cycles host/idle_gc.c completed */
  uint64_t topics_dropped; /* publishes not sent on to other workers or instances (pubsub.h) */
  int pubsub_listener;     /* its PostgreSQL listener: CLANK_LISTENER_* */
  clank_metrics_action_t actions[CLANK_METRICS_ACTIONS];
  int nactions;
  /* job runs (issue 32) by queue, in the order the queues were first seen;
     queues[CLANK_METRICS_QUEUES] is "other". nqueues is read by the sibling
     workers while this one adds a queue: it moves on once the name is written. */
  clank_metrics_queue_t queues[CLANK_METRICS_QUEUES + 1];
  int nqueues;
  /* gauges a worker publishes every second for its siblings' scrapes */
  uint64_t lua_bytes;
  unsigned connections, inflight;
  clank_buf_t out; /* the scrape's text, reused (by its own process only) */
} clank_metrics_t;

struct clank_host_s;
struct clank_gen_s;
struct clank_route_s;

void clank_metrics_init(clank_metrics_t *m);
/* A restarted worker takes over its slot: the counters go on from where the dead one left
   them, so the sum over workers never goes down. */
void clank_metrics_restart(clank_metrics_t *m);
void clank_metrics_free(clank_metrics_t *m);
/* The kind of a request held for a handler of g (dispatch's pseudo-routes). */
int clank_metrics_route_kind(const struct clank_gen_s *g, const struct clank_route_s *route);
/* The server's on_answered: counts one answer (status, time since the request's first byte). */
void clank_metrics_answered(clank_conn_t *c, int status, uint64_t ns);
/* Registers the actions of a generation that loaded (names are kept across reloads). */
void clank_metrics_actions(clank_metrics_t *m, lua_State *L, int bridge_ref);
/* A worker's gauges into its shared slot (host/master.h). */
void clank_metrics_publish(struct clank_host_s *h);
/* Whether path is /__clank/health or /__clank/metrics, which it serves. */
int clank_metrics_path(const char *path, size_t n);
/* /__clank/health and /__clank/metrics: answers and returns 1, else 0. */
int clank_metrics_serve(clank_conn_t *c, struct clank_host_s *h, const char *path, size_t n);

#endif
