/* clank.action: defineAction, ActionError and the call pipeline (SPEC §4). */
#include "agent/action.h"

#include <lauxlib.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/protect.h"
#include "core/scheduler.h"
#include "data/rows.h"
#include "data/schema.h"
#include "core/values.h"

enum { SIDE_NONE, SIDE_READ, SIDE_WRITE, SIDE_DESTRUCTIVE };
enum { CONFIRM_NEVER, CONFIRM_WRITE, CONFIRM_ALWAYS };

static const char *const side_names[] = {"none", "read", "write", "destructive", NULL};
static const char *const confirm_names[] = {"never", "write", "always", NULL};

/* The userdata holds what the pipeline checks; its uservalue holds the Lua
   values (name, description, schemas, functions, manifest). */
struct clank_action_s {
  const void *tag; /* &action_tag: tells an action from other userdata without a registry lookup */
  const clank_schema_node_t *input;
  const clank_schema_node_t *output; /* NULL without an output schema */
  int side, confirmation;
  int has_authorize;
  int has_publishes; /* publishes: topics to publish after each successful call (issue 28) */
  int auth;          /* CLANK_AUTH_*: who may call it (issue 30) */
  int takes_ctx;     /* its handler has a second parameter, or takes any number */
};

/* clank.ActionError(code, message, status = 400, details) */
static int l_action_error(lua_State *L) {
  lua_settop(L, 4); /* details at 4, even when absent */
  size_t code_len;
  const char *code = luaL_checklstring(L, 1, &code_len);
  luaL_argcheck(L, code_len > 0, 1, "clank.ActionError: code must be a non-empty string");
  const char *message = luaL_checkstring(L, 2);
  lua_Integer status = 400;
  if (!lua_isnoneornil(L, 3)) {
    int isint;
    status = lua_tointegerx(L, 3, &isint);
    if (!isint || status < 400 || status > 599)
      return luaL_error(L, "clank.ActionError: status must be an integer from 400 to 599");
  }
  clank_action_error_push(L, code, message, (int)status);
  if (!lua_isnoneornil(L, 4)) {
    lua_pushvalue(L, 4);
    lua_setfield(L, -2, "details");
  }
  return 1;
}

static int l_is_action_error(lua_State *L) {
  lua_pushboolean(L, clank_action_error_is(L, 1));
  return 1;
}

/* ---- defineAction ---- */

enum { UV_VALUES = 1, UV_HANDLER, UV_LOG, UV_PROGRESS, UV_HELD };
static int ctx_log(lua_State *L);
static int ctx_progress(lua_State *L);

/* Only its address matters: no other userdata of an action's size starts
   with it, since only defineAction writes it. */
static const char action_tag = 0;

clank_action_t *clank_action_test(lua_State *L, int idx) {
  return clank_tagged(L, idx, sizeof(clank_action_t), &action_tag);
}

static clank_action_t *check_action(lua_State *L, int idx) {
  clank_action_t *a = clank_action_test(L, idx);
  if (a == NULL) luaL_typeerror(L, idx, CLANK_ACTION_MT);
  return a;
}

int clank_action_auth(const clank_action_t *a) { return a->auth; }

int clank_action_writes(const clank_action_t *a) { return a->side >= SIDE_WRITE; }

int clank_action_requires_confirmation(const clank_action_t *a) {
  return a->confirmation == CONFIRM_ALWAYS ||
         (a->confirmation == CONFIRM_WRITE && a->side >= SIDE_WRITE);
}

void clank_action_push_name(lua_State *L, int idx) {
  lua_getiuservalue(L, idx, 1);
  lua_getfield(L, -1, "name");
  lua_remove(L, -2);
}

void clank_action_count_call(lua_State *L, int idx, int ok) {
  idx = lua_absindex(L, idx);
  if (lua_getfield(L, LUA_REGISTRYINDEX, CLANK_COUNT_CALL_KEY) != LUA_TFUNCTION) {
    lua_pop(L, 1);
    return;
  }
  clank_action_push_name(L, idx);
  lua_pushboolean(L, ok);
  lua_call(L, 2, 0);
}

static int valid_name(const char *s, size_t n) {
  if (n == 0 || n > 128) return 0;
  if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z'))) return 0;
  for (size_t i = 1; i < n; i++) {
    char c = s[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return 0;
  }
  return 1;
}

static int option_index(lua_State *L, int idx, const char *const names[], const char *field) {
  const char *v = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
  for (int i = 0; v && names[i]; i++)
    if (strcmp(v, names[i]) == 0) return i;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; names[i]; i++) {
    if (i) luaL_addstring(&b, ", ");
    luaL_addstring(&b, names[i]);
  }
  luaL_pushresult(&b);
  return luaL_error(L, "clank.defineAction: '%s' must be one of %s", field, lua_tostring(L, -1));
}

static void push_json_schema(lua_State *L, int schema_idx) {
  lua_getfield(L, schema_idx, "toJSONSchema");
  lua_pushvalue(L, schema_idx);
  lua_call(L, 1, 1);
}

static const char *const action_fields[] = {"name",        "description",  "input",     "output",
                                            "sideEffects", "confirmation", "authorize", "handler",
                                            "publishes",   "auth",         "confirm",   NULL};

/* auth = "public" | "user" | { roles = { "name", ... } }: kept in the values
   table as given (a roles table copied, so that later writes to it change
   nothing), its kind in a->auth. */
static void read_auth(lua_State *L, clank_action_t *a, int values) {
  static const char *const problem =
      "clank.defineAction: 'auth' must be \"public\", \"user\" or { roles = { \"name\", ... } }";
  int t = lua_getfield(L, 1, "auth");
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  if (t == LUA_TSTRING) {
    const char *v = lua_tostring(L, -1);
    if (strcmp(v, "public") == 0)
      a->auth = CLANK_AUTH_PUBLIC;
    else if (strcmp(v, "user") == 0)
      a->auth = CLANK_AUTH_USER;
    else
      luaL_error(L, "%s", problem);
    lua_setfield(L, values, "auth");
    return;
  }
  if (t != LUA_TTABLE) luaL_error(L, "%s", problem);
  int given = lua_gettop(L);
  for (lua_pushnil(L); lua_next(L, given); lua_pop(L, 1))
    if (lua_type(L, -2) != LUA_TSTRING || strcmp(lua_tostring(L, -2), "roles") != 0)
      luaL_error(L, "%s", problem);
  if (lua_getfield(L, given, "roles") != LUA_TTABLE) luaL_error(L, "%s", problem);
  lua_Integer n = luaL_len(L, -1);
  if (n < 1) luaL_error(L, "clank.defineAction: 'auth.roles' must name at least one role");
  lua_createtable(L, 0, 1);
  lua_createtable(L, (int)n, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_rawgeti(L, -3, i) != LUA_TSTRING || lua_rawlen(L, -1) == 0)
      luaL_error(L, "clank.defineAction: 'auth.roles[%d]' must be a non-empty string", (int)i);
    lua_rawseti(L, -2, i);
  }
  clank_mark_array(L, -1);
  lua_setfield(L, -2, "roles");
  a->auth = CLANK_AUTH_ROLES;
  lua_setfield(L, values, "auth");
  lua_settop(L, given - 1);
}

static int l_define_action(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  for (lua_pushnil(L); lua_next(L, 1); lua_pop(L, 1)) {
    int known = 0;
    for (int i = 0; action_fields[i]; i++)
      if (lua_type(L, -2) == LUA_TSTRING && strcmp(lua_tostring(L, -2), action_fields[i]) == 0)
        known = 1;
    if (!known)
      return luaL_error(L, "clank.defineAction: unknown field '%s'", luaL_tolstring(L, -2, NULL));
  }
  /* uservalue 1: the table of Lua values; reached without a lookup: 2 the
     handler, 3 and 4 its ctx.log and ctx.progress (outside MCP), 5 the
     bridge's (clank_action_push_held) */
  clank_action_t *a = lua_newuserdatauv(L, sizeof *a, UV_HELD); /* 2 */
  memset(a, 0, sizeof *a);
  a->tag = &action_tag;
  lua_newtable(L); /* 3: the uservalue */

  size_t n;
  lua_getfield(L, 1, "name");
  const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
  if (!name || !valid_name(name, n))
    return luaL_error(L,
                      "clank.defineAction: 'name' must match ^[A-Za-z][A-Za-z0-9_.-]*$ "
                      "and be at most 128 bytes");
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, ctx_log, 1);
  lua_setiuservalue(L, 2, UV_LOG);
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, ctx_progress, 1);
  lua_setiuservalue(L, 2, UV_PROGRESS);
  lua_setfield(L, 3, "name");
  lua_getfield(L, 1, "description");
  if (lua_type(L, -1) != LUA_TSTRING || lua_rawlen(L, -1) == 0)
    return luaL_error(L, "clank.defineAction: 'description' must be a non-empty string");
  lua_setfield(L, 3, "description");

  lua_getfield(L, 1, "input");
  a->input = clank_schema_node(L, -1);
  if (a->input == NULL) return luaL_error(L, "clank.defineAction: 'input' must be a schema");
  lua_setfield(L, 3, "input");
  lua_getfield(L, 1, "output");
  if (!lua_isnil(L, -1)) {
    a->output = clank_schema_node(L, -1);
    if (a->output == NULL) return luaL_error(L, "clank.defineAction: 'output' must be a schema");
  }
  lua_setfield(L, 3, "output");

  lua_getfield(L, 1, "sideEffects");
  a->side = lua_isnil(L, -1) ? SIDE_WRITE : option_index(L, -1, side_names, "sideEffects");
  lua_pop(L, 1);
  lua_getfield(L, 1, "confirmation");
  a->confirmation = lua_isnil(L, -1)
                        ? (a->side == SIDE_DESTRUCTIVE ? CONFIRM_ALWAYS : CONFIRM_WRITE)
                        : option_index(L, -1, confirm_names, "confirmation");
  lua_pop(L, 1);
  /* confirm: what a person is asked before a call that needs confirmation
     (issue 34), a text or confirm(input) → text; default the description */
  lua_getfield(L, 1, "confirm");
  if (!lua_isnil(L, -1) && !lua_isfunction(L, -1) &&
      (lua_type(L, -1) != LUA_TSTRING || lua_rawlen(L, -1) == 0))
    return luaL_error(L, "clank.defineAction: 'confirm' must be a non-empty string or a function");
  lua_setfield(L, 3, "confirm");

  lua_getfield(L, 1, "authorize");
  if (!lua_isnil(L, -1) && !lua_isfunction(L, -1))
    return luaL_error(L, "clank.defineAction: 'authorize' must be a function");
  a->has_authorize = !lua_isnil(L, -1);
  lua_setfield(L, 3, "authorize");
  lua_getfield(L, 1, "publishes");
  if (lua_istable(L, -1)) { /* a list of topics, each checked now */
    lua_getglobal(L, "require");
    lua_pushliteral(L, "clank.pubsub");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "checkTopics");
    lua_pushvalue(L, -3);
    lua_call(L, 1, 0);
    lua_pop(L, 1);
  } else if (!lua_isnil(L, -1) && !lua_isfunction(L, -1)) {
    return luaL_error(L, "clank.defineAction: 'publishes' must be a list of topics or a function");
  }
  a->has_publishes = !lua_isnil(L, -1);
  lua_setfield(L, 3, "publishes");
  read_auth(L, a, 3);
  lua_getfield(L, 1, "handler");
  if (!lua_isfunction(L, -1))
    return luaL_error(L, "clank.defineAction: 'handler' must be a function");
  lua_pushvalue(L, -1);
  lua_setiuservalue(L, 2, UV_HANDLER);
  lua_Debug ar;
  lua_pushvalue(L, -1);
  lua_getinfo(L, ">u", &ar); /* a C function is a vararg one */
  a->takes_ctx = ar.isvararg || ar.nparams >= 2;
  lua_setfield(L, 3, "handler");

  /* manifest = { name, description, inputSchema, outputSchema?, sideEffects, confirmation, auth? }
   */
  lua_createtable(L, 0, 7);
  lua_getfield(L, 3, "name");
  lua_setfield(L, -2, "name");
  lua_getfield(L, 3, "description");
  lua_setfield(L, -2, "description");
  lua_getfield(L, 3, "input");
  push_json_schema(L, lua_gettop(L));
  lua_setfield(L, -3, "inputSchema");
  lua_pop(L, 1);
  if (a->output) {
    lua_getfield(L, 3, "output");
    push_json_schema(L, lua_gettop(L));
    lua_setfield(L, -3, "outputSchema");
    lua_pop(L, 1);
  }
  lua_pushstring(L, side_names[a->side]);
  lua_setfield(L, -2, "sideEffects");
  lua_pushstring(L, confirm_names[a->confirmation]);
  lua_setfield(L, -2, "confirmation");
  if (a->auth) { /* only when declared: an app with accounts gives the others theirs (bridge.c) */
    lua_getfield(L, 3, "auth");
    lua_setfield(L, -2, "auth");
  }
  lua_setfield(L, 3, "manifest");

  lua_setiuservalue(L, 2, 1);
  luaL_setmetatable(L, CLANK_ACTION_MT);
  return 1;
}

/* ---- ctx.log and ctx.progress outside MCP (SPEC §6: both go to the log) ----

   Over MCP, clank.mcp.notify puts its own on the ctx first; everywhere else
   (the bridge's HTTP calls, bridge:invoke, a direct action(input, ctx) call)
   the pipeline gives these. The checks match clank.mcp.notify's, so a bad
   call raises at the call site whichever way the action was called. */

static const char *const rfc5424[] = {"debug",    "info",  "notice",    "warning", "error",
                                      "critical", "alert", "emergency", NULL};
/* each RFC 5424 level as the logger's (debug info warn error) */
static const char *const log_as[] = {"debug", "info",  "info",  "warn",
                                     "error", "error", "error", "error"};

static int rfc5424_level(lua_State *L, int arg) {
  const char *v = lua_type(L, arg) == LUA_TSTRING ? lua_tostring(L, arg) : NULL;
  for (int i = 0; v && rfc5424[i]; i++)
    if (strcmp(v, rfc5424[i]) == 0) return i;
  return luaL_error(L,
                    "ctx.log: level must be one of debug, info, notice, warning, error, critical, "
                    "alert, emergency (got %s)",
                    luaL_tolstring(L, arg, NULL));
}

static void check_optional_string(lua_State *L, int arg, const char *what) {
  if (!lua_isnoneornil(L, arg) && lua_type(L, arg) != LUA_TSTRING)
    luaL_error(L, "%s: message must be a string", what);
}

static void check_finite(lua_State *L, int arg, const char *what) {
  lua_Number x = lua_type(L, arg) == LUA_TNUMBER ? lua_tonumber(L, arg) : NAN;
  if (!(x == x && x != HUGE_VAL && x != -HUGE_VAL))
    luaL_error(L, "ctx.progress: %s must be a finite number (got %s)", what, luaL_typename(L, arg));
}

/* ctx.log(level, message?, data?): one line at the level mapped onto the
   logger's, naming the action (upvalue 1), the data as JSON after the
   message. */
static int ctx_log(lua_State *L) {
  lua_settop(L, 3);
  int level = rfc5424_level(L, 1);
  check_optional_string(L, 2, "ctx.log");
  const char *action = lua_tostring(L, lua_upvalueindex(1));
  const char *message = lua_isnil(L, 2) ? "" : lua_tostring(L, 2);
  if (lua_isnil(L, 3)) {
    clank_sched_log(L, log_as[level], "action %s: %s", action, message);
    return 0;
  }
  lua_getglobal(L, "require");
  lua_pushliteral(L, "clank.json");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "encode");
  lua_pushvalue(L, 3);
  lua_call(L, 1, 1);
  clank_sched_log(L, log_as[level], "action %s: %s%s%s", action, message, *message ? " " : "",
                  lua_tostring(L, -1));
  return 0;
}

/* ctx.progress(done, total?, message?): an info line, as ctx.log("info", ...) writes (a debug
   one would be dropped unless CLANK_DEBUG is set, and SPEC §6 says it goes to the log). */
static int ctx_progress(lua_State *L) {
  lua_settop(L, 3);
  check_finite(L, 1, "done");
  if (!lua_isnil(L, 2)) check_finite(L, 2, "total");
  check_optional_string(L, 3, "ctx.progress");
  const char *done = luaL_tolstring(L, 1, NULL);
  const char *total = lua_isnil(L, 2) ? "?" : luaL_tolstring(L, 2, NULL);
  clank_sched_log(L, "info", "action %s: progress %s/%s%s%s", lua_tostring(L, lua_upvalueindex(1)),
                  done, total, lua_isnil(L, 3) ? "" : " ",
                  lua_isnil(L, 3) ? "" : lua_tostring(L, 3));
  return 0;
}

/* ctx.log and ctx.progress, when the table ctx at ctx lacks them (read
   through its __index, if any), become the action's own, made with it. */
void clank_action_give_log(lua_State *L, int action, int ctx) {
  static const char *const fields[] = {"log", "progress"};
  static const int slots[] = {UV_LOG, UV_PROGRESS};
  action = lua_absindex(L, action);
  ctx = lua_absindex(L, ctx);
  if (!lua_istable(L, ctx)) return;
  for (int i = 0; i < 2; i++) {
    lua_pushstring(L, fields[i]);
    lua_pushvalue(L, -1);
    int absent = lua_gettable(L, ctx) == LUA_TNIL;
    lua_pop(L, 1);
    if (!absent) {
      lua_pop(L, 1);
      continue;
    }
    lua_getiuservalue(L, action, slots[i]);
    lua_rawset(L, ctx); /* raw: a ctx with a __newindex still gets it */
  }
}

int clank_action_give_log_field(lua_State *L, int action, const char *key, size_t len) {
  int slot = len == 3 && memcmp(key, "log", 3) == 0        ? UV_LOG
             : len == 8 && memcmp(key, "progress", 8) == 0 ? UV_PROGRESS
                                                           : 0;
  if (slot == 0) return 0;
  lua_getiuservalue(L, action, slot);
  return 1;
}

/* ---- the pipeline ---- */

enum { STEP_START, STEP_AUTHORIZED, STEP_HANDLED, STEP_VALIDATED, STEP_MASK = 7 };
/* A flag beside the step: the caller checks the output (the bridge). */
#define OUTPUT_UNCHECKED 8

/* Logs that the action at action failed, and why; pushes the ActionError
   ACTION_FAILED 500 the pipeline raises for it. */
static void push_failed(lua_State *L, int action, const char *why) {
  lua_getiuservalue(L, action, 1);
  lua_getfield(L, -1, "name");
  clank_sched_log(L, "error", "action %s failed: %s", lua_tostring(L, -1), why);
  clank_action_error_push(L, "ACTION_FAILED", "The action failed.", 500);
}

static int fail_action(lua_State *L, const char *why) {
  push_failed(L, 1, why);
  return lua_error(L);
}

/* The output at idx checked against the output schema of the action at 1:
   returns 1 when it is valid, else logs why and raises ACTION_FAILED. */
static int check_output(lua_State *L, const clank_action_t *a, int idx) {
  if (a->output == NULL) return 1;
  clank_rows_settle(L, a->output, idx); /* a query's rows (db:queryAs) as the list Lua sees */
  if (!clank_schema_validate(L, a->output, idx)) {
    lua_getfield(L, -1, "issues");
    clank_schema_push_message(L, lua_gettop(L), 0);
    return fail_action(L, lua_pushfstring(L, "its output does not match the output schema: %s",
                                          lua_tostring(L, -1)));
  }
  return 1;
}

int clank_action_check_output(lua_State *L) {
  const clank_action_t *a = check_action(L, 1);
  lua_settop(L, 2);
  return check_output(L, a, 2);
}

/* [action, input, output, ctx] → pubsub.publishAction(publishes, input, output, ctx). */
static int publish_call(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "clank.pubsub");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "publishAction");
  lua_getiuservalue(L, 1, UV_VALUES);
  lua_getfield(L, -1, "publishes");
  lua_remove(L, -2);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 4);
  lua_call(L, 4, 0);
  return 0;
}

/* After a successful call (the output on top; the input at 2, ctx at 3):
   the action's topics are published (issue 28), on every transport, since
   every call of an action with publishes runs this pipeline. A failure
   there is logged; the call still succeeds. */
static void publish_after(lua_State *L, const clank_action_t *a) {
  if (!a->has_publishes) return;
  int output = lua_gettop(L);
  lua_pushcfunction(L, publish_call);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, output);
  lua_pushvalue(L, 3);
  if (clank_pcall(L, 4, 0) != LUA_OK) {
    clank_action_push_name(L, 1);
    clank_sched_log(L, "error", "action %s: publishing failed: %s", lua_tostring(L, -1),
                    clank_error_text(L, -2));
    lua_pop(L, 2);
  }
}

static int pipeline_k(lua_State *L, int status, lua_KContext ctx) {
  clank_action_t *a = lua_touserdata(L, 1);
  lua_KContext unchecked = ctx & OUTPUT_UNCHECKED, step = ctx & STEP_MASK;
  switch (step) {
    case STEP_START:
    case STEP_VALIDATED:
      /* outside MCP ctx.log and ctx.progress go to the log (SPEC §6): a
         ctx without them gets them, and no ctx at all gets one */
      if (lua_isnil(L, 3)) {
        lua_newtable(L);
        lua_replace(L, 3);
      }
      if (step == STEP_START) clank_action_give_log(L, 1, 3); /* the bridge gave them */
      if (step == STEP_START && !clank_schema_validate(L, a->input, 2))
        return lua_error(L); /* the input's ValidationError */
      if (a->has_authorize) {
        lua_getiuservalue(L, 1, 1);
        lua_getfield(L, -1, "authorize");
        lua_remove(L, -2);
        lua_pushvalue(L, 2);
        lua_pushvalue(L, 3);
        lua_callk(L, 2, 1, STEP_AUTHORIZED | unchecked, pipeline_k);
      } else {
        lua_pushboolean(L, 1);
      }
      /* fallthrough */
    case STEP_AUTHORIZED:
      if (!lua_toboolean(L, -1)) {
        clank_action_error_push(L, "FORBIDDEN", "Action is not authorized.", 403);
        return lua_error(L);
      }
      lua_pop(L, 1);
      /* 4: the one message handler: the error stays as it is, its traceback
         is kept for the log (clank_error_text) */
      lua_pushcfunction(L, clank_traceback_handler);
      lua_getiuservalue(L, 1, UV_HANDLER);
      lua_pushvalue(L, 2);
      lua_pushvalue(L, 3);
      status = lua_pcallk(L, 2, 1, 4, STEP_HANDLED | unchecked, pipeline_k);
      /* fallthrough */
    default: break;
  }
  /* STEP_HANDLED: the handler's result, or its error, is on top. */
  if (status != LUA_OK && status != LUA_YIELD) {
    clank_action_handler_failed(L, 1);
    return lua_error(L);
  }
  /* Left to the bridge, unless it stopped waiting (the action timed out
     while it waited): then checked here as before, its failure logged. */
  if (unchecked && step != STEP_VALIDATED && !clank_task_awaited(clank_task_of(L))) unchecked = 0;
  if (!unchecked) check_output(L, a, lua_gettop(L));
  publish_after(L, a);
  return 1;
}

void clank_action_handler_failed(lua_State *L, int action) {
  if (!clank_has_metatable(L, -1, "clank.ValidationError")) return;
  /* A handler's own ValidationError is a server fault, not bad input. */
  action = lua_absindex(L, action);
  int error = lua_gettop(L);
  lua_getfield(L, error, "issues");
  clank_schema_push_message(L, lua_gettop(L), 0);
  push_failed(L, action,
              lua_pushfstring(L, "the handler raised a ValidationError: %s", lua_tostring(L, -1)));
  lua_replace(L, error);
  lua_settop(L, error);
}

int clank_action_direct(lua_State *L, int action) {
  const clank_action_t *a = lua_touserdata(L, action);
  if (a->has_authorize || a->has_publishes) return 0; /* the pipeline runs those */
  return a->takes_ctx ? CLANK_DIRECT_CTX : CLANK_DIRECT_INPUT;
}

void clank_action_push_handler(lua_State *L, int action) {
  action = lua_absindex(L, action);
  lua_pushcfunction(L, clank_traceback_handler);
  lua_getiuservalue(L, action, UV_HANDLER);
}

int clank_action_push_held(lua_State *L, int action) {
  return lua_getiuservalue(L, action, UV_HELD);
}

void clank_action_set_held(lua_State *L, int action) { lua_setiuservalue(L, action, UV_HELD); }

int clank_action_pipeline(lua_State *L) {
  check_action(L, 1);
  lua_settop(L, 3);
  return pipeline_k(L, LUA_OK, STEP_START);
}

int clank_action_pipeline_validated(lua_State *L) {
  check_action(L, 1);
  lua_settop(L, 3);
  return pipeline_k(L, LUA_OK, STEP_VALIDATED | OUTPUT_UNCHECKED);
}

const clank_schema_node_t *clank_action_input(const clank_action_t *a) { return a->input; }

const clank_schema_node_t *clank_action_output(const clank_action_t *a) { return a->output; }

/* action(input, ctx): inside a task the pipeline runs right here (it may
   wait); elsewhere it runs in a task of its own and the loop runs until it
   ends. */
static int action_call(lua_State *L) {
  check_action(L, 1);
  lua_settop(L, 3);
  if (clank_in_task(L)) return clank_action_pipeline(L);
  lua_pushcfunction(L, clank_action_pipeline);
  lua_insert(L, 1);
  return clank_sched_call(L, 3);
}

/* action:confirmText(input) → the text a person confirms a call with: the
   action's confirm (a text, or confirm(input), which must return one), else
   its description. input is the call's valid input. */
static int confirm_text_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  if (lua_type(L, -1) != LUA_TSTRING || lua_rawlen(L, -1) == 0) {
    clank_action_push_name(L, 1);
    return luaL_error(L, "action %s: confirm(input) must return a non-empty string (got %s)",
                      lua_tostring(L, -1), luaL_typename(L, -2));
  }
  return 1;
}

int clank_action_confirm_text(lua_State *L) {
  check_action(L, 1);
  lua_settop(L, 2);
  lua_getiuservalue(L, 1, UV_VALUES);
  if (lua_getfield(L, 3, "confirm") == LUA_TNIL) lua_getfield(L, 3, "description");
  if (!lua_isfunction(L, -1)) return 1;
  lua_pushvalue(L, 2);
  lua_callk(L, 1, 1, 0, confirm_text_k);
  return confirm_text_k(L, LUA_OK, 0);
}

static int action_requires_confirmation(lua_State *L) {
  clank_action_t *a = check_action(L, 1);
  lua_pushboolean(L, clank_action_requires_confirmation(a));
  return 1;
}

static int action_index(lua_State *L) {
  clank_action_t *a = check_action(L, 1);
  const char *key = luaL_checkstring(L, 2);
  if (strcmp(key, "requiresConfirmation") == 0) {
    lua_pushcfunction(L, action_requires_confirmation);
  } else if (strcmp(key, "confirmText") == 0) {
    lua_pushcfunction(L, clank_action_confirm_text);
  } else if (strcmp(key, "sideEffects") == 0) {
    lua_pushstring(L, side_names[a->side]);
  } else if (strcmp(key, "confirmation") == 0) {
    lua_pushstring(L, confirm_names[a->confirmation]);
  } else {
    lua_getiuservalue(L, 1, 1);
    lua_getfield(L, -1, key);
  }
  return 1;
}

static int action_tostring(lua_State *L) {
  check_action(L, 1);
  clank_action_push_name(L, 1);
  lua_pushfstring(L, "clank.Action(%s)", lua_tostring(L, -1));
  return 1;
}

static const luaL_Reg action_meta[] = {{"__index", action_index},
                                       {"__call", action_call},
                                       {"__tostring", action_tostring},
                                       {NULL, NULL}};

static const luaL_Reg action_funcs[] = {{"defineAction", l_define_action},
                                        {"ActionError", l_action_error},
                                        {"isActionError", l_is_action_error},
                                        {NULL, NULL}};

int luaopen_clank_action(lua_State *L) {
  luaL_newmetatable(L, CLANK_ACTION_MT);
  luaL_setfuncs(L, action_meta, 0);
  lua_pop(L, 1);
  clank_action_error_metatable(L);
  lua_pop(L, 1);
  luaL_newlib(L, action_funcs);
  return 1;
}
