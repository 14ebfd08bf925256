/* clank.bridge seen from C: clank-run answers early (before the body) and
   runs the rest of handle() in a request's task. */
#ifndef CLANK_BRIDGE_H
#define CLANK_BRIDGE_H

#include <lua.h>

#include "agent/bridge_checks.h"
#include "core/scheduler.h"

#define CLANK_BRIDGE_MT "clank.Bridge"
/* actionTimeout when the app gives none (ms); Lua sees it as
   clank.bridge.DEFAULT_ACTION_TIMEOUT. */
#define CLANK_BRIDGE_DEFAULT_ACTION_TIMEOUT 30000
/* maxRequestBytes when an app gives none (SPEC §5), also
   clank.bridge.DEFAULT_MAX_REQUEST_BYTES (the live surface's bodies). */
#define CLANK_BRIDGE_DEFAULT_MAX_BYTES 65536

/* clank_bridge_view_t (the request as steps 1–7 read it) and
   clank_bridge_reserved_path (SPEC §2): bridge_checks.h. */

/* [bridge, request] → the early answer (a response table) or nil when the
   body is needed. Runs steps 1–7 as far as they go without the body. Never
   waits. */
int clank_bridge_head(lua_State *L);
/* [bridge, view (light userdata, a clank_bridge_view_t)] → the same as
   clank_bridge_head, read from the view. */
int clank_bridge_head_view(lua_State *L);
/* Non-NULL (the action's entry, for the view's `passed`) when steps 1–7
   surely let the request v through to its body, found without Lua (no call,
   no allocation) for the bridge at idx; NULL when clank_bridge_head_view is
   to say (an answer, or a foreign origin). */
const void *clank_bridge_head_passes(lua_State *L, int idx, const clank_bridge_view_t *v);
/* [bridge, request, context source] → the response table; the context
   source is a table, a function(request) run only when an action runs, or
   nil. Must run in a task. */
int clank_bridge_handle_task(lua_State *L);
/* An answer of handle's given as C values instead of a response table:
   status (0: a response table was returned instead), cache-control (or
   NULL), access-control-allow-origin with vary: Origin (or NULL), and a
   JSON body (content-type: application/json unless empty), whose bytes stay
   valid until the bridge answers again. */
typedef struct clank_bridge_answer_s {
  int status;
  const char *cache;
  const char *cors_origin;
  size_t cors_len;
  const char *body;
  size_t len;
  /* Set by the caller of clank_bridge_handle_view_task, or NULL: called in
     the run, with the answer given (and, when status is 0, the response
     table on top), where the run ends, before or after waits; what it
     returns, the run returns. */
  int (*done)(lua_State *L, struct clank_bridge_answer_s *out);
  /* Set by the caller, or NULL: pushes the request's maker when the request
     argument is nil, called only when Lua may read the request (ctx.request,
     a context function), always before the run's first wait. */
  void (*push_request)(lua_State *L, struct clank_bridge_answer_s *out);
  /* Set by the run: the request did not confirm (for a check made later). */
  int unconfirmed;
} clank_bridge_answer_t;
/* [bridge, request or maker or nil, context source, view, answer (light
   userdata: a clank_bridge_view_t, a clank_bridge_answer_t)]: the same as
   clank_bridge_handle_task, the checks read from the view (with the body),
   which need live only until the first wait; the answer given in *answer
   (which must live until the run ends), or, for the rare answers with more
   headers, as a response table. A maker is a callable giving the request
   table: called only when Lua needs the table (ctx.request, a context
   function); nil: answer->push_request gives the maker when Lua may. */
int clank_bridge_handle_view_task(lua_State *L);
/* Fills out with the action timeout's 504 answer (SPEC §5 step 8), its
   CORS kept: what handle gives when an action it runs inline times out,
   for the driver to write at the deadline. */
void clank_bridge_timeout_answer(clank_bridge_answer_t *out);
/* [bridge, error, answer (light userdata: a clank_bridge_answer_t, CORS
   filled)] → the text to log, or nil: fills the answer with what handle
   gives for an action that failed with that error, for the driver to write
   when an action run inline failed where the run could not catch it (a bare
   coroutine.yield in its handler, or a resume refused over its budget). */
int clank_bridge_failed(lua_State *L);
/* Pushes the manifest's canonical JSON: the bytes GET /manifest serves. */
void clank_bridge_push_manifest(lua_State *L, int idx);
/* Pushes the name → action table, and the contract hash (the etag's 16 hex digits). */
void clank_bridge_push_actions(lua_State *L, int idx);
void clank_bridge_push_contract_hash(lua_State *L, int idx);
/* Pushes run(action, input, ctx): an action run as the bridge runs it (the
   signal, the timeout), giving true, output / false, error / nil, "timeout". */
void clank_bridge_push_runner(lua_State *L, int idx);
/* The bridge's maxRequestBytes. */
long long clank_bridge_max_bytes(lua_State *L, int idx);

/* The held slots of the agent layer (core/scheduler.h). */
enum {
  CLANK_HELD_CTX_META =
      CLANK_HELD_CORE_END, /* bridge_ctx.c: the metatable of its ctxs for no action */
  CLANK_HELD_AGENT_END
};

/* The server's public origin behind a TLS proxy (--public-origin, SPEC
   §13), hung on a state's scheduler by the host: the bridge's origin checks
   and the host's request tables read it. pub must outlive the state; NULL
   takes it down. clank_bridge_public_of: NULL when there is none. */
void clank_bridge_set_public(clank_sched_t *s, const clank_bridge_public_t *pub);
const clank_bridge_public_t *clank_bridge_public_of(clank_sched_t *s);

int luaopen_clank_bridge(lua_State *L);

#endif
