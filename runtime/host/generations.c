/* Hot reload's hands (SPEC §14): load a new generation beside the running
   one, switch at once, and retire the old one — it finishes what it has in
   flight, bounded by its action timeout plus 5 s, then its state closes. */
#include <malloc.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/dispatch.h"
#include "host/exchange.h"
#include "host/host.h"
#include "host/jobs.h"
#include "host/live.h"
#include "host/pubsub.h"
#include "host/static.h"
#include "agent/bridge.h"
#include "data/json.h"

#define LINGER_MS 5000

/* ---- what changed in the contract ---- */

typedef struct contract_s {
  int n;
  char **names; /* sorted, as the manifest lists them */
  char **json;  /* each action's manifest entry, canonical */
} contract_t;

static void read_contract(clank_gen_t *g, contract_t *c) {
  lua_State *L = g->L;
  memset(c, 0, sizeof *c);
  lua_rawgeti(L, LUA_REGISTRYINDEX, g->bridge_ref);
  clank_bridge_push_manifest(L, -1);
  size_t len;
  const char *m = lua_tolstring(L, -1, &len);
  clank_json_decode(L, m, len);
  lua_getfield(L, -1, "actions");
  int n = (int)luaL_len(L, -1);
  c->names = calloc((size_t)n + 1, sizeof *c->names);
  c->json = calloc((size_t)n + 1, sizeof *c->json);
  clank_buf_t buf = {0};
  for (int i = 1; i <= n && c->names && c->json; i++) {
    lua_rawgeti(L, -1, i);
    lua_getfield(L, -1, "name");
    c->names[c->n] = strdup(lua_tostring(L, -1));
    lua_pop(L, 1);
    clank_buf_reset(&buf);
    clank_json_encode(L, lua_gettop(L), 0, &buf); /* decoded from canonical JSON: cannot fail */
    c->json[c->n] = strndup(buf.data, buf.len);
    c->n++;
    lua_pop(L, 1);
  }
  clank_buf_free(&buf);
  lua_pop(L, 4); /* bridge, manifest, decoded, actions */
}

static void free_contract(contract_t *c) {
  for (int i = 0; i < c->n; i++) {
    free(c->names[i]);
    free(c->json[i]);
  }
  free(c->names);
  free(c->json);
}

static int find(const contract_t *c, const char *name) {
  for (int i = 0; i < c->n; i++)
    if (strcmp(c->names[i], name) == 0) return i;
  return -1;
}

static void list_names(clank_buf_t *out, const contract_t *in, const contract_t *other,
                       int changed) {
  size_t start = out->len;
  for (int i = 0; i < in->n; i++) {
    int j = find(other, in->names[i]);
    int take = changed ? (j >= 0 && strcmp(in->json[i], other->json[j]) != 0) : j < 0;
    if (!take) continue;
    if (out->len > start) clank_buf_appendc(out, ',');
    clank_buf_appends(out, in->names[i]);
  }
  if (out->len == start) clank_buf_appends(out, "none");
}

/* ---- retiring ---- */

static void close_generation(clank_host_t *h, clank_gen_t *g) {
  h->jobs_held -= g->jobs_held; /* a generation dropped past its bound takes its jobs along */
  g->jobs_held = 0;
  clank_gen_t **p = &h->retired;
  while (*p && *p != g) p = &(*p)->next_retired;
  if (*p) *p = g->next_retired;
  clank_exchange_forget(g);
  clank_gen_close(g);
#ifdef __GLIBC__
  /* The state was built on a thread of libuv's pool, in that thread's malloc
     arena: give its freed pages back, or each pool thread keeps a heap's worth. */
  malloc_trim(0);
#endif
  h->live_generations--;
  clank_log_msg(&h->log, "info", "generation closed; live generations: %u", h->live_generations);
}

/* Closes retired generations that are idle, drops those past their bound,
   and sets the timer for the next bound. */
static void reap(uv_timer_t *t) {
  clank_host_t *h = t->data;
  uint64_t now = uv_now(&h->loop), next = 0;
  for (clank_gen_t *g = h->retired, *following; g; g = following) {
    following = g->next_retired;
    int overdue = g->inflight > 0 && now >= g->retire_deadline;
    if (overdue) {
      clank_log_msg(&h->log, "warn",
                    "a retired generation still had %d request(s) after its bound: dropped",
                    g->inflight);
      clank_dispatch_drop(&h->server, g);
    }
    if (g->inflight <= 0 || overdue)
      close_generation(h, g);
    else if (next == 0 || g->retire_deadline < next)
      next = g->retire_deadline;
  }
  if (next) uv_timer_start(&h->reap, reap, next - now, 0);
}

void clank_host_gen_idle(clank_host_t *h, clank_gen_t *g) {
  /* Not now: the caller may still be inside g's state. */
  if (g->retired && g->inflight <= 0 && !h->torn_down) uv_timer_start(&h->reap, reap, 0, 0);
}

static void retire(clank_host_t *h, clank_gen_t *g) {
  g->retired = 1;
  g->retire_deadline = uv_now(&h->loop) + (uint64_t)g->action_timeout_ms + LINGER_MS;
  g->next_retired = h->retired;
  h->retired = g;
  clank_sched_retire(&g->sched);
  uv_timer_start(&h->reap, reap, 0, 0);
}

void clank_host_close_retired(clank_host_t *h) {
  while (h->retired) {
    clank_gen_t *g = h->retired;
    clank_dispatch_drop(&h->server, g);
    close_generation(h, g);
  }
}

static void fresh_load(uv_timer_t *t) { clank_host_reload(t->data); }

static int over_nine_tenths(const clank_alloc_t *a) { return a->used > a->cap / 10 * 9; }

void clank_host_memory_check(clank_host_t *h, clank_gen_t *g) {
  if (g != h->gen || h->torn_down) {
    g->alloc.pressure = 0;
    return;
  }
  /* A flood of refused requests must not become a full collection each:
     the tick checks again (pressure stays set) once the interval passed. */
  if (uv_now(&h->loop) - h->memory_checked_at < h->opts.limits.memory_check_ms) return;
  g->alloc.pressure = 0;
  lua_gc(g->L, LUA_GCCOLLECT);
  h->memory_checked_at = uv_now(&h->loop);
  if (!over_nine_tenths(&g->alloc)) {
    if (h->memory_degraded)
      clank_log_msg(&h->log, "info", "the app's Lua memory is back to %zu of its %zu MiB",
                    g->alloc.used >> 20, g->alloc.cap >> 20);
    h->memory_degraded = 0;
    return;
  }
  h->memory_degraded = 1;
  clank_log_msg(&h->log, "warn",
                "the app's Lua memory stays at %zu of its %zu MiB after a full collection: "
                "loading the app afresh",
                g->alloc.used >> 20, g->alloc.cap >> 20);
  uv_timer_start(&h->fresh_load, fresh_load, 0, 0);
}

void clank_host_memory_tick(clank_host_t *h) {
  clank_gen_t *g = h->gen;
  if (g == NULL || g->alloc.cap == 0 || h->torn_down) return;
  if (!g->alloc.pressure && !h->memory_degraded && !over_nine_tenths(&g->alloc)) return;
  clank_host_memory_check(h, g);
}

/* ---- reloading ---- */

static void log_failure(clank_host_t *h, const char *err) {
  /* The error's first line names file:line; the traceback follows. */
  clank_log_msg_colour(&h->log, "error", "\x1b[1;31m", "reload failed, the running app stays: %s",
                       err);
}

/* A reload's new generation is built on a thread of its own, so the loop
   keeps serving while app.lua runs (SPEC §13), and a slow load never holds
   one of libuv's pool threads (DNS, files) nor gives each of them a malloc
   arena and a stack's worth of memory; the switch happens back on the loop,
   told through h->reload_done. One build at a time: a reload asked for
   meanwhile runs once this one ends. */
typedef struct reload_job_s {
  uv_thread_t thread;
  clank_host_t *h;
  clank_gen_opts_t go;
  clank_gen_t *g;
  uint64_t t0;
  char err[4096];
  clank_buf_t failed_log, failed_files;
} reload_job_t;

static void build(void *arg) {
  reload_job_t *job = arg;
  job->g = clank_gen_load(&job->go, job->err, sizeof job->err);
  uv_async_send(&job->h->reload_done);
}

static void free_job(reload_job_t *job) {
  clank_buf_free(&job->failed_log);
  clank_buf_free(&job->failed_files);
  free(job);
}

void clank_host_reload_abandon(clank_host_t *h) {
  reload_job_t *job = h->reloading;
  if (job == NULL) return;
  uv_thread_join(&job->thread);
  h->reloading = NULL;
  if (job->g) clank_gen_close(job->g);
  free_job(job);
}

static void switch_to(clank_host_t *h, clank_gen_t *g, uint64_t t0) {
  h->metrics->reloads_ok++;
  clank_inspector_reload(&h->inspector, 1, uv_hrtime() - t0, NULL);
  h->metrics->generation++;
  clank_metrics_actions(h->metrics, g->L, g->bridge_ref);
  clank_pubsub_attach(h, g);
  clank_gen_t *old = h->gen;
  contract_t before, after;
  read_contract(old, &before);
  read_contract(g, &after);
  clank_buf_t changes = {0};
  clank_buf_appends(&changes, "actions added: ");
  list_names(&changes, &after, &before, 0);
  clank_buf_appends(&changes, "; removed: ");
  list_names(&changes, &before, &after, 0);
  clank_buf_appends(&changes, "; changed: ");
  list_names(&changes, &after, &before, 1);
  free_contract(&before);
  free_contract(&after);

  h->gen = g; /* new requests go to the new generation from here on */
  if (h->memory_degraded && !over_nine_tenths(&g->alloc)) {
    h->memory_degraded = 0; /* the fresh state is what it was loaded for */
    clank_log_msg(&h->log, "info", "the app's Lua memory is back to %zu of its %zu MiB",
                  g->alloc.used >> 20, g->alloc.cap >> 20);
  }
  if (h->opts.watch) clank_static_watch(h, g);
  h->live_generations++;
  clank_live_move(h, old, g); /* before retiring: its sessions' handlers may still finish there */
  retire(h, old);
  clank_jobs_attach(h, g); /* after retiring: the old runner claims no more */
  clank_log_msg(&h->log, "info", "reloaded in %.1f ms; %.*s", (double)(uv_hrtime() - t0) / 1e6,
                (int)changes.len, changes.data);
  clank_buf_free(&changes);
}

void clank_host_reload_built(uv_async_t *a) {
  clank_host_t *h = a->data;
  reload_job_t *job = h->reloading;
  if (job == NULL) return;
  uv_thread_join(&job->thread); /* it has just ended: this does not wait */
  clank_gen_t *g = job->g;
  h->reloading = NULL;
  if (h->torn_down || h->stop_requests) {
    if (g) clank_gen_close(g);
    free_job(job);
    return;
  }
  clank_reloader_begin(&h->reloader);
  if (g) /* tells the reloader the files it loaded */
    clank_gen_attach(g, &job->go);
  else
    clank_gen_tell_kept(&job->go, &job->failed_log, &job->failed_files);
  clank_buf_free(&job->failed_log);
  clank_buf_free(&job->failed_files);
  clank_reloader_end(&h->reloader, g != NULL);
  if (g) {
    switch_to(h, g, job->t0);
  } else if (!clank_reloader_current(&h->reloader)) {
    /* it may have read a file half written: what is there now loads next */
    clank_log_msg(&h->log, "info", "a file changed while the app loaded: loading it again");
  } else {
    h->metrics->reloads_failed++;
    clank_inspector_reload(&h->inspector, 0, uv_hrtime() - job->t0, job->err);
    log_failure(h, job->err);
    clank_live_app_failed(h, job->err); /* development: the open pages show it */
  }
  free(job);
  if (h->reload_again) {
    h->reload_again = 0;
    clank_host_reload(h);
  }
}

void clank_host_reload(void *ud) {
  clank_host_t *h = ud;
  if (h->torn_down || h->stop_requests) return;
  if (h->reloading) {
    h->reload_again = 1;
    return;
  }
  reload_job_t *job = calloc(1, sizeof *job);
  if (job == NULL) {
    log_failure(h, "out of memory");
    return;
  }
  job->h = h;
  job->t0 = uv_hrtime();
  job->go = clank_host_gen_opts(h);
  job->go.loop_running = 1;
  job->go.off_loop = 1;
  job->go.failed_log = &job->failed_log;
  job->go.failed_files = &job->failed_files;
  h->reloading = job;
  if (uv_thread_create(&job->thread, build, job) != 0) {
    h->reloading = NULL;
    free(job);
    log_failure(h, "cannot start a thread to load the app on");
  }
}
