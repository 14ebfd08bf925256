/* clank.action seen from C: the bridge runs actions and builds ActionErrors. */
#ifndef CLANK_ACTION_H
#define CLANK_ACTION_H

#include <lua.h>

#include "core/error.h"
#include "data/schema.h"

#define CLANK_ACTION_MT "clank.Action"

typedef struct clank_action_s clank_action_t;

/* The action at idx, or NULL. */
clank_action_t *clank_action_test(lua_State *L, int idx);
int clank_action_requires_confirmation(const clank_action_t *a);
/* Who may call an action (issue 30): as its `auth` says, or UNSET, when the
   app decides (with accounts: a signed-in user). */
enum { CLANK_AUTH_UNSET, CLANK_AUTH_PUBLIC, CLANK_AUTH_USER, CLANK_AUTH_ROLES };
int clank_action_auth(const clank_action_t *a);
/* 1 when its sideEffects are write or destructive. */
int clank_action_writes(const clank_action_t *a);
/* 1 when the running coroutine serves a live view's event (a ctx bound with
   clank.runner.bindRequest) that the person did not confirm (runner.c). */
int clank_bound_request_unconfirmed(lua_State *L);
/* The same, when the request was bound with a way to ask the person
   (bindRequest's ask): pushes ask and returns 1; else pushes nothing, 0. */
int clank_bound_request_ask(lua_State *L);
/* action:confirmText(input) as a lua_CFunction over [action, input]: the
   text a person confirms a call with (its confirm, else its description);
   raises when confirm(input) does. */
int clank_action_confirm_text(lua_State *L);
/* Pushes the action's name. */
void clank_action_push_name(lua_State *L, int idx);
/* Registry key of count(name, ok), clank-run's counter of action calls
   (SPEC §15, clank_action_calls_total); absent elsewhere. */
#define CLANK_COUNT_CALL_KEY "clank.count_call"
/* Counts one call of the action at idx, when clank-run counts them. */
void clank_action_count_call(lua_State *L, int idx, int ok);

/* The call pipeline of SPEC §4 as a lua_CFunction over [action, input, ctx]:
   it must run inside a task (it may wait); returns the output. */
int clank_action_pipeline(lua_State *L);
/* The same, for an input already found valid against the action's input
   schema (clank_action_input) and a ctx that has its log and progress
   (clank_action_give_log, or served as the bridge does), as the bridge does: the pipeline from
   authorize on, without the output's check, which the caller makes: clank_schema_encode
   (json.h) validates as it writes, and where it stops, clank_action_check_output. */
int clank_action_pipeline_validated(lua_State *L);
/* Whether the bridge's inline run of an input it validated may call the
   handler of the action at action itself (as clank_action_pipeline_validated,
   without its frame): 0 when it has an authorize (the pipeline runs it);
   CLANK_DIRECT_CTX for handler(input, ctx); CLANK_DIRECT_INPUT when the
   handler has one parameter or none, so that it can never see a ctx. */
enum { CLANK_DIRECT_CTX = 1, CLANK_DIRECT_INPUT };
int clank_action_direct(lua_State *L, int action);
/* Pushes the pipeline's message handler and the action's handler. */
void clank_action_push_handler(lua_State *L, int action);
/* With the error of such a handler on top: replaced as the pipeline replaces
   it (a ValidationError is logged and becomes ACTION_FAILED 500). */
void clank_action_handler_failed(lua_State *L, int action);
/* A slot of the action for its caller's own value (the bridge: the
   metatable of its ctxs): pushes it and returns its type; set pops it. */
int clank_action_push_held(lua_State *L, int action);
void clank_action_set_held(lua_State *L, int action);
/* The pipeline's last step as a lua_CFunction over [action, output]: returns
   the output when it matches the output schema (or there is none), else
   logs why and raises ActionError ACTION_FAILED 500, as the pipeline does. */
int clank_action_check_output(lua_State *L);
/* The action's input schema. */
const clank_schema_node_t *clank_action_input(const clank_action_t *a);
/* Its output schema, NULL when it has none. */
const clank_schema_node_t *clank_action_output(const clank_action_t *a);

/* Gives the table ctx at ctx, when it lacks them, the ctx.log and
   ctx.progress that write to the log (SPEC §6 outside MCP), naming the
   action at action. */
void clank_action_give_log(lua_State *L, int action, int ctx);
/* For a ctx that serves them through its __index (the bridge's): pushes the
   action's function for key ("log" or "progress", len bytes) and returns 1,
   else returns 0 and pushes nothing. */
int clank_action_give_log_field(lua_State *L, int action, const char *key, size_t len);

int luaopen_clank_action(lua_State *L);

#endif
