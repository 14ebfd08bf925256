/* The command line of clank-run (SPEC §2) and the test-only limits. */
#ifndef CLANK_OPTIONS_H
#define CLANK_OPTIONS_H

#include <stdint.h>

#include "http/server.h"
#include "util/log.h"

typedef struct clank_limits_s {
  clank_http_limits_t http;
  uint64_t stop_ms;       /* graceful stop */
  uint64_t live_idle_ms;  /* an idle view session ends (SPEC §11) */
  unsigned live_max_idle; /* idle view sessions kept per worker */
  uint64_t ping_ms;       /* live connections are pinged this often */
  uint64_t silence_ms;    /* and dropped when silent this long */
} clank_limits_t;

typedef struct clank_options_s {
  const char *host;
  int port;
  int check;
  int watch;
  int quiet; /* no access log */
  int workers;
  clank_log_format_t log_format;
  const char *app_path;
  clank_limits_t limits;
} clank_options_t;

enum { CLANK_OPTIONS_RUN, CLANK_OPTIONS_EXIT_OK, CLANK_OPTIONS_USAGE };

/* Parses argv; prints --help/--version itself. Returns one of the enum above. */
int clank_options_parse(clank_options_t *o, int argc, char **argv);

#endif
