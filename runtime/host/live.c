/* The live channel of SPEC §11: a view session's WebSocket (wslay over an
   upgraded connection), bound to the generation's clank.live object. Owns
   each channel's wslay context, its frames in and out, and its refs. */
#include "host/live.h"

#include <lauxlib.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <wslay/wslay.h>

#include "host/csrf.h"
#include "host/dispatch.h"
#include "host/host.h"
#include "host/inspector.h"
#include "host/lua_request.h"
#include "host/respond.h"
#include "data/json.h"
#include "core/protect.h"
#include "core/scheduler.h"

#define SOCKET_MT "clank.LiveSocket"
#define MAX_MESSAGE (1024 * 1024) /* a larger message closes with 1009 */
#define MAX_OUTPUT \
  (1024 * 1024)        /* unsent output past which a browser that does not read is dropped */
#define LINGER_MS 2000 /* after our close frame, input is read and dropped this long */
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

struct clank_live_s {
  clank_conn_t *conn;
  clank_host_t *host;
  clank_gen_t *gen;
  wslay_event_context_ptr ws;
  const char *in; /* bytes being fed to wslay */
  size_t in_len;
  int feeding;     /* inside wslay_event_recv: sends wait until it returns */
  int sending;     /* inside wslay_event_send, or writing what it sent */
  int dead;        /* its connection closed inside one of those: freed when it returns */
  char *id;        /* the session id: its token */
  char *request;   /* the upgrade request as canonical JSON, to mount it again after a reload */
  int socket_ref;  /* the LiveSocket userdata in gen's state */
  uint64_t heard;  /* loop time of the peer's last frame */
  uint64_t jitter; /* the state of ping_interval's sequence */
  int inspector;   /* a session of the inspector (SPEC §16), not of the app's views */
  /* Backpressure: the session's queue is full (its receive said so), so the
     socket is not read and the frames of the last read wait in held until
     socket:resume(); resume_pending: they are fed from the connection's timer,
     outside whatever Lua called resume. */
  int paused, resume_pending;
  clank_buf_t held;
  clank_live_t *prev, *next;
};

typedef struct socket_s {
  clank_live_t *live; /* NULL once the channel is gone */
} socket_t;

/* ---- the handshake (RFC 6455 §4.2) ---- */

static const clank_header_t *header(const clank_request_t *r, const char *name) {
  int n;
  const clank_header_t *h = clank_request_header(r, name, strlen(name), &n);
  return n == 1 ? h : NULL;
}

/* Whether a comma-separated header value lists `token` (case ignored). */
static int lists_token(const clank_request_t *r, const clank_header_t *h, const char *token) {
  if (h == NULL) return 0;
  const char *v = clank_header_value(r, h), *end = v + h->value_len;
  size_t n = strlen(token);
  while (v < end) {
    while (v < end && (*v == ' ' || *v == '\t' || *v == ',')) v++;
    const char *start = v;
    while (v < end && *v != ',') v++;
    const char *stop = v;
    while (stop > start && (stop[-1] == ' ' || stop[-1] == '\t')) stop--;
    if ((size_t)(stop - start) == n && strncasecmp(start, token, n) == 0) return 1;
  }
  return 0;
}

/* Sec-WebSocket-Key: the base64 of 16 bytes. */
static int key_ok(const clank_request_t *r, const clank_header_t *h) {
  if (h == NULL || h->value_len != 24) return 0;
  const char *v = clank_header_value(r, h);
  for (int i = 0; i < 22; i++)
    if (!((v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= 'a' && v[i] <= 'z') ||
          (v[i] >= '0' && v[i] <= '9') || v[i] == '+' || v[i] == '/'))
      return 0;
  return v[22] == '=' && v[23] == '=';
}

/* A body follows the head: transfer-encoding, or a content-length but 0. */
static int has_body(const clank_request_t *r) {
  if (clank_request_header(r, "transfer-encoding", 17, NULL)) return 1;
  const clank_header_t *h = clank_request_header(r, "content-length", 14, NULL);
  if (h == NULL) return 0;
  const char *v = clank_header_value(r, h);
  for (uint32_t i = 0; i < h->value_len; i++)
    if (v[i] != '0') return 1;
  return 0;
}

int clank_live_origin(clank_conn_t *c, clank_gen_t *g) {
  int allowed = clank_origin_allowed(c, g, 1, "live");
  if (!allowed)
    clank_answer_envelope(c, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.", NULL);
  return allowed;
}

int clank_live_check(clank_conn_t *c, clank_gen_t *g) {
  const clank_request_t *r = &c->req;
  if (!clank_live_origin(c, g)) return 0;
  if (r->method != HTTP_GET || !lists_token(r, header(r, "upgrade"), "websocket") ||
      !lists_token(r, header(r, "connection"), "upgrade")) {
    clank_answer_envelope(c, 426, "UPGRADE_REQUIRED", "The live channel is a WebSocket.",
                          "upgrade: websocket\r\nconnection: Upgrade\r\n");
    return 0;
  }
  const clank_header_t *version = header(r, "sec-websocket-version");
  if (version == NULL || version->value_len != 2 ||
      memcmp(clank_header_value(r, version), "13", 2) != 0) {
    clank_answer_envelope(c, 426, "UPGRADE_REQUIRED", "WebSocket version 13 is required.",
                          "sec-websocket-version: 13\r\n");
    return 0;
  }
  if (!key_ok(r, header(r, "sec-websocket-key"))) {
    clank_answer_envelope(c, 400, "BAD_REQUEST", "Sec-WebSocket-Key is missing or not valid.",
                          NULL);
    return 0;
  }
  if (has_body(r)) { /* after the 101 its bytes would be read as the client's frames */
    clank_answer_envelope(c, 400, "BAD_REQUEST", "A WebSocket handshake has no body.", NULL);
    return 0;
  }
  return 1;
}

/* ---- the socket Lua sees ---- */

static void pump(clank_live_t *live);

static clank_live_t *socket_live(lua_State *L) {
  socket_t *s = luaL_checkudata(L, 1, SOCKET_MT);
  return s->live;
}

/* socket:send(text) → true, or false when the channel is gone or the
   browser stopped reading (it is dropped then). */
static int socket_send(lua_State *L) {
  clank_live_t *live = socket_live(L);
  size_t n;
  const char *text = luaL_checklstring(L, 2, &n);
  if (live == NULL || !wslay_event_get_write_enabled(live->ws)) {
    lua_pushboolean(L, 0);
    return 1;
  }
  if (clank_conn_pending(live->conn) + wslay_event_get_queued_msg_length(live->ws) > MAX_OUTPUT) {
    clank_log_msg(&live->host->log, "warn", "live: a browser that does not read was dropped");
    clank_conn_close(live->conn); /* its on_close frees the channel */
    lua_pushboolean(L, 0);
    return 1;
  }
  struct wslay_event_msg msg = {WSLAY_TEXT_FRAME, (const uint8_t *)text, n};
  int ok = wslay_event_queue_msg(live->ws, &msg) == 0;
  if (ok) pump(live);
  lua_pushboolean(L, ok);
  return 1;
}

/* socket:close(code, reason) */
static int socket_close(lua_State *L) {
  clank_live_t *live = socket_live(L);
  lua_Integer code = luaL_optinteger(L, 2, 1000);
  size_t n = 0;
  const char *reason = luaL_optlstring(L, 3, "", &n);
  if (n > 123) n = 123; /* a close frame's payload is at most 125 bytes */
  if (live && wslay_event_get_write_enabled(live->ws)) {
    wslay_event_queue_close(live->ws, (uint16_t)code, (const uint8_t *)reason, n);
    pump(live);
  }
  return 0;
}

/* Reads on after a pause; frames held back are fed first, from the loop. */
static void unpause(clank_live_t *live) {
  if (!live->paused) return;
  live->paused = 0;
  if (live->held.len == 0) {
    clank_conn_hold_input(live->conn, 0);
  } else {
    live->resume_pending = 1;
    clank_conn_deadline(live->conn, 1);
  }
}

/* socket:resume(): the session's queue has room again, read on. */
static int socket_resume(lua_State *L) {
  clank_live_t *live = socket_live(L);
  if (live) unpause(live);
  return 0;
}

static const luaL_Reg socket_methods[] = {
    {"send", socket_send},
    {"close", socket_close},
    {"resume", socket_resume},
    {NULL, NULL},
};

static void push_socket(lua_State *L, clank_live_t *live) {
  socket_t *s = lua_newuserdatauv(L, sizeof *s, 0);
  s->live = live;
  if (luaL_newmetatable(L, SOCKET_MT)) {
    luaL_newlib(L, socket_methods);
    lua_setfield(L, -2, "__index");
  }
  lua_setmetatable(L, -2);
}

/* The socket outlives the channel in Lua's hands: it then says false. */
static void forget_socket(clank_live_t *live) {
  if (live->socket_ref == LUA_NOREF) return;
  lua_State *L = live->gen->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, live->socket_ref);
  ((socket_t *)lua_touserdata(L, -1))->live = NULL;
  lua_pop(L, 1);
  luaL_unref(L, LUA_REGISTRYINDEX, live->socket_ref);
  live->socket_ref = LUA_NOREF;
}

/* Pushes the object owning the channel's session in g: the app's live object,
   or the inspector's; returns 0 (nothing pushed) when there is none. */
static int push_owner(clank_live_t *live, clank_gen_t *g) {
  if (live->inspector) {
    clank_inspector_push(live->host, g);
    if (!lua_isnil(g->L, -1)) return 1;
    lua_pop(g->L, 1);
    return 0;
  }
  if (g->live_ref == LUA_NOREF) return 0;
  lua_rawgeti(g->L, LUA_REGISTRYINDEX, g->live_ref);
  return 1;
}

/* [fn, args...] → fn(args...) in a task of its own, so that what it
   allocates is charged to it and refused past the cap like a request's. */
static int in_task(lua_State *L) { return clank_sched_call(L, lua_gettop(L) - 1); }

/* live:<method>(id, ..., socket) on the generation's live object, protected;
   the arguments between the id and the socket are on top of the stack
   (nargs of them). The socket tells a replaced connection from its successor.
   charged: run in a task (a client's input). Returns what it returned, as a
   boolean, or -1 when it failed. */
static int call_live(clank_live_t *live, const char *method, int nargs, int charged) {
  clank_gen_t *g = live->gen;
  lua_State *L = g->L;
  int base = lua_gettop(L) - nargs;
  if (!push_owner(live, g)) {
    lua_settop(L, base);
    return 0;
  }
  lua_getfield(L, -1, method);
  lua_insert(L, base + 1);
  lua_insert(L, base + 2); /* [fn, live, args...] */
  lua_pushstring(L, live->id);
  lua_insert(L, base + 3);
  lua_rawgeti(L, LUA_REGISTRYINDEX, live->socket_ref);
  if (charged) {
    lua_pushcfunction(L, in_task);
    lua_insert(L, base + 1);
  }
  if (clank_pcall(L, nargs + 3 + charged, 1) != LUA_OK) {
    clank_log_msg(&live->host->log, "error", "live: %s failed: %s", method,
                  clank_error_text(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  int result = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return result;
}

/* ---- frames ---- */

static ssize_t ws_recv(wslay_event_context_ptr ws, uint8_t *buf, size_t len, int flags, void *ud) {
  (void)flags;
  clank_live_t *live = ud;
  if (live->in_len == 0 || live->dead || live->paused) {
    wslay_event_set_error(ws, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  size_t n = len < live->in_len ? len : live->in_len;
  memcpy(buf, live->in, n);
  live->in += n;
  live->in_len -= n;
  return (ssize_t)n;
}

static ssize_t ws_send(wslay_event_context_ptr ws, const uint8_t *data, size_t len, int flags,
                       void *ud) {
  (void)ws;
  (void)flags;
  clank_live_t *live = ud;
  clank_conn_append(live->conn, (const char *)data, len); /* pump writes it */
  return (ssize_t)len;
}

static void ws_message(wslay_event_context_ptr ws, const struct wslay_event_on_msg_recv_arg *arg,
                       void *ud) {
  clank_live_t *live = ud;
  if (live->dead) return;
  live->heard = uv_now(live->conn->server->loop);
  if (arg->opcode == WSLAY_TEXT_FRAME) {
    lua_pushlstring(live->gen->L, (const char *)arg->msg, arg->msg_length);
    int pause = call_live(live, "receive", 1, 1);
    if (pause < 0) { /* nothing is lost unsaid: the client reconnects */
      static const char why[] = "internal error";
      wslay_event_queue_close(ws, 1011, (const uint8_t *)why, sizeof why - 1);
    } else if (pause && !live->dead) {
      live->paused = 1;
      clank_conn_hold_input(live->conn, 1);
    }
  } else if (arg->opcode == WSLAY_BINARY_FRAME) {
    static const char why[] = "binary messages are not accepted";
    wslay_event_queue_close(ws, 1003, (const uint8_t *)why, sizeof why - 1);
  }
}

static const struct wslay_event_callbacks ws_callbacks = {
    .recv_callback = ws_recv,
    .send_callback = ws_send,
    .on_msg_recv_callback = ws_message,
};

/* Sends what wslay queued; once both sides said close (or wslay gave up),
   the connection closes after its output. */
static void free_live(clank_live_t *live);

static void pump(clank_live_t *live) {
  if (live->feeding || live->sending || live->conn->closing) return;
  live->sending = 1;
  int rc = wslay_event_send(live->ws);
  clank_conn_flush(live->conn); /* what wslay sent, frames' heads and payloads, in one write */
  live->sending = 0;
  if (live->dead) { /* a write failed and closed the connection under wslay */
    free_live(live);
    return;
  }
  if (rc != 0) {
    clank_conn_close(live->conn);
    return;
  }
  if (!wslay_event_want_read(live->ws) && !wslay_event_want_write(live->ws))
    clank_conn_linger(live->conn, LINGER_MS); /* the close frame reaches a peer still sending */
}

static clank_live_t *live_of(clank_conn_t *c) { return ((clank_conn_state_t *)c->data)->live; }

/* Feeds bytes from the peer to wslay; returns 0 when live was freed or its
   connection is ending. What a pause left unread is kept in held. */
static int feed(clank_live_t *live, const char *data, size_t len) {
  clank_conn_t *c = live->conn;
  if (live->paused) {
    clank_buf_append(&live->held, data, len);
    return 1;
  }
  live->in = data;
  live->in_len = len;
  live->feeding = 1;
  int rc = wslay_event_recv(live->ws);
  live->feeding = 0;
  if (live->dead) { /* closed under wslay (by Lua, or a write that failed) */
    free_live(live);
    return 0;
  }
  if (c->closing) return 0;
  if (rc != 0) {
    clank_conn_linger(c, LINGER_MS);
    return 0;
  }
  if (live->in_len > 0) clank_buf_append(&live->held, live->in, live->in_len);
  live->in_len = 0;
  return 1;
}

static void on_data(clank_conn_t *c, const char *data, size_t len) {
  clank_live_t *live = live_of(c);
  if (feed(live, data, len)) pump(live);
}

/* After socket:resume(): the frames held back are fed first, then the socket
   is read again, unless they filled the queue once more. */
static void feed_held(clank_live_t *live) {
  live->resume_pending = 0;
  clank_buf_t held = live->held;
  live->held = (clank_buf_t){0};
  int alive = feed(live, held.data, held.len);
  clank_buf_free(&held);
  if (!alive) return;
  if (!live->paused) clank_conn_hold_input(live->conn, 0);
  pump(live);
}

/* ping_ms, give or take an eighth: connections opened together (a server
   restart, a burst of page loads) do not all ping in the same loop
   iteration, which would delay everything else by as much. */
static uint64_t ping_interval(clank_live_t *live, uint64_t ms) {
  live->jitter = live->jitter * 6364136223846793005ull + 1442695040888963407ull;
  uint64_t spread = ms / 4;
  return spread ? ms - spread / 2 + (live->jitter >> 33) % spread : ms;
}

/* Pinged every ping_ms; silent for silence_ms, dropped. */
static void on_timeout(clank_conn_t *c) {
  clank_live_t *live = live_of(c);
  const clank_limits_t *limits = &live->host->opts.limits;
  uint64_t now = uv_now(c->server->loop);
  if (live->resume_pending) {
    clank_conn_deadline(c, ping_interval(live, limits->ping_ms));
    feed_held(live);
    return;
  }
  if (live->paused) live->heard = now; /* we are the ones not reading */
  if (now - live->heard >= limits->silence_ms) {
    clank_conn_close(c);
    return;
  }
  struct wslay_event_msg ping = {WSLAY_PING, (const uint8_t *)"", 0};
  wslay_event_queue_msg(live->ws, &ping);
  pump(live);
  clank_conn_deadline(c, ping_interval(live, limits->ping_ms));
}

static const clank_upgrade_handler_t upgrade_handler = {
    .on_data = on_data,
    .on_timeout = on_timeout,
};

/* ---- lifetime ---- */

static void hold(clank_live_t *live, clank_gen_t *g) {
  live->gen = g;
  g->inflight++;
}

static void let_go(clank_live_t *live) {
  clank_gen_t *g = live->gen;
  forget_socket(live);
  g->inflight--;
  clank_host_gen_idle(live->host, g);
}

/* Gives the channel a socket in its generation and calls live:<method>(id, request, socket). */
static void hand_over(clank_live_t *live, const char *method, int request_idx) {
  lua_State *L = live->gen->L;
  if (!push_owner(live, live->gen)) {
    /* the app has no views (any more): the session is unknown */
    wslay_event_queue_close(live->ws, 4404, (const uint8_t *)"unknown session", 15);
    pump(live);
    return;
  }
  lua_pop(L, 1);
  push_socket(L, live);
  live->socket_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, request_idx);
  call_live(live, method, 1, 0);
}

/* [buf, value] → the value's canonical JSON appended to buf (which the
   caller frees, whether this raises or not). */
static int encode_request(lua_State *L) {
  clank_json_encode(L, 2, 0, lua_touserdata(L, 1));
  return 0;
}

/* The sec-websocket-accept line of the 101 (RFC 6455 §4.2.2). */
static void accept_line(const clank_request_t *r, char *lines, size_t n) {
  const clank_header_t *key = header(r, "sec-websocket-key");
  char accept_in[64], digest[EVP_MAX_MD_SIZE];
  unsigned char accept[32];
  unsigned dlen = 0;
  snprintf(accept_in, sizeof accept_in, "%.*s" WS_GUID, (int)key->value_len,
           clank_header_value(r, key));
  EVP_Digest(accept_in, strlen(accept_in), (unsigned char *)digest, &dlen, EVP_sha1(), NULL);
  EVP_EncodeBlock(accept, (const unsigned char *)digest, (int)dlen);
  snprintf(lines, n, "sec-websocket-accept: %s\r\n", accept);
}

static void refused_data(clank_conn_t *c, const char *data, size_t len) {
  (void)c, (void)data, (void)len; /* lingering: nothing is read */
}
static const clank_upgrade_handler_t refused_handler = {.on_data = refused_data};

void clank_live_refuse(clank_conn_t *c, uint16_t code, const char *reason) {
  char lines[96];
  accept_line(&c->req, lines, sizeof lines);
  clank_conn_upgrade(c, &refused_handler, "websocket", lines);
  size_t n = strlen(reason);
  if (n > 123) n = 123;
  unsigned char frame[127] = {0x88, (unsigned char)(2 + n), (unsigned char)(code >> 8),
                              (unsigned char)(code & 0xff)};
  memcpy(frame + 4, reason, n);
  clank_conn_write(c, (const char *)frame, 4 + n);
  clank_conn_linger(c, 1000);
}

void clank_live_accept(clank_conn_t *c, clank_host_t *h, clank_gen_t *g, const char *id,
                       size_t id_len, int request_idx, int inspector) {
  char lines[96];
  accept_line(&c->req, lines, sizeof lines);

  clank_live_t *live = calloc(1, sizeof *live);
  if (live == NULL || wslay_event_context_server_init(&live->ws, &ws_callbacks, live) != 0) {
    free(live);
    clank_conn_text(c, 503, "Service unavailable.");
    return;
  }
  wslay_event_config_set_max_recv_msg_length(live->ws, MAX_MESSAGE);
  live->conn = c;
  live->host = h;
  live->id = strndup(id, id_len);
  live->inspector = inspector;
  live->socket_ref = LUA_NOREF;
  live->heard = uv_now(c->server->loop);
  live->jitter = (uint64_t)(uintptr_t)live ^ uv_hrtime();
  hold(live, g);
  /* kept as JSON: a reload mounts the session again in another Lua state */
  clank_buf_t json = {0};
  lua_State *L = g->L;
  lua_pushcfunction(L, encode_request);
  lua_pushlightuserdata(L, &json);
  lua_pushvalue(L, request_idx);
  if (clank_pcall(L, 2, 0) == LUA_OK)
    live->request = strndup(json.data ? json.data : "", json.len);
  else
    lua_pop(L, 1);
  clank_buf_free(&json);
  live->next = h->lives;
  if (h->lives) h->lives->prev = live;
  h->lives = live;
  ((clank_conn_state_t *)c->data)->live = live;

  clank_conn_upgrade(c, &upgrade_handler, "websocket", lines);
  clank_conn_deadline(c, ping_interval(live, h->opts.limits.ping_ms));
  hand_over(live, "connect", request_idx);
}

void clank_live_closed(clank_live_t *live) {
  clank_host_t *h = live->host;
  call_live(live, "disconnect", 0, 0);
  let_go(live);
  if (live->prev)
    live->prev->next = live->next;
  else
    h->lives = live->next;
  if (live->next) live->next->prev = live->prev;
  ((clank_conn_state_t *)live->conn->data)->live = NULL;
  if (live->feeding || live->sending)
    live->dead = 1; /* wslay is still using it: freed when it returns */
  else
    free_live(live);
}

static void free_live(clank_live_t *live) {
  wslay_event_context_free(live->ws);
  free(live->id);
  free(live->request);
  clank_buf_free(&live->held);
  free(live);
}

void clank_live_move(clank_host_t *h, clank_gen_t *from, clank_gen_t *to) {
  for (clank_live_t *live = h->lives; live; live = live->next) {
    if (live->gen != from || live->conn->closing) continue;
    call_live(live, "disconnect", 0, 0);
    let_go(live);
    unpause(live); /* the queue that was full stays with the old generation */
    hold(live, to);
    lua_State *L = to->L;
    size_t n = live->request ? strlen(live->request) : 0;
    int pushed = n > 0 ? clank_json_decode(L, live->request, n) : 0;
    if (pushed != 1) {
      lua_pop(L, pushed);
      lua_newtable(L);
    }
    hand_over(live, "adopt", lua_gettop(L));
    lua_pop(L, 1);
  }
}

void clank_live_app_failed(clank_host_t *h, const char *err) {
  clank_gen_t *g = h->gen;
  if (g == NULL || g->live_ref == LUA_NOREF) return;
  lua_State *L = g->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, g->live_ref);
  lua_getfield(L, -1, "appFailed");
  lua_insert(L, -2);
  lua_pushstring(L, err);
  if (clank_pcall(L, 2, 0) != LUA_OK) {
    clank_log_msg(&h->log, "error", "live: appFailed failed: %s", clank_error_text(L, -1));
    lua_pop(L, 2); /* the error and its text */
  }
}

void clank_live_stop(clank_host_t *h) {
  static const char why[] = "server restarting";
  for (clank_live_t *live = h->lives; live; live = live->next) {
    if (live->conn->closing || !wslay_event_get_write_enabled(live->ws)) continue;
    wslay_event_queue_close(live->ws, 1012, (const uint8_t *)why, sizeof why - 1);
    pump(live);
  }
}

void clank_live_css(clank_host_t *h) {
  static const char css[] = "{\"t\":\"css\"}";
  for (clank_live_t *live = h->lives; live; live = live->next) {
    if (live->conn->closing || !wslay_event_get_write_enabled(live->ws)) continue;
    struct wslay_event_msg msg = {WSLAY_TEXT_FRAME, (const uint8_t *)css, sizeof css - 1};
    if (wslay_event_queue_msg(live->ws, &msg) == 0) pump(live);
  }
}

/* owner:tick(now) for the object on top of the stack (popped). */
static void tick(clank_host_t *h, lua_State *L) {
  lua_getfield(L, -1, "tick");
  lua_insert(L, -2);
  lua_pushinteger(L, (lua_Integer)uv_now(&h->loop));
  if (clank_pcall(L, 2, 0) != LUA_OK) {
    clank_log_msg(&h->log, "error", "live: tick failed: %s", clank_error_text(L, -1));
    lua_pop(L, 1);
  }
}

void clank_live_tick(clank_host_t *h) {
  clank_gen_t *g = h->gen;
  if (g == NULL) return;
  if (g->live_ref != LUA_NOREF) {
    lua_rawgeti(g->L, LUA_REGISTRYINDEX, g->live_ref);
    tick(h, g->L);
  }
  if (clank_inspector_existing(g->L)) tick(h, g->L);
}
