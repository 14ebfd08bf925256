/* handle() (SPEC §5): the run of one request through the bridge, driven by
   continuations so that a context function or an action may wait anywhere:
   the checks (bridge_request.c), the context, the input checked, ctx and
   the signal, the action run (inline in the request's task, or joined in a
   task of its own) and its answer (steps 8 and 9). Also run(), the action
   as the bridge runs it, for clank.mcp. Owns nothing past a run: the stack
   slots below hold what it needs, the caller's answer struct its result. */
#include <string.h>

#include "agent/action.h"
#include "agent/bridge_envelope.h"
#include "agent/bridge_internal.h"
#include "core/abort.h"
#include "core/protect.h"
#include "data/json.h"
#include "data/rows.h"
#include "data/schema.h"
#include "util/bytes.h"

/* The stack of a run, slot by slot. Every function of the run and its
   continuations reads these absolute indices, so each is set once, in
   this order, and never moved:

   RUN_BRIDGE   the bridge (its caller's, at 1 when handle is called)
   RUN_REQUEST  the request table, or its maker (a callable that builds it),
                or nil until Lua may read it (need_maker)
   RUN_SOURCE   the context source: a table, a function(request), or nil
   RUN_ACTION   the action (pushed by the checks)
   RUN_INPUT    the input, decoded from the body
   RUN_CONTEXT  the context value: the source's result, or the source
   RUN_CTX      ctx; for a handler without ctx (CLANK_DIRECT_INPUT) the
                signal's holder alone, or nil while its holder is deferred
   RUN_HOLDER   the signal's holder (RUN_CTX again), or nil while deferred
   RUN_TASK     the task (light userdata), in a run inline (inline_out_k)
   RUN_MSGH     the handler's message handler, when the handler is called
                directly (INLINE_DIRECT)
   RUN_HANDLER  that handler, then its arguments: the call's results end up
                here */
enum {
  RUN_BRIDGE = 1,
  RUN_REQUEST,
  RUN_SOURCE,
  RUN_ACTION,
  RUN_INPUT,
  RUN_CONTEXT,
  RUN_CTX,
  RUN_HOLDER,
  RUN_TASK,
  RUN_MSGH,
  RUN_HANDLER
};

/* Where handle_k resumes. */
enum { STEP_CHECK, STEP_CONTEXT, STEP_RAN };
/* In the continuation of an inline run, beside the answer's address: the
   action's handler was called directly, not its pipeline. */
#define INLINE_DIRECT 1

static int handle_k(lua_State *L, int status, lua_KContext step);
static int context_out_k(lua_State *L, int status, lua_KContext out);
static int ran_out_k(lua_State *L, int status, lua_KContext out);
static int inline_out_k(lua_State *L, int status, lua_KContext out);

/* A run that answers in out ends: its caller's done, if any, has the last
   word (clank_bridge_handle_view_task); n: the results of the run. */
static int view_done(lua_State *L, clank_bridge_answer_t *out, int n) {
  return out && out->done ? out->done(L, out) : n;
}

/* Steps 1–7 on v, then the context: the first part of a run. The answer
   goes to out when it is not NULL (the continuations carry it). */
static int handle_checked(lua_State *L, const clank_bridge_view_t *v, clank_bridge_answer_t *out) {
  answer_t a = {.out = out};
  if (clank_bridge_check_request(L, PHASE_FULL, &a, v)) return view_done(L, out, 1);
  if (out) { /* the request's origin lives as long as the run: the answer's CORS */
    out->cors_origin = a.cors_origin;
    out->cors_len = a.cors_len;
    out->unconfirmed = !clank_span_is(v->confirmation.p, v->confirmation.n, "confirmed");
  }
  if (lua_isfunction(L, RUN_SOURCE)) {
    need_maker(L, out);
    need_request(L, RUN_REQUEST);
    lua_pushvalue(L, RUN_SOURCE);
    lua_pushvalue(L, RUN_REQUEST);
    if (out)
      lua_callk(L, 1, 1, (lua_KContext)out, context_out_k);
    else
      lua_callk(L, 1, 1, STEP_CONTEXT, handle_k);
  } else {
    lua_pushvalue(L, RUN_SOURCE);
  }
  return out ? context_out_k(L, LUA_OK, (lua_KContext)out) : handle_k(L, LUA_OK, STEP_CONTEXT);
}

/* [schema node, input, buffer] → clank_schema_validate_json's result. */
static int validate_json(lua_State *L) {
  lua_pushinteger(L, clank_schema_validate_json(L, lua_touserdata(L, 1), 2, lua_touserdata(L, 3)));
  return 1;
}

/* Step 9 for the input of the action, before the action runs: returns 1
   when it is valid, 0 with the 422 answer's body in the scratch buffer, or
   -1 when the pipeline is to find out (and answer) as it did before: the
   check raised, or could not write its JSON. */
static int check_input(lua_State *L, bridge_t *b) {
  const clank_action_t *action = lua_touserdata(L, RUN_ACTION);
  if (b->valid_input != NULL && lua_topointer(L, RUN_INPUT) == b->valid_input) {
    b->valid_input = NULL; /* checked while it was decoded */
    return 1;
  }
  clank_buf_reset(&b->scratch);
  clank_buf_appends(&b->scratch, CLANK_BRIDGE_ENVELOPE_OPEN);
  lua_pushcfunction(L, validate_json);
  lua_pushlightuserdata(L, (void *)clank_action_input(action));
  lua_pushvalue(L, RUN_INPUT);
  lua_pushlightuserdata(L, &b->scratch);
  int valid = clank_pcall(L, 3, 1) == LUA_OK ? (int)lua_tointeger(L, -1) : -1;
  lua_pop(L, 1);
  if (valid == 0) clank_buf_appends(&b->scratch, CLANK_BRIDGE_ENVELOPE_CLOSE);
  return valid;
}

/* Gives ctx (at idx) a fresh abort signal, which the driver of task (the
   running one) aborts when the client goes away; pushes the signal. */
static void give_signal(lua_State *L, int ctx, clank_task_t *task) {
  clank_abort_push(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, ctx, "signal");
  if (task && task->wants_signal && task->signal_ref == 0) {
    lua_pushvalue(L, -1);
    task->signal_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
}

/* The same for a lazy ctx (at idx), the holder of its signal (abort.h):
   the signal is made when ctx.signal or the task's (a wait's) is first
   read, and aborting it before marks ctx. Pushes ctx again, the holder.
   The task's signal_ref names ctx, in its driver's slot when it has one. */
static void hold_signal(lua_State *L, int ctx, clank_task_t *task) {
  lua_pushvalue(L, ctx);
  if (task && task->wants_signal && task->signal_ref == 0) {
    lua_pushvalue(L, -1);
    if (task->hold_slot) { /* the driver's slot for it (scheduler.h) */
      lua_rawseti(L, LUA_REGISTRYINDEX, task->hold_slot);
      task->signal_ref = task->hold_slot;
    } else {
      task->signal_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
  }
}

/* 1 when the request table at RUN_REQUEST confirmed (x-clank-confirmation). */
static int table_confirmed(lua_State *L) {
  int top = lua_gettop(L);
  int yes = lua_istable(L, RUN_REQUEST) && lua_getfield(L, RUN_REQUEST, "headers") == LUA_TTABLE &&
            lua_getfield(L, -1, "x-clank-confirmation") == LUA_TSTRING &&
            strcmp(lua_tostring(L, -1), "confirmed") == 0;
  lua_settop(L, top);
  return yes;
}

/* With the context value in RUN_CONTEXT: who may call checked, the input, then ctx, the
   signal, and the action run, inline or in a task of its own. */
static int handle_context(lua_State *L, clank_bridge_answer_t *out) {
  bridge_t *b = lua_touserdata(L, RUN_BRIDGE);
  lua_settop(L, RUN_CONTEXT);
  clank_bridge_step_t who =
      clank_bridge_user_step(L, b, RUN_ACTION, RUN_CONTEXT, out ? out->unconfirmed : -1);
  if (who == CLANK_BRIDGE_CONFIRM && out == NULL && table_confirmed(L)) who = CLANK_BRIDGE_PASS;
  if (who != CLANK_BRIDGE_PASS) {
    answer_t a = {.out = out};
    clank_bridge_answer_origin(L, &a, out);
    clank_bridge_refuse_user(L, b, &a, who);
    return view_done(L, out, 1);
  }
  int valid = check_input(L, b);
  if (valid == 0) {
    answer_t a = {.out = out};
    clank_bridge_answer_origin(L, &a, out);
    push_response(L, &a, 422, "no-store", b->scratch.data, b->scratch.len);
    return view_done(L, out, 1);
  }
  clank_sched_t *s = clank_sched_get(L);
  clank_task_t *task = clank_task_on(s, L);
  int inline_run = out && task && task->on_deadline && !task->deadline_on_wait;
  /* a valid input, no authorize: the pipeline's one step left, its handler,
     is called right here */
  int direct = inline_run && valid == 1 ? clank_action_direct(L, RUN_ACTION) : 0;
  if (direct == CLANK_DIRECT_INPUT && task->wants_signal && task->signal_ref == 0 &&
      task->hold_slot) {
    /* a handler that can never see a ctx gets none (nor the request, nor
       its id), and its signal's holder is made only if something may take
       the signal (clank_task_hold_signal) */
    task->holder_deferred = 1;
    lua_pushnil(L); /* RUN_CTX */
    lua_pushnil(L); /* RUN_HOLDER */
  } else if (direct == CLANK_DIRECT_INPUT) {
    lua_createtable(L, 0, 0);      /* RUN_CTX: the holder alone */
    hold_signal(L, RUN_CTX, task); /* RUN_HOLDER */
  } else {
    /* RUN_CTX = { <context fields>..., request, log, progress, signal }, the
       last three (and a made-up requestId) served when read */
    need_maker(L, out);
    clank_bridge_push_ctx(L, RUN_CONTEXT, RUN_REQUEST, task, RUN_ACTION, s);
    hold_signal(L, RUN_CTX, task); /* RUN_HOLDER */
  }
  if (inline_run) {
    lua_pushlightuserdata(L, task); /* RUN_TASK, for the continuation */
    /* in this task: its driver arms the timeout if it waits, and answers
       504 itself at the deadline (clank_bridge_timeout_answer) */
    task->deadline_ms = b->timeout_ms;
    task->deadline_passed = 0;
    task->deadline_on_wait = 1;
    if (direct) {
      clank_action_push_handler(L, RUN_ACTION); /* RUN_MSGH, RUN_HANDLER */
      lua_pushvalue(L, RUN_INPUT);
      if (direct == CLANK_DIRECT_CTX) lua_pushvalue(L, RUN_CTX);
      lua_KContext k = (lua_KContext)out | INLINE_DIRECT;
      int st = lua_pcallk(L, direct == CLANK_DIRECT_CTX ? 2 : 1, 1, RUN_MSGH, k, inline_out_k);
      return inline_out_k(L, st, k);
    }
  }
  lua_pushcfunction(L, valid == 1 ? clank_action_pipeline_validated : clank_action_pipeline);
  lua_pushvalue(L, RUN_ACTION);
  lua_pushvalue(L, RUN_INPUT);
  lua_pushvalue(L, RUN_CTX);
  if (inline_run) {
    int st = lua_pcallk(L, 3, 1, 0, (lua_KContext)out, inline_out_k);
    return inline_out_k(L, st, (lua_KContext)out);
  }
  if (out) return clank_sched_join_in(L, task, 3, b->timeout_ms, ran_out_k, (lua_KContext)out);
  return clank_sched_join_in(L, task, 3, b->timeout_ms, handle_k, STEP_RAN);
}

/* The run ended: [..., true, output] or [..., false, error] or [..., nil, "timeout"]. */
static int handle_ran(lua_State *L, clank_bridge_answer_t *out) {
  bridge_t *b = lua_touserdata(L, RUN_BRIDGE);
  answer_t a = {.out = out};
  clank_bridge_answer_origin(L, &a, out);
  if (lua_isnil(L, -2)) {
    clank_abort_fire(L, RUN_HOLDER, "timeout");
    push_response(L, &a, 504, "no-store", clank_bridge_timeout_body, clank_bridge_timeout_len);
    return 1;
  }
  if (!lua_toboolean(L, -2)) return clank_bridge_answer_error(L, b, &a, -1);
  /* {"ok":true,"output":...}, the output encoded as its schema says */
  int output = lua_gettop(L);
  const clank_schema_node_t *schema = clank_action_output(lua_touserdata(L, RUN_ACTION));
  clank_buf_reset(&b->scratch);
  if (lua_isnil(L, output) && schema == NULL) {
    /* a handler that returns nothing, with no output schema (SPEC §13) */
    clank_buf_appends(&b->scratch, "{\"ok\":true}");
  } else {
    clank_buf_appends(&b->scratch, "{\"ok\":true,\"output\":");
    /* the pipeline left the output to us: validated as it is written; where
       that walk stops, checked as the pipeline checks it, then encoded */
    if (schema == NULL || !clank_schema_encode(L, schema, output, &b->scratch)) {
      if (schema != NULL) {
        clank_rows_settle(L, schema, output); /* what the encoder below sees too */
        lua_pushcfunction(L, clank_action_check_output);
        lua_pushvalue(L, RUN_ACTION);
        lua_pushvalue(L, output);
        if (clank_pcall(L, 2, 0) != LUA_OK) return clank_bridge_answer_error(L, b, &a, -1);
      }
      clank_json_encode_node(L, output, schema, &b->scratch);
    }
    clank_buf_appendc(&b->scratch, '}');
  }
  push_response(L, &a, 200, NULL, b->scratch.data, b->scratch.len);
  return 1;
}

static int context_out_k(lua_State *L, int status, lua_KContext out) {
  (void)status;
  return handle_context(L, (clank_bridge_answer_t *)out);
}

static int ran_out_k(lua_State *L, int status, lua_KContext out) {
  (void)status;
  clank_bridge_answer_t *o = (clank_bridge_answer_t *)out;
  return view_done(L, o, handle_ran(L, o));
}

/* The handler called directly (INLINE_DIRECT) ended, with [..., RUN_MSGH,
   output or error]: what the pipeline would have ended with is left on
   top. Returns the pipeline's ok. */
static int direct_end(lua_State *L, int ok, clank_task_t *task) {
  if (!ok) {
    clank_action_handler_failed(L, RUN_ACTION);
    return 0;
  }
  if (!task->deadline_passed || clank_action_output(lua_touserdata(L, RUN_ACTION)) == NULL)
    return 1;
  /* no one waits for it: the pipeline checked it, its failure logged */
  lua_pushcfunction(L, clank_action_check_output);
  lua_pushvalue(L, RUN_ACTION);
  lua_pushvalue(L, -3);
  if (clank_pcall(L, 2, 0) == LUA_OK) return 1;
  lua_replace(L, -2);
  return 0;
}

/* The inline run (handle_context) ended: [..., RUN_TASK, output] or [...,
   RUN_TASK, error], given to handle_ran as a join gives it; dropped when
   the driver answered 504 meanwhile (a failure logged as a joined child's
   is). */
static int inline_out_k(lua_State *L, int status, lua_KContext k) {
  clank_task_t *task = lua_touserdata(L, RUN_TASK);
  lua_KContext out = k & ~(lua_KContext)INLINE_DIRECT;
  int ok = status == LUA_OK || status == LUA_YIELD;
  if (k & INLINE_DIRECT) { /* as the pipeline would have raised it: a plain error */
    ok = direct_end(L, ok, task);
    if (status == LUA_ERRMEM) status = LUA_ERRRUN;
  }
  if (task->deadline_timer) clank_sched_timer_cancel(task->deadline_timer);
  task->deadline_timer = NULL;
  task->deadline_on_wait = 0;
  if (!ok) /* an error, or one made of a good end (direct_end): the budget's when over it */
    clank_task_budget_error(L, task, status == LUA_OK || status == LUA_YIELD ? LUA_ERRRUN : status);
  if (task->deadline_passed) {
    task->deadline_passed = 0;
    if (!ok)
      clank_sched_log(L, "error", "an action that timed out failed later: %s",
                      clank_error_text(L, -1));
    lua_settop(L, 0);
    return 0;
  }
  lua_pushboolean(L, ok);
  if (k & INLINE_DIRECT) /* in the message handler's place */
    lua_replace(L, RUN_MSGH);
  else
    lua_insert(L, -2);
  clank_bridge_answer_t *o = (clank_bridge_answer_t *)out;
  return view_done(L, o, handle_ran(L, o));
}

static int handle_k(lua_State *L, int status, lua_KContext step) {
  (void)status;
  clank_bridge_view_t v;
  switch (step) {
    case STEP_CHECK:
      check_bridge(L, RUN_BRIDGE);
      luaL_checktype(L, RUN_REQUEST, LUA_TTABLE);
      clank_bridge_view_from_table(L, RUN_REQUEST, &v);
      return handle_checked(L, &v, NULL);
    case STEP_CONTEXT: return handle_context(L, NULL);
    default: return handle_ran(L, NULL);
  }
}

int clank_bridge_handle_task(lua_State *L) {
  lua_settop(L, RUN_SOURCE);
  return handle_k(L, LUA_OK, STEP_CHECK);
}

int clank_bridge_handle_view_task(lua_State *L) {
  const clank_bridge_view_t *v = lua_touserdata(L, 4);
  clank_bridge_answer_t *out = lua_touserdata(L, 5);
  out->status = 0;
  lua_settop(L, RUN_SOURCE); /* RUN_BRIDGE: the bridge, as its caller (the host) holds it */
  return handle_checked(L, v, out);
}

void clank_bridge_timeout_answer(clank_bridge_answer_t *out) {
  out->status = 504;
  out->cache = "no-store";
  out->body = clank_bridge_timeout_body;
  out->len = clank_bridge_timeout_len;
}

int clank_bridge_failed(lua_State *L) {
  bridge_t *b = lua_touserdata(L, 1);
  clank_bridge_answer_t *out = lua_touserdata(L, 3);
  answer_t a = {.out = out};
  clank_bridge_answer_origin(L, &a, out);
  lua_settop(L, 2);
  int status = clank_bridge_push_error_object(L, 2, b->expose_errors, 0); /* 3 object, 4 text */
  lua_insert(L, 3);
  clank_bridge_send_failure(L, b, &a, status);
  lua_settop(L, 3);
  return 1;
}

/* ---- run(), for clank.mcp ---- */

/* Its stack: 1 the action, 2 the input, 3 ctx, then: */
enum { RUNNER_SIGNAL = 4 };

static int run_done(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  if (lua_isnil(L, -2)) clank_abort_fire(L, RUNNER_SIGNAL, "timeout");
  return 2;
}

/* run(action, input, ctx) (upvalue: the bridge), in a task: the action as
   the bridge runs it — ctx.signal set, the action timeout applied — giving
   true, output; false, error; or nil, "timeout". */
static int l_run(lua_State *L) {
  bridge_t *b = check_bridge(L, lua_upvalueindex(1));
  if (clank_action_test(L, 1) == NULL) return luaL_argerror(L, 1, "expected an action");
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);
  give_signal(L, 3, clank_task_of(L)); /* RUNNER_SIGNAL */
  lua_pushcfunction(L, clank_action_pipeline);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  return clank_sched_join(L, 3, b->timeout_ms, run_done, 0);
}

void clank_bridge_push_runner(lua_State *L, int idx) {
  check_bridge(L, idx);
  lua_pushvalue(L, idx);
  lua_pushcclosure(L, l_run, 1);
}
