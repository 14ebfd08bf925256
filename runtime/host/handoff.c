/* Session ownership across workers (SPEC §13): the decision, and the
   worker's end of the IPC pipe to its master. */
#include "host/handoff.h"

#include <stdlib.h>
#include <string.h>

#include "host/dispatch.h"
#include "host/host.h"
#include "host/live.h"
#include "host/master.h"

#define SESSIONS "/__clank/sessions/"

typedef struct clank_handoff_s {
  uv_pipe_t pipe;
  clank_buf_t in; /* messages from the master, not yet whole */
  clank_host_t *host;
} handoff_t;

typedef struct send_s {
  uv_write_t req;
  clank_ipc_head_t head;
  clank_buf_t bytes;
  clank_conn_t *conn; /* NULL for a message without a socket */
} send_t;

uint64_t clank_fnv1a64(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static void sent(uv_write_t *req, int status) {
  (void)status; /* failed: the client sees its connection close, as when the owner dies */
  send_t *s = req->data;
  if (s->conn) {
    clank_conn_close(s->conn); /* our copy of the socket: the owner holds its own */
    clank_conn_release(s->conn);
  }
  clank_buf_free(&s->bytes);
  free(s);
}

static int send_message(handoff_t *hs, uint32_t type, uint32_t worker, clank_buf_t *bytes,
                        clank_conn_t *c) {
  send_t *s = calloc(1, sizeof *s);
  if (s == NULL) return -1;
  s->head = (clank_ipc_head_t){.type = type, .worker = worker, .len = (uint32_t)bytes->len};
  s->bytes = *bytes;
  *bytes = (clank_buf_t){0};
  s->conn = c;
  s->req.data = s;
  uv_buf_t b[2] = {uv_buf_init((char *)&s->head, sizeof s->head),
                   uv_buf_init(s->bytes.data, (unsigned)s->bytes.len)};
  int rc = c ? uv_write2(&s->req, (uv_stream_t *)&hs->pipe, b, 2, (uv_stream_t *)&c->tcp, sent)
             : uv_write(&s->req, (uv_stream_t *)&hs->pipe, b, 2, sent);
  if (rc != 0) {
    *bytes = s->bytes;
    free(s);
    return -1;
  }
  if (c) clank_conn_hold(c);
  return 0;
}

/* ---- from the master: connections handed to this worker ---- */

static void ipc_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  handoff_t *hs = handle->data;
  if (clank_buf_reserve(&hs->in, 64 * 1024) != 0) {
    *buf = uv_buf_init(NULL, 0);
    return;
  }
  *buf = uv_buf_init(hs->in.data + hs->in.len, (unsigned)(hs->in.cap - hs->in.len));
}

static void ipc_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf) {
  (void)buf;
  handoff_t *hs = stream->data;
  if (n < 0) { /* the master is gone: it takes the workers with it */
    uv_read_stop(stream);
    return;
  }
  hs->in.len += (size_t)n;
  size_t pos = 0;
  while (hs->in.len - pos >= sizeof(clank_ipc_head_t)) {
    clank_ipc_head_t head;
    memcpy(&head, hs->in.data + pos, sizeof head);
    if (head.len > CLANK_IPC_MAX) {
      uv_read_stop(stream);
      break;
    }
    if (hs->in.len - pos - sizeof head < head.len) break;
    const char *bytes = hs->in.data + pos + sizeof head;
    /* A socket comes with the message's first bytes: it is pending by now. */
    if (head.type == CLANK_IPC_HANDOFF && uv_pipe_pending_count(&hs->pipe) > 0)
      clank_conn_adopt(&hs->host->server, stream, bytes, head.len);
    pos += sizeof head + head.len;
  }
  clank_buf_consume(&hs->in, pos);
}

static void free_handoff(uv_handle_t *handle) {
  handoff_t *hs = handle->data;
  clank_buf_free(&hs->in);
  free(hs);
}

void clank_handoff_free(clank_host_t *h) {
  if (h->handoff) free_handoff((uv_handle_t *)&h->handoff->pipe);
  h->handoff = NULL;
}

int clank_handoff_start(clank_host_t *h, const char *app_name) {
  handoff_t *hs = calloc(1, sizeof *hs);
  if (hs == NULL) return -1;
  hs->host = h;
  uv_pipe_init(&h->loop, &hs->pipe, 1);
  hs->pipe.data = hs;
  if (uv_pipe_open(&hs->pipe, h->worker->ipc_fd) != 0) {
    uv_close((uv_handle_t *)&hs->pipe, free_handoff);
    return -1;
  }
  h->handoff = hs;
  uv_unref((uv_handle_t *)&hs->pipe);
  uv_read_start((uv_stream_t *)&hs->pipe, ipc_alloc, ipc_read);
  clank_buf_t name = {0};
  clank_buf_appends(&name, app_name);
  int rc = send_message(hs, CLANK_IPC_READY, (uint32_t)h->worker->index, &name, NULL);
  clank_buf_free(&name);
  return rc;
}

/* ---- to the owner ---- */

static int owner_of(const clank_worker_t *w, const char *id, size_t n) {
  return (int)(clank_fnv1a64(id, n) % (uint64_t)w->count);
}

int clank_handoff_owner(clank_host_t *h, const char *p, size_t n, const clank_request_t *r,
                        int *live) {
  const clank_worker_t *w = h->worker;
  if (w == NULL || h->handoff == NULL) return -1;
  int owner = -1;
  size_t k = sizeof SESSIONS - 1;
  if (n > k && memcmp(p, SESSIONS, k) == 0) {
    const char *id = p + k;
    const char *end = memchr(id, '/', n - k);
    size_t len = end ? (size_t)(end - id) : n - k;
    /* the inspector's sessions ("i.<token>") are every worker's own */
    if (len > 0 && !(len > 1 && id[0] == 'i' && id[1] == '.')) owner = owner_of(w, id, len);
    *live = end && (size_t)(p + n - end) == 5 && memcmp(end, "/live", 5) == 0;
  } else if (n == sizeof "/__clank/mcp" - 1 && memcmp(p, "/__clank/mcp", n) == 0) {
    int count;
    const clank_header_t *sid = clank_request_header(r, "mcp-session-id", 14, &count);
    if (sid && count == 1 && sid->value_len > 0)
      owner = owner_of(w, clank_header_value(r, sid), sid->value_len);
  }
  return owner == w->index ? -1 : owner;
}

int clank_handoff(clank_conn_t *c, int owner, int live) {
  clank_host_t *h = c->server->data;
  if (!h->worker->up[owner] && live) {
    if (clank_live_check(c, h->gen)) clank_live_refuse(c, 1013, "try again later");
    return CLANK_HTTP_ANSWERED;
  }
  if (!h->worker->up[owner]) {
    clank_conn_answer(c, 503, "content-type: text/plain; charset=utf-8\r\nretry-after: 1\r\n",
                      "Service unavailable.", sizeof "Service unavailable." - 1);
    return CLANK_HTTP_ANSWERED;
  }
  ((clank_conn_state_t *)c->data)->handoff_to = (unsigned char)(owner + 1);
  clank_conn_detach(c);
  return CLANK_HTTP_ANSWERED;
}

void clank_handoff_detached(clank_conn_t *c, clank_buf_t *bytes) {
  clank_host_t *h = c->server->data;
  int owner = ((clank_conn_state_t *)c->data)->handoff_to - 1;
  if (owner < 0 || h->handoff == NULL || !h->worker->up[owner] ||
      send_message(h->handoff, CLANK_IPC_HANDOFF, (uint32_t)owner, bytes, c) != 0)
    clank_conn_close(c);
}
