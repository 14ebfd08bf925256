/*
 * bare: the floor of bench/http.sh. A libuv + llhttp server that answers every
 * request with the same bytes. It does what any correct HTTP/1.1 server must
 * (parse every request in full, keep the connection alive, answer pipelined
 * requests in order, close when the client asks to) and nothing more, so the
 * gap between it and clank-run is the cost of clank-run's own work.
 *
 *   bare [--port N] [--response FILE]
 *     listen on 127.0.0.1:N (0, the default, picks a free port), print
 *     "bare: serving at http://127.0.0.1:PORT/", serve until SIGINT or SIGTERM.
 *     Every answer is the bytes of FILE (a whole HTTP/1.1 response, status line
 *     to body, written by bench/http.sh), or else the GET /hello answer below.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llhttp.h>
#include <uv.h>

#define READ_BUFFER_SIZE 65536
/* Stop reading from a client that pipelines faster than it takes answers. */
#define MAX_QUEUED_BYTES (1 << 20)
/* Answers handed to the kernel in one writev. */
#define BATCH 64

static const char hello_response[] =
    "HTTP/1.1 200 OK\r\n"
    "content-type: text/plain; charset=utf-8\r\n"
    "content-length: 14\r\n"
    "\r\n"
    "Hello, world!\n";
static const char bad_request_response[] =
    "HTTP/1.1 400 Bad Request\r\n"
    "content-length: 0\r\n"
    "connection: close\r\n"
    "\r\n";

typedef struct {
  uv_loop_t *loop;
  uv_tcp_t listener;
  uv_signal_t sigint, sigterm;
  llhttp_settings_t settings;
  /* What every request gets: hello_response or the --response file. */
  const char *response;
  size_t response_len;
  /* Shared by all connections: each read is parsed before the next one. */
  char read_buffer[READ_BUFFER_SIZE];
} server_t;

typedef struct {
  uv_tcp_t tcp; /* first member: the handle's address is the connection's */
  server_t *server;
  llhttp_t parser;
  size_t answers;  /* requests parsed, not yet answered */
  unsigned writes; /* uv_write requests in flight */
  int last;        /* the client asked to close after this request */
  int closing;     /* close once the writes in flight are done */
  int reading;
} conn_t;

typedef struct {
  uv_write_t req;
  conn_t *conn;
  char data[]; /* owned copy of the bytes the kernel did not take at once */
} write_t;

/* ---------------------------------------------------------------- closing */

static void on_conn_closed(uv_handle_t *handle) { free(handle); }

static void conn_close(conn_t *c) {
  if (!uv_is_closing((uv_handle_t *)&c->tcp)) uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* Stops reading and closes once every answer has been written. */
static void conn_finish(conn_t *c) {
  c->closing = 1;
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->reading = 0;
  if (c->writes == 0) conn_close(c);
}

/* ---------------------------------------------------------------- writing */

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void conn_read_start(conn_t *c) {
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
    c->reading = 1;
  else
    conn_close(c);
}

static void on_write(uv_write_t *req, int status) {
  write_t *w = (write_t *)req;
  conn_t *c = w->conn;
  free(w);
  c->writes--;
  if (status < 0)
    conn_close(c);
  else if (c->closing && c->writes == 0)
    conn_close(c);
  else if (!c->closing && !c->reading &&
           uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) < MAX_QUEUED_BYTES / 2)
    conn_read_start(c);
}

/* Sends bufs, which may be static: what the kernel does not take at once is
 * copied into a write request that owns it. */
static void conn_send(conn_t *c, const uv_buf_t *bufs, unsigned nbufs) {
  uv_stream_t *stream = (uv_stream_t *)&c->tcp;
  size_t total = 0, sent = 0;
  for (unsigned i = 0; i < nbufs; i++) total += bufs[i].len;
  /* With writes queued, uv_try_write would overtake them; libuv refuses. */
  int n = uv_try_write(stream, bufs, nbufs);
  if (n >= 0)
    sent = (size_t)n;
  else if (n != UV_EAGAIN) {
    conn_close(c);
    return;
  }
  if (sent == total) return;

  write_t *w = malloc(sizeof *w + (total - sent));
  if (w == NULL) {
    conn_close(c);
    return;
  }
  char *p = w->data;
  size_t skip = sent;
  for (unsigned i = 0; i < nbufs; i++) {
    if (skip >= bufs[i].len) {
      skip -= bufs[i].len;
      continue;
    }
    memcpy(p, bufs[i].base + skip, bufs[i].len - skip);
    p += bufs[i].len - skip;
    skip = 0;
  }
  w->conn = c;
  uv_buf_t rest = uv_buf_init(w->data, (unsigned)(total - sent));
  if (uv_write(&w->req, stream, &rest, 1, on_write) != 0) {
    free(w);
    conn_close(c);
    return;
  }
  c->writes++;
  if (c->reading && uv_stream_get_write_queue_size(stream) >= MAX_QUEUED_BYTES) {
    uv_read_stop(stream);
    c->reading = 0;
  }
}

/* Answers every request parsed so far, in one writev per BATCH. */
static void conn_answer(conn_t *c) {
  uv_buf_t bufs[BATCH];
  for (unsigned i = 0; i < BATCH; i++)
    bufs[i] = uv_buf_init((char *)c->server->response, (unsigned)c->server->response_len);
  while (c->answers > 0 && !uv_is_closing((uv_handle_t *)&c->tcp)) {
    unsigned n = c->answers < BATCH ? (unsigned)c->answers : BATCH;
    c->answers -= n;
    conn_send(c, bufs, n);
  }
}

/* ---------------------------------------------------------------- reading */

static int on_message_complete(llhttp_t *parser) {
  conn_t *c = parser->data;
  c->answers++;
  if (!llhttp_should_keep_alive(parser)) c->last = 1;
  return HPE_OK;
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  conn_t *c = (conn_t *)handle;
  *buf = uv_buf_init(c->server->read_buffer, READ_BUFFER_SIZE);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  conn_t *c = (conn_t *)stream;
  if (nread == UV_EOF) {
    conn_finish(c);
    return;
  }
  if (nread < 0) {
    conn_close(c);
    return;
  }
  llhttp_errno_t err = llhttp_execute(&c->parser, buf->base, (size_t)nread);
  conn_answer(c);
  if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
  /* An upgrade request was answered like any other; the connection ends. */
  if (c->last || err == HPE_PAUSED_UPGRADE) {
    conn_finish(c);
  } else if (err != HPE_OK) {
    uv_buf_t bad = uv_buf_init((char *)bad_request_response, sizeof bad_request_response - 1);
    conn_send(c, &bad, 1);
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) conn_finish(c);
  }
}

/* ---------------------------------------------------------------- server */

static void on_connection(uv_stream_t *listener, int status) {
  server_t *server = listener->data;
  if (status < 0) return;
  conn_t *c = calloc(1, sizeof *c);
  if (c == NULL) return;
  c->server = server;
  if (uv_tcp_init(server->loop, &c->tcp) != 0) {
    free(c);
    return;
  }
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
    conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  llhttp_init(&c->parser, HTTP_REQUEST, &server->settings);
  c->parser.data = c;
  conn_read_start(c);
}

static void close_any(uv_handle_t *handle, void *arg) {
  server_t *server = arg;
  if (uv_is_closing(handle)) return;
  /* Every TCP handle but the listener is a connection, freed when closed. */
  if (handle->type == UV_TCP && handle != (uv_handle_t *)&server->listener)
    uv_close(handle, on_conn_closed);
  else
    uv_close(handle, NULL);
}

static void on_signal(uv_signal_t *signal, int signum) {
  (void)signum;
  uv_walk(signal->loop, close_any, signal->data);
}

typedef struct {
  int port;
  const char *response_file; /* NULL: hello_response */
} options_t;

static int parse_options(int argc, char **argv, options_t *o) {
  o->port = 0;
  o->response_file = NULL;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) return -1;
    if (strcmp(argv[i], "--port") == 0) {
      char *end;
      long port = strtol(argv[i + 1], &end, 10);
      if (*argv[i + 1] == '\0' || *end != '\0' || port < 0 || port > 65535) return -1;
      o->port = (int)port;
    } else if (strcmp(argv[i], "--response") == 0) {
      o->response_file = argv[i + 1];
    } else {
      return -1;
    }
  }
  return 0;
}

/* Reads a whole file into a malloc'ed buffer (the caller frees it); NULL on
 * failure, an empty file or one too large to be one writev entry. */
static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  char *data = NULL;
  long size = -1;
  if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0 && size < (long)UINT32_MAX &&
      fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)size)) != NULL &&
      fread(data, 1, (size_t)size, f) != (size_t)size) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *len = data != NULL ? (size_t)size : 0;
  return data;
}

static int fail(const char *what, int err) {
  fprintf(stderr, "bare: %s: %s\n", what, uv_strerror(err));
  return 1;
}

int main(int argc, char **argv) {
  options_t opts;
  if (parse_options(argc, argv, &opts) != 0) {
    fprintf(stderr, "usage: bare [--port N] [--response FILE]\n");
    return 2;
  }
  int port = opts.port;
  /* A write to a connection the client has closed must not kill us. */
  signal(SIGPIPE, SIG_IGN);

  server_t *server = malloc(sizeof *server);
  if (server == NULL) return fail("malloc", UV_ENOMEM);
  char *file_response = NULL;
  server->response = hello_response;
  server->response_len = sizeof hello_response - 1;
  if (opts.response_file != NULL) {
    file_response = read_file(opts.response_file, &server->response_len);
    if (file_response == NULL) {
      fprintf(stderr, "bare: cannot read a response from %s\n", opts.response_file);
      free(server);
      return 1;
    }
    server->response = file_response;
  }
  server->loop = uv_default_loop();
  llhttp_settings_init(&server->settings);
  server->settings.on_message_complete = on_message_complete;

  struct sockaddr_in addr;
  struct sockaddr_storage bound;
  int len = sizeof bound, err;
  uv_ip4_addr("127.0.0.1", port, &addr);
  uv_tcp_init(server->loop, &server->listener);
  server->listener.data = server;
  if ((err = uv_tcp_bind(&server->listener, (const struct sockaddr *)&addr, 0)) != 0 ||
      (err = uv_listen((uv_stream_t *)&server->listener, SOMAXCONN, on_connection)) != 0 ||
      (err = uv_tcp_getsockname(&server->listener, (struct sockaddr *)&bound, &len)) != 0) {
    uv_close((uv_handle_t *)&server->listener, NULL);
    uv_run(server->loop, UV_RUN_DEFAULT);
    uv_loop_close(server->loop);
    free(file_response);
    free(server);
    return fail("listen", err);
  }

  uv_signal_init(server->loop, &server->sigint);
  uv_signal_init(server->loop, &server->sigterm);
  server->sigint.data = server->sigterm.data = server;
  uv_signal_start(&server->sigint, on_signal, SIGINT);
  uv_signal_start(&server->sigterm, on_signal, SIGTERM);

  printf("bare: serving at http://127.0.0.1:%d/\n",
         ntohs(((struct sockaddr_in *)&bound)->sin_port));
  fflush(stdout);

  uv_run(server->loop, UV_RUN_DEFAULT);
  err = uv_loop_close(server->loop);
  free(file_response);
  free(server);
  return err == 0 ? 0 : fail("uv_loop_close", err);
}
