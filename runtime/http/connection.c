/* One client connection: reading, parsing with llhttp plus the server's own
   checks (SPEC §13), limits and their timers, ordered output; its events go
   up through the server's handler table. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "http/headers.h"
#include "http/response.h"
#include "http/server.h"

#define PIPELINE_BUFFER (64 * 1024) /* input buffered while a handler runs */
#define READ_CHUNK CLANK_READ_CHUNK
#define DRAIN_MAX (64 * 1024)              /* unread body discarded after an early answer */
#define OUTPUT_HIGH (4 * 1024 * 1024)      /* unsent output that stops reading */
#define OUTPUT_LOW (256 * 1024)            /* and below which on_drain is told */
#define STREAM_LOW (CLANK_STREAM_HIGH / 2) /* a waiting producer goes on below this */
#define WRITE_SLICE (128 * 1024) /* one write: its end is the progress the write deadline sees */
#define COPY_MAX (16 * 1024)     /* bodies smaller than this are copied, not referred to */
#define CAP_HEAD_MS 1000         /* a connection past the cap gets this long for its head */

static void timer_fired(uv_timer_t *t);
static void process(clank_conn_t *c);
static void detach_when_idle(clank_conn_t *c);

static clank_conn_t *conn_of(llhttp_t *p) { return p->data; }

/* Deadlines move on every request; the timer only when one comes earlier
   than it is set for. When it fires early it checks and sets itself again,
   which keeps timer-heap work off the request path. Two deadlines share it:
   the phase's, and the write in flight's. */
static void schedule(clank_conn_t *c) {
  if (c->closing) return;
  uint64_t next = c->deadline;
  if (c->write_by && (next == 0 || c->write_by < next)) next = c->write_by;
  if (next == 0) return;
  if (c->armed_for == 0 || c->armed_for > next) {
    uint64_t now = uv_now(c->server->loop);
    c->armed_for = next;
    uv_timer_start(&c->timer, timer_fired, next > now ? next - now : 0, 0);
  }
}

static void arm(clank_conn_t *c, uint64_t ms) {
  if (c->closing) return;
  c->deadline = uv_now(c->server->loop) + ms;
  schedule(c);
}

/* A write was handed to libuv: it must end (the peer take its bytes) in time. */
static void arm_write(clank_conn_t *c) {
  c->write_by = uv_now(c->server->loop) + c->server->limits.write_ms;
  schedule(c);
}

static void disarm(clank_conn_t *c) { c->deadline = 0; }

/* ---- lifetime ---- */

static void piece_free(clank_piece_t *p) {
  if (p->release)
    p->release(p->ud, p->token);
  else
    clank_buf_free(&p->own);
  free(p);
}

/* The queue's output is let go of at close: whoever lent bytes gets them back. */
static void queue_free(clank_conn_t *c) {
  while (c->queue) {
    clank_piece_t *p = c->queue;
    c->queue = p->next;
    piece_free(p);
  }
  c->queue_tail = NULL;
  c->queued = 0;
}

int clank_conn_refers_to(const clank_conn_t *c, const void *ud) {
  for (const clank_piece_t *p = c->queue; p; p = p->next)
    if (p->release && p->ud == ud) return 1;
  return 0;
}

static void conn_free(clank_conn_t *c) {
  if (c->holds > 0) return; /* the last release frees it */
  clank_server_t *s = c->server;
  if (c->prev)
    c->prev->next = c->next;
  else
    s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  clank_buf_free(&c->in);
  clank_buf_free(&c->out);
  clank_buf_free(&c->wbuf);
  clank_request_free(&c->req);
  free(c);
}

static void handle_closed(uv_handle_t *h) {
  clank_conn_t *c = h->data;
  if (--c->open_handles == 0) conn_free(c);
}

void clank_conn_hold(clank_conn_t *c) { c->holds++; }

void clank_conn_release(clank_conn_t *c) {
  if (--c->holds == 0 && c->closing && c->open_handles == 0) conn_free(c);
}

size_t clank_conn_pending(const clank_conn_t *c) {
  return c->out.len + (c->wbuf.len - c->woff) + c->queued;
}

static void file_end(clank_conn_t *c);
static int file_reading(const clank_conn_t *c);
static void shut_down(clank_conn_t *c);

static void unqueue_flush(clank_conn_t *c) {
  clank_conn_t **at = &c->server->flush_first;
  while (*at != c) at = &(*at)->flush_next;
  *at = c->flush_next;
  c->flush_next = NULL;
  c->flush_queued = 0;
}

void clank_conn_close(clank_conn_t *c) {
  if (c->closing) return;
  c->closing = 1;
  clank_server_t *s = c->server;
  s->nconns--;
  if (s->handler->on_close) s->handler->on_close(c);
  if (c->file && !file_reading(c)) file_end(c); /* a read in flight ends it when it returns */
  if (c->flush_queued) unqueue_flush(c);
  uv_close((uv_handle_t *)&c->tcp, handle_closed);
  uv_close((uv_handle_t *)&c->timer, handle_closed);
  /* uv_close stopped the socket's I/O: nothing reads the lent bytes again */
  queue_free(c);
  if (s->stopping && s->nconns == 0 && s->on_drained) s->on_drained(s);
}

/* ---- output ---- */

static void update_reading(clank_conn_t *c);

/* ---- a file as the body ---- */

#define FILE_CHUNK (64 * 1024)

typedef struct clank_file_body_s {
  uv_fs_t req;
  uv_file fd;
  uint64_t offset, left;
  int reading;
  char buf[FILE_CHUNK];
} file_body_t;

static void file_read(clank_conn_t *c);

static int file_reading(const clank_conn_t *c) { return c->file->reading; }

static void close_file(uv_file fd);

static void file_end(clank_conn_t *c) {
  file_body_t *f = c->file;
  close_file(f->fd); /* closing is quick: no thread for it */
  c->file = NULL;
  free(f);
  clank_conn_resume(c);
  clank_conn_release(c);
}

static void file_chunk(uv_fs_t *req) {
  clank_conn_t *c = req->data;
  file_body_t *f = c->file;
  ssize_t n = req->result;
  uv_fs_req_cleanup(req);
  f->reading = 0;
  if (c->closing) {
    file_end(c);
    return;
  }
  if (n <= 0) { /* the file shrank or failed under us: the length promised cannot be kept */
    clank_conn_close(c);
    file_end(c);
    return;
  }
  f->offset += (uint64_t)n;
  f->left -= (uint64_t)n;
  clank_buf_append(&c->out, f->buf, (size_t)n);
  clank_conn_flush(c);
  if (c->file != f) return; /* the flush closed the connection, which ended the file */
  if (f->left == 0)
    file_end(c);
  else if (!c->writing)
    file_read(c);
}

/* The next chunk, once the previous one was handed to the kernel. */
static void file_read(clank_conn_t *c) {
  file_body_t *f = c->file;
  if (f == NULL || f->reading || c->writing) return;
  if (c->closing) {
    file_end(c);
    return;
  }
  size_t want = f->left < FILE_CHUNK ? (size_t)f->left : FILE_CHUNK;
  uv_buf_t b = uv_buf_init(f->buf, (unsigned)want);
  f->reading = 1;
  f->req.data = c;
  if (uv_fs_read(c->server->loop, &f->req, f->fd, &b, 1, (int64_t)f->offset, file_chunk) != 0) {
    f->reading = 0;
    clank_conn_close(c);
    file_end(c);
  }
}

static void close_file(uv_file fd) {
  uv_fs_t req;
  uv_fs_close(NULL, &req, fd, NULL);
  uv_fs_req_cleanup(&req);
}

int clank_conn_body_file(clank_conn_t *c, uv_file fd, uint64_t offset, uint64_t len) {
  clank_conn_body_length(c, len); /* the head, then the file as the body */
  if (c->req.method == HTTP_HEAD || len == 0) {
    close_file(fd);
    return 0;
  }
  file_body_t *f = calloc(1, sizeof *f);
  if (f == NULL) {
    close_file(fd);
    c->close_after = 1; /* the promised body cannot come */
    c->out.len = c->head_mark;
    return 0;
  }
  f->fd = fd;
  f->offset = offset;
  f->left = len;
  c->file = f;
  clank_conn_hold(c);
  clank_conn_flush(c);
  file_read(c);
  return 1;
}

/* Output buffers keep their memory between answers, up to this much. */
#define OUTPUT_KEEP (16 * 1024)

/* n bytes of the queue's head were written. */
static void queue_advance(clank_conn_t *c, size_t n) {
  clank_piece_t *p = c->queue;
  p->off += n;
  c->queued -= n;
  if (p->off < p->len) return;
  c->queue = p->next;
  if (c->queue == NULL) c->queue_tail = NULL;
  piece_free(p);
}

static void queue_push(clank_conn_t *c, clank_piece_t *p) {
  if (c->queue_tail)
    c->queue_tail->next = p;
  else
    c->queue = p;
  c->queue_tail = p;
  c->queued += p->len;
}

/* What c->out holds goes into the queue as it is (no copy): later output
   must follow what is queued next. Returns -1 out of memory. */
static int queue_out(clank_conn_t *c) {
  if (c->out.len == 0) return 0;
  clank_piece_t *p = calloc(1, sizeof *p);
  if (p == NULL) return -1;
  p->own = c->out;
  p->data = p->own.data;
  p->len = p->own.len;
  c->out = (clank_buf_t){0};
  queue_push(c, p);
  return 0;
}

void clank_conn_out_ref(clank_conn_t *c, const char *data, size_t len, clank_release_fn release,
                        void *ud, uintptr_t token) {
  clank_piece_t *p = c->closing ? NULL : calloc(1, sizeof *p);
  if (p == NULL || queue_out(c) != 0) {
    free(p);
    release(ud, token);
    if (!c->closing) clank_conn_close(c); /* the promised body cannot come */
    return;
  }
  p->data = data;
  p->len = len;
  p->release = release;
  p->ud = ud;
  p->token = token;
  queue_push(c, p);
}

/* Tells a waiting producer (streamed output, an upgraded protocol) that the
   output went down. */
static void tell_drained(clank_conn_t *c) {
  size_t pending = clank_conn_pending(c);
  if (c->draining && !c->closing && pending < OUTPUT_LOW) {
    c->draining = 0;
    if (c->upgrade && c->upgrade->on_drain) c->upgrade->on_drain(c);
  }
  if (c->want_writable && !c->closing && pending < STREAM_LOW) {
    c->want_writable = 0;
    if (c->server->handler->on_writable) c->server->handler->on_writable(c);
  }
}

static void write_done(uv_write_t *req, int status) {
  clank_conn_t *c = req->data;
  c->writing = 0;
  c->write_by = 0;
  if (status < 0) {
    clank_conn_close(c);
    return;
  }
  if (c->from_queue) {
    c->from_queue = 0;
    queue_advance(c, c->wslice);
  } else {
    c->woff += c->wslice;
    if (c->woff == c->wbuf.len) {
      c->woff = 0;
      clank_buf_reset(&c->wbuf);
      if (c->wbuf.cap > OUTPUT_KEEP) clank_buf_free(&c->wbuf);
    }
  }
  clank_conn_flush(c);
  update_reading(c);
  if (c->file) file_read(c);
  tell_drained(c);
  if (c->detaching) detach_when_idle(c);
}

/* Hands a slice of [data, len) to libuv; its end is the write's progress. */
static void write_slice(clank_conn_t *c, const char *data, size_t len, int from_queue) {
  if (len > WRITE_SLICE) len = WRITE_SLICE;
  c->writing = 1;
  c->from_queue = from_queue ? 1 : 0;
  c->wslice = len;
  c->wreq.data = c;
  uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
  if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, write_done) != 0) {
    c->writing = 0;
    clank_conn_close(c);
    return;
  }
  arm_write(c);
}

void clank_conn_flush(clank_conn_t *c) {
  if (c->closing || c->writing) return; /* write_done flushes again */
  if (c->wbuf.len > c->woff) {          /* the rest of a write begun before */
    write_slice(c, c->wbuf.data + c->woff, c->wbuf.len - c->woff, 0);
    return;
  }
  while (c->queue) {
    clank_piece_t *p = c->queue;
    uv_buf_t b = uv_buf_init((char *)p->data + p->off, (unsigned)(p->len - p->off));
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n == UV_EAGAIN) n = 0;
    if (n < 0) {
      clank_conn_close(c);
      return;
    }
    if (n == 0) {
      write_slice(c, b.base, b.len, 1);
      return;
    }
    queue_advance(c, (size_t)n);
  }
  if (c->out.len > 0) {
    uv_buf_t b = uv_buf_init(c->out.data, (unsigned)c->out.len);
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n == UV_EAGAIN) n = 0;
    if (n < 0) {
      clank_conn_close(c);
      return;
    }
    clank_buf_consume(&c->out, (size_t)n);
    if (c->out.len == 0 && c->out.cap > OUTPUT_KEEP) clank_buf_free(&c->out);
  }
  if (c->out.len > 0) {
    /* The kernel took part of it: hand the rest to libuv, and let new output
       gather in the other buffer meanwhile. */
    clank_buf_t t = c->wbuf;
    c->wbuf = c->out;
    c->out = t;
    c->woff = 0;
    write_slice(c, c->wbuf.data, c->wbuf.len, 0);
    return;
  }
  if (c->close_after && c->phase != CLANK_PHASE_HANDLER)
    clank_conn_close(c);
  else if (c->lingering && !c->shut)
    shut_down(c);
}

static void flush_deferred_hook(uv_handle_t *h) { clank_server_flush_deferred(h->data); }
static void flush_after_poll(uv_check_t *h) { flush_deferred_hook((uv_handle_t *)h); }
static void flush_before_poll(uv_prepare_t *h) { flush_deferred_hook((uv_handle_t *)h); }

void clank_conn_flush_later(clank_conn_t *c) {
  clank_server_t *s = c->server;
  /* the host's teardown may have closed every handle, the server's too */
  if (!s->flush_open || uv_is_closing((uv_handle_t *)&s->flush_check) || c->close_after ||
      c->lingering) {
    clank_conn_flush(c);
    return;
  }
  if (c->flush_queued) return;
  if (s->flush_first == NULL) {
    uv_check_start(&s->flush_check, flush_after_poll);
    uv_prepare_start(&s->flush_prepare, flush_before_poll);
  }
  c->flush_queued = 1;
  c->flush_next = s->flush_first;
  s->flush_first = c;
}

void clank_server_flush_deferred(clank_server_t *s) {
  while (s->flush_first) {
    clank_conn_t *c = s->flush_first;
    s->flush_first = c->flush_next;
    c->flush_next = NULL;
    c->flush_queued = 0;
    clank_conn_flush(c);
    update_reading(c); /* reading stopped while the output was over its mark */
  }
  uv_check_stop(&s->flush_check);
  uv_prepare_stop(&s->flush_prepare);
}

void clank_conn_detach(clank_conn_t *c) {
  c->detaching = 1;
  c->stop_parsing = 1;
  c->answered = 1;
}

/* The request head as the parser saw it (names lower-cased), for the
   process that parses it again. */
static void rebuild_head(const clank_conn_t *c, clank_buf_t *b) {
  const clank_request_t *r = &c->req;
  clank_buf_appendf(b, "%s %.*s HTTP/%d.%d\r\n", llhttp_method_name(r->method), (int)r->url_len,
                    r->head.data, r->http_major, r->http_minor);
  for (int i = 0; i < r->nheaders; i++) {
    const clank_header_t *h = &r->headers[i];
    clank_buf_append(b, r->head.data + h->name_off, h->name_len);
    clank_buf_appends(b, ": ");
    clank_buf_append(b, r->head.data + h->value_off, h->value_len);
    clank_buf_appends(b, "\r\n");
  }
  clank_buf_appends(b, "\r\n");
}

/* A detaching connection leaves once what it owes is written (write_done
   calls this again). It reads no more: the rest stays in the socket. */
static void detach_when_idle(clank_conn_t *c) {
  if (c->closing) return;
  c->phase = CLANK_PHASE_HANDLER; /* inert: no timer fires, nothing is parsed */
  disarm(c);
  if (c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
  }
  if (!c->writing) clank_conn_flush(c); /* earlier answers first */
  if (c->closing || c->writing || clank_conn_pending(c) > 0) return;
  c->detaching = 0;
  clank_buf_t bytes = {0};
  rebuild_head(c, &bytes);
  clank_buf_append(&bytes, c->in.data, c->in.len);
  c->in.len = 0; /* a shared read buffer is not freed: own_input sees it empty */
  if (c->server->handler->on_detach)
    c->server->handler->on_detach(c, &bytes);
  else
    clank_conn_close(c);
  clank_buf_free(&bytes);
}

static void shutdown_done(uv_shutdown_t *req, int status) {
  clank_conn_t *c = req->data;
  if (status == UV_ECANCELED) return;
  if (status < 0 || c->close_on_shut) clank_conn_close(c);
}

/* All output written: the peer reads our end, we read (and drop) its rest. */
static void shut_down(clank_conn_t *c) {
  c->shut = 1;
  c->shutdown.data = c;
  if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, shutdown_done) != 0) clank_conn_close(c);
}

void clank_conn_linger(clank_conn_t *c, uint64_t ms) {
  if (c->closing || c->lingering) return;
  c->lingering = 1;
  arm(c, ms);
  clank_conn_flush(c);
}

int clank_conn_stream_full(clank_conn_t *c) {
  if (clank_conn_pending(c) < CLANK_STREAM_HIGH) return 0;
  c->want_writable = 1;
  return 1;
}

void clank_conn_append(clank_conn_t *c, const char *data, size_t len) {
  if (c->closing) return;
  clank_buf_append(&c->out, data, len);
  if (clank_conn_pending(c) >= OUTPUT_HIGH) c->draining = 1;
}

void clank_conn_write(clank_conn_t *c, const char *data, size_t len) {
  clank_conn_append(c, data, len);
  clank_conn_flush(c);
}

int clank_conn_keep_alive(clank_conn_t *c) {
  return !c->close_after && !c->undrainable && !c->server->stopping && !c->eof &&
         llhttp_should_keep_alive(&c->parser);
}

/* Answers and stops parsing this connection: what follows cannot be framed. */
static int refuse(clank_conn_t *c, int status, const char *body) {
  if (!c->answered) {
    c->close_after = 1;
    clank_conn_text(c, status, body);
  }
  c->close_after = 1;
  c->stop_parsing = 1;
  return HPE_PAUSED;
}

/* The body outgrew the limit on_head set. */
static int refuse_too_large(clank_conn_t *c) {
  const clank_http_handler_t *h = c->server->handler;
  c->close_after = 1;
  if (h->on_body_too_large)
    h->on_body_too_large(c);
  else
    clank_conn_text(c, 413, "Payload too large.");
  c->stop_parsing = 1;
  return HPE_PAUSED;
}

/* Past the connection cap (SPEC §13): 503, then the write side is shut
   down and input read and dropped until the peer closes, so it reads the
   whole answer instead of a reset. */
static void answer_over_cap(clank_conn_t *c, int head_read) {
  if (!c->answered) {
    c->close_after = 1; /* for its connection: close */
    clank_conn_answer(c, 503, "content-type: text/plain; charset=utf-8\r\nretry-after: 1\r\n",
                      "Service unavailable.", sizeof "Service unavailable." - 1);
  }
  c->close_after = 0;
  c->stop_parsing = 1;
  /* Nothing more is coming (a head without a body): close once the answer
     and our FIN are out, which frees the descriptor at once; else read the
     rest and drop it until the peer closes. */
  c->close_on_shut = head_read && c->parser.content_length == 0 && !(c->parser.flags & F_CHUNKED);
  c->phase = CLANK_PHASE_IDLE;
  clank_conn_linger(c, c->server->limits.drain_ms);
  update_reading(c);
}

/* ---- llhttp callbacks ---- */

static size_t body_max(const clank_conn_t *c) { return c->body_max ? c->body_max : CLANK_MAX_BODY; }

static int on_message_begin(llhttp_t *p) {
  clank_conn_t *c = conn_of(p);
  clank_request_reset(&c->req);
  c->req.started_ns = c->read_ns;
  c->answered = 0;
  c->undrainable = 0;
  c->body_limit = 0;
  c->body_max = 0;
  c->drained = 0;
  c->phase = CLANK_PHASE_HEAD;
  if (!c->over_cap) arm(c, c->server->limits.header_ms); /* else the cap's 1 s from accept */
  return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len) {
  clank_conn_t *c = conn_of(p);
  clank_request_t *r = &c->req;
  r->method = p->method;
  size_t line =
      strlen(llhttp_method_name(p->method)) + 1 + r->url_len + len + sizeof " HTTP/1.1" - 1;
  if (line > CLANK_MAX_REQUEST_LINE) return refuse(c, 414, "URI too long.");
  clank_buf_append(&r->head, at, len);
  r->url_len += (uint32_t)len;
  return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len) {
  clank_conn_t *c = conn_of(p);
  if (clank_headers_name(&c->req, at, len) != 0)
    return refuse(c, 431, "Request header fields too large.");
  return 0;
}

static int on_header_field_complete(llhttp_t *p) {
  clank_headers_name_done(&conn_of(p)->req);
  return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len) {
  clank_conn_t *c = conn_of(p);
  if (clank_headers_value(&c->req, at, len) != 0)
    return refuse(c, 431, "Request header fields too large.");
  return 0;
}

static int on_header_value_complete(llhttp_t *p) {
  clank_headers_value_done(&conn_of(p)->req);
  return 0;
}

/* host [":" port] (RFC 9112 §3.2, RFC 3986 §3.2.2): a reg-name, an IPv4 or a
   bracketed IP literal. Anything else is a 400. */
static int host_syntax_ok(const char *v, size_t n) {
  static const char reg[] = "-._~!$&'()*+,;=%";
  size_t i = 0;
  if (n > 0 && v[0] == '[') {
    while (i < n && v[i] != ']') {
      char ch = v[i];
      if (i > 0 && !((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
                     (ch >= 'A' && ch <= 'F') || ch == ':' || ch == '.'))
        return 0;
      i++;
    }
    if (i == n) return 0;
    i++;
  } else {
    while (i < n && v[i] != ':') {
      unsigned char ch = (unsigned char)v[i];
      if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
            ch == '.' || strchr(reg, ch)))
        return 0;
      i++;
    }
  }
  if (i < n) {
    if (v[i] != ':') return 0;
    for (i++; i < n; i++)
      if (v[i] < '0' || v[i] > '9') return 0;
  }
  return 1;
}

static int header_is(const clank_request_t *r, const clank_header_t *h, const char *v) {
  size_t n = strlen(v);
  return h->value_len == n && strncasecmp(clank_header_value(r, h), v, n) == 0;
}

static int on_headers_complete(llhttp_t *p) {
  clank_conn_t *c = conn_of(p);
  clank_request_t *r = &c->req;
  r->method = p->method;
  r->http_major = p->http_major;
  r->http_minor = p->http_minor;
  if (c->over_cap) {
    answer_over_cap(c, 1);
    return HPE_PAUSED;
  }
  if (p->http_major != 1 || p->http_minor > 1) return refuse(c, 505, "HTTP version not supported.");
  int http11 = p->http_minor == 1;

  /* host, transfer-encoding and expect, in one pass: the first of each, and how many */
  const clank_header_t *host = NULL, *te = NULL, *expect = NULL;
  int nhost = 0, nte = 0;
  for (int i = 0; i < r->nheaders; i++) {
    const clank_header_t *h = &r->headers[i];
    const char *name = r->head.data + h->name_off;
    if (h->name_len == 4 && memcmp(name, "host", 4) == 0) {
      if (nhost++ == 0) host = h;
    } else if (h->name_len == 17 && memcmp(name, "transfer-encoding", 17) == 0) {
      if (nte++ == 0) te = h;
    } else if (h->name_len == 6 && memcmp(name, "expect", 6) == 0) {
      if (expect == NULL) expect = h;
    }
  }
  if (nhost > 1 || (http11 && nhost == 0)) return refuse(c, 400, "Bad request.");
  clank_target_t t;
  clank_request_target(r, &t);
  if (host && t.authority) {
    /* RFC 9112 §3.2.2: the authority of an absolute-form target replaces
       Host, for whoever reads the Host header after this (origin checks) */
    r->headers[host - r->headers].value_off = (uint32_t)(t.authority - r->head.data);
    r->headers[host - r->headers].value_len = (uint32_t)t.authority_len;
  }
  if ((host && !host_syntax_ok(clank_header_value(r, host), host->value_len)) ||
      (t.authority && !host_syntax_ok(t.authority, t.authority_len)))
    return refuse(c, 400, "Bad request.");
  if (te) {
    if (!http11) return refuse(c, 400, "Bad request.");
    if (nte > 1 || !header_is(r, te, "chunked")) return refuse(c, 501, "Not implemented.");
  }
  if (!http11) expect = NULL;
  if (expect && !header_is(r, expect, "100-continue"))
    clank_conn_text(c, 417, "Expectation failed.");

  int has_body = (p->flags & F_CHUNKED) || p->content_length > 0;
  /* An early answer keeps the connection only if the unread body is small. */
  c->undrainable = !(p->flags & F_CHUNKED) && p->content_length > DRAIN_MAX;
  int read_body = !c->answered && c->server->handler->on_head(c) == CLANK_HTTP_READ_BODY;
  if (c->stop_parsing || c->phase == CLANK_PHASE_UPGRADED) return HPE_PAUSED;
  if (read_body) {
    c->undrainable = 0; /* the body is read, not discarded */
    /* A body limit of the handler's own is enforced as the body arrives
       (its answer may want what came before). */
    if (!(p->flags & F_CHUNKED) && p->content_length > body_max(c))
      return refuse(c, 413, "Payload too large.");
    if (expect && has_body) clank_buf_appends(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
    c->phase = CLANK_PHASE_BODY;
    if (has_body)
      arm(c, c->server->limits.body_ms);
    else
      disarm(c);
  } else {
    if (c->undrainable) {
      c->close_after = 1;
      c->stop_parsing = 1;
      return HPE_PAUSED;
    }
    c->phase = CLANK_PHASE_DRAIN;
    if (has_body)
      arm(c, c->server->limits.drain_ms);
    else
      disarm(c);
  }
  return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len) {
  clank_conn_t *c = conn_of(p);
  if (c->phase == CLANK_PHASE_DRAIN) {
    c->drained += len;
    if (c->drained > DRAIN_MAX) {
      c->close_after = 1;
      c->stop_parsing = 1;
      return HPE_PAUSED;
    }
    return 0;
  }
  clank_buf_t *b = &c->req.body;
  if (c->body_limit && b->len + len > c->body_limit) return refuse_too_large(c);
  if (b->len + len > body_max(c)) return refuse(c, 413, "Payload too large.");
  clank_buf_append(b, at, len);
  return 0;
}

/* Chunk extensions (RFC 9112 §7.1.1) are metadata like header fields: they
   count toward the header limit (SPEC §13), else a client could send them
   without end. */
static int on_chunk_extension(llhttp_t *p, const char *at, size_t len) {
  (void)at;
  clank_conn_t *c = conn_of(p);
  clank_request_t *r = &c->req;
  r->header_bytes += len;
  if (r->header_bytes > CLANK_MAX_HEADER_BYTES)
    return refuse(c, 431, "Request header fields too large.");
  return 0;
}

static int on_message_complete(llhttp_t *p) {
  clank_conn_t *c = conn_of(p);
  disarm(c);
  if (!c->answered) {
    if (!clank_conn_keep_alive(c)) c->close_after = 1;
    c->phase = CLANK_PHASE_HANDLER;
    if (c->server->handler->on_message(c)) return HPE_PAUSED; /* the answer is coming */
    if (c->phase == CLANK_PHASE_UPGRADED) return HPE_PAUSED;  /* the rest is not HTTP */
  }
  c->phase = CLANK_PHASE_IDLE;
  if (c->close_after) {
    c->stop_parsing = 1;
    return HPE_PAUSED;
  }
  return 0;
}

void clank_server_init_parser_settings(llhttp_settings_t *s);
void clank_server_init_parser_settings(llhttp_settings_t *s) {
  llhttp_settings_init(s);
  s->on_message_begin = on_message_begin;
  s->on_url = on_url;
  s->on_header_field = on_header_field;
  s->on_header_field_complete = on_header_field_complete;
  s->on_header_value = on_header_value;
  s->on_header_value_complete = on_header_value_complete;
  s->on_headers_complete = on_headers_complete;
  s->on_body = on_body;
  s->on_chunk_extension_name = on_chunk_extension;
  s->on_chunk_extension_value = on_chunk_extension;
  s->on_message_complete = on_message_complete;
}

/* ---- input ---- */

static void framing_error(clank_conn_t *c, llhttp_errno_t err) {
  /* llhttp files a bad line ending after the version under the same code as
     an unknown version; only the latter is a 505. */
  const char *reason = llhttp_get_error_reason(&c->parser);
  if (err == HPE_INVALID_VERSION && strstr(reason ? reason : "", "Invalid") != NULL)
    refuse(c, 505, "HTTP version not supported.");
  else
    refuse(c, 400, "Bad request.");
}

static void process(clank_conn_t *c) {
  size_t pos = 0;
  while (pos < c->in.len && !c->closing && !c->stop_parsing && c->phase != CLANK_PHASE_HANDLER &&
         c->phase != CLANK_PHASE_UPGRADED) {
    const char *start = c->in.data + pos;
    llhttp_errno_t err = llhttp_execute(&c->parser, start, c->in.len - pos);
    if (err == HPE_OK) {
      pos = c->in.len;
    } else if (err == HPE_PAUSED) {
      pos += (size_t)(llhttp_get_error_pos(&c->parser) - start);
      llhttp_resume(&c->parser);
    } else if (err == HPE_PAUSED_UPGRADE) {
      /* Nobody took the upgrade: the request was answered as plain HTTP
         (RFC 9110 §7.8 lets a server ignore Upgrade), and so is what follows. */
      pos += (size_t)(llhttp_get_error_pos(&c->parser) - start);
      if (c->phase == CLANK_PHASE_UPGRADED) break;
      llhttp_resume_after_upgrade(&c->parser);
    } else {
      framing_error(c, err);
      pos = c->in.len;
    }
  }
  if (c->closing) return;
  clank_buf_consume(&c->in, pos);
  if (c->detaching) {
    detach_when_idle(c);
    return;
  }
  if (c->phase == CLANK_PHASE_UPGRADED) {
    clank_conn_flush(c);
    if (c->in.len > 0 && !c->closing) {
      c->upgrade->on_data(c, c->in.data, c->in.len);
      clank_buf_reset(&c->in);
    }
    update_reading(c);
    return;
  }
  if (c->stop_parsing) clank_buf_reset(&c->in);
  if (c->phase == CLANK_PHASE_IDLE && c->eof) c->close_after = 1;
  if (c->phase == CLANK_PHASE_IDLE && !c->close_after && !c->lingering) {
    clank_request_trim(&c->req);
    arm(c, c->server->limits.idle_ms);
  }
  clank_conn_flush_later(c);
  update_reading(c);
}

/* Reads land in the server's one read buffer when the connection has no
   input pending (the usual case), so an idle connection holds no input
   memory; what a read leaves unparsed is copied into the connection's own. */
static void alloc_input(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  clank_conn_t *c = h->data;
  clank_server_t *s = c->server;
  if (c->in.len == 0 && s->read_buf) {
    clank_buf_free(&c->in);
    *buf = uv_buf_init(s->read_buf, READ_CHUNK);
    return;
  }
  if (clank_buf_reserve(&c->in, READ_CHUNK) != 0) {
    *buf = uv_buf_init(NULL, 0);
    return;
  }
  *buf = uv_buf_init(c->in.data + c->in.len, (unsigned)(c->in.cap - c->in.len));
}

/* After a read into the shared buffer: what is left moves to memory of the
   connection's own (none when nothing is). */
static void own_input(clank_conn_t *c) {
  clank_buf_t own = {0};
  if (c->in.len > 0) clank_buf_append(&own, c->in.data, c->in.len);
  c->in = own;
}

static void read_input(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  clank_conn_t *c = stream->data;
  int shared = buf->base != NULL && buf->base == c->server->read_buf;
  if (nread == UV_EOF) {
    c->eof = 1;
    uv_read_stop(stream);
    c->reading = 0;
    if (c->phase == CLANK_PHASE_UPGRADED) {
      if (!c->lingering && c->upgrade->on_eof) c->upgrade->on_eof(c);
      if (c->out.len > 0 || c->writing)
        c->close_after = 1; /* what we still owe it goes out first */
      else
        clank_conn_close(c);
      return;
    }
    /* A client that half-closed after its request still reads the answer:
       the handler goes on, and the connection closes once it is written
       (bounded by the write deadline like any answer). Only a reset or a
       failed write is a client gone (on_close). */
    if (c->phase == CLANK_PHASE_HANDLER) return;
    /* A request begun but not finished can never be: close after any answer. */
    c->close_after = 1;
    clank_conn_flush(c);
    return;
  }
  if (nread < 0) {
    clank_conn_close(c);
    return;
  }
  if (nread == 0) return;
  if (c->lingering && c->phase != CLANK_PHASE_UPGRADED) return; /* dropped */
  if (c->phase == CLANK_PHASE_UPGRADED) {
    if (!c->lingering) c->upgrade->on_data(c, buf->base, (size_t)nread);
    return;
  }
  /* when the oldest byte still unparsed arrived: the start of the requests
     parsed from it (one clock read for all the requests of a read) */
  if (shared || c->in.len == 0) c->read_ns = uv_hrtime();
  if (shared)
    c->in = (clank_buf_t){.data = buf->base, .len = (size_t)nread, .cap = READ_CHUNK};
  else
    c->in.len += (size_t)nread;
  if (c->phase == CLANK_PHASE_HANDLER) {
    if (shared) own_input(c);
    update_reading(c);
    return;
  }
  if (c->phase == CLANK_PHASE_IDLE) disarm(c);
  process(c);
  if (shared) own_input(c);
}

static void update_reading(clank_conn_t *c) {
  if (c->closing) return;
  int want = !c->eof &&
             (c->lingering || (!c->stop_parsing && !c->input_held && c->in.len < PIPELINE_BUFFER &&
                               clank_conn_pending(c) < OUTPUT_HIGH));
  if (want && !c->reading) {
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_input, read_input) == 0) c->reading = 1;
  } else if (!want && c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
  }
}

void clank_conn_hold_input(clank_conn_t *c, int hold) {
  c->input_held = hold != 0;
  update_reading(c);
}

void clank_conn_resume(clank_conn_t *c) {
  if (c->closing) return;
  c->phase = CLANK_PHASE_IDLE;
  if (c->close_after) c->stop_parsing = 1;
  process(c);
}

static void timer_fired(uv_timer_t *t) {
  clank_conn_t *c = t->data;
  c->armed_for = 0;
  uint64_t now = uv_now(c->server->loop);
  if (c->write_by && now >= c->write_by) {
    clank_conn_close(c); /* the peer stopped taking its answer (SPEC §13) */
    return;
  }
  if (c->deadline == 0 || now < c->deadline) {
    schedule(c);
    return;
  }
  c->deadline = 0;
  if (c->lingering && c->phase != CLANK_PHASE_UPGRADED) {
    clank_conn_close(c);
    return;
  }
  if (c->over_cap && (c->phase == CLANK_PHASE_IDLE || c->phase == CLANK_PHASE_HEAD)) {
    answer_over_cap(c, 0); /* no head in time: answered all the same */
    return;
  }
  switch (c->phase) {
    case CLANK_PHASE_HEAD:
    case CLANK_PHASE_BODY:
      refuse(c, 408, "Request timeout.");
      clank_conn_flush(c);
      break;
    case CLANK_PHASE_IDLE:
    case CLANK_PHASE_DRAIN:
      clank_conn_close(c); /* silently: nothing is owed */
      break;
    case CLANK_PHASE_HANDLER: break;
    case CLANK_PHASE_UPGRADED:
      if (c->lingering)
        clank_conn_close(c);
      else if (c->upgrade->on_timeout)
        c->upgrade->on_timeout(c);
      break;
  }
}

void clank_conn_upgrade(clank_conn_t *c, const clank_upgrade_handler_t *h, const char *protocol,
                        const char *header_lines) {
  c->close_after = 0;
  clank_conn_switch(c, protocol, header_lines);
  c->upgrade = h;
  c->phase = CLANK_PHASE_UPGRADED;
  c->close_after = 0;
  disarm(c);
}

void clank_conn_deadline(clank_conn_t *c, uint64_t ms) {
  if (ms == 0)
    disarm(c);
  else
    arm(c, ms);
}

static clank_conn_t *conn_new(clank_server_t *s) {
  /* the user's data slot follows the connection, in the same allocation */
  size_t extra = (s->conn_data_size + 15) & ~(size_t)15;
  size_t size = (sizeof(clank_conn_t) + 15) & ~(size_t)15;
  clank_conn_t *c = calloc(1, size + extra);
  if (c == NULL) return NULL;
  c->server = s;
  clank_request_reset(&c->req);
  if (extra) c->data = (char *)c + size;
  uv_tcp_init(s->loop, &c->tcp);
  uv_timer_init(s->loop, &c->timer);
  c->tcp.data = c->timer.data = c;
  c->open_handles = 2;
  c->next = s->conns;
  if (s->conns) s->conns->prev = c;
  s->conns = c;
  s->nconns++;
  llhttp_init(&c->parser, HTTP_REQUEST, &s->settings);
  c->parser.data = c;
  return c;
}

static void conn_start(clank_conn_t *c) {
  clank_server_t *s = c->server;
  /* The loop reads its clock once per iteration: after a long callback it is
     behind, and a connection's first deadline would be shorter by as much. */
  uv_update_time(s->loop);
  uv_tcp_nodelay(&c->tcp, 1);
  update_reading(c);
  if (s->nconns > s->limits.max_connections) {
    /* Its head is read first: closing with a request unread would reset it. */
    c->over_cap = 1;
    arm(c, CAP_HEAD_MS);
    return;
  }
  arm(c, s->limits.idle_ms);
}

void clank_conn_accept(clank_server_t *s, int fd) {
  clank_conn_t *c = conn_new(s);
  if (c == NULL) {
    close(fd);
    return;
  }
  if (uv_tcp_open(&c->tcp, fd) != 0) {
    close(fd);
    clank_conn_close(c);
    return;
  }
  conn_start(c);
}

clank_conn_t *clank_conn_adopt(clank_server_t *s, uv_stream_t *ipc, const char *bytes, size_t len) {
  clank_conn_t *c = conn_new(s);
  if (c == NULL) return NULL;
  if (uv_accept(ipc, (uv_stream_t *)&c->tcp) != 0) {
    clank_conn_close(c);
    return NULL;
  }
  if (len) clank_buf_append(&c->in, bytes, len);
  c->read_ns = uv_hrtime(); /* read by the process that handed it over, a moment ago */
  conn_start(c);
  if (c->in.len) process(c);
  return c;
}

int clank_conn_open(clank_server_t *s, uv_os_sock_t sock) {
  clank_conn_t *c = conn_new(s);
  if (c == NULL) return UV_ENOMEM;
  int rc = uv_tcp_open(&c->tcp, sock);
  if (rc != 0) {
    clank_conn_close(c);
    return rc;
  }
  conn_start(c);
  return 0;
}
