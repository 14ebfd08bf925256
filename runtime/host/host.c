/* The host: loads the app, serves it, stops on signals (SPEC §2, §13). */
#include "host/host.h"

#include "host/dispatch.h"
#include "host/exchange.h"
#include "host/jobs.h"
#include "host/live.h"
#include "host/announce.h"
#include "host/handoff.h"
#include "host/master.h"
#include "host/pubsub.h"
#include "host/static.h"
#include "agent/bridge.h"
#include "io/db.h"
#include "core/preempt.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <lauxlib.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The access log (and every other line) goes out once per loop iteration. */
static void flush_log(uv_prepare_t *p) {
  clank_host_t *h = p->data;
  clank_log_repeats(&h->log);
  clank_log_flush(&h->log);
}

/* Raises the soft file limit to the hard one; the connection cap follows it. */
static unsigned raise_nofile(clank_host_t *h) {
  struct rlimit rl;
  unsigned cap = h->opts.limits.http.max_connections;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return cap;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  /* Leave room for the listener, the log, app files and database handles. */
  rlim_t usable = rl.rlim_cur > 128 ? rl.rlim_cur - 64 : rl.rlim_cur / 2;
  if (rl.rlim_cur != RLIM_INFINITY && usable < cap) {
    clank_log_msg(&h->log, "warn",
                  "the file limit (%llu) lowers the connection cap from %u to %llu",
                  (unsigned long long)rl.rlim_cur, cap, (unsigned long long)usable);
    cap = (unsigned)usable;
  }
  return cap;
}

static void close_handle(uv_handle_t *handle, void *arg) {
  (void)arg;
  if (!uv_is_closing(handle)) uv_close(handle, NULL);
}

static void teardown(clank_host_t *h) {
  if (h->torn_down) return;
  h->torn_down = 1;
  clank_host_reload_abandon(h); /* its thread tells reload_done, which closes below */
  if (h->gen) clank_sched_cancel_all(&h->gen->sched);
  for (clank_gen_t *g = h->retired; g; g = g->next_retired) clank_sched_cancel_all(&g->sched);
  clank_reloader_close(&h->reloader);
  clank_pubsub_stop(h);
  clank_static_unwatch(h);
  clank_db_registry_close(h->db); /* joins the pools' threads, closes their handles */
  uv_walk(&h->loop, close_handle, NULL);
}

/* The last connection closed after a stop: the process ends once its jobs
   have finished or given their leases back too (host/jobs.h). */
static void server_drained(clank_server_t *s) {
  clank_host_t *h = s->data;
  h->drained = 1;
  clank_host_stop_if_done(h);
}

static void stop_now(uv_timer_t *t) { teardown(t->data); }

void clank_host_stop_if_done(clank_host_t *h) {
  /* from the loop, not now: the caller may be a job's Lua code the teardown frees */
  if (h->drained && h->jobs_held <= 0 && !h->torn_down)
    uv_timer_start(&h->stop_timer, stop_now, 0, 0);
}

static void stop_deadline(uv_timer_t *t) {
  clank_host_t *h = t->data;
  clank_log_msg(&h->log, "warn", "stop: requests still running after %llu ms were cut off",
                (unsigned long long)h->opts.limits.stop_ms);
  clank_server_close_all(&h->server);
  teardown(h);
}

static void on_signal(uv_signal_t *sig, int signum) {
  clank_host_t *h = sig->data;
  if (signum == SIGHUP) {
    clank_host_reload(h); /* even with --no-watch */
    return;
  }
  if (++h->stop_requests > 1) {
    clank_log_msg(&h->log, "warn", "second signal: exiting at once");
    clank_log_flush(&h->log);
    _exit(1);
  }
  clank_log_msg(&h->log, "info", "stopping: finishing requests in flight");
  uv_timer_start(&h->stop_timer, stop_deadline, h->opts.limits.stop_ms, 0);
  uv_unref((uv_handle_t *)&h->stop_timer);
  clank_live_stop(h);
  /* jobs give their leases back a second before the cut-off, so none waits for its lease */
  uint64_t stop_ms = h->opts.limits.stop_ms;
  clank_jobs_stop(h, stop_ms > 2000 ? stop_ms - 1000 : stop_ms / 2);
  clank_server_stop(&h->server);
}

static void start_signal(clank_host_t *h, uv_signal_t *sig, int signum) {
  uv_signal_init(&h->loop, sig);
  sig->data = h;
  uv_signal_start(sig, on_signal, signum);
  uv_unref((uv_handle_t *)sig);
}

static void tick_live(uv_timer_t *t) {
  clank_host_t *h = t->data;
  clank_live_tick(h);
  clank_host_memory_tick(h);
  clank_idle_gc_tick(h);
  if (h->worker) clank_metrics_publish(h); /* for its siblings' scrapes */
}

/* The log sink the generations' C modules and Lua code write through. */
void clank_host_log_sink(void *ud, const char *level, const char *msg, const char *request_id) {
  clank_host_t *h = ud;
  if (strcmp(level, "debug") == 0 && !h->log.debug) return;
  clank_log_request(&h->log, request_id, level, "%s", msg);
}

clank_gen_opts_t clank_host_gen_opts(clank_host_t *h) {
  return (clank_gen_opts_t){
      .loop = &h->loop,
      .app_path = h->opts.app_path,
      .secret = h->secret,
      .on_file = clank_reloader_file,
      .file_hash = clank_reloader_hash_file,
      .ud = &h->reloader,
      .live_idle_ms = h->opts.limits.live_idle_ms,
      .live_max_idle = h->opts.limits.live_max_idle,
      .live_hibernate_ms = h->opts.limits.live_hibernate_ms,
      .worker_index = h->worker ? h->worker->index : 0,
      .worker_count = h->worker ? h->worker->count : 1,
      .development = h->opts.development,
      .db = h->db,
      .log = clank_host_log_sink,
      .log_ud = h,
      .watchdog = h->watchdog,
      .cpu_limit_ms = h->opts.cpu_limit_ms,
      .memory_limit = (size_t)h->opts.memory_limit_mib << 20,
      .public_origin = h->opts.public_origin_len ? h->opts.public_origin : NULL,
      .public_origin_len = h->opts.public_origin_len,
      .public_host_at = h->opts.public_host_at,
  };
}

int clank_host_secret(unsigned char secret[CLANK_SECRET_BYTES]) {
  /* The app secret (SPEC §11, §13, §15): CLANK_SECRET's SHA-256, so instances sharing it
     verify each other's session tokens, MCP sessions and signed cookies; else per run. */
  const char *configured = getenv("CLANK_SECRET");
  if (configured && *configured) {
    unsigned int n = 0;
    EVP_Digest(configured, strlen(configured), secret, &n, EVP_sha256(), NULL);
  } else if (RAND_bytes(secret, CLANK_SECRET_BYTES) != 1) {
    fprintf(stderr, "clank-run: no random bytes for the session key\n");
    return -1;
  }
  return 0;
}

static int load(clank_host_t *h) {
  char err[4096];
  if (h->worker) /* the master's, so that every worker verifies the others' tokens */
    memcpy(h->secret, h->worker->secret, sizeof h->secret);
  else if (clank_host_secret(h->secret) != 0)
    return -1;
  clank_reloader_init(&h->reloader, &h->loop, &h->log, h->opts.watch && !h->opts.check,
                      clank_host_reload, h);
  clank_gen_opts_t go = clank_host_gen_opts(h);
  h->gen = clank_gen_load(&go, err, sizeof err);
  if (h->gen == NULL) {
    clank_log_flush(&h->log);
    fprintf(stderr, "clank-run: cannot load %s:\n%s\n", h->opts.app_path, err);
    return -1;
  }
  clank_reloader_loaded(&h->reloader);
  clank_metrics_actions(h->metrics, h->gen->L, h->gen->bridge_ref);
  if (h->opts.watch && !h->opts.check) clank_static_watch(h, h->gen);
  h->live_generations = 1;
  return 0;
}

/* Topics to the other workers and instances: --pubsub, else CLANK_PUBSUB_URL,
   else the app's pubsub (read once: a reload does not move it). */
static int start_pubsub(clank_host_t *h) {
  const char *url = h->opts.pubsub_url;
  if (url == NULL || *url == '\0') url = getenv("CLANK_PUBSUB_URL");
  lua_State *L = h->gen->L;
  int top = lua_gettop(L);
  if ((url == NULL || *url == '\0') && h->gen->app_ref != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, h->gen->app_ref);
    if (lua_istable(L, -1) && lua_getfield(L, -1, "pubsub") == LUA_TSTRING)
      url = lua_tostring(L, -1);
  }
  char err[512];
  int rc = clank_pubsub_start(h, url, err, sizeof err);
  lua_settop(L, top);
  if (rc != 0) {
    clank_log_flush(&h->log);
    fprintf(stderr, "clank-run: --pubsub: %s\n", err);
  }
  return rc;
}

int clank_host_main(const clank_options_t *o) {
#ifdef __GLIBC__
  /* One malloc arena: a reload builds the new state on a thread of its own,
     whose arena kept its pages after the state moved to the loop (RSS grew
     by a step over the first reloads). The loop's small allocations come
     from the Lua allocator's cache, so the shared arena's lock is rarely
     taken. */
  mallopt(M_ARENA_MAX, 1);
#endif
  if (o->workers > 1 && !o->check) return clank_master_main(o);
  return clank_host_serve(o, NULL);
}

int clank_host_serve(const clank_options_t *o, const clank_worker_t *w) {
  clank_host_t *h = calloc(1, sizeof *h);
  if (h == NULL) return 1;
  h->opts = *o;
  h->worker = w;
  h->metrics = w ? &w->slots[w->index] : &h->own_metrics;
  clank_log_init(&h->log, o->log_format, 2);
  h->log.quiet = o->quiet;
  h->log.worker = w ? w->index + 1 : 0;
  h->log.credential_prefix = "/__clank/sessions/";
  h->log.debug = getenv("CLANK_DEBUG") != NULL && *getenv("CLANK_DEBUG") != '\0';
  signal(SIGPIPE, SIG_IGN);
  uv_loop_init(&h->loop);
  /* the time the loop waits for I/O: host/idle_gc.c's measure of how busy it is */
  uv_loop_configure(&h->loop, UV_METRICS_IDLE_TIME);
  if (w && h->metrics->started_ns != 0)
    clank_metrics_restart(h->metrics);
  else
    clank_metrics_init(h->metrics);
  /* clank.db's pools, shared by every generation (each one's sched.db); the
     registry frees itself once closed and its last pool is gone. */
  h->db = clank_db_registry_new(&h->loop);
  h->watchdog = o->limits.preempt ? clank_watchdog_start() : NULL;
  int code = 0;
  if (load(h) != 0) {
    code = 1;
    goto done;
  }
  if (o->check) {
    /* exactly the bytes GET /manifest serves */
    lua_State *L = h->gen->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, h->gen->bridge_ref);
    clank_bridge_push_manifest(L, -1);
    size_t n;
    const char *m = lua_tolstring(L, -1, &n);
    fwrite(m, 1, n, stdout);
    fflush(stdout);
    lua_pop(L, 2);
    goto done;
  }

  if (start_pubsub(h) != 0) { /* before the start-up line: a bad URL is a failed start */
    code = 1;
    goto done;
  }
  h->server.data = h;
  h->server.handler = &clank_dispatch_handler;
  h->server.conn_data_size = sizeof(clank_conn_state_t);
  h->server.log = &h->log;
  h->server.limits = o->limits.http;
  h->server.limits.max_connections = raise_nofile(h);
  h->server.on_drained = server_drained;
  h->server.reuseport = w != NULL;
  h->server.on_answered = clank_metrics_answered;
  char err[256];
  int port;
  if (clank_server_listen(&h->server, &h->loop, o->host, o->port, &port, err, sizeof err) != 0) {
    clank_announce_listen_hint(err, sizeof err);
    clank_log_flush(&h->log);
    fprintf(stderr, "clank-run: %s\n", err);
    code = 1;
    goto done;
  }
  uv_prepare_init(&h->loop, &h->flush);
  h->flush.data = h;
  uv_prepare_start(&h->flush, flush_log);
  uv_unref((uv_handle_t *)&h->flush);
  uv_timer_init(&h->loop, &h->live_tick);
  h->live_tick.data = h;
  uv_timer_start(&h->live_tick, tick_live, 1000, 1000);
  h->memory_checked_at = uv_now(&h->loop); /* checks count from the start */
  uv_unref((uv_handle_t *)&h->live_tick);
  clank_idle_gc_init(h);
  uv_timer_init(&h->loop, &h->reap);
  h->reap.data = h;
  uv_unref((uv_handle_t *)&h->reap);
  uv_async_init(&h->loop, &h->reload_done, clank_host_reload_built);
  h->reload_done.data = h;
  uv_unref((uv_handle_t *)&h->reload_done);
  uv_timer_init(&h->loop, &h->fresh_load);
  h->fresh_load.data = h;
  uv_unref((uv_handle_t *)&h->fresh_load);
  uv_timer_init(&h->loop, &h->stop_timer);
  h->stop_timer.data = h;
  uv_unref((uv_handle_t *)&h->stop_timer);
  start_signal(h, &h->sigint, SIGINT);
  start_signal(h, &h->sigterm, SIGTERM);
  start_signal(h, &h->sighup, SIGHUP);
  clank_watchdog_take_signals(h->watchdog); /* after libuv's handlers, which it chains */

  if (w) {
    /* the master prints the one start-up line once every worker listens */
    if (clank_handoff_start(h, h->gen->name) != 0) {
      clank_log_msg(&h->log, "error", "worker %d: no pipe to the master", w->index);
      code = 1;
      goto done;
    }
  } else {
    const char *shown = strchr(o->host, ':') ? "[" : "";
    printf("clank-run: serving %s at http://%s%s%s:%d/\n", h->gen->name, shown, o->host,
           *shown ? "]" : "", port);
    fflush(stdout);
    clank_announce_urls(&h->log, o, port);
  }
  h->gen->sched.loop_running = 1;
  clank_jobs_attach(h, h->gen);
  uv_run(&h->loop, UV_RUN_DEFAULT);

done:
  teardown(h);
  while (uv_loop_close(&h->loop) == UV_EBUSY) uv_run(&h->loop, UV_RUN_DEFAULT);
  clank_host_close_retired(h);
  clank_handoff_free(h);
  clank_pubsub_free(h);
  clank_dispatch_free_leftovers(&h->server);
  if (h->gen) {
    clank_exchange_forget(h->gen);
    clank_gen_close(h->gen);
  }
  clank_watchdog_stop(h->watchdog);
  clank_log_free(&h->log);
  clank_metrics_free(h->metrics);
  free(h);
  return code;
}
