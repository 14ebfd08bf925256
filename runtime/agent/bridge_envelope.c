/* The bridge's failures (SPEC §5): the one writer of the failure envelope
   {"error":{"code","message","details"?},"ok":false} (bridge_envelope.h, for
   the host too), the answers of the steps that refuse a request, and step
   9: what an error becomes (the input's ValidationError, an ActionError,
   anything else) — for handle() and for clank.mcp (errorEnvelope). Owns
   nothing: bodies are written in the bridge's scratch buffer or the
   caller's. */
#include "agent/bridge_envelope.h"

#include <stdio.h>

#include "agent/action.h"
#include "agent/bridge_internal.h"
#include "core/error.h"
#include "core/protect.h"
#include "data/json.h"
#include "data/schema.h"

/* ---- the envelope, in C ---- */

int clank_bridge_envelope(clank_buf_t *out, const char *code, const char *message) {
  size_t was = out->len;
  int r = clank_buf_appends(out, "{\"error\":{\"code\":\"");
  if (r == 0) r = clank_json_escape(out, code, strlen(code));
  if (r == 0) r = clank_buf_appends(out, "\",\"message\":\"");
  if (r == 0) r = clank_json_escape(out, message, strlen(message));
  if (r == 0) r = clank_buf_appends(out, "\"}" CLANK_BRIDGE_ENVELOPE_CLOSE);
  if (r != 0) out->len = was;
  return r;
}

int clank_bridge_envelope_too_large(clank_buf_t *out, long long max_bytes) {
  const clank_bridge_refusal_t *r = clank_bridge_refusal(CLANK_BRIDGE_TOO_LARGE);
  char message[64];
  snprintf(message, sizeof message, r->message, max_bytes);
  return clank_bridge_envelope(out, r->code, message);
}

const char clank_bridge_timeout_body[] =
    "{\"error\":{\"code\":\"TIMEOUT\",\"message\":\"The action timed out.\"},\"ok\":false}";
const size_t clank_bridge_timeout_len = sizeof clank_bridge_timeout_body - 1;

/* ---- the answers of steps 2–7 ---- */

int clank_bridge_refuse(lua_State *L, bridge_t *b, const answer_t *a, clank_bridge_step_t step) {
  const clank_bridge_refusal_t *r = clank_bridge_refusal(step);
  clank_buf_reset(&b->scratch);
  /* the codes and messages are ASCII: the writer fails only out of memory */
  int failed = step == CLANK_BRIDGE_TOO_LARGE
                   ? clank_bridge_envelope_too_large(&b->scratch, b->rules.max_bytes)
                   : clank_bridge_envelope(&b->scratch, r->code, r->message);
  if (failed) luaL_error(L, "not enough memory");
  push_response(L, a, r->status, "no-store", b->scratch.data, b->scratch.len);
  return 1;
}

int clank_bridge_send_failure(lua_State *L, bridge_t *b, const answer_t *a, int status) {
  lua_createtable(L, 0, 2);
  lua_insert(L, -2);
  lua_setfield(L, -2, "error");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "ok");
  clank_buf_reset(&b->scratch);
  clank_json_encode(L, lua_gettop(L), 0, &b->scratch);
  lua_pop(L, 1);
  push_response(L, a, status, "no-store", b->scratch.data, b->scratch.len);
  return 1;
}

/* ---- step 9: errors ---- */

/* The input's issues as {path (0-based), message, expected?}, for details. */
static void push_issue_details(lua_State *L, int issues) {
  lua_Integer n = luaL_len(L, issues);
  lua_createtable(L, (int)n, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, issues, i);
    int issue = lua_gettop(L);
    lua_createtable(L, 0, 3);
    lua_getfield(L, issue, "path");
    lua_Integer pn = lua_istable(L, -1) ? luaL_len(L, -1) : 0;
    lua_createtable(L, (int)pn, 0);
    for (lua_Integer k = 1; k <= pn; k++) {
      lua_rawgeti(L, -2, k);
      if (lua_isinteger(L, -1)) {
        lua_Integer v = lua_tointeger(L, -1);
        lua_pop(L, 1);
        lua_pushinteger(L, v - 1);
      }
      lua_rawseti(L, -2, k);
    }
    clank_mark_array(L, -1);
    lua_setfield(L, -3, "path");
    lua_pop(L, 1);
    lua_getfield(L, issue, "message");
    lua_setfield(L, -2, "message");
    lua_getfield(L, issue, "expected");
    lua_setfield(L, -2, "expected");
    lua_rawseti(L, -3, i);
    lua_pop(L, 1);
  }
  clank_mark_array(L, -1);
}

/* Pushes the issues at idx with the key at prefix put before every path
   (MCP's wrapped inputs keep their `value` key). */
static void push_prefixed_issues(lua_State *L, int issues, int prefix) {
  lua_Integer n = luaL_len(L, issues);
  lua_createtable(L, (int)n, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, issues, i);
    lua_createtable(L, 0, 3);
    lua_getfield(L, -2, "message");
    lua_setfield(L, -2, "message");
    lua_getfield(L, -2, "expected");
    lua_setfield(L, -2, "expected");
    lua_getfield(L, -2, "path");
    lua_Integer pn = lua_istable(L, -1) ? luaL_len(L, -1) : 0;
    lua_createtable(L, (int)pn + 1, 0);
    lua_pushvalue(L, prefix);
    lua_rawseti(L, -2, 1);
    for (lua_Integer k = 1; k <= pn; k++) {
      lua_rawgeti(L, -2, k);
      lua_rawseti(L, -2, k + 1);
    }
    lua_setfield(L, -3, "path");
    lua_pop(L, 1);
    lua_rawseti(L, -3, i);
    lua_pop(L, 1);
  }
}

/* The input's ValidationError → 422 INVALID_INPUT (0-based paths, after the
   key at prefix unless prefix is 0); an ActionError → its own; anything
   else → 500 ACTION_FAILED, its message only when expose. The text to log
   comes with the traceback the protected call kept. */
int clank_bridge_push_error_object(lua_State *L, int idx, int expose, int prefix) {
  idx = lua_absindex(L, idx);
  lua_createtable(L, 0, 3);
  int obj = lua_gettop(L);
  if (clank_has_metatable(L, idx, "clank.ValidationError")) {
    lua_getfield(L, idx, "issues");
    if (prefix) {
      push_prefixed_issues(L, lua_gettop(L), prefix);
      lua_remove(L, -2);
    }
    int issues = lua_gettop(L);
    lua_pushliteral(L, "INVALID_INPUT");
    lua_setfield(L, obj, "code");
    clank_schema_push_message(L, issues, 1);
    lua_setfield(L, obj, "message");
    push_issue_details(L, issues);
    lua_setfield(L, obj, "details");
    lua_pop(L, 1);
    lua_pushnil(L);
    return 422;
  }
  if (clank_action_error_is(L, idx)) {
    lua_getfield(L, idx, "status");
    int status = (int)lua_tointeger(L, -1);
    if (status < 400 || status > 599) status = 500;
    lua_pop(L, 1);
    lua_getfield(L, idx, "code");
    if (!lua_isstring(L, -1)) {
      lua_pop(L, 1);
      lua_pushliteral(L, "ACTION_FAILED");
    }
    lua_setfield(L, obj, "code");
    lua_getfield(L, idx, "message");
    if (!lua_isstring(L, -1)) {
      lua_pop(L, 1);
      lua_pushliteral(L, "");
    }
    lua_setfield(L, obj, "message");
    lua_getfield(L, idx, "details");
    lua_setfield(L, obj, "details");
    lua_pushnil(L);
    return status;
  }
  lua_pushliteral(L, "ACTION_FAILED");
  lua_setfield(L, obj, "code");
  if (expose)
    clank_error_message(L, idx);
  else
    lua_pushliteral(L, "The action failed.");
  lua_setfield(L, obj, "message");
  clank_error_text(L, idx);
  return 500;
}

int clank_bridge_answer_error(lua_State *L, bridge_t *b, const answer_t *a, int idx) {
  int status = clank_bridge_push_error_object(L, idx, b->expose_errors, 0);
  if (!lua_isnil(L, -1)) clank_sched_log(L, "error", "action failed: %s", lua_tostring(L, -1));
  lua_pop(L, 1);
  return clank_bridge_send_failure(L, b, a, status);
}

/* bridge.errorEnvelope(err, { exposeErrors, pathPrefix }) → { status, code,
   message, details? }, and the text to log (with its traceback) when err is
   unexpected (step 9). pathPrefix is put before every issue path. */
static int l_error_envelope(lua_State *L) {
  lua_settop(L, 2);
  int expose = 0, prefix = 0;
  if (!lua_isnil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_getfield(L, 2, "exposeErrors"); /* 3 */
    expose = lua_toboolean(L, 3);
    if (lua_getfield(L, 2, "pathPrefix") != LUA_TNIL) prefix = 4; /* 4 */
  }
  int status = clank_bridge_push_error_object(L, 1, expose, prefix);
  lua_pushinteger(L, status);
  lua_setfield(L, -3, "status");
  return 2;
}

const luaL_Reg clank_bridge_envelope_funcs[] = {{"errorEnvelope", l_error_envelope}, {NULL, NULL}};
