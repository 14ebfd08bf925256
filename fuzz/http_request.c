/* libFuzzer: the bytes of one client connection → the server's request path
   (llhttp, SPEC §13's limits, dispatch, the bridge) over fuzz/app/app.lua.
   No listener and no network: the connection is one end of an AF_UNIX
   socketpair handed to the server with clank_conn_open, the harness writes
   the input into the other end in up to three reads' worth of pieces, shuts
   its write side and runs the loop until the server has let go of the
   connection. Every byte the server sent must frame as HTTP/1.1 responses. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "host/dispatch.h"
#include "host/host.h"
#include "lua/db.h"
#include "options.h"
#include "util/buf.h"

#define MAX_TURNS 20000 /* loop iterations one input may take before it counts as a hang */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static clank_host_t *host;

static void fail(const char *what, const char *out, size_t len) {
  fprintf(stderr, "fuzz/http_request: %s; the server sent %zu bytes:\n", what, len);
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
    fprintf(stderr, "fuzz/http_request: cannot load %s:\n%s\n", app, err);
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

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  signal(SIGPIPE, SIG_IGN);
  setenv("CLANK_LUA_DIR", CLANK_FUZZ_LUA_DIR, 0); /* the source tree's Lua side */
  const char *app = getenv("CLANK_FUZZ_APP");
  host = calloc(1, sizeof *host);
  if (host == NULL) abort();
  load_app(host, app && *app ? app : CLANK_FUZZ_APP);
  return 0;
}

/* ---- the client's end ---- */

typedef struct client_s {
  int fd;
  clank_buf_t got; /* everything the server sent */
  int eof;
} client_t;

static void client_read(client_t *cl) {
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

/* One loop iteration, then whatever the server wrote. While input is still
   to come it never blocks; after, it may wait for a timer (a limit). */
static void turn(client_t *cl, unsigned *turns, uv_run_mode mode) {
  if (++*turns > MAX_TURNS) fail("the connection did not end", cl->got.data, cl->got.len);
  uv_run(&host->loop, mode);
  clank_log_flush(&host->log);
  client_read(cl);
}

static void send_piece(client_t *cl, const uint8_t *p, size_t n, unsigned *turns) {
  while (n > 0 && host->server.conns) {
    ssize_t w = write(cl->fd, p, n);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
    } else if (w < 0 && errno != EAGAIN) {
      return; /* the server closed: the rest can never be read */
    }
    for (int i = 0; i < 4; i++) turn(cl, turns, UV_RUN_NOWAIT);
  }
}

/* ---- checking the output ---- */

static const char *find(const char *s, size_t n, const char *what) {
  size_t k = strlen(what);
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(s + i, what, k) == 0) return s + i;
  return NULL;
}

/* The value of header `name` (lowercase) in a head, or NULL. */
static const char *header(const char *head, size_t n, const char *name, size_t *len) {
  size_t k = strlen(name);
  const char *line = find(head, n, "\r\n") + 2;
  const char *end = head + n;
  while (line < end) {
    const char *eol = find(line, (size_t)(end - line), "\r\n");
    if (eol == NULL) return NULL;
    if ((size_t)(eol - line) > k + 1 && strncasecmp(line, name, k) == 0 && line[k] == ':') {
      const char *v = line + k + 1;
      while (v < eol && *v == ' ') v++;
      *len = (size_t)(eol - v);
      return v;
    }
    line = eol + 2;
  }
  return NULL;
}

static int parse_size(const char *v, size_t n, int base, uint64_t *out) {
  if (n == 0 || n > 15) return -1;
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    int d;
    char ch = v[i];
    if (ch >= '0' && ch <= '9')
      d = ch - '0';
    else if (base == 16 && ch >= 'a' && ch <= 'f')
      d = ch - 'a' + 10;
    else if (base == 16 && ch >= 'A' && ch <= 'F')
      d = ch - 'A' + 10;
    else
      return -1;
    x = x * (uint64_t)base + (uint64_t)d;
  }
  *out = x;
  return 0;
}

/* Whether out[pos..] is a sequence of whole responses. A response with a
   content-length may have no body (an answer to HEAD): both readings are tried. */
static int responses(const char *out, size_t len, size_t pos, int depth) {
  if (pos == len) return 1;
  if (depth > 400) return 0;
  const char *s = out + pos;
  size_t n = len - pos;
  if (n < 17 || memcmp(s, "HTTP/1.1 ", 9) != 0) return 0;
  for (int i = 9; i < 12; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  if (s[9] == '0' || s[12] != ' ') return 0;
  int status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
  const char *eoh = find(s, n, "\r\n\r\n");
  if (eoh == NULL) return 0;
  size_t head = (size_t)(eoh - s) + 4;
  for (const char *p = s; p < eoh; p++) /* a bare CR or LF would split the head */
    if ((*p == '\r' && p[1] != '\n') || (*p == '\n' && p[-1] != '\r')) return 0;
  size_t vlen;
  const char *cl = header(s, head - 2, "content-length", &vlen);
  const char *te = header(s, head - 2, "transfer-encoding", &vlen);
  if (status < 200 || status == 204 || status == 304) {
    if (cl && status != 304) return 0;
    if (te) return 0;
    return responses(out, len, pos + head, depth + 1);
  }
  if (cl && te) return 0;
  if (te) {
    if (vlen != 7 || memcmp(te, "chunked", 7) != 0) return 0;
    size_t p = pos + head;
    for (;;) {
      const char *eol = find(out + p, len - p, "\r\n");
      if (eol == NULL) return 0;
      uint64_t size;
      if (parse_size(out + p, (size_t)(eol - (out + p)), 16, &size) != 0) return 0;
      p = (size_t)(eol - out) + 2;
      if (size > len - p || len - p - size < 2) return 0;
      if (memcmp(out + p + size, "\r\n", 2) != 0) return 0;
      p += size + 2;
      if (size == 0) return responses(out, len, p, depth + 1);
    }
  }
  if (cl == NULL) return 0; /* every answer here is framed by its length */
  header(s, head - 2, "content-length", &vlen);
  uint64_t body;
  if (parse_size(cl, vlen, 10, &body) != 0) return 0;
  if (body <= n - head && responses(out, len, pos + head + body, depth + 1)) return 1;
  return body > 0 && responses(out, len, pos + head, depth + 1);
}

/* ---- one input ---- */

static uint32_t fnv(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) abort();
  if (clank_conn_open(&host->server, sv[0]) != 0) abort();
  client_t cl = {.fd = sv[1]};
  unsigned turns = 0;
  /* Where the reads split comes from the input itself, so the fuzzer explores
     it, while a hand-written seed stays plain HTTP. */
  uint32_t h = fnv(data, size);
  size_t a = size ? h % (size + 1) : 0;
  size_t b = a + (size - a ? (h >> 16) % (size - a + 1) : 0);
  send_piece(&cl, data, a, &turns);
  send_piece(&cl, data + a, b - a, &turns);
  send_piece(&cl, data + b, size - b, &turns);
  shutdown(cl.fd, SHUT_WR);
  while (host->server.conns) turn(&cl, &turns, UV_RUN_ONCE);
  client_read(&cl);
  if (!cl.eof) fail("the server's side stayed open", cl.got.data, cl.got.len);
  if (getenv("CLANK_FUZZ_SHOW")) fprintf(stderr, "%.*s\n", (int)cl.got.len, cl.got.data);
  if (!responses(cl.got.data, cl.got.len, 0, 0))
    fail("not a sequence of whole HTTP/1.1 responses", cl.got.data, cl.got.len);
  close(cl.fd);
  clank_buf_free(&cl.got);
  return 0;
}
