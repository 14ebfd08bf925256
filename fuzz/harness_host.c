/* See harness_host.h. */
#include "harness_host.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "host/dispatch.h"
#include "io/db.h"
#include "options.h"

static const char *harness_name = "fuzz";

void harness_fail(const char *what, const char *out, size_t len) {
  fprintf(stderr, "%s: %s; the server sent %zu bytes:\n", harness_name, what, len);
  fwrite(out, 1, len, stderr);
  fputc('\n', stderr);
  abort();
}

/* The generation's log lines (errors of actions, print) go to the host's log. */
static void load_app(clank_host_t *h, const char *app) {
  char *args[] = {"clank-run", "--quiet", "--no-watch", (char *)app, NULL};
  if (clank_options_parse(&h->opts, 4, args) != CLANK_OPTIONS_RUN) abort();
  /* Short limits: a connection the input leaves half-way ends in milliseconds. */
  h->opts.limits.http.header_ms = 200;
  h->opts.limits.http.body_ms = 200;
  h->opts.limits.http.idle_ms = 200;
  h->opts.limits.http.drain_ms = 200;
  const char *show = getenv("CLANK_FUZZ_LOG"); /* the server's log lines, when debugging */
  clank_log_init(&h->log, h->opts.log_format, show && *show ? 2 : open("/dev/null", O_WRONLY));
  h->log.quiet = 1;
  uv_loop_init(&h->loop);
  h->metrics = &h->own_metrics;
  clank_metrics_init(h->metrics);
  h->db = clank_db_registry_new(&h->loop);
  memset(h->secret, 7, sizeof h->secret);
  clank_reloader_init(&h->reloader, &h->loop, &h->log, 0, clank_host_reload, h);
  clank_gen_opts_t go = clank_host_gen_opts(h);
  char err[4096];
  h->gen = clank_gen_load(&go, err, sizeof err);
  if (h->gen == NULL) {
    fprintf(stderr, "%s: cannot load %s:\n%s\n", harness_name, app, err);
    exit(1);
  }
  clank_reloader_loaded(&h->reloader);
  clank_metrics_actions(h->metrics, h->gen->L, h->gen->bridge_ref);
  h->live_generations = 1;
  h->server.data = h;
  h->server.handler = &clank_dispatch_handler;
  h->server.conn_data_size = sizeof(clank_conn_state_t);
  h->server.log = &h->log;
  h->server.limits = h->opts.limits.http;
  h->server.on_answered = clank_metrics_answered;
  clank_server_init(&h->server, &h->loop);
  h->gen->sched.loop_running = 1;
}

clank_host_t *harness_host(const char *name, const char *default_app) {
  harness_name = name;
  signal(SIGPIPE, SIG_IGN);
  setenv("CLANK_LUA_DIR", CLANK_FUZZ_LUA_DIR, 0); /* the source tree's Lua side */
  const char *app = getenv("CLANK_FUZZ_APP");
  clank_host_t *h = calloc(1, sizeof *h);
  if (h == NULL) abort();
  load_app(h, app && *app ? app : default_app);
  return h;
}

void harness_connect(clank_host_t *h, harness_client_t *cl) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) abort();
  if (clank_conn_open(&h->server, sv[0]) != 0) abort();
  *cl = (harness_client_t){.fd = sv[1]};
}

void harness_read(harness_client_t *cl) {
  char buf[16384];
  for (;;) {
    ssize_t n = read(cl->fd, buf, sizeof buf);
    if (n > 0) {
      clank_buf_append(&cl->got, buf, (size_t)n);
      continue;
    }
    /* A reset is an end too: the server closed with input unread (AF_UNIX says so). */
    if (n == 0 || errno != EAGAIN) cl->eof = 1;
    return;
  }
}

/* While input is still to come it never blocks; after, it may wait for a
   timer (a limit). */
void harness_turn(clank_host_t *h, harness_client_t *cl, uv_run_mode mode) {
  if (++cl->turns > HARNESS_MAX_TURNS)
    harness_fail("the connection did not end", cl->got.data, cl->got.len);
  uv_run(&h->loop, mode);
  clank_log_flush(&h->log);
  harness_read(cl);
}

void harness_send(clank_host_t *h, harness_client_t *cl, const uint8_t *p, size_t n) {
  while (n > 0 && h->server.conns) {
    ssize_t w = write(cl->fd, p, n);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
    } else if (w < 0 && errno != EAGAIN) {
      return; /* the server closed: the rest can never be read */
    }
    for (int i = 0; i < 4; i++) harness_turn(h, cl, UV_RUN_NOWAIT);
  }
}

void harness_finish(clank_host_t *h, harness_client_t *cl) {
  shutdown(cl->fd, SHUT_WR);
  while (h->server.conns) harness_turn(h, cl, UV_RUN_ONCE);
  harness_read(cl);
  if (!cl->eof) harness_fail("the server's side stayed open", cl->got.data, cl->got.len);
}

const char *harness_find(const char *s, size_t n, const char *what) {
  size_t k = strlen(what);
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(s + i, what, k) == 0) return s + i;
  return NULL;
}
