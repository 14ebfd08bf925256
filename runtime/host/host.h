/* The host: one loop, the server, the current generation, signals. */
#ifndef CLANK_HOST_H
#define CLANK_HOST_H

#include <uv.h>

#include "host/generation.h"
#include "host/idle_gc.h"
#include "host/inspector.h"
#include "host/metrics.h"
#include "host/reload.h"
#include "http/server.h"
#include "options.h"
#include "util/log.h"

typedef struct clank_host_s {
  uv_loop_t loop;
  clank_options_t opts;
  clank_log_t log;
  clank_server_t server;
  clank_gen_t *gen;
  uv_signal_t sigint, sigterm, sighup;
  uv_prepare_t flush;
  uv_timer_t stop_timer;
  unsigned char secret[CLANK_SECRET_BYTES]; /* MCP session ids, per run */
  clank_reloader_t reloader;
  clank_gen_t *retired; /* replaced generations finishing their requests */
  uv_timer_t reap;
  uv_timer_t fresh_load; /* replaces a generation whose memory stays near its cap */
  /* The current generation's Lua memory stayed over 90 % of its cap after a
     full collection, so requests are refused for memory: health says
     degraded until a check finds it below again (SPEC §13). */
  int memory_degraded;
  uint64_t memory_checked_at; /* loop time of the last full collection a check made */
  unsigned live_generations;
  struct clank_live_s *lives;            /* open live channels (SPEC §11) */
  struct static_watch_s *static_watches; /* stylesheets changing under app.static */
  void *db; /* clank.db's pools (io/db.h), shared by every generation */
  uv_timer_t live_tick;
  clank_idle_gc_t idle_gc;             /* collection after sessions hibernated */
  clank_metrics_t *metrics;            /* health and metrics (SPEC §15): own_metrics, or */
  clank_metrics_t own_metrics;         /* this worker's slot in the master's shared region */
  const struct clank_worker_s *worker; /* forked by a master (host/master.h); NULL: alone */
  struct clank_handoff_s *handoff;     /* its IPC pipe to the master (host/handoff.h) */
  struct clank_pubsub_s *pubsub;       /* topics to other workers and instances (host/pubsub.h) */
  clank_inspector_log_t inspector;     /* recent requests and reloads (SPEC §16) */
  struct clank_watchdog_s *watchdog;   /* preempts long Lua runs (core/preempt.h) */
  struct reload_job_s *reloading;      /* a generation being built off the loop */
  uv_async_t reload_done;              /* its thread ended */
  int reload_again;                    /* and another reload was asked for meanwhile */
  int stop_requests;
  int torn_down;
  int drained;   /* stopping, and the server has no connection left */
  int jobs_held; /* durable jobs running in any generation (host/jobs.h) */
} clank_host_t;

/* generations.c: a reload (the reloader's callback, and SIGHUP's). */
void clank_host_reload(void *h);
/* reload_done's callback: the built generation is switched in. */
void clank_host_reload_built(uv_async_t *a);
/* Waits for a build in progress and drops what it built (the host stops). */
void clank_host_reload_abandon(clank_host_t *h);
/* Stopping, the server drained and no job running: the loop ends. */
void clank_host_stop_if_done(clank_host_t *h);
/* A retired generation may have become idle: close it soon. */
void clank_host_gen_idle(clank_host_t *h, clank_gen_t *g);
void clank_host_close_retired(clank_host_t *h);
/* A request of g's was refused memory: g is loaded afresh when a full
   collection leaves it over 90 % of its cap (SPEC §13). */
void clank_host_memory_check(clank_host_t *h, clank_gen_t *g);
/* About once a second: the current generation is checked as above when it
   was refused memory, is marked degraded, or holds over 90 % of its cap (a
   heap that stopped allocating is never collected otherwise); at most one
   full collection every limits.memory_check_ms (2 s). */
void clank_host_memory_tick(clank_host_t *h);

/* The options every generation of h loads with (a reload adds its own). */
clank_gen_opts_t clank_host_gen_opts(clank_host_t *h);
/* The log sink the generations' C modules and Lua code write through. */
void clank_host_log_sink(void *ud, const char *level, const char *msg, const char *request_id);

/* Runs clank-run with parsed options; returns the exit code. */
int clank_host_main(const clank_options_t *o);
/* Serves as one process: alone (w NULL) or as a master's worker. */
int clank_host_serve(const clank_options_t *o, const struct clank_worker_s *w);
/* The app secret: CLANK_SECRET's SHA-256, else random; 0, or -1 with a message. */
int clank_host_secret(unsigned char secret[CLANK_SECRET_BYTES]);

#endif
