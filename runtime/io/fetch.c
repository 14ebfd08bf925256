/* clank.fetch.core: one HTTP exchange waited for in the running task (SPEC
   §12). The connection is the HTTP library's client (http/client.h); the
   wait (signal, timeout) is clank.db's (io/db.h); the keep-alive pool is
   io/fetch_pool.h. Redirects, request bytes and the response
   object are lua/clank/fetch.lua's.

   core.request{tls, host, port, request, head, maxBytes, timeout, signal,
                verify, ca} -> status, headers, stream | nil, err
   stream:read(all, timeout, signal) -> chunk (all: the rest) | nil (end) | nil, err
   stream:close() */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/client.h"
#include "core/abort.h"
#include "io/db.h"
#include "io/fetch_pool.h"
#include "io/fetch.h"
#include "core/scheduler.h"

#define FETCH_STREAM_MT "clank.FetchStream"
#define READ_AHEAD (256 * 1024) /* unread body that stops reading the socket */

/* ---- one exchange ---- */

typedef clank_fetch_pool_t pool_t;
typedef struct fetch_s fetch_t;

enum { WANT_NOTHING, WANT_HEAD, WANT_CHUNK, WANT_ALL };

struct fetch_s {
  clank_db_wait_t wait;   /* first: the wait's owner is this userdata */
  pool_t *pool;           /* NULL once the pool closed */
  fetch_t *prev, *next;   /* the pool's live list */
  clank_client_t *client; /* NULL once given back or closed */
  clank_tls_ctx_t *tls_ctx;
  char *host;
  int port;
  char *request; /* kept to send again on a fresh connection (a stale reused one) */
  size_t request_len;
  int head_only, retried, headed, ended, want, status;
  size_t max_bytes, total;
  uint64_t deadline; /* the whole exchange (non-streaming reads) */
  clank_buf_t buf;   /* body bytes not yet read */
  const char *kind;  /* the failure, or NULL */
  char message[320];
};

static const clank_client_handler_t handler;

static void set_failure(fetch_t *f, const char *kind, const char *message) {
  if (f->kind) return;
  f->kind = kind;
  snprintf(f->message, sizeof f->message, "%s", message);
}

static void drop_client(fetch_t *f) {
  if (f->client) clank_client_close(f->client);
  f->client = NULL;
}

static void push_error(lua_State *L, const char *kind, const char *message) {
  lua_pushnil(L);
  lua_createtable(L, 0, 2);
  lua_pushstring(L, kind);
  lua_setfield(L, -2, "kind");
  lua_pushstring(L, message);
  lua_setfield(L, -2, "message");
}

static void push_headers(lua_State *L, const clank_request_t *r) {
  lua_createtable(L, 0, r->nheaders);
  for (int i = 0; i < r->nheaders; i++) {
    const clank_header_t *h = &r->headers[i];
    lua_pushlstring(L, r->head.data + h->name_off, h->name_len);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, -3) == LUA_TSTRING) { /* repeated: joined with ", " (SPEC §12) */
      lua_pushliteral(L, ", ");
      lua_pushlstring(L, r->head.data + h->value_off, h->value_len);
      lua_concat(L, 3);
    } else {
      lua_pop(L, 1);
      lua_pushlstring(L, r->head.data + h->value_off, h->value_len);
    }
    lua_rawset(L, -3);
  }
}

/* Resumes the waiting task with what it waits for, if it can have it now. */
static void wake(fetch_t *f) {
  if (f->want == WANT_NOTHING) return;
  int ready = f->kind != NULL || f->ended || (f->want == WANT_HEAD && f->headed) ||
              (f->want == WANT_CHUNK && f->buf.len > 0);
  if (!ready) return;
  lua_State *co = clank_db_wait_target(&f->wait);
  int want = f->want;
  f->want = WANT_NOTHING;
  if (co == NULL) return;
  int n;
  if (f->kind) {
    push_error(co, f->kind, f->message);
    n = 2;
  } else if (want == WANT_HEAD) {
    lua_pushinteger(co, f->status);
    if (f->client)
      push_headers(co, &f->client->res);
    else
      lua_newtable(co);
    lua_rawgeti(co, LUA_REGISTRYINDEX, f->wait.owner_ref);
    n = 3;
  } else if (f->buf.len > 0 || want == WANT_ALL) {
    lua_pushlstring(co, f->buf.data ? f->buf.data : "", f->buf.len);
    f->buf.len = 0;
    n = 1;
  } else {
    lua_pushnil(co);
    n = 1;
  }
  clank_db_wait_resume(&f->wait, n);
}

static void on_head(clank_client_t *c) {
  fetch_t *f = c->data;
  f->headed = 1;
  f->status = c->status;
  free(f->request); /* no sending again once an answer came */
  f->request = NULL;
  /* a body announced too large is refused unread (HEAD, 204 and 304 have none) */
  const clank_header_t *cl = clank_request_header(&c->res, "content-length", 14, NULL);
  if (cl && !f->head_only && c->status != 204 && c->status != 304 &&
      strtoull(clank_header_value(&c->res, cl), NULL, 10) > f->max_bytes) {
    drop_client(f);
    set_failure(f, "too_large", "the response body is larger than maxBytes");
    wake(f);
    return;
  }
  wake(f);
}

static void on_body(clank_client_t *c, const char *data, size_t len) {
  fetch_t *f = c->data;
  f->total += len;
  if (f->total > f->max_bytes) {
    drop_client(f); /* the rest is not read */
    set_failure(f, "too_large", "the response body is larger than maxBytes");
    wake(f);
    return;
  }
  if (clank_buf_append(&f->buf, data, len) != 0) {
    drop_client(f);
    set_failure(f, "protocol", "out of memory");
    wake(f);
    return;
  }
  if (f->want != WANT_ALL && f->buf.len > READ_AHEAD) clank_client_pause(c, 1);
  wake(f);
}

static void on_end(clank_client_t *c) {
  fetch_t *f = c->data;
  f->ended = 1;
  f->client = NULL;
  if (c->keep_alive)
    clank_fetch_pool_put(f->pool, c);
  else
    clank_client_close(c);
  wake(f);
}

static void on_error(clank_client_t *c, const char *kind, const char *message) {
  fetch_t *f = c->data;
  f->client = NULL;
  if (c->stale && !f->retried && !f->headed) {
    /* the peer closed a kept-alive connection as we reused it: once more, afresh */
    f->retried = 1;
    f->client = clank_client_new(f->pool->loop, f->host, f->port, f->tls_ctx);
    if (f->client) {
      clank_client_send(f->client, &handler, f, f->request, f->request_len, f->head_only);
      return;
    }
  }
  set_failure(f, kind, message);
  wake(f);
}

static const clank_client_handler_t handler = {on_head, on_body, on_end, on_error};

/* Abort or timeout (maybe from inside Lua: an abort listener): stop, resume later. */
static void on_stop(clank_db_wait_t *w) {
  fetch_t *f = (fetch_t *)w;
  drop_client(f);
  if (strcmp(w->stopped, "TIMEOUT") == 0) {
    set_failure(f, "timeout", "timed out");
  } else {
    char msg[96];
    snprintf(msg, sizeof msg, "aborted: %s", w->reason);
    set_failure(f, "aborted", msg);
  }
  clank_db_wait_due(w);
}

static void on_due(clank_db_wait_t *w) { wake((fetch_t *)w); }

static void fetch_unlink(fetch_t *f) {
  pool_t *p = f->pool;
  if (p == NULL) return;
  if (f->prev)
    f->prev->next = f->next;
  else
    p->live = f->next;
  if (f->next) f->next->prev = f->prev;
  f->prev = f->next = NULL;
  f->pool = NULL;
}

/* The pool closes: no more I/O; a read says so. */
static void abandon_all(pool_t *p) {
  while (p->live) {
    fetch_t *f = p->live;
    clank_db_wait_end(&f->wait); /* its task is being dropped too */
    drop_client(f);
    set_failure(f, "aborted", "aborted: closed");
    fetch_unlink(f);
  }
}

static int signal_aborted(lua_State *L, int idx, fetch_t *f) {
  if (idx == 0) return 0;
  lua_getfield(L, idx, "aborted");
  int aborted = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (!aborted) return 0;
  lua_getfield(L, idx, "reason");
  char msg[96];
  snprintf(msg, sizeof msg, "aborted: %s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "aborted");
  lua_pop(L, 1);
  drop_client(f);
  set_failure(f, "aborted", msg);
  return 1;
}

static int fetch_gc(lua_State *L) {
  fetch_t *f = luaL_checkudata(L, 1, FETCH_STREAM_MT);
  clank_db_wait_end(&f->wait);
  drop_client(f);
  fetch_unlink(f);
  clank_buf_free(&f->buf);
  free(f->request);
  free(f->host);
  f->request = f->host = NULL;
  return 0;
}

static int request_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  return lua_gettop(L) - (int)ctx;
}

static double opt_number(lua_State *L, const char *key, double def) {
  lua_getfield(L, 1, key);
  double v = luaL_optnumber(L, -1, def);
  lua_pop(L, 1);
  return v;
}

static int fetch_request(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  if (!clank_in_task(L)) return luaL_error(L, CLANK_WAIT_MESSAGE);
  pool_t *p = clank_fetch_pool_of(L, abandon_all);
  lua_getfield(L, 1, "host");
  const char *host = luaL_checkstring(L, -1);
  lua_getfield(L, 1, "request");
  size_t len;
  const char *request = luaL_checklstring(L, -1, &len);
  lua_getfield(L, 1, "tls");
  int tls = lua_toboolean(L, -1);
  lua_getfield(L, 1, "verify");
  int verify = lua_isnil(L, -1) ? 1 : lua_toboolean(L, -1);
  lua_getfield(L, 1, "ca");
  const char *ca = luaL_optstring(L, -1, NULL);
  lua_getfield(L, 1, "head");
  int head_only = lua_toboolean(L, -1);
  lua_getfield(L, 1, "signal"); /* index 8 */
  int signal = lua_isnil(L, 8) ? 0 : 8;
  if (signal) luaL_checkudata(L, signal, CLANK_ABORT_MT);
  int port = (int)opt_number(L, "port", tls ? 443 : 80);
  double timeout = opt_number(L, "timeout", 30000);
  double max_bytes = opt_number(L, "maxBytes", 16 * 1024 * 1024);

  clank_tls_ctx_t *ctx = NULL;
  char err[256];
  if (tls && (ctx = clank_fetch_pool_tls(L, p, ca, verify, err, sizeof err)) == NULL) {
    push_error(L, "tls", err);
    return 2;
  }
  fetch_t *f = lua_newuserdatauv(L, sizeof *f, 0); /* index 9 */
  memset(f, 0, sizeof *f);
  luaL_setmetatable(L, FETCH_STREAM_MT);
  f->wait.on_stop = on_stop;
  f->wait.on_due = on_due;
  f->pool = p;
  f->next = p->live;
  if (p->live) ((fetch_t *)p->live)->prev = f;
  p->live = f;
  f->tls_ctx = ctx;
  f->port = port;
  f->head_only = head_only;
  f->max_bytes = max_bytes < 0 ? 0 : (size_t)max_bytes;
  f->host = strdup(host);
  f->request = malloc(len);
  if (f->host == NULL || f->request == NULL) return luaL_error(L, "clank.fetch: out of memory");
  memcpy(f->request, request, len);
  f->request_len = len;
  uv_update_time(p->loop);
  f->deadline = timeout > 0 ? uv_now(p->loop) + (uint64_t)timeout : 0;
  if (signal_aborted(L, signal, f)) {
    push_error(L, f->kind, f->message);
    return 2;
  }
  clank_client_t *c = clank_fetch_pool_take(p, host, port, ctx);
  if (c == NULL) c = clank_client_new(p->loop, host, port, ctx);
  if (c == NULL) return luaL_error(L, "clank.fetch: out of memory");
  f->client = c;
  clank_client_send(c, &handler, f, f->request, f->request_len, head_only);
  if (f->kind) { /* failed at once */
    push_error(L, f->kind, f->message);
    return 2;
  }
  f->want = WANT_HEAD;
  lua_pushvalue(L, 9);
  lua_replace(L, 1); /* the stream stays on the stack: k finds it at 1 */
  lua_settop(L, 8);
  return clank_db_wait(L, &f->wait, 1, signal, timeout, request_k);
}

/* stream:read(all, timeout, signal) */
static int stream_read(lua_State *L) {
  fetch_t *f = luaL_checkudata(L, 1, FETCH_STREAM_MT);
  int all = lua_toboolean(L, 2);
  double timeout = luaL_optnumber(L, 3, 30000);
  int signal = lua_isnoneornil(L, 4) ? 0 : 4;
  if (signal) luaL_checkudata(L, 4, CLANK_ABORT_MT);
  lua_settop(L, 4);
  if (all && f->deadline && f->pool) {
    uv_update_time(f->pool->loop);
    uint64_t now = uv_now(f->pool->loop);
    timeout = f->deadline > now ? (double)(f->deadline - now) : 0.001;
  }
  if (!f->kind && !f->ended) signal_aborted(L, signal, f);
  if (f->kind) {
    push_error(L, f->kind, f->message);
    return 2;
  }
  if (f->client && f->client->paused && (all || f->buf.len == 0))
    clank_client_pause(f->client, 0); /* may deliver at once */
  if (f->kind) {
    push_error(L, f->kind, f->message);
    return 2;
  }
  if (f->ended || (!all && f->buf.len > 0)) {
    if (f->buf.len == 0 && !all) {
      lua_pushnil(L);
      return 1;
    }
    lua_pushlstring(L, f->buf.data ? f->buf.data : "", f->buf.len);
    f->buf.len = 0;
    return 1;
  }
  if (f->client == NULL) {
    lua_pushnil(L);
    return 1;
  }
  if (!clank_in_task(L)) return luaL_error(L, CLANK_WAIT_MESSAGE);
  if (f->wait.active) return luaL_error(L, "clank.fetch: another coroutine is reading this body");
  f->want = all ? WANT_ALL : WANT_CHUNK;
  return clank_db_wait(L, &f->wait, 1, signal, timeout, request_k);
}

/* stream:close(): the rest of the body is not wanted. */
static int stream_close(lua_State *L) {
  fetch_t *f = luaL_checkudata(L, 1, FETCH_STREAM_MT);
  drop_client(f);
  f->ended = 1;
  f->buf.len = 0;
  return 0;
}

static const luaL_Reg stream_methods[] = {
    {"read", stream_read}, {"close", stream_close}, {NULL, NULL}};

static const luaL_Reg fetch_funcs[] = {{"request", fetch_request}, {NULL, NULL}};

int luaopen_clank_fetch_core(lua_State *L) {
  if (luaL_newmetatable(L, FETCH_STREAM_MT)) {
    luaL_newlib(L, stream_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, fetch_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  luaL_newlib(L, fetch_funcs);
  return 1;
}
