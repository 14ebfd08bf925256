/* The host: one loop, the server, the current generation, signals. */
#ifndef CLANK_HOST_H
#define CLANK_HOST_H

#include <uv.h>

#include "generation.h"
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
  int stop_requests;
  int torn_down;
} clank_host_t;

/* Runs clank-run with parsed options; returns the exit code. */
int clank_host_main(const clank_options_t *o);

#endif
