/* The command line of clank-run (SPEC §2) and the test-only limits. */
#ifndef CLANK_OPTIONS_H
#define CLANK_OPTIONS_H

#include <stdint.h>

#include "util/log.h"

typedef struct clank_limits_s {
  uint64_t header_ms;   /* header block, from the request's first byte */
  uint64_t body_ms;     /* body, from the end of the header block */
  uint64_t idle_ms;     /* idle keep-alive connection */
  uint64_t drain_ms;    /* discarding an unread body after an early answer */
  uint64_t stop_ms;     /* graceful stop */
  unsigned max_connections;
} clank_limits_t;

typedef struct clank_options_s {
  const char *host;
  int port;
  int check;
  int watch;
  int workers;
  clank_log_format_t log_format;
  const char *app_path;
  clank_limits_t limits;
} clank_options_t;

enum { CLANK_OPTIONS_RUN, CLANK_OPTIONS_EXIT_OK, CLANK_OPTIONS_USAGE };

/* Parses argv; prints --help/--version itself. Returns one of the enum above. */
int clank_options_parse(clank_options_t *o, int argc, char **argv);

#endif
