/* Parses clank-run's command line and CLANK_TEST_LIMITS (options.h); the
   options point into argv, nothing is allocated. */
#include "options.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "version.h"
#include "http/request.h"

static const char usage[] =
    "usage: clank-run [options] app.lua|DIR\n"
    "       clank-run new NAME\n"
    "       clank-run test [DIR]\n"
    "       clank-run users add EMAIL [--role NAME]... [--app DIR]\n"
    "       clank-run jobs ls [--state STATE] [--limit N] [--app DIR]\n"
    "       clank-run jobs retry|cancel ID [--app DIR]\n"
    "\n"
    "Serves a Clank app over HTTP (DIR serves DIR/app.lua). `new NAME` writes a starter app\n"
    "into the folder NAME; `test DIR` runs the specs under DIR/spec (default .) with busted;\n"
    "`users add` adds an account to the app's clank.auth (the password read from stdin);\n"
    "`jobs` lists the app's durable jobs with their counts, or runs one again or cancels it.\n"
    "\n"
    "  --host HOST          address to listen on (default 127.0.0.1)\n"
    "  --allow-any-host     answer any Host (behind a proxy that checks it); by default\n"
    "                       only loopback names, HOST itself and allowedOrigins' hosts\n"
    "  --port N             port (default $PORT, else 8080; 0 picks a free port)\n"
    "  --no-watch           do not reload the app when its files change\n"
    "  --production         pages show only a generic message for an error; otherwise\n"
    "                       (development) an error shows in the open pages with its\n"
    "                       traceback, unless HOST is not loopback or --public-origin or\n"
    "                       --allow-any-host is given\n"
    "  --quiet              no access log\n"
    "  --workers N|auto     worker processes (default 1; auto: one per core)\n"
    "  --cpu-limit MS       CPU time a handler may run before it is stopped (default 1000)\n"
    "  --memory-limit MIB   memory of an app's Lua state (default 512)\n"
    "  --inspector HOST     open /__clank/inspector to requests for HOST (default: loopback)\n"
    "  --public-origin ORIGIN\n"
    "                       the origin a TLS proxy serves the app at (https://app.example):\n"
    "                       an allowed Host, the server's own origin, request.scheme, and\n"
    "                       secure cookies when https\n"
    "  --pubsub URL         PostgreSQL (postgres://...) that carries topics to the other\n"
    "                       instances of the app (default $CLANK_PUBSUB_URL, else app.pubsub)\n"
    "  --log text|json      log format on stderr (default text)\n"
    "  --check              load the app, print its manifest, exit\n"
    "  --version            print the version and the git commit it was built from\n"
    "  --help               print this help and exit\n"
    "\n"
    "See clank-run(1).\n";

static int parse_int(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "clank-run: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n%s", usage);
  va_end(ap);
  return CLANK_OPTIONS_USAGE;
}

/* Why s is not an origin spelled as a browser's Origin header spells it
   (http or https, "://", a lower-case host or a bracketed IPv6 address, a
   port unless it is the scheme's default, nothing more), or NULL when it is:
   then it is o's public origin. The server compares Origin headers with it
   byte for byte, so a spelling no browser sends would never match. */
static const char *public_origin(clank_options_t *o, const char *s) {
  size_t at = strncmp(s, "https://", 8) == 0 ? 8 : strncmp(s, "http://", 7) == 0 ? 7 : 0;
  if (at == 0) return "it must start with http:// or https://, in lower case";
  const char *host = s + at, *end = host + strcspn(host, "/?#@");
  if (*end == '@') return "an origin has no user information";
  if (*end == '/' && end[1] == '\0') return "an origin has no trailing slash";
  if (*end) return "an origin has no path, query or fragment";
  const char *port;
  if (*host == '[') {
    const char *close = strchr(host, ']');
    char addr[INET6_ADDRSTRLEN];
    struct in6_addr a;
    if (close == NULL || (size_t)(close - host - 1) >= sizeof addr)
      return "not an IPv6 address between [ and ]";
    memcpy(addr, host + 1, (size_t)(close - host - 1));
    addr[close - host - 1] = '\0';
    if (inet_pton(AF_INET6, addr, &a) != 1) return "not an IPv6 address between [ and ]";
    if (strpbrk(addr, "ABCDEF")) return "the host must be in lower case";
    port = close + 1;
    if (*port && *port != ':') return "only a port may follow the IPv6 address";
  } else {
    port = host + strcspn(host, ":");
    size_t label = 0;
    if (port == host) return "it has no host";
    if (port - host > 253) return "the host is longer than 253 characters";
    for (const char *p = host; p < port; p++) {
      if (*p == '.') {
        if (label == 0) return "the host has an empty label";
        label = 0;
      } else if (*p >= 'A' && *p <= 'Z') {
        return "the host must be in lower case";
      } else if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')) {
        return "the host may hold only letters, digits, - and .";
      } else if (++label > 63) {
        return "a label of the host is longer than 63 characters";
      }
    }
    if (label == 0) return "the host has an empty label";
  }
  if (*port == ':') {
    size_t digits = strspn(port + 1, "0123456789");
    long v;
    if (digits == 0 || digits > 5 || port[digits + 1] || port[1] == '0' ||
        parse_int(port + 1, 1, 65535, &v) != 0)
      return "the port must be a number from 1 to 65535, without leading zeros";
    if (v == (at == 8 ? 443 : 80)) return "leave the scheme's default port out, as browsers do";
  }
  size_t len = strlen(s); /* at most 8 + 253 + 6: the checks above bound it */
  memcpy(o->public_origin, s, len + 1);
  o->public_origin_len = len;
  o->public_host_at = at;
  o->public_https = at == 8;
  return NULL;
}

/* CLANK_TEST_LIMITS="header_ms=200,idle_ms=300,...": lets the specs cross the
   time limits without waiting for them. */
static void parse_test_limits(clank_limits_t *l, const char *spec) {
  char copy[512];
  snprintf(copy, sizeof copy, "%s", spec);
  for (char *save = NULL, *item = strtok_r(copy, ",", &save); item;
       item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    long v;
    if (!eq || parse_int(eq + 1, 0, 1L << 30, &v) != 0) continue;
    *eq = '\0';
    if (!strcmp(item, "header_ms"))
      l->http.header_ms = (uint64_t)v;
    else if (!strcmp(item, "body_ms"))
      l->http.body_ms = (uint64_t)v;
    else if (!strcmp(item, "idle_ms"))
      l->http.idle_ms = (uint64_t)v;
    else if (!strcmp(item, "drain_ms"))
      l->http.drain_ms = (uint64_t)v;
    else if (!strcmp(item, "write_ms"))
      l->http.write_ms = (uint64_t)v;
    else if (!strcmp(item, "max_connections"))
      l->http.max_connections = (unsigned)v;
    else if (!strcmp(item, "stop_ms"))
      l->stop_ms = (uint64_t)v;
    else if (!strcmp(item, "live_idle_ms"))
      l->live_idle_ms = (uint64_t)v;
    else if (!strcmp(item, "live_max_idle"))
      l->live_max_idle = (unsigned)v;
    else if (!strcmp(item, "live_hibernate_ms"))
      l->live_hibernate_ms = (uint64_t)v;
    else if (!strcmp(item, "ping_ms"))
      l->ping_ms = (uint64_t)v;
    else if (!strcmp(item, "silence_ms"))
      l->silence_ms = (uint64_t)v;
    else if (!strcmp(item, "memory_check_ms"))
      l->memory_check_ms = (uint64_t)v;
    else if (!strcmp(item, "preempt")) /* bench/preempt.sh's baseline: 0 turns it off */
      l->preempt = (int)v;
  }
}

int clank_options_parse(clank_options_t *o, int argc, char **argv) {
  *o = (clank_options_t){
      .host = "127.0.0.1",
      .port = 8080,
      .watch = 1,
      .workers = 1,
      .cpu_limit_ms = 1000,
      .memory_limit_mib = 512,
      .log_format = CLANK_LOG_TEXT,
      .limits = {.http = {.header_ms = 10000,
                          .body_ms = 30000,
                          .idle_ms = 60000,
                          .drain_ms = 2000,
                          .write_ms = 60000,
                          .max_connections = 10000},
                 .stop_ms = 10000,
                 .live_idle_ms = 600000,
                 .live_max_idle = 1000,
                 .live_hibernate_ms = 15000,
                 .ping_ms = 30000,
                 .silence_ms = 60000,
                 .memory_check_ms = 2000,
                 .preempt = 1},
  };
  long v;
  const char *env_port = getenv("PORT");
  if (env_port && *env_port) {
    if (parse_int(env_port, 0, 65535, &v) != 0) return bad_usage("bad $PORT: %s", env_port);
    o->port = (int)v;
  }
  const char *test_limits = getenv("CLANK_TEST_LIMITS");
  if (test_limits) parse_test_limits(&o->limits, test_limits);

  int first = 1;
  if (argc > 1 && (!strcmp(argv[1], "new") || !strcmp(argv[1], "test"))) {
    o->command = !strcmp(argv[1], "new") ? CLANK_COMMAND_NEW : CLANK_COMMAND_TEST;
    first = 2;
  }
  /* their own options: lua/clank/cli/users.lua, jobs.lua */
  if (argc > 1 && (!strcmp(argv[1], "users") || !strcmp(argv[1], "jobs"))) {
    o->command = !strcmp(argv[1], "users") ? CLANK_COMMAND_USERS : CLANK_COMMAND_JOBS;
    o->app_path = ".";
    o->rest_argc = argc - 2;
    o->rest_argv = argv + 2;
    return CLANK_OPTIONS_RUN;
  }
  if (o->command == CLANK_COMMAND_TEST) {
    /* the rest is busted's own command line */
    o->app_path = argc > 2 && argv[2][0] != '-' ? argv[2] : ".";
    o->rest_argc = argc - (argc > 2 && argv[2][0] != '-' ? 3 : 2);
    o->rest_argv = argv + argc - o->rest_argc;
    return CLANK_OPTIONS_RUN;
  }
  for (int i = first; i < argc; i++) {
    const char *a = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(usage, stdout);
      return CLANK_OPTIONS_EXIT_OK;
    } else if (!strcmp(a, "--version")) {
      printf("clank-run %s (git %s)\n", CLANK_VERSION, clank_git_commit);
      return CLANK_OPTIONS_EXIT_OK;
    } else if (!strcmp(a, "--check")) {
      o->check = 1;
    } else if (!strcmp(a, "--quiet")) {
      o->quiet = 1;
    } else if (!strcmp(a, "--allow-any-host")) {
      o->allow_any_host = 1;
    } else if (!strcmp(a, "--no-watch")) {
      o->watch = 0;
    } else if (!strcmp(a, "--production")) {
      o->production = 1;
    } else if (!strcmp(a, "--host")) {
      if (!next || !*next) return bad_usage("%s needs a value", a);
      o->host = argv[++i];
    } else if (!strcmp(a, "--port")) {
      if (!next || parse_int(next, 0, 65535, &v) != 0)
        return bad_usage("--port needs a number from 0 to 65535, got %s", next ? next : "nothing");
      o->port = (int)v;
      i++;
    } else if (!strcmp(a, "--workers")) {
      if (next && !strcmp(next, "auto")) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        v = cores < 1 ? 1 : cores > CLANK_MAX_WORKERS ? CLANK_MAX_WORKERS : cores;
      } else if (!next || parse_int(next, 1, CLANK_MAX_WORKERS, &v) != 0) {
        return bad_usage("--workers needs a number from 1 to 64 or auto, got %s",
                         next ? next : "nothing");
      }
      o->workers = (int)v;
      i++;
    } else if (!strcmp(a, "--cpu-limit")) {
      if (!next || parse_int(next, 1, 3600000, &v) != 0)
        return bad_usage("--cpu-limit needs a number of milliseconds from 1 to 3600000, got %s",
                         next ? next : "nothing");
      o->cpu_limit_ms = (unsigned)v;
      i++;
    } else if (!strcmp(a, "--memory-limit")) {
      if (!next || parse_int(next, 1, 1048576, &v) != 0)
        return bad_usage("--memory-limit needs a number of MiB from 1 to 1048576, got %s",
                         next ? next : "nothing");
      o->memory_limit_mib = (unsigned)v;
      i++;
    } else if (!strcmp(a, "--inspector")) {
      if (!next || !*next) return bad_usage("%s needs a host", a);
      o->inspector_host = argv[++i];
    } else if (!strcmp(a, "--public-origin")) {
      const char *why = next && *next ? public_origin(o, next) : "it is missing";
      if (why)
        return bad_usage("--public-origin needs an origin like https://app.example, got %s (%s)",
                         next && *next ? next : "nothing", why);
      i++;
    } else if (!strcmp(a, "--pubsub")) {
      if (!next || !*next) return bad_usage("%s needs a PostgreSQL URL", a);
      o->pubsub_url = argv[++i];
    } else if (!strcmp(a, "--log")) {
      if (next && !strcmp(next, "text"))
        o->log_format = CLANK_LOG_TEXT;
      else if (next && !strcmp(next, "json"))
        o->log_format = CLANK_LOG_JSON;
      else
        return bad_usage("--log needs text or json, got %s", next ? next : "nothing");
      i++;
    } else if (a[0] == '-' && a[1] != '\0') {
      return bad_usage("unknown option %s", a);
    } else if (o->app_path) {
      return bad_usage("one app only; extra argument %s", a);
    } else {
      o->app_path = a;
    }
  }
  if (o->command == CLANK_COMMAND_NEW) {
    if (!o->app_path) return bad_usage("%s", "new needs the name of the folder to write");
    return CLANK_OPTIONS_RUN;
  }
  if (!o->app_path) return bad_usage("%s", "missing app.lua");
  /* Tracebacks go to the browser only where nobody else can open the pages:
     a loopback listener with no proxy in front (SPEC §11). */
  o->development = !o->production && o->public_origin_len == 0 && !o->allow_any_host &&
                   (clank_http_is_loopback(o->host, strlen(o->host)) || !strcmp(o->host, "::1"));
  /* clank-run DIR serves DIR/app.lua (SPEC §16) */
  struct stat st;
  if (stat(o->app_path, &st) == 0 && S_ISDIR(st.st_mode)) {
    size_t n = strlen(o->app_path);
    while (n > 1 && o->app_path[n - 1] == '/') n--;
    if (n + sizeof "/app.lua" > sizeof o->app_file)
      return bad_usage("folder name too long: %s", o->app_path);
    snprintf(o->app_file, sizeof o->app_file, "%.*s/app.lua", (int)n, o->app_path);
    o->app_path = o->app_file;
  }
  return CLANK_OPTIONS_RUN;
}
