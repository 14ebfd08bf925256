/* Health and metrics (SPEC §15). The request path only adds to fixed
   counters (no allocation, no Lua); the text is built when scraped. */
#include "host/metrics.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "host/dispatch.h"
#include "host/generation.h"
#include "host/host.h"
#include "host/master.h"
#include "host/pubsub.h"
#include "agent/action.h"
#include "core/alloc.h"
#include "agent/bridge.h"

/* Bucket bounds in ns and as Prometheus writes them. */
static const uint64_t bound_ns[CLANK_METRICS_BUCKETS - 1] = {
    1000000ull,   5000000ull,   10000000ull,   25000000ull,   50000000ull,   100000000ull,
    250000000ull, 500000000ull, 1000000000ull, 2500000000ull, 5000000000ull, 10000000000ull};
static const char *const bound_text[CLANK_METRICS_BUCKETS] = {
    "0.001", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"};
static const char *const kind_name[CLANK_KIND_COUNT] = {"other", "bridge", "mcp",    "route",
                                                        "page",  "live",   "static", "runtime"};

void clank_metrics_init(clank_metrics_t *m) {
  memset(m, 0, sizeof *m);
  m->started_ns = uv_hrtime();
  m->generation = 1;
}

void clank_metrics_restart(clank_metrics_t *m) {
  m->out = (clank_buf_t){0}; /* the dead process's memory */
  m->started_ns = uv_hrtime();
  m->generation = 1;
  m->lua_bytes = 0;
  m->connections = m->inflight = 0;
}

void clank_metrics_free(clank_metrics_t *m) { clank_buf_free(&m->out); }

int clank_metrics_route_kind(const clank_gen_t *g, const clank_route_t *route) {
  if (route == &g->bridge_route) return CLANK_KIND_BRIDGE;
  if (route == &g->mcp_route) return CLANK_KIND_MCP;
  if (route == &g->page_route || route == &g->live_http_route) return CLANK_KIND_PAGE;
  if (route == &g->live_route) return CLANK_KIND_LIVE;
  if (route == &g->static_route) return CLANK_KIND_STATIC;
  return CLANK_KIND_ROUTE;
}

static int starts(const char *p, size_t n, const char *s, size_t k) {
  return n >= k && memcmp(p, s, k) == 0;
}
#define STARTS(p, n, lit) starts(p, n, lit, sizeof lit - 1)
#define IS(p, n, lit) ((n) == sizeof lit - 1 && memcmp(p, lit, n) == 0)

/* An answer given before any handler was chosen: by its path. */
static int path_kind(const char *p, size_t n) {
  if (IS(p, n, "/__clank/mcp")) return CLANK_KIND_MCP;
  if (IS(p, n, "/manifest") || IS(p, n, "/.well-known/clank") || STARTS(p, n, "/actions/"))
    return CLANK_KIND_BRIDGE;
  if (STARTS(p, n, "/__clank/")) return CLANK_KIND_RUNTIME;
  return CLANK_KIND_OTHER;
}

/* The histogram bucket of a duration (the last one is +Inf). */
static int bucket_of(uint64_t ns) {
  int b = 0;
  while (b < CLANK_METRICS_BUCKETS - 1 && ns > bound_ns[b]) b++;
  return b;
}

static clank_metrics_action_t *find_action(clank_metrics_t *m, const char *name, size_t n) {
  for (int i = 0; i < m->nactions; i++)
    if (m->actions[i].len == n && memcmp(m->actions[i].name, name, n) == 0) return &m->actions[i];
  return NULL;
}

void clank_metrics_answered(clank_conn_t *c, int status, uint64_t ns) {
  clank_host_t *h = c->server->data;
  clank_metrics_t *m = h->metrics;
  clank_target_t t; /* split once, for the inspector and for us */
  clank_request_target(&c->req, &t);
  clank_inspector_record(&h->inspector, c, &t, status, ns);
  clank_conn_state_t *st = c->data;
  int kind = st->kind;
  st->kind = CLANK_KIND_OTHER; /* the next request on the connection starts unclassified */
  if (kind == CLANK_KIND_OTHER) kind = path_kind(t.path, t.path_len);
  if (status >= CLANK_METRICS_STATUS_MIN && status <= CLANK_METRICS_STATUS_MAX)
    m->requests[kind][status - CLANK_METRICS_STATUS_MIN]++;
  m->buckets[bucket_of(ns)]++;
  m->duration_ns += ns;
  m->count++;
  /* an action call: POST /actions/<name> of an action the app has */
  if (kind == CLANK_KIND_BRIDGE && c->req.method == HTTP_POST &&
      STARTS(t.path, t.path_len, "/actions/")) {
    clank_metrics_action_t *a = find_action(m, t.path + 9, t.path_len - 9);
    if (a) {
      if (status >= 200 && status < 300)
        a->ok++;
      else
        a->error++;
    }
  }
}

/* count(name, ok): an action call that did not come over the bridge's HTTP
   path (MCP's tools/call, a live view's event); upvalue 1: the metrics. */
static int count_call(lua_State *L) {
  clank_metrics_t *m = lua_touserdata(L, lua_upvalueindex(1));
  size_t n;
  const char *name = luaL_checklstring(L, 1, &n);
  clank_metrics_action_t *a = find_action(m, name, n);
  if (a) {
    if (lua_toboolean(L, 2))
      a->ok++;
    else
      a->error++;
  }
  return 0;
}

/* ---- job runs (issue 32) ---- */

#define OTHER_QUEUE CLANK_METRICS_QUEUES

/* The counters of queue `name` in m: its own, new ones while there is room,
   else "other"'s (which a queue the app itself calls "other" shares: one
   series per label). The sibling workers read nqueues while this one adds a
   queue, so the name is written before nqueues counts it. */
static clank_metrics_queue_t *queue_slot(clank_metrics_t *m, const char *name, size_t n) {
  clank_metrics_queue_t *other = &m->queues[OTHER_QUEUE];
  if (n == 0 || n >= CLANK_METRICS_QUEUE_NAME || (n == 5 && memcmp(name, "other", 5) == 0))
    return other;
  int count = m->nqueues;
  for (int i = 0; i < count; i++)
    if (m->queues[i].len == n && memcmp(m->queues[i].name, name, n) == 0) return &m->queues[i];
  if (count == CLANK_METRICS_QUEUES) return other;
  clank_metrics_queue_t *q = &m->queues[count];
  memcpy(q->name, name, n);
  q->name[n] = '\0';
  q->len = (uint8_t)n;
  __atomic_store_n(&m->nqueues, count + 1, __ATOMIC_RELEASE);
  return q;
}

/* count("job", queue, "done" | "failed" | "dead", seconds): the end of one
   run of a job (lua/clank/jobs/runner.lua). */
static void count_job(lua_State *L, clank_metrics_t *m) {
  size_t n;
  const char *queue = luaL_checklstring(L, 2, &n);
  const char *how = luaL_checkstring(L, 3);
  double seconds = luaL_optnumber(L, 4, 0);
  int end = !strcmp(how, "done")     ? CLANK_JOB_DONE
            : !strcmp(how, "failed") ? CLANK_JOB_FAILED
            : !strcmp(how, "dead")   ? CLANK_JOB_DEAD
                                     : -1;
  if (end < 0) return;
  if (!(seconds > 0)) seconds = 0; /* a clock that stepped back; NaN */
  if (seconds > 1e9) seconds = 1e9;
  uint64_t ns = (uint64_t)(seconds * 1e9);
  clank_metrics_queue_t *q = queue_slot(m, queue, n);
  q->runs[end]++;
  q->buckets[bucket_of(ns)]++;
  q->duration_ns += ns;
}

/* count(what, ...): one event of the topics (issue 28): "published",
   "delivered" or "rerender"; of live sessions: "hibernate", "wake"; of
   jobs: "job" (count_job); upvalue 1: the metrics. */
static int count_event(lua_State *L) {
  clank_metrics_t *m = lua_touserdata(L, lua_upvalueindex(1));
  const char *what = luaL_checkstring(L, 1);
  if (what[0] == 'j')
    count_job(L, m);
  else if (what[0] == 'p')
    m->published++;
  else if (what[0] == 'd')
    m->delivered++;
  else if (what[0] == 'r')
    m->rerenders++;
  else if (what[0] == 'h')
    m->hibernations++;
  else if (what[0] == 'w')
    m->wakes++;
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const clank_metrics_action_t *)a)->name,
                ((const clank_metrics_action_t *)b)->name);
}

void clank_metrics_actions(clank_metrics_t *m, lua_State *L, int bridge_ref) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, bridge_ref);
  clank_bridge_push_actions(L, -1);
  if (lua_istable(L, -1)) {
    for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
      if (lua_type(L, -2) != LUA_TSTRING) continue;
      size_t n;
      const char *name = lua_tolstring(L, -2, &n);
      if (n == 0 || n >= CLANK_METRICS_ACTION_NAME || m->nactions == CLANK_METRICS_ACTIONS ||
          find_action(m, name, n))
        continue;
      clank_metrics_action_t *a = &m->actions[m->nactions++];
      memcpy(a->name, name, n);
      a->len = (uint8_t)n;
    }
  }
  lua_pop(L, 2);
  lua_pushlightuserdata(L, m);
  lua_pushcclosure(L, count_call, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, CLANK_COUNT_CALL_KEY);
  lua_pushlightuserdata(L, m);
  lua_pushcclosure(L, count_event, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, CLANK_COUNT_EVENT_KEY);
  qsort(m->actions, (size_t)m->nactions, sizeof *m->actions,
        by_name); /* scrapes list them sorted */
}

/* ---- the answers ---- */

/* ok; or, while this process refuses requests for memory (SPEC §13), 503
   degraded with the reason, so a balancer's health check takes it out; or,
   while its topics reach no other instance (host/pubsub.h), degraded with
   the reason but 200: it serves its own clients as well as ever. */
static void health(clank_conn_t *c, clank_host_t *h) {
  clank_metrics_t *m = h->metrics;
  unsigned long long generation = m->generation,
                     uptime = (uv_hrtime() - m->started_ns) / 1000000000ull;
  char body[768];
  int n;
  const char *trouble = clank_pubsub_trouble(h);
  if (h->memory_degraded && h->gen)
    n = snprintf(body, sizeof body,
                 "{\"generation\":%llu,\"reason\":\"The app's Lua memory stays over 90 %% of "
                 "its %zu MiB cap: requests are refused until it is loaded afresh.\","
                 "\"status\":\"degraded\",\"uptime\":%llu}",
                 generation, h->gen->alloc.cap >> 20, uptime);
  else if (trouble) /* its text has no character JSON escapes but what pg_state wrote */
    n = snprintf(body, sizeof body,
                 "{\"generation\":%llu,\"reason\":%s,\"status\":\"degraded\",\"uptime\":%llu}",
                 generation, trouble, uptime);
  else
    n = snprintf(body, sizeof body, "{\"generation\":%llu,\"status\":\"ok\",\"uptime\":%llu}",
                 generation, uptime);
  if (n >= (int)sizeof body) n = (int)sizeof body - 1;
  clank_conn_answer(c, h->memory_degraded ? 503 : 200,
                    "content-type: application/json\r\ncache-control: no-store\r\n", body,
                    (size_t)n);
}

static void family(clank_buf_t *b, const char *name, const char *type, const char *help) {
  clank_buf_appendf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value: \, " and newline escaped (text format 0.0.4). */
static void label_value(clank_buf_t *b, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\\' || s[i] == '"')
      clank_buf_appendc(b, '\\');
    else if (s[i] == '\n') {
      clank_buf_appends(b, "\\n");
      continue;
    }
    clank_buf_appendc(b, s[i]);
  }
}

void clank_metrics_publish(clank_host_t *h) {
  clank_metrics_t *m = h->metrics;
  unsigned inflight = 0;
  for (clank_conn_t *k = h->server.conns; k; k = k->next)
    if (k->phase == CLANK_PHASE_BODY || k->phase == CLANK_PHASE_HANDLER) inflight++;
  m->inflight = inflight;
  m->connections = h->server.nconns;
  lua_State *L = h->gen->L;
  /* what its allocator holds: Lua's objects and the buffers live sessions render into, which
     the collector does not count (render/html.c) */
  void *ud;
  if (lua_getallocf(L, &ud) == clank_alloc)
    m->lua_bytes = ((clank_alloc_t *)ud)->used;
  else
    m->lua_bytes = (uint64_t)lua_gc(L, LUA_GCCOUNT) * 1024u + (uint64_t)lua_gc(L, LUA_GCCOUNTB);
}

/* Adds a sibling worker's counters to t (SPEC §13: metrics sum all workers). Its
   slot is read while it writes: a scrape may miss the requests of that instant. */
static void add_worker(clank_metrics_t *t, const clank_metrics_t *w) {
  for (int k = 0; k < CLANK_KIND_COUNT; k++)
    for (int s = 0; s <= CLANK_METRICS_STATUS_MAX - CLANK_METRICS_STATUS_MIN; s++)
      t->requests[k][s] += w->requests[k][s];
  for (int i = 0; i < CLANK_METRICS_BUCKETS; i++) t->buckets[i] += w->buckets[i];
  t->duration_ns += w->duration_ns;
  t->count += w->count;
  t->reloads_ok += w->reloads_ok;
  t->reloads_failed += w->reloads_failed;
  t->published += w->published;
  t->delivered += w->delivered;
  t->rerenders += w->rerenders;
  t->hibernations += w->hibernations;
  t->wakes += w->wakes;
  t->idle_collections += w->idle_collections;
  t->topics_dropped += w->topics_dropped;
  t->lua_bytes += w->lua_bytes;
  t->connections += w->connections;
  t->inflight += w->inflight;
  int nq = __atomic_load_n(&w->nqueues, __ATOMIC_ACQUIRE); /* the names it counts are written */
  if (nq > CLANK_METRICS_QUEUES) nq = CLANK_METRICS_QUEUES;
  for (int i = 0; i <= CLANK_METRICS_QUEUES; i++) {
    if (i < CLANK_METRICS_QUEUES && i >= nq) continue;
    const clank_metrics_queue_t *q = &w->queues[i];
    clank_metrics_queue_t *mine =
        i == OTHER_QUEUE ? &t->queues[OTHER_QUEUE] : queue_slot(t, q->name, q->len);
    for (int e = 0; e < CLANK_JOB_ENDS; e++) mine->runs[e] += q->runs[e];
    for (int b = 0; b < CLANK_METRICS_BUCKETS; b++) mine->buckets[b] += q->buckets[b];
    mine->duration_ns += q->duration_ns;
  }
  int n = w->nactions < CLANK_METRICS_ACTIONS ? w->nactions : CLANK_METRICS_ACTIONS;
  for (int i = 0; i < n; i++) {
    const clank_metrics_action_t *a = &w->actions[i];
    clank_metrics_action_t *mine =
        find_action(t, a->name, a->len < CLANK_METRICS_ACTION_NAME ? a->len : 0);
    if (mine) {
      mine->ok += a->ok;
      mine->error += a->error;
    }
  }
}

/* The queues of m that counted runs, by name, then "other" when it counted any:
   indexes into m->queues; returns how many. */
static int queue_order(const clank_metrics_t *m, int order[CLANK_METRICS_QUEUES + 1]) {
  int n = 0;
  for (int i = 0; i < m->nqueues; i++) {
    int at = n++;
    while (at > 0 && strcmp(m->queues[order[at - 1]].name, m->queues[i].name) > 0) {
      order[at] = order[at - 1];
      at--;
    }
    order[at] = i;
  }
  const clank_metrics_queue_t *other = &m->queues[OTHER_QUEUE];
  if (other->runs[CLANK_JOB_DONE] + other->runs[CLANK_JOB_FAILED] + other->runs[CLANK_JOB_DEAD])
    order[n++] = OTHER_QUEUE;
  return n;
}

static void queue_label(clank_buf_t *b, const clank_metrics_t *m, int i) {
  clank_buf_appends(b, "{queue=\"");
  if (i == OTHER_QUEUE)
    clank_buf_appends(b, "other");
  else
    label_value(b, m->queues[i].name, m->queues[i].len);
  clank_buf_appendc(b, '"');
}

/* clank_jobs_total and clank_job_duration_seconds (issue 32). */
static void job_families(clank_buf_t *b, const clank_metrics_t *m) {
  static const char *const end_name[CLANK_JOB_ENDS] = {"done", "failed", "dead"};
  int order[CLANK_METRICS_QUEUES + 1];
  int n = queue_order(m, order);
  family(b, "clank_jobs_total", "counter",
         "Runs of jobs that ended, by queue and how: done, failed (to run again) or dead "
         "(its last attempt failed).");
  for (int k = 0; k < n; k++)
    for (int e = 0; e < CLANK_JOB_ENDS; e++) {
      clank_buf_appends(b, "clank_jobs_total");
      queue_label(b, m, order[k]);
      clank_buf_appendf(b, ",state=\"%s\"} %llu\n", end_name[e],
                        (unsigned long long)m->queues[order[k]].runs[e]);
    }
  family(b, "clank_job_duration_seconds", "histogram", "Time a run of a job took, by queue.");
  for (int k = 0; k < n; k++) {
    const clank_metrics_queue_t *q = &m->queues[order[k]];
    uint64_t cumulative = 0;
    for (int i = 0; i < CLANK_METRICS_BUCKETS; i++) {
      cumulative += q->buckets[i];
      clank_buf_appends(b, "clank_job_duration_seconds_bucket");
      queue_label(b, m, order[k]);
      clank_buf_appendf(b, ",le=\"%s\"} %llu\n", bound_text[i], (unsigned long long)cumulative);
    }
    clank_buf_appends(b, "clank_job_duration_seconds_sum");
    queue_label(b, m, order[k]);
    clank_buf_appendf(b, "} %.9f\n", (double)q->duration_ns / 1e9);
    clank_buf_appends(b, "clank_job_duration_seconds_count");
    queue_label(b, m, order[k]);
    clank_buf_appendf(b, "} %llu\n", (unsigned long long)cumulative);
  }
}

static void metrics(clank_conn_t *c, clank_host_t *h, clank_metrics_t *own) {
  clank_metrics_publish(h);
  clank_metrics_t *m = own;
  if (h->worker) { /* the sum, in a copy: the slots keep counting meanwhile */
    m = malloc(sizeof *m);
    if (m == NULL) {
      clank_conn_text(c, 503, "Out of memory.\n");
      return;
    }
    memcpy(m, own, sizeof *m);
    for (int i = 0; i < h->worker->count; i++)
      if (i != h->worker->index) add_worker(m, &h->worker->slots[i]);
  }
  clank_buf_t *b = &own->out;
  clank_buf_reset(b);
  family(b, "clank_requests_total", "counter", "Requests answered, by kind and status.");
  for (int k = 0; k < CLANK_KIND_COUNT; k++)
    for (int s = 0; s <= CLANK_METRICS_STATUS_MAX - CLANK_METRICS_STATUS_MIN; s++)
      if (m->requests[k][s])
        clank_buf_appendf(b, "clank_requests_total{kind=\"%s\",status=\"%d\"} %llu\n", kind_name[k],
                          s + CLANK_METRICS_STATUS_MIN, (unsigned long long)m->requests[k][s]);

  family(b, "clank_request_duration_seconds", "histogram",
         "Time from a request's first byte to its answer's head.");
  uint64_t cumulative = 0;
  for (int i = 0; i < CLANK_METRICS_BUCKETS; i++) {
    cumulative += m->buckets[i];
    clank_buf_appendf(b, "clank_request_duration_seconds_bucket{le=\"%s\"} %llu\n", bound_text[i],
                      (unsigned long long)cumulative);
  }
  clank_buf_appendf(b, "clank_request_duration_seconds_sum %.9f\n", (double)m->duration_ns / 1e9);
  clank_buf_appendf(b, "clank_request_duration_seconds_count %llu\n", (unsigned long long)m->count);

  family(b, "clank_inflight_requests", "gauge", "Requests being read or handled.");
  clank_buf_appendf(b, "clank_inflight_requests %u\n", m->inflight);
  family(b, "clank_connections", "gauge", "Open client connections.");
  clank_buf_appendf(b, "clank_connections %u\n", m->connections);

  family(b, "clank_lua_memory_bytes", "gauge",
         "Memory the current generation's Lua state holds: its objects and the HTML its live "
         "sessions keep.");
  clank_buf_appendf(b, "clank_lua_memory_bytes %llu\n", (unsigned long long)m->lua_bytes);

  family(b, "clank_pubsub_published_total", "counter", "Publishes to topics.");
  clank_buf_appendf(b, "clank_pubsub_published_total %llu\n", (unsigned long long)m->published);
  family(b, "clank_pubsub_delivered_total", "counter",
         "Publishes delivered to a subscriber or a view session.");
  clank_buf_appendf(b, "clank_pubsub_delivered_total %llu\n", (unsigned long long)m->delivered);
  family(b, "clank_pubsub_dropped_total", "counter",
         "Publishes not sent on to the other workers (the master's buffer was full) or "
         "instances (the PostgreSQL listener was down).");
  clank_buf_appendf(b, "clank_pubsub_dropped_total %llu\n", (unsigned long long)m->topics_dropped);
  unsigned listeners[3] = {0};
  listeners[own->pubsub_listener]++;
  for (int i = 0; h->worker && i < h->worker->count; i++)
    if (i != h->worker->index) listeners[h->worker->slots[i].pubsub_listener]++;
  if (listeners[CLANK_LISTENER_UP] + listeners[CLANK_LISTENER_DOWN] > 0) {
    family(b, "clank_pubsub_listeners", "gauge",
           "PostgreSQL listeners of topics (one per worker), by state.");
    clank_buf_appendf(b, "clank_pubsub_listeners{state=\"up\"} %u\n", listeners[CLANK_LISTENER_UP]);
    clank_buf_appendf(b, "clank_pubsub_listeners{state=\"down\"} %u\n",
                      listeners[CLANK_LISTENER_DOWN]);
  }
  family(b, "clank_live_rerenders_total", "counter", "View sessions re-loaded for a publish.");
  clank_buf_appendf(b, "clank_live_rerenders_total %llu\n", (unsigned long long)m->rerenders);
  family(b, "clank_live_hibernations_total", "counter",
         "View sessions that let their tree go after a quiet while.");
  clank_buf_appendf(b, "clank_live_hibernations_total %llu\n", (unsigned long long)m->hibernations);
  family(b, "clank_live_wakes_total", "counter", "Hibernated view sessions rendered again.");
  clank_buf_appendf(b, "clank_live_wakes_total %llu\n", (unsigned long long)m->wakes);
  family(b, "clank_lua_idle_collections_total", "counter",
         "Collection cycles run in idle time after sessions hibernated.");
  clank_buf_appendf(b, "clank_lua_idle_collections_total %llu\n",
                    (unsigned long long)m->idle_collections);
  family(b, "clank_reloads_total", "counter", "Reloads, by result.");
  clank_buf_appendf(b, "clank_reloads_total{result=\"ok\"} %llu\n",
                    (unsigned long long)m->reloads_ok);
  clank_buf_appendf(b, "clank_reloads_total{result=\"failed\"} %llu\n",
                    (unsigned long long)m->reloads_failed);

  family(b, "clank_action_calls_total", "counter",
         "Action calls (bridge, MCP, live views), by action and outcome.");
  for (int i = 0; i < m->nactions; i++) {
    const clank_metrics_action_t *a = &m->actions[i];
    for (int e = 0; e < 2; e++) {
      clank_buf_appends(b, "clank_action_calls_total{action=\"");
      label_value(b, a->name, a->len);
      clank_buf_appendf(b, "\",outcome=\"%s\"} %llu\n", e ? "error" : "ok",
                        (unsigned long long)(e ? a->error : a->ok));
    }
  }
  job_families(b, m);
  clank_conn_answer(c, 200,
                    "content-type: text/plain; version=0.0.4; charset=utf-8\r\n"
                    "cache-control: no-store\r\n",
                    b->data, b->len);
  if (m != own) free(m);
}

int clank_metrics_path(const char *path, size_t n) {
  return IS(path, n, "/__clank/health") || IS(path, n, "/__clank/metrics");
}

int clank_metrics_serve(clank_conn_t *c, clank_host_t *h, const char *path, size_t n) {
  int which = IS(path, n, "/__clank/health") ? 1 : IS(path, n, "/__clank/metrics") ? 2 : 0;
  if (which == 0) return 0;
  if (c->req.method != HTTP_GET && c->req.method != HTTP_HEAD) {
    clank_conn_answer(c, 405, "content-type: text/plain; charset=utf-8\r\nallow: GET, HEAD\r\n",
                      "Method not allowed.\n", 20);
    return 1;
  }
  if (which == 1)
    health(c, h);
  else
    metrics(c, h, h->metrics);
  return 1;
}
