/* The host: one loop, the server, the current generation, signals. */
#ifndef CLANK_HOST_H
#define CLANK_HOST_H

#include <uv.h>

#include "host/generation.h"
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
  unsigned live_generations;
  struct clank_live_s *lives;            /* open live channels (SPEC §11) */
  struct static_watch_s *static_watches; /* stylesheets changing under app.static */
  void *db; /* clank.db's pools (lua/db.h), shared by every generation */
  uv_timer_t live_tick;
  clank_metrics_t metrics; /* health and metrics (SPEC §15) */
  int stop_requests;
  int torn_down;
} clank_host_t;

/* generations.c: a reload (the reloader's callback, and SIGHUP's). */
void clank_host_reload(void *h);
/* A retired generation may have become idle: close it soon. */
void clank_host_gen_idle(clank_host_t *h, clank_gen_t *g);
void clank_host_close_retired(clank_host_t *h);

/* Runs clank-run with parsed options; returns the exit code. */
int clank_host_main(const clank_options_t *o);

#endif
