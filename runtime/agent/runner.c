/* clank.runner: actionRunner, an action's call state as signals (SPEC §7).

   runner = clank.actionRunner(action, { context = table | function })
   runner.pending / .data / .error   clank.signal signals
   runner.canRun                     a computed: not pending
   runner:run(input, ctx)            the output, or nil on failure; never raises
   runner:reset()

   Revisions: each run takes revision + 1 and only the newest run (not
   overtaken by a later run or a reset) writes its outcome; a stale run still
   returns its output to its caller. Inside a task the action runs right here
   and may wait; from top-level code run() runs in a task of its own and the
   loop runs until it ends (like calling an action).

   The request a task serves (a live event, a surface call) may be bound to
   its coroutine with bindRequest(co, ctx, ask?) (clank.live does): a run
   there without a ctx of its own and without a context option gets that
   ctx. When the request is not confirmed (ctx.confirmed ~= true), an action
   that requires confirmation has its input validated first (invalid: the
   ValidationError is the run's error, and nobody is asked to confirm bad
   input); then ask(text), bound with the request, asks the person with the
   action's confirmText(input) and returns true to run it, false for a run
   that fails with CONFIRMATION_REQUIRED (428) "The action was not
   confirmed."; without ask it fails with CONFIRMATION_REQUIRED at once. A ctx
   with confirmed = false does the same without a binding (and never asks).

   The signals are written in clank.signal batches, so effects see each
   transition whole. An effect that raises while the runner writes is logged,
   not raised: run() never raises, and reset() behaves the same. */
#include <lauxlib.h>
#include <string.h>

#include "agent/action.h"
#include "agent/runner.h"
#include "core/protect.h"
#include "core/scheduler.h"

#define RUNNER_MT "clank.ActionRunner"

/* Uservalues: the public fields (pending, data, error, canRun, run, reset,
   action) and the private ones (context, batch). */
enum { UV_PUBLIC = 1, UV_PRIVATE = 2 };

typedef struct runner_s {
  lua_Integer revision;
} runner_t;

static runner_t *check_runner(lua_State *L, int idx) { return luaL_checkudata(L, idx, RUNNER_MT); }

/* ---- writing the signals ---- */

/* batch(apply, sig1, v1, sig2, v2, ...): sets each signal's value. */
static int apply_writes(lua_State *L) {
  int top = lua_gettop(L);
  for (int i = 1; i + 1 <= top; i += 2) {
    lua_pushvalue(L, i + 1);
    lua_setfield(L, i, "value");
  }
  return 0;
}

/* Pushes batch and apply_writes; the caller then pushes (signal, value)
   pairs with push_signal and calls commit with the base returned. */
static int begin_commit(lua_State *L, int self) {
  luaL_checkstack(L, 10, NULL);
  int base = lua_gettop(L);
  lua_getiuservalue(L, self, UV_PRIVATE);
  lua_getfield(L, -1, "batch");
  lua_remove(L, -2);
  lua_pushcfunction(L, apply_writes);
  return base;
}

static void push_signal(lua_State *L, int self, const char *name) {
  lua_getiuservalue(L, self, UV_PUBLIC);
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
}

static void commit(lua_State *L, int base) {
  if (clank_pcall(L, lua_gettop(L) - base - 1, 0) != LUA_OK)
    clank_sched_log(L, "error", "actionRunner: an effect failed: %s", clank_error_text(L, -1));
  lua_settop(L, base);
}

/* ---- the request bound to a coroutine ---- */

#define REQUESTS_KEY "clank.requests"
#define ASKS_KEY "clank.request_asks"

/* Pushes registry[key] (a table with weak keys: thread → value), made on
   first use: REQUESTS_KEY's values are the ctxs, ASKS_KEY's the asks. */
static void push_bound(lua_State *L, const char *key) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, key);
}

/* Pushes what is bound to the running coroutine under key, or nil. */
static void push_bound_value(lua_State *L, const char *key) {
  push_bound(L, key);
  lua_pushthread(L);
  lua_rawget(L, -2);
  lua_remove(L, -2);
}

/* Pushes the ctx bound to the running coroutine, or nil. */
static void push_request(lua_State *L) { push_bound_value(L, REQUESTS_KEY); }

/* A boolean field of the table at idx, read raw: -1 when absent. */
static int raw_flag(lua_State *L, int idx, const char *name) {
  lua_pushstring(L, name);
  int t = lua_rawget(L, idx);
  int v = t == LUA_TBOOLEAN ? lua_toboolean(L, -1) : -1;
  lua_pop(L, 1);
  return v;
}

/* 1 when the run must fail for want of confirmation: the bound request (else
   the ctx) is not confirmed and the runner's action requires it. */
static int unconfirmed(lua_State *L, int self, int ctx, int request) {
  if (lua_istable(L, request)) {
    if (raw_flag(L, request, "confirmed") == 1) return 0;
  } else if (!lua_istable(L, ctx) || raw_flag(L, ctx, "confirmed") != 0) {
    return 0;
  }
  lua_getiuservalue(L, self, UV_PUBLIC);
  lua_getfield(L, -1, "action");
  clank_action_t *a = clank_action_test(L, -1);
  int required = a != NULL && clank_action_requires_confirmation(a);
  lua_pop(L, 2);
  return required;
}

int clank_bound_request_unconfirmed(lua_State *L) {
  push_request(L);
  int unconfirmed = lua_istable(L, -1) && raw_flag(L, lua_gettop(L), "confirmed") != 1;
  lua_pop(L, 1);
  return unconfirmed;
}

int clank_bound_request_ask(lua_State *L) {
  push_request(L);
  int unconfirmed = lua_istable(L, -1) && raw_flag(L, lua_gettop(L), "confirmed") != 1;
  lua_pop(L, 1);
  if (!unconfirmed) return 0;
  push_bound_value(L, ASKS_KEY);
  if (lua_isfunction(L, -1)) return 1;
  lua_pop(L, 1);
  return 0;
}

/* clank.runner.bindRequest(co, ctx | nil, ask?) */
static int l_bind_request(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTHREAD);
  if (!lua_isnil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TFUNCTION);
  lua_settop(L, 3);
  if (lua_isnil(L, 2)) lua_pushnil(L), lua_replace(L, 3); /* unbound: no ask either */
  static const char *const keys[] = {REQUESTS_KEY, ASKS_KEY};
  for (int i = 0; i < 2; i++) {
    push_bound(L, keys[i]);
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2 + i);
    lua_rawset(L, -3);
    lua_pop(L, 1);
  }
  return 0;
}

/* clank.runner.currentRequest() → the ctx bound to the running coroutine */
static int l_current_request(lua_State *L) {
  push_request(L);
  return 1;
}

/* ---- run ---- */

/* Stack of a run: 1 runner, 2 input, 3 ctx given to run, 4 rev, 5 ctx used,
   then the action's result or error. */
enum { STEP_START, STEP_ASKED, STEP_BEGIN, STEP_CONTEXT, STEP_RAN, STEP_MASK = 7 };
#define RUN_CONFIRMED 8 /* beside the step: the person confirmed this run when asked */

/* The runner's action, when it is one that requires confirmation: pushed,
   and 1; else nothing pushed, and 0. */
static int push_confirmed_action(lua_State *L, int self) {
  lua_getiuservalue(L, self, UV_PUBLIC);
  lua_getfield(L, -1, "action");
  lua_remove(L, -2);
  clank_action_t *a = clank_action_test(L, -1);
  if (a && clank_action_requires_confirmation(a)) return 1;
  lua_pop(L, 1);
  return 0;
}

/* The run's input is valid for the action on top (popped): 1, else 0 with
   its ValidationError on top. */
static int valid_input(lua_State *L) {
  const clank_schema_node_t *input = clank_action_input(lua_touserdata(L, -1));
  lua_pop(L, 1);
  return clank_schema_validate(L, input, 2);
}

static int run_k(lua_State *L, int status, lua_KContext k) {
  runner_t *r = lua_touserdata(L, 1);
  lua_KContext step = k & STEP_MASK, confirmed = k & RUN_CONFIRMED;
  switch (step) {
    case STEP_START:
      lua_pushinteger(L, ++r->revision); /* 4 */
      /* a person to ask (a live page): the input is checked first, then the
         person asked, before the run shows as pending */
      if (clank_bound_request_ask(L)) { /* 5: ask */
        if (!push_confirmed_action(L, 1)) {
          lua_settop(L, 4);
        } else {
          lua_pushvalue(L, -1);
          if (!valid_input(L)) { /* nobody is asked to confirm what cannot run */
            status = LUA_ERRRUN;
            break;
          }
          lua_pushcfunction(L, clank_action_confirm_text);
          lua_insert(L, -2);
          lua_pushvalue(L, 2);
          if (clank_pcall(L, 2, 1) != LUA_OK) { /* confirm(input) failed */
            status = LUA_ERRRUN;
            break;
          }
          status = lua_pcallk(L, 1, 1, 0, STEP_ASKED, run_k);
          step = STEP_ASKED;
        }
      }
      /* fallthrough */
    case STEP_ASKED:
      if (step == STEP_ASKED) {
        if (status != LUA_OK && status != LUA_YIELD) break; /* asking failed: its error */
        if (!lua_toboolean(L, -1)) {
          clank_action_error_push(L, "CONFIRMATION_REQUIRED", "The action was not confirmed.", 428);
          status = LUA_ERRRUN;
          break;
        }
        confirmed = RUN_CONFIRMED;
        lua_settop(L, 4);
      }
      /* fallthrough */
    case STEP_BEGIN: {
      int base = begin_commit(L, 1);
      push_signal(L, 1, "pending");
      lua_pushboolean(L, 1);
      push_signal(L, 1, "error");
      lua_pushnil(L);
      commit(L, base);
      if (!lua_isnil(L, 3)) {
        lua_pushvalue(L, 3);
      } else {
        lua_getiuservalue(L, 1, UV_PRIVATE);
        lua_getfield(L, -1, "context");
        lua_remove(L, -2);
        if (lua_isfunction(L, -1)) status = lua_pcallk(L, 0, 1, 0, STEP_CONTEXT | confirmed, run_k);
      }
    }
      /* fallthrough */
    case STEP_CONTEXT:
      if (status != LUA_OK && status != LUA_YIELD) break; /* the context failed: its error on top */
      lua_settop(L, 5);
      push_request(L); /* 6 */
      if (lua_isnil(L, 5)) {
        if (lua_isnil(L, 6))
          lua_newtable(L);
        else
          lua_pushvalue(L, 6);
        lua_replace(L, 5);
      }
      if (!confirmed && unconfirmed(L, 1, 5, 6)) {
        /* the input's issues first: confirming would not make it valid */
        if (push_confirmed_action(L, 1) && valid_input(L))
          clank_action_error_push(L, "CONFIRMATION_REQUIRED",
                                  "This action requires explicit confirmation.", 428);
        status = LUA_ERRRUN;
        break;
      }
      lua_settop(L, 5);
      lua_getiuservalue(L, 1, UV_PUBLIC);
      lua_getfield(L, -1, "action");
      lua_remove(L, -2);
      lua_pushvalue(L, 2);
      lua_pushvalue(L, 5);
      status = lua_pcallk(L, 2, 1, 0, STEP_RAN | confirmed, run_k);
      /* fallthrough */
    default: break;
  }
  /* The action's output, or the error (of the action or the context), is on top. */
  int value = lua_gettop(L);
  int ok = status == LUA_OK || status == LUA_YIELD;
  if (r->revision == lua_tointeger(L, 4)) {
    int base = begin_commit(L, 1);
    push_signal(L, 1, ok ? "data" : "error");
    lua_pushvalue(L, value);
    push_signal(L, 1, "pending");
    lua_pushboolean(L, 0);
    commit(L, base);
  }
  /* a run for a live view's event or surface call is one of the app's
     action calls (SPEC §15); the bridge and MCP count their own */
  push_request(L);
  int bound = lua_istable(L, -1);
  lua_pop(L, 1);
  if (bound) {
    lua_getiuservalue(L, 1, UV_PUBLIC);
    lua_getfield(L, -1, "action");
    if (clank_action_test(L, -1)) clank_action_count_call(L, -1, ok);
    lua_pop(L, 2);
  }
  if (!ok) lua_pushnil(L);
  return 1;
}

static int run_task(lua_State *L) {
  check_runner(L, 1);
  lua_settop(L, 3);
  return run_k(L, LUA_OK, STEP_START);
}

/* runner:run(input, ctx), or runner.run(input, ctx): upvalue 1 is the runner. */
static int runner_run(lua_State *L) {
  if (lua_rawequal(L, 1, lua_upvalueindex(1))) lua_remove(L, 1);
  lua_settop(L, 2);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  if (clank_in_task(L)) return run_task(L);
  lua_pushcfunction(L, run_task);
  lua_insert(L, 1);
  return clank_sched_call(L, 3);
}

/* runner:reset(), or runner.reset() */
static int runner_reset(lua_State *L) {
  lua_settop(L, 0);
  lua_pushvalue(L, lua_upvalueindex(1));
  runner_t *r = lua_touserdata(L, 1);
  r->revision++;
  int base = begin_commit(L, 1);
  push_signal(L, 1, "pending");
  lua_pushboolean(L, 0);
  push_signal(L, 1, "data");
  lua_pushnil(L);
  push_signal(L, 1, "error");
  lua_pushnil(L);
  commit(L, base);
  return 0;
}

/* ---- the userdata ---- */

static int runner_index(lua_State *L) {
  check_runner(L, 1);
  lua_getiuservalue(L, 1, UV_PUBLIC);
  lua_pushvalue(L, 2);
  lua_rawget(L, -2);
  return 1;
}

static int runner_tostring(lua_State *L) {
  check_runner(L, 1);
  lua_getiuservalue(L, 1, UV_PUBLIC);
  lua_getfield(L, -1, "action");
  if (clank_action_test(L, -1)) {
    clank_action_push_name(L, lua_gettop(L));
    lua_pushfstring(L, RUNNER_MT "(%s)", lua_tostring(L, -1));
  } else {
    lua_pushliteral(L, RUNNER_MT);
  }
  return 1;
}

/* canRun's function: not pending.value (upvalue 1: pending) */
static int can_run(lua_State *L) {
  lua_getfield(L, lua_upvalueindex(1), "value");
  lua_pushboolean(L, !lua_toboolean(L, -1));
  return 1;
}

static int is_callable(lua_State *L, int idx) {
  if (lua_isfunction(L, idx)) return 1;
  if (luaL_getmetafield(L, idx, "__call") == LUA_TNIL) return 0;
  lua_pop(L, 1);
  return 1;
}

/* clank.actionRunner(action, { context }) */
static int l_action_runner(lua_State *L) {
  lua_settop(L, 2);
  luaL_argexpected(L, is_callable(L, 1), 1, "action");
  if (!lua_isnil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    for (lua_pushnil(L); lua_next(L, 2); lua_pop(L, 1))
      if (lua_type(L, -2) != LUA_TSTRING || strcmp(lua_tostring(L, -2), "context") != 0)
        return luaL_error(L, "clank.actionRunner: unknown option '%s'",
                          luaL_tolstring(L, -2, NULL));
    lua_getfield(L, 2, "context");
    if (!lua_isnil(L, -1) && !lua_istable(L, -1) && !lua_isfunction(L, -1))
      return luaL_error(L, "clank.actionRunner: 'context' must be a table or a function");
  } else {
    lua_pushnil(L);
  }
  /* 3: context */

  lua_getglobal(L, "require");
  lua_pushliteral(L, "clank.signal");
  lua_call(L, 1, 1); /* 4: clank.signal */

  runner_t *r = lua_newuserdatauv(L, sizeof *r, 2); /* 5 */
  r->revision = 0;
  luaL_setmetatable(L, RUNNER_MT);

  lua_createtable(L, 0, 2); /* private */
  lua_pushvalue(L, 3);
  lua_setfield(L, -2, "context");
  lua_getfield(L, 4, "batch");
  lua_setfield(L, -2, "batch");
  lua_setiuservalue(L, 5, UV_PRIVATE);

  lua_createtable(L, 0, 7); /* 6: public */
  lua_pushvalue(L, 1);
  lua_setfield(L, 6, "action");
  lua_getfield(L, 4, "signal");
  lua_pushboolean(L, 0);
  lua_call(L, 1, 1);
  lua_pushvalue(L, -1); /* keep pending for canRun */
  lua_setfield(L, 6, "pending");
  lua_getfield(L, 4, "computed");
  lua_insert(L, -2);
  lua_pushcclosure(L, can_run, 1);
  lua_call(L, 1, 1);
  lua_setfield(L, 6, "canRun");
  lua_getfield(L, 4, "signal");
  lua_call(L, 0, 1);
  lua_setfield(L, 6, "data");
  lua_getfield(L, 4, "signal");
  lua_call(L, 0, 1);
  lua_setfield(L, 6, "error");
  lua_pushvalue(L, 5);
  lua_pushcclosure(L, runner_run, 1);
  lua_setfield(L, 6, "run");
  lua_pushvalue(L, 5);
  lua_pushcclosure(L, runner_reset, 1);
  lua_setfield(L, 6, "reset");
  lua_setiuservalue(L, 5, UV_PUBLIC);
  return 1;
}

/* clank.runner.countCall(action, ok): a call made elsewhere (MCP's
   tools/call) counted with the rest (SPEC §15) */
static int l_count_call(lua_State *L) {
  if (clank_action_test(L, 1) == NULL) luaL_typeerror(L, 1, "clank.Action");
  clank_action_count_call(L, 1, lua_toboolean(L, 2));
  return 0;
}

static const luaL_Reg runner_meta[] = {
    {"__index", runner_index}, {"__tostring", runner_tostring}, {NULL, NULL}};

static const luaL_Reg runner_funcs[] = {{"actionRunner", l_action_runner},
                                        {"bindRequest", l_bind_request},
                                        {"currentRequest", l_current_request},
                                        {"countCall", l_count_call},
                                        {NULL, NULL}};

int luaopen_clank_runner(lua_State *L) {
  luaL_newmetatable(L, RUNNER_MT);
  luaL_setfuncs(L, runner_meta, 0);
  lua_pop(L, 1);
  luaL_newlib(L, runner_funcs);
  return 1;
}
