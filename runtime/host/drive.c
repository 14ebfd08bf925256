/* Driving a request's coroutine: the entries each kind of route runs in it
   (an app route, the bridge, MCP, views), resuming it, and finishing it:
   its answer when it failed or was stopped, its exchange back to the pool,
   the connection on to its next request, an action that timed out. */
#include "host/drive.h"

#include <lauxlib.h>
#include <stddef.h>
#include <string.h>

#include "host/dispatch.h"
#include "host/host.h"
#include "host/respond.h"
#include "core/abort.h"
#include "core/protect.h"

/* A continuation's context: the exchange (no lookup of the coroutine's
   task) and the step, in the pointer's low bits. */
#define STEP_MASK 3
static lua_KContext step_ctx(exchange_t *x, int step) { return (lua_KContext)x | step; }
static exchange_t *step_exchange(lua_KContext ctx) { return (exchange_t *)(ctx & ~STEP_MASK); }

/* The coroutine's body: [handler, request (nil for a handler that takes no
   parameter), context fn or nil] →
   ctx = context(request); response = handler(request, ctx); write it.
   Every step is a continuation, so each may wait. */
static int route_step(lua_State *co, int status, lua_KContext k) {
  (void)status;
  exchange_t *x = step_exchange(k);
  switch (k & STEP_MASK) {
    case 0:
      if (!lua_isnil(co, 3)) {
        lua_pushvalue(co, 3);
        lua_pushvalue(co, 2);
        lua_callk(co, 1, 1, step_ctx(x, 1), route_step);
      } else if (lua_isnil(co, 2)) {
        lua_pushnil(co); /* a handler without parameters: no request, no ctx */
      } else {
        lua_newtable(co);
      }
      /* fallthrough */
    case 1:
      lua_pushvalue(co, 1);
      lua_pushvalue(co, 2);
      lua_pushvalue(co, 4);
      lua_callk(co, 2, 1, step_ctx(x, 2), route_step);
      /* fallthrough */
    case 2: {
      if (!lua_istable(co, 5)) clank_write_response(co, x->conn, x->gen, 5); /* raises */
      int names = clank_push_names(co, x->gen);                              /* 6 */
      if (clank_get_named(co, names, 5, CLANK_NAME_STREAM) == LUA_TNIL) {
        clank_write_response_in(co, x->conn, x->gen, 5, names);
        return 0;
      }
      if (!lua_isfunction(co, 7)) luaL_error(co, "bad route response: stream must be a function");
      clank_write_stream_head(co, x, 5, names);
      lua_remove(co, names);
      lua_callk(co, 1, 0, step_ctx(x, 3), route_step); /* stream(send) */
    }
      /* fallthrough */
    default: clank_stream_finish(x); return 0;
  }
}

/* [handler, request, context fn or nil, exchange] */
int clank_drive_route_entry(lua_State *co) {
  exchange_t *x = lua_touserdata(co, 4);
  lua_settop(co, 3);
  return route_step(co, LUA_OK, step_ctx(x, 0));
}

/* The bridge's answer written: given as C values, or the response table on top. */
static int bridge_answer(lua_State *co, exchange_t *x) {
  if (x->answer.status) {
    if (clank_put_answer(x->conn, &x->answer) != 0)
      luaL_error(
          co, "bad route response: header access-control-allow-origin is not allowed or not valid");
  } else {
    clank_write_response(co, x->conn, x->gen, lua_gettop(co));
  }
  return 0;
}

/* clank_bridge_handle_view_task's run ended, waits or not (its done). */
static int bridge_done(lua_State *co, clank_bridge_answer_t *a) {
  exchange_t *x = (exchange_t *)(void *)((char *)a - offsetof(exchange_t, answer));
  if (x->late) return 0; /* answered 504 at the action timeout */
  return bridge_answer(co, x);
}

/* A request the bridge reads as a table (clank_bridge_handle_task): its
   action runs in a joined child, never inline, so it is never late. */
static int bridge_step(lua_State *co, int status, lua_KContext k) {
  (void)status;
  exchange_t *x = step_exchange(k);
  if ((k & STEP_MASK) == 0) { /* called where it lies, its arguments above it */
    x->answer.status = 0;
    lua_callk(co, lua_gettop(co) - 1, 1, step_ctx(x, 1), bridge_step);
  }
  return bridge_answer(co, x);
}

/* The bridge's answer->push_request: the request's maker, made only when
   Lua may read the request (before the run's first wait: the request is
   as it was read). */
static void push_bridge_request(lua_State *co, clank_bridge_answer_t *a) {
  exchange_t *x = (exchange_t *)(void *)((char *)a - offsetof(exchange_t, answer));
  clank_lua_request_push_maker(co, &x->conn->req);
}

/* [bridge, request or maker or nil, context fn or nil, view, answer, exchange]:
   clank_bridge_handle_view_task, right here, its answer written by its
   done; or [clank_bridge_handle_task, bridge, request, context fn or nil,
   exchange]. */
int clank_drive_bridge_entry(lua_State *co) {
  exchange_t *x = lua_touserdata(co, -1);
  lua_pop(co, 1);
  if (lua_gettop(co) == 5) {
    x->answer.done = bridge_done;
    x->answer.push_request = push_bridge_request;
    return clank_bridge_handle_view_task(co);
  }
  x->answer.done = NULL;
  x->answer.push_request = NULL;
  return bridge_step(co, LUA_OK, step_ctx(x, 0));
}

/* /__clank/mcp: [env, request, context fn] → require("clank.mcp").handle(request, env);
   its answer, unless it streamed one. */
static int mcp_step(lua_State *co, int status, lua_KContext step) {
  (void)status;
  if (step == 0) {
    lua_getglobal(co, "require");
    lua_pushliteral(co, "clank.mcp");
    lua_callk(co, 1, 1, 1, mcp_step);
  }
  if (step <= 1) {
    lua_getfield(co, -1, "handle");
    lua_pushvalue(co, 2);
    lua_pushvalue(co, 1);
    lua_callk(co, 2, 1, 2, mcp_step);
  }
  exchange_t *x = exchange_of(co);
  if (x->streaming)
    clank_stream_finish(x);
  else
    clank_write_response(co, x->conn, x->gen, lua_gettop(co));
  return 0;
}

int clank_drive_mcp_entry(lua_State *co) { return mcp_step(co, LUA_OK, 0); }

/* Views (SPEC §11): [live, request, context] → live:page(request) or
   live:http(request), which run the app's context themselves. */
static int live_step(lua_State *co, int status, lua_KContext method) {
  (void)status;
  if (method != 0) {
    lua_getfield(co, 1, method == 1 ? "page" : "http");
    lua_pushvalue(co, 1);
    lua_pushvalue(co, 2);
    lua_callk(co, 2, 1, 0, live_step);
  }
  exchange_t *x = exchange_of(co);
  clank_write_response(co, x->conn, x->gen, lua_gettop(co));
  return 0;
}

int clank_drive_page_entry(lua_State *co) { return live_step(co, LUA_OK, 1); }
int clank_drive_live_http_entry(lua_State *co) { return live_step(co, LUA_OK, 2); }

/* ---- running and finishing ---- */

/* ---- running and finishing ---- */

/* The signal's holder or signal of x is let go: the hold slot is kept. */
static void drop_signal(exchange_t *x) {
  if (x->task.signal_ref == x->task.hold_slot) { /* a bridge's ctx: the slot is kept */
    lua_pushboolean(x->gen->L, 0);
    lua_rawseti(x->gen->L, LUA_REGISTRYINDEX, x->task.hold_slot);
  } else if (x->task.signal_ref) {
    luaL_unref(x->gen->L, LUA_REGISTRYINDEX, x->task.signal_ref);
  }
  x->task.signal_ref = 0;
  x->task.holder_deferred = 0; /* nothing took it: never made */
}

/* x's request is over for the generation: a retired one may go now. */
static void request_over(exchange_t *x) {
  if (x->gen->alloc.pressure) clank_host_memory_check(x->host, x->gen);
  x->gen->inflight--;
  clank_host_gen_idle(x->host, x->gen);
}

/* The connection c, held while its exchange waited, goes on to its next request. */
static void conn_goes_on(clank_conn_t *c) {
  ((clank_conn_state_t *)c->data)->exchange = NULL;
  clank_conn_resume(c);
  clank_conn_release(c);
}

static void finish(exchange_t *x, int reusable) {
  if (x->task.deadline_timer) clank_sched_cancel(&x->task);
  request_over(x);
  if (x->streaming) {
    clank_stream_finish(x);
    clank_stream_forget(x, x->gen->L);
  }
  drop_signal(x);
  clank_conn_t *c = x->conn;
  int waited = x->waited;
  clank_exchange_put(x, reusable);
  if (waited) conn_goes_on(c); /* else on_message_complete goes on by itself */
}

/* The action the bridge runs inline in x waited past its timeout (SPEC §5
   step 8): the bridge's 504 goes out now and the connection moves on, as
   it did when the action ran in a child task; x stays with its coroutine,
   in the generation's late list, until the action ends (late_end). */
void clank_drive_timed_out(clank_task_t *t) {
  exchange_t *x = (exchange_t *)t;
  clank_conn_t *c = x->conn;
  clank_gen_t *g = x->gen;
  if (!x->abandoned) {
    clank_bridge_timeout_answer(&x->answer);
    clank_put_answer_outside(c, &x->answer);
  }
  clank_exchange_late(x);
  request_over(x);
  conn_goes_on(c);
  if (t->signal_ref) { /* after the answer: a listener may end the action at once */
    lua_rawgeti(g->L, LUA_REGISTRYINDEX, t->signal_ref);
    clank_abort_fire(g->L, -1, "timeout");
    lua_pop(g->L, 1);
  }
}

/* The coroutine of a late exchange ended: it is taken off the late list
   and reused (its action's end was dropped by the bridge). */
static void late_end(exchange_t *x, int st) {
  clank_exchange_unlate(x);
  if (st != LUA_OK) {
    lua_State *co = x->task.co;
    clank_log_request(&x->host->log, x->task.request_id, "error",
                      "an action that timed out failed later: %s",
                      lua_tostring(co, -1) ? lua_tostring(co, -1) : "(an error object)");
  }
  drop_signal(x);
  clank_exchange_put(x, clank_exchange_reusable(x, st));
}

/* A coroutine's error, with the traceback of where it was raised. */
static void log_failure(exchange_t *x, lua_State *co) {
  clank_request_t *r = &x->conn->req;
  const char *msg = clank_error_message(co, -1);
  luaL_traceback(co, co, msg, 0);
  clank_log_request(&x->host->log, x->task.request_id, "error", "route %s %.*s failed: %s",
                    llhttp_method_name((llhttp_method_t)r->method), (int)r->url_len,
                    clank_request_url(r), lua_tostring(co, -1));
}

/* The action the bridge ran inline in x failed where its run could not
   catch the error (a bare coroutine.yield in the handler, a resume refused
   over the task's budget): answered and logged as the bridge answers and
   logs a failed action. */
static void action_failed(exchange_t *x, lua_State *co) {
  lua_State *L = x->gen->L;
  clank_conn_t *c = x->conn;
  x->task.deadline_on_wait = 0;
  lua_pushcfunction(L, clank_bridge_failed);
  lua_rawgeti(L, LUA_REGISTRYINDEX, x->gen->bridge_ref);
  lua_pushvalue(co, -1);
  lua_xmove(co, L, 1);
  lua_pushlightuserdata(L, &x->answer);
  int ok = clank_pcall(L, 3, 1) == LUA_OK;
  if (!ok) { /* with the traceback of where it was raised */
    clank_log_request(&x->host->log, x->task.request_id, "error",
                      "answering a failed action failed: %s", clank_error_text(L, -1));
    lua_pop(L, 1);
  } else if (lua_isstring(L, -1)) {
    clank_log_request(&x->host->log, x->task.request_id, "error", "action failed: %s",
                      lua_tostring(L, -1));
  }
  lua_pop(L, 1);
  if (x->abandoned || c->closing || c->answered) return;
  if (ok)
    clank_put_answer_outside(c, &x->answer);
  else
    clank_answer_stopped(c, 500, "INTERNAL_ERROR", "Internal server error.");
}

/* The log line of a request stopped over its budget: its target as the
   access log writes it, a view session's token redacted. */
static void log_stopped(exchange_t *x, clank_conn_t *c, const char *message) {
  const char *url = clank_request_url(&c->req), *prefix = x->host->log.credential_prefix;
  size_t n = c->req.url_len, k = prefix ? strlen(prefix) : 0;
  const char *method = llhttp_method_name((llhttp_method_t)c->req.method);
  if (k && n > k && memcmp(url, prefix, k) == 0) {
    const char *slash = memchr(url + k, '/', n - k);
    int rest = slash ? (int)(n - (size_t)(slash - url)) : 0;
    clank_log_request(&x->host->log, x->task.request_id, "error",
                      "route %s %.*s<redacted>%.*s stopped: %s", method, (int)k, url, rest,
                      slash ? slash : "", message);
  } else {
    clank_log_request(&x->host->log, x->task.request_id, "error", "route %s %.*s stopped: %s",
                      method, (int)n, url, message);
  }
}

/* ---- resuming ---- */

void clank_drive_resume(clank_task_t *t, int nargs) { clank_drive_run((exchange_t *)t, nargs); }

int clank_drive_run(exchange_t *x, int nargs) {
  lua_State *co = x->task.co;
  int nres;
  int st = clank_task_resume(&x->task, nargs, &nres);
  if (st == LUA_YIELD) return 1;
  if (x->late) {
    late_end(x, st);
    return 0;
  }
  if (st != LUA_OK && x->task.deadline_on_wait) {
    action_failed(x, co);
  } else if (st != LUA_OK) {
    clank_conn_t *c = x->conn;
    int exhausted = x->task.exhausted;
    if (exhausted) { /* the RESOURCE_LIMIT ActionError: its message is the answer */
      lua_getfield(co, -1, "message");
      log_stopped(x, c, lua_tostring(co, -1));
    } else {
      log_failure(x, co);
    }
    if (!x->abandoned && !c->closing && !c->answered) {
      if (exhausted)
        clank_answer_stopped(c, 503, "RESOURCE_LIMIT", lua_tostring(co, -1));
      else
        clank_answer_stopped(c, 500, "INTERNAL_ERROR", "Internal server error.");
    } else if (x->streaming && !x->stream_closed && !c->closing) {
      x->stream_closed = 1; /* no last chunk: the client must not take it for whole */
      clank_conn_close(c);
    }
  }
  finish(x, clank_exchange_reusable(x, st));
  return 0;
}

/* The client went away (a reset, a failed write: not a half-close) while
   its handler waits: its signal aborts with reason "disconnected". */
void clank_drive_client_gone(exchange_t *x) {
  if (x->task.signal_ref) {
    lua_State *L = x->gen->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, x->task.signal_ref);
    clank_abort_fire(L, -1, "disconnected");
    lua_pop(L, 1);
  }
}
