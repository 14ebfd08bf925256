/* What the files of clank.bridge share and no one else sees: the bridge
   userdata, its uservalue slots, an answer in the making, and the helpers of
   the request path, kept static inline here so that splitting bridge.c into
   files of one job each costs the hot path no call:

     bridge.c          the constructor, the manifest, the methods, luaopen
     bridge_checks.c   SPEC §5 steps 1–7 in plain C (bridge_checks.h)
     bridge_request.c  those checks on a request table or view, answered
     bridge_envelope.c the failure envelope, and what an error becomes (step 9)
     bridge_ctx.c      the ctx an action gets, and its lazy metatables
     bridge_run.c      handle(): the continuation-driven run (steps 8, 9) */
#ifndef CLANK_BRIDGE_INTERNAL_H
#define CLANK_BRIDGE_INTERNAL_H

#include <lauxlib.h>
#include <lua.h>

#include "agent/bridge.h"
#include "agent/bridge_checks.h"
#include "core/scheduler.h"
#include "core/values.h"
#include "util/buf.h"

typedef clank_bridge_span_t span_t;
typedef clank_bridge_origin_t origin_t;
typedef clank_bridge_entry_t entry_t;

typedef struct bridge_s {
  const void *tag; /* &clank_bridge_tag: tells a bridge from other userdata without a lookup */
  clank_bridge_rules_t rules; /* index: the UV_INDEX userdata's bytes */
  int expose_errors;
  double timeout_ms;
  clank_buf_t scratch;     /* JSON bodies; encoding never waits, so one suffices */
  const void *valid_input; /* the input table check_body last decoded, known valid */
} bridge_t;

/* Only its address matters: only createAgentBridge writes it in a userdata. */
extern const char clank_bridge_tag;

/* uservalues, each in a slot of its own (no lookup by name per request) */
enum {
  UV_ACTIONS = 1, /* name → action */
  UV_MANIFEST,    /* canonical JSON */
  UV_ETAG,
  UV_ORIGINS, /* origin → true */
  UV_INDEX,   /* the entry_t of every action, sorted */
  UV_LIST,    /* the actions, as the entries' slots say */
  UV_REALM,   /* www-authenticate of a 401: Bearer realm="<name>" */
  UV_COUNT = UV_REALM
};

static inline bridge_t *test_bridge(lua_State *L, int idx) {
  return clank_tagged(L, idx, sizeof(bridge_t), &clank_bridge_tag);
}

static inline bridge_t *check_bridge(lua_State *L, int idx) {
  bridge_t *b = test_bridge(L, idx);
  if (b == NULL) luaL_typeerror(L, idx, CLANK_BRIDGE_MT);
  return b;
}

static inline void push_uv_field(lua_State *L, int idx, int slot) {
  lua_getiuservalue(L, idx, slot);
}

/* ---- answers ---- */

/* What every answer to one request shares: CORS for an allowed foreign origin. */
typedef struct answer_s {
  const char *cors_origin; /* NULL unless the origin is an allowed foreign one */
  size_t cors_len;
  clank_bridge_answer_t *out; /* the answer goes here, not in a response table */
} answer_t;

/* Pushes { status, headers = { ... }, body }; or, for an answer given as C
   values, fills them and pushes nil. */
static inline void push_response(lua_State *L, const answer_t *a, int status, const char *cache,
                                 const char *body, size_t len) {
  if (a->out) {
    *a->out = (clank_bridge_answer_t){
        status, cache,        a->cors_origin,       a->cors_len,        body,
        len,    a->out->done, a->out->push_request, a->out->unconfirmed};
    lua_pushnil(L);
    return;
  }
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, status);
  lua_setfield(L, -2, "status");
  lua_createtable(L, 0, 4);
  if (len > 0) {
    lua_pushliteral(L, "application/json");
    lua_setfield(L, -2, "content-type");
  }
  if (cache) {
    lua_pushstring(L, cache);
    lua_setfield(L, -2, "cache-control");
  }
  if (a->cors_origin) {
    lua_pushlstring(L, a->cors_origin, a->cors_len);
    lua_setfield(L, -2, "access-control-allow-origin");
    lua_pushliteral(L, "Origin");
    lua_setfield(L, -2, "vary");
  }
  lua_setfield(L, -2, "headers");
  lua_pushlstring(L, body, len);
  lua_setfield(L, -2, "body");
}

/* ---- bridge_request.c: steps 1–7 answered ---- */

enum { PHASE_HEAD, PHASE_FULL };
/* Runs the checks of SPEC §5 in order on the request v for the bridge at 1.
   Returns 1 with a response pushed, or 0 with the action pushed (and, in the
   full phase, the decoded input after it). */
int clank_bridge_check_request(lua_State *L, int phase, answer_t *a, const clank_bridge_view_t *v);
/* What the checks read of the request table at req. */
void clank_bridge_view_from_table(lua_State *L, int req, clank_bridge_view_t *v);
/* The CORS of an answer after the checks read again from the request table
   at 2 for the bridge at 1. */
void clank_bridge_table_origin(lua_State *L, answer_t *a);
/* The CORS of an answer after the checks: kept in out, else read again. */
static inline void clank_bridge_answer_origin(lua_State *L, answer_t *a,
                                              const clank_bridge_answer_t *out) {
  if (out == NULL) {
    clank_bridge_table_origin(L, a);
    return;
  }
  a->cors_origin = out->cors_origin;
  a->cors_len = out->cors_len;
}
/* isJsonMediaType, checkOrigin, isReservedPath: the rules for clank.mcp and clank.app. */
extern const luaL_Reg clank_bridge_rule_funcs[];

/* ---- bridge_envelope.c: failures ---- */

/* Pushes the answer of a step's failure (clank_bridge_refusal), no-store. */
int clank_bridge_refuse(lua_State *L, bridge_t *b, const answer_t *a, clank_bridge_step_t step);
/* {"ok":false,"error":<the error object on top, popped>} with no-store. */
int clank_bridge_send_failure(lua_State *L, bridge_t *b, const answer_t *a, int status);
/* Step 9. Pushes the error object {code, message, details?} for the error at
   idx and returns its status; then pushes the text to log for an unexpected
   error, nil for the others (bridge_envelope.c). */
int clank_bridge_push_error_object(lua_State *L, int idx, int expose, int prefix);
/* Step 9: the error at idx becomes an answer; an unexpected one is logged. */
int clank_bridge_answer_error(lua_State *L, bridge_t *b, const answer_t *a, int idx);
/* errorEnvelope. */
extern const luaL_Reg clank_bridge_envelope_funcs[];

/* ---- bridge_auth.c: who may call ---- */

/* 1 when the action needs a signed-in user in this bridge. */
int clank_bridge_needs_user(const clank_bridge_rules_t *r, const struct clank_action_s *a);
/* The check of the action at action against the context value at context
   (a table, or anything else: no user); unconfirmed: the request did not
   confirm, for actions whose confirmation waited for this check. */
clank_bridge_step_t clank_bridge_user_step(lua_State *L, const bridge_t *b, int action, int context,
                                           int unconfirmed);
/* Pushes the answer of such a refusal (a 401 with www-authenticate) for the
   bridge at 1. */
int clank_bridge_refuse_user(lua_State *L, bridge_t *b, const answer_t *a,
                             clank_bridge_step_t step);
/* allows. */
extern const luaL_Reg clank_bridge_auth_methods[];

/* ---- bridge_ctx.c: ctx ---- */

/* Pushes ctx = { <the fields of the context value at src, when a table>...,
   request = <the value at req> } (bridge_ctx.c). */
void clank_bridge_push_ctx(lua_State *L, int src, int req, clank_task_t *t, int action,
                           clank_sched_t *s);
/* context. */
extern const luaL_Reg clank_bridge_ctx_funcs[];

/* The request at idx as a table: a maker (clank-run's, a callable that
   builds the table when asked) is called, and the table put in its place. */
static inline void need_request(lua_State *L, int idx) {
  if (lua_istable(L, idx) || lua_type(L, idx) != LUA_TUSERDATA) return;
  idx = lua_absindex(L, idx);
  lua_pushvalue(L, idx);
  lua_call(L, 0, 1);
  lua_replace(L, idx);
}

/* The request argument at 2 as its maker at least, when its caller gives
   it only on demand (nil there, and out->push_request). */
static inline void need_maker(lua_State *L, clank_bridge_answer_t *out) {
  if (out && out->push_request && lua_isnil(L, 2)) {
    out->push_request(L, out);
    lua_replace(L, 2);
  }
}

#endif
