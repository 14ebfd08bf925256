/* The client connection: resolve, connect, TLS handshake, write the
   request, parse the response. Parser callbacks only record; what they
   found goes up once llhttp_execute has returned, so a handler may close
   or reuse the connection from any event. */
#include "http/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/headers.h"

#define CLIENT_READ_CHUNK (64 * 1024)

static void start_reading(clank_client_t *c);

static void maybe_free(clank_client_t *c) {
  if (!c->closing || c->inflight > 0) return;
  clank_tls_free(c->tls);
  clank_buf_free(&c->pending);
  clank_buf_free(&c->out);
  clank_buf_free(&c->wbuf);
  clank_buf_free(&c->body);
  clank_request_free(&c->res);
  free(c->rbuf);
  free(c->host);
  free(c->addrs);
  free(c);
}

static void tcp_closed(uv_handle_t *h) {
  clank_client_t *c = h->data;
  c->inflight--;
  maybe_free(c);
}

void clank_client_close(clank_client_t *c) {
  if (c->closing) return;
  c->closing = 1;
  c->handler = NULL;
  if (c->idle && c->on_idle_close) c->on_idle_close(c);
  /* closed by someone else (a host closing every handle): its memory stays */
  if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
  uv_close((uv_handle_t *)&c->tcp, tcp_closed);
}

static void fail(clank_client_t *c, const char *kind, const char *message) {
  if (c->closing) return;
  const clank_client_handler_t *h = c->handler;
  c->stale = c->used && !c->got_bytes && !c->connecting;
  clank_client_close(c);
  if (h && h->on_error) h->on_error(c, kind, message);
}

/* ---- the parser ---- */

static clank_client_t *client_of(llhttp_t *p) { return p->data; }

static int on_message_begin(llhttp_t *p) {
  clank_client_t *c = client_of(p);
  clank_request_reset(&c->res);
  return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len) {
  return clank_headers_name(&client_of(p)->res, at, len) ? HPE_USER : 0;
}

static int on_header_field_complete(llhttp_t *p) {
  clank_headers_name_done(&client_of(p)->res);
  return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len) {
  return clank_headers_value(&client_of(p)->res, at, len) ? HPE_USER : 0;
}

static int on_header_value_complete(llhttp_t *p) {
  clank_headers_value_done(&client_of(p)->res);
  return 0;
}

static int on_headers_complete(llhttp_t *p) {
  clank_client_t *c = client_of(p);
  c->status = p->status_code;
  if (p->http_major != 1) return HPE_USER;
  if (c->status < 200) { /* 1xx: the final answer follows */
    if (c->status == 101) return HPE_USER;
    c->informational = 1;
    return 0;
  }
  c->got_head = 1;
  return c->head_only ? 1 : 0; /* 1: no body follows */
}

static int on_body(llhttp_t *p, const char *at, size_t len) {
  clank_client_t *c = client_of(p);
  if (clank_buf_append(&c->body, at, len) != 0) return HPE_USER;
  return 0;
}

static int on_message_complete(llhttp_t *p) {
  clank_client_t *c = client_of(p);
  if (c->informational) {
    c->informational = 0;
    return 0;
  }
  c->complete = 1;
  c->keep_alive = llhttp_should_keep_alive(p) ? 1 : 0;
  return HPE_PAUSED; /* anything after it is not an answer to us */
}

static void init_settings(llhttp_settings_t *s) {
  llhttp_settings_init(s);
  s->on_message_begin = on_message_begin;
  s->on_header_field = on_header_field;
  s->on_header_field_complete = on_header_field_complete;
  s->on_header_value = on_header_value;
  s->on_header_value_complete = on_header_value_complete;
  s->on_headers_complete = on_headers_complete;
  s->on_body = on_body;
  s->on_message_complete = on_message_complete;
}

/* What the parser found goes up, in order; a handler may close c at any step. */
static void deliver(clank_client_t *c) {
  if (c->got_head && !c->told_head) {
    c->told_head = 1;
    if (c->handler) c->handler->on_head(c);
    if (c->closing) return;
  }
  if (c->body.len > 0) {
    size_t n = c->body.len;
    c->body.len = 0;
    if (c->handler) c->handler->on_body(c, c->body.data, n);
    if (c->closing) return;
  }
  if (c->complete) {
    const clank_client_handler_t *h = c->handler;
    c->complete = 0;
    c->got_head = c->told_head = 0;
    c->used = 1;
    if (!c->keep_alive) {
      c->handler = NULL;
      uv_read_stop((uv_stream_t *)&c->tcp);
    }
    if (h) h->on_end(c); /* last: it may send the next request on c */
  }
}

static void parse(clank_client_t *c, const char *data, size_t len) {
  if (c->idle) {
    clank_client_close(c); /* nothing is owed to us between requests */
    return;
  }
  if (!c->handler) return;
  c->got_bytes = 1;
  llhttp_errno_t rc = llhttp_execute(&c->parser, data, len);
  if (rc == HPE_PAUSED) {
    const char *end = llhttp_get_error_pos(&c->parser);
    if (end && end < data + len) c->keep_alive = 0; /* bytes past the answer */
  } else if (rc != HPE_OK) {
    char msg[160];
    snprintf(msg, sizeof msg, "malformed response: %s",
             rc == HPE_USER ? "header block too large or not HTTP/1.x"
                            : llhttp_get_error_reason(&c->parser));
    c->body.len = 0;
    c->got_head = c->told_head; /* a head that failed midway never goes up */
    deliver(c);
    fail(c, "protocol", msg);
    return;
  }
  deliver(c);
}

static void ended(clank_client_t *c) {
  if (c->idle) {
    clank_client_close(c);
    return;
  }
  if (c->handler && c->got_bytes && llhttp_finish(&c->parser) == HPE_OK && c->complete) {
    c->keep_alive = 0;
    deliver(c); /* a body delimited by the close */
    return;
  }
  fail(c, "protocol",
       c->got_bytes ? "connection closed before the response ended"
                    : "connection closed without a response");
}

/* ---- output ---- */

static void flush(clank_client_t *c);

static void write_done(uv_write_t *req, int status) {
  clank_client_t *c = req->data;
  c->inflight--;
  c->writing = 0;
  c->wbuf.len = 0;
  if (c->closing) {
    maybe_free(c);
    return;
  }
  if (status < 0) {
    fail(c, c->got_bytes ? "protocol" : "connect", uv_strerror(status));
    return;
  }
  flush(c);
}

static void flush(clank_client_t *c) {
  if (c->writing || c->closing || c->out.len == 0) return;
  clank_buf_t t = c->wbuf;
  c->wbuf = c->out;
  c->out = t;
  c->out.len = 0;
  uv_buf_t b = uv_buf_init(c->wbuf.data, (unsigned)c->wbuf.len);
  c->wreq.data = c;
  int rc = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, write_done);
  if (rc != 0) {
    fail(c, "connect", uv_strerror(rc));
    return;
  }
  c->writing = 1;
  c->inflight++;
}

/* The request goes out once the connection is ready. */
static void send_pending(clank_client_t *c) {
  if (c->pending.len == 0) return;
  if (c->tls) {
    if (clank_tls_write(c->tls, c->pending.data, c->pending.len) != 0) {
      fail(c, "tls", clank_tls_error(c->tls));
      return;
    }
    clank_tls_take(c->tls, &c->out);
  } else {
    clank_buf_append(&c->out, c->pending.data, c->pending.len);
  }
  c->pending.len = 0;
  flush(c);
}

/* ---- input ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  clank_client_t *c = h->data;
  if (c->rbuf == NULL) c->rbuf = malloc(CLIENT_READ_CHUNK);
  *buf = uv_buf_init(c->rbuf, c->rbuf ? CLIENT_READ_CHUNK : 0);
}

/* Plaintext out of the TLS session, while the reader wants it. */
static void tls_pump(clank_client_t *c) {
  char buf[16 * 1024];
  while (!c->closing && !c->paused) {
    int n = clank_tls_read(c->tls, buf, sizeof buf);
    if (n > 0) {
      parse(c, buf, (size_t)n);
      continue;
    }
    if (n == -2) {
      ended(c);
    } else if (n == -1) {
      fail(c, c->idle ? "protocol" : "tls", clank_tls_error(c->tls));
    }
    break;
  }
  if (!c->closing && c->tls) {
    clank_tls_take(c->tls, &c->out); /* a key update may want an answer */
    flush(c);
  }
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  clank_client_t *c = s->data;
  (void)buf;
  if (c->closing || n == 0) return;
  if (n < 0) {
    if (c->connecting) {
      fail(c, "tls",
           n == UV_EOF ? "connection closed during the TLS handshake" : uv_strerror((int)n));
    } else if (n == UV_EOF) {
      ended(c);
    } else {
      fail(c, c->idle || c->got_bytes ? "protocol" : "connect", uv_strerror((int)n));
    }
    return;
  }
  if (c->tls == NULL) {
    parse(c, c->rbuf, (size_t)n);
    return;
  }
  if (clank_tls_feed(c->tls, c->rbuf, (size_t)n) != 0) {
    fail(c, "tls", "out of memory");
    return;
  }
  if (c->connecting) {
    int hs = clank_tls_handshake(c->tls);
    clank_tls_take(c->tls, &c->out);
    flush(c);
    if (hs < 0) {
      fail(c, "tls", clank_tls_error(c->tls));
      return;
    }
    if (hs == 0) return;
    c->connecting = 0;
    c->ready = 1;
    send_pending(c);
  }
  tls_pump(c);
}

static void start_reading(clank_client_t *c) {
  if (c->closing || c->paused) return;
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

void clank_client_pause(clank_client_t *c, int paused) {
  if (c->closing || (int)c->paused == paused) return;
  c->paused = paused ? 1 : 0;
  if (paused) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    return;
  }
  start_reading(c);
  if (c->tls && c->ready) tls_pump(c); /* records OpenSSL already holds */
}

/* ---- connecting ---- */

static void connect_to(clank_client_t *c, const struct sockaddr *addr);

/* The socket of a failed attempt is closed: the next address gets a new one. */
static void retry_closed(uv_handle_t *h) {
  clank_client_t *c = h->data;
  if (c->closing || uv_tcp_init(c->loop, &c->tcp) != 0) {
    const clank_client_handler_t *told = c->closing ? NULL : c->handler;
    c->closing = 1;
    c->handler = NULL;
    c->inflight--;
    if (told) told->on_error(c, "connect", "cannot make a socket");
    maybe_free(c);
    return;
  }
  c->tcp.data = c;
  connect_to(c, (struct sockaddr *)&c->addrs[c->next_addr++]);
}

static void on_connected(uv_connect_t *req, int status) {
  clank_client_t *c = req->data;
  c->inflight--;
  if (c->closing) {
    maybe_free(c);
    return;
  }
  if (status < 0 && c->next_addr < c->naddrs) {
    uv_close((uv_handle_t *)&c->tcp, retry_closed); /* the handle stays counted */
    return;
  }
  if (status < 0) {
    char msg[300];
    snprintf(msg, sizeof msg, "cannot connect to %s:%d: %s", c->host, c->port, uv_strerror(status));
    fail(c, "connect", msg);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  start_reading(c);
  if (c->tls_ctx == NULL) {
    c->connecting = 0;
    c->ready = 1;
    send_pending(c);
    return;
  }
  c->tls = clank_tls_new(c->tls_ctx, c->host);
  if (c->tls == NULL) {
    fail(c, "tls", "cannot start a TLS session");
    return;
  }
  if (clank_tls_handshake(c->tls) < 0) {
    fail(c, "tls", clank_tls_error(c->tls));
    return;
  }
  clank_tls_take(c->tls, &c->out);
  flush(c);
}

static void connect_to(clank_client_t *c, const struct sockaddr *addr) {
  c->connect_req.data = c;
  int rc = uv_tcp_connect(&c->connect_req, &c->tcp, addr, on_connected);
  if (rc != 0) {
    char msg[300];
    snprintf(msg, sizeof msg, "cannot connect to %s:%d: %s", c->host, c->port, uv_strerror(rc));
    fail(c, "connect", msg);
    return;
  }
  c->inflight++;
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  clank_client_t *c = req->data;
  c->inflight--;
  if (c->closing || status < 0) {
    if (res) uv_freeaddrinfo(res);
    if (c->closing) {
      maybe_free(c);
      return;
    }
    char msg[300];
    snprintf(msg, sizeof msg, "cannot resolve %s: %s", c->host, uv_strerror(status));
    fail(c, "dns", msg);
    return;
  }
  /* Each address in turn until one connects, IPv4 first: a local server
     bound to 127.0.0.1 is the common case for "localhost". */
  int n = 0;
  for (struct addrinfo *a = res; a; a = a->ai_next) n++;
  c->addrs = calloc((size_t)n, sizeof *c->addrs);
  for (int pass = 0; c->addrs && pass < 2; pass++)
    for (struct addrinfo *a = res; a; a = a->ai_next) {
      if ((a->ai_family == AF_INET) != (pass == 0)) continue;
      if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
      struct sockaddr_storage *addr = &c->addrs[c->naddrs++];
      memcpy(addr, a->ai_addr, a->ai_addrlen);
      if (a->ai_family == AF_INET)
        ((struct sockaddr_in *)addr)->sin_port = htons((uint16_t)c->port);
      else
        ((struct sockaddr_in6 *)addr)->sin6_port = htons((uint16_t)c->port);
    }
  uv_freeaddrinfo(res);
  if (c->naddrs == 0) {
    fail(c, "dns", c->addrs ? "no address to connect to" : "out of memory");
    return;
  }
  c->next_addr = 1;
  connect_to(c, (struct sockaddr *)&c->addrs[0]);
}

static void start(clank_client_t *c) {
  c->connecting = 1;
  struct sockaddr_in a4;
  struct sockaddr_in6 a6;
  if (uv_ip4_addr(c->host, c->port, &a4) == 0) {
    connect_to(c, (struct sockaddr *)&a4);
    return;
  }
  if (uv_ip6_addr(c->host, c->port, &a6) == 0) {
    connect_to(c, (struct sockaddr *)&a6);
    return;
  }
  struct addrinfo hints = {0};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  c->gai.data = c;
  int rc = uv_getaddrinfo(c->loop, &c->gai, on_resolved, c->host, NULL, &hints);
  if (rc != 0) {
    char msg[300];
    snprintf(msg, sizeof msg, "cannot resolve %s: %s", c->host, uv_strerror(rc));
    fail(c, "dns", msg);
    return;
  }
  c->inflight++;
}

/* ---- the API ---- */

clank_client_t *clank_client_new(uv_loop_t *loop, const char *host, int port,
                                 clank_tls_ctx_t *tls_ctx) {
  clank_client_t *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->host = strdup(host);
  if (c->host == NULL || uv_tcp_init(loop, &c->tcp) != 0) {
    free(c->host);
    free(c);
    return NULL;
  }
  c->inflight = 1; /* the tcp handle */
  c->tcp.data = c;
  c->loop = loop;
  c->port = port;
  c->tls_ctx = tls_ctx;
  clank_request_reset(&c->res);
  init_settings(&c->settings);
  return c;
}

void clank_client_send(clank_client_t *c, const clank_client_handler_t *h, void *data,
                       const char *request, size_t len, int head_only) {
  c->handler = h;
  c->data = data;
  c->head_only = head_only ? 1 : 0;
  c->got_head = c->told_head = c->complete = c->informational = 0;
  c->got_bytes = 0;
  c->keep_alive = 0;
  c->paused = 0;
  c->body.len = 0;
  if (c->idle) {
    c->idle = 0;
    c->on_idle_close = NULL;
    uv_ref((uv_handle_t *)&c->tcp);
  }
  llhttp_init(&c->parser, HTTP_RESPONSE, &c->settings);
  c->parser.data = c;
  clank_buf_append(&c->pending, request, len);
  if (c->ready) {
    start_reading(c);
    send_pending(c);
  } else if (!c->connecting) {
    start(c);
  }
}

void clank_client_idle(clank_client_t *c, void (*on_close)(clank_client_t *c), void *data) {
  if (c->closing) return;
  c->handler = NULL;
  c->data = data;
  c->on_idle_close = on_close;
  c->idle = 1;
  c->paused = 0;
  uv_unref((uv_handle_t *)&c->tcp); /* an idle connection keeps no loop alive */
  start_reading(c);
}
