/* The command line of clank-run (SPEC §2) and the test-only limits. */
#ifndef CLANK_OPTIONS_H
#define CLANK_OPTIONS_H

#include <limits.h>
#include <stdint.h>

#include "http/server.h"
#include "util/log.h"

typedef struct clank_limits_s {
  clank_http_limits_t http;
  uint64_t stop_ms;           /* graceful stop */
  uint64_t live_idle_ms;      /* an idle view session ends (SPEC §11) */
  unsigned live_max_idle;     /* idle view sessions kept per worker */
  uint64_t live_hibernate_ms; /* a view session without events or pushes lets its tree go */
  uint64_t ping_ms;           /* live connections are pinged this often */
  uint64_t silence_ms;        /* and dropped when silent this long */
  int preempt;                /* the watchdog runs (SPEC §13); off only to measure its cost */
  uint64_t memory_check_ms;   /* a full collection to check the memory cap at most this often */
} clank_limits_t;

/* What clank-run was asked to do (SPEC §2, §16). */
typedef enum {
  CLANK_COMMAND_SERVE, /* clank-run [options] app.lua|DIR */
  CLANK_COMMAND_NEW,   /* clank-run new NAME: app_path is NAME */
  CLANK_COMMAND_TEST,  /* clank-run test [DIR]: app_path is DIR (default ".") */
  CLANK_COMMAND_USERS, /* clank-run users add EMAIL [--role R] [--app DIR]: the rest as is */
  CLANK_COMMAND_JOBS   /* clank-run jobs ls|retry|cancel ... [--app DIR]: the rest as is */
} clank_command_t;

/* "https://" + a host of 253 bytes (or a bracketed IPv6 address) + ":65535" + NUL */
#define CLANK_ORIGIN_MAX 272

typedef struct clank_options_s {
  clank_command_t command;
  const char *host;
  int port;
  int check;
  int watch;
  int quiet;   /* no access log */
  int workers; /* 1..CLANK_MAX_WORKERS; over 1, a master supervises them (host/master.h) */
  clank_log_format_t log_format;
  const char *app_path;
  unsigned cpu_limit_ms;      /* a handler's CPU time per run (SPEC §13) */
  unsigned memory_limit_mib;  /* an app generation's Lua memory (SPEC §13) */
  const char *inspector_host; /* --inspector HOST opens /__clank/inspector (SPEC §16); NULL */
  const char *pubsub_url;     /* --pubsub URL: topics across instances (host/pubsub.h); NULL */
  int allow_any_host;         /* --allow-any-host: no Host check (a proxy in front does it) */
  int production;             /* --production */
  /* Errors go to the open pages with their tracebacks (SPEC §11): not
     --production, a loopback --host, no --public-origin nor --allow-any-host. */
  int development;
  /* --public-origin (SPEC §13): the origin a TLS proxy serves the app at,
     spelled as a browser's Origin header spells it; "" when not given. Its
     host[:port] starts at public_host_at; public_https: its scheme is https.
     Held in the struct, so every copy (a worker's, a check's) has it. */
  char public_origin[CLANK_ORIGIN_MAX];
  size_t public_origin_len, public_host_at;
  int public_https;
  char app_file[PATH_MAX]; /* DIR/app.lua when app_path named a folder */
  int rest_argc;           /* clank-run test DIR ARGS...: ARGS go to busted */
  char **rest_argv;
  clank_limits_t limits;
} clank_options_t;

#define CLANK_MAX_WORKERS 64

enum { CLANK_OPTIONS_RUN, CLANK_OPTIONS_EXIT_OK, CLANK_OPTIONS_USAGE };

/* Parses argv; prints --help/--version itself. Returns one of the enum above. */
int clank_options_parse(clank_options_t *o, int argc, char **argv);

#endif
