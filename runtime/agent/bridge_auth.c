/* Who may call an action (issue 30), checked by the run once the context
   is known, before confirmation and the input: an action's `auth` (or, in
   a bridge made for an app with accounts, "user" when it says nothing)
   against the context's `user` ({ id, roles }) and `credential` (a token's
   { scope = "read" } may call only actions that do not write). Also the
   confirmation those actions had put off (bridge_checks.c: the header pass
   cannot tell a person who did not confirm from one not signed in), and
   bridge:allows, the same check for clank.mcp. Owns nothing. */
#include <string.h>

#include "agent/action.h"
#include "agent/bridge_internal.h"

int clank_bridge_needs_user(const clank_bridge_rules_t *r, const clank_action_t *a) {
  int auth = clank_action_auth(a);
  return auth == CLANK_AUTH_USER || auth == CLANK_AUTH_ROLES ||
         (auth == CLANK_AUTH_UNSET && r->auth);
}

/* 1 when the string at idx is in the list at list. */
static int listed(lua_State *L, int list, int idx) {
  lua_Integer n = luaL_len(L, list);
  for (lua_Integer i = 1; i <= n; i++) {
    int found = lua_rawgeti(L, list, i) == LUA_TSTRING && lua_rawequal(L, -1, idx);
    lua_pop(L, 1);
    if (found) return 1;
  }
  return 0;
}

/* 1 when the user at user holds one of the roles the action at action names. */
static int has_role(lua_State *L, int action, int user) {
  int top = lua_gettop(L);
  int ok = 0;
  if (lua_getfield(L, user, "roles") == LUA_TTABLE) {
    int mine = lua_gettop(L);
    lua_getiuservalue(L, action, 1);
    lua_getfield(L, -1, "auth");
    lua_getfield(L, -1, "roles");
    int wanted = lua_gettop(L);
    lua_Integer n = luaL_len(L, wanted);
    for (lua_Integer i = 1; i <= n && !ok; i++) {
      lua_rawgeti(L, wanted, i);
      ok = listed(L, mine, lua_gettop(L));
      lua_pop(L, 1);
    }
  }
  lua_settop(L, top);
  return ok;
}

clank_bridge_step_t clank_bridge_user_step(lua_State *L, const bridge_t *b, int action, int context,
                                           int unconfirmed) {
  const clank_action_t *a = lua_touserdata(L, action);
  if (!clank_bridge_needs_user(&b->rules, a)) return CLANK_BRIDGE_PASS;
  int top = lua_gettop(L);
  clank_bridge_step_t step = CLANK_BRIDGE_PASS;
  if (!lua_istable(L, context) || lua_getfield(L, context, "user") == LUA_TNIL ||
      !lua_toboolean(L, -1)) {
    step = CLANK_BRIDGE_UNAUTHORIZED;
  } else if (clank_action_auth(a) == CLANK_AUTH_ROLES &&
             (!lua_istable(L, -1) || !has_role(L, action, lua_gettop(L)))) {
    step = CLANK_BRIDGE_FORBIDDEN;
  } else if (clank_action_writes(a) && lua_getfield(L, context, "credential") == LUA_TTABLE &&
             lua_getfield(L, -1, "scope") == LUA_TSTRING &&
             strcmp(lua_tostring(L, -1), "read") == 0) {
    step = CLANK_BRIDGE_READ_ONLY;
  } else if (unconfirmed && clank_action_requires_confirmation(a)) {
    step = CLANK_BRIDGE_CONFIRM;
  }
  lua_settop(L, top);
  return step;
}

int clank_bridge_refuse_user(lua_State *L, bridge_t *b, const answer_t *a,
                             clank_bridge_step_t step) {
  if (step != CLANK_BRIDGE_UNAUTHORIZED) return clank_bridge_refuse(L, b, a, step);
  /* the one bridge answer with a header of its own: as a response table */
  answer_t t = *a;
  t.out = NULL;
  clank_bridge_refuse(L, b, &t, step);
  lua_getfield(L, -1, "headers");
  lua_getiuservalue(L, 1, UV_REALM);
  lua_setfield(L, -2, "www-authenticate");
  lua_pop(L, 1);
  if (a->out) a->out->status = 0; /* the table on top is the answer */
  return 1;
}

/* bridge:allows(action, context, confirmed?) → true, or false, status,
   code, message: the run's check, for callers that run actions themselves
   (clank.mcp), given the context value the app's context returned. */
static int l_allows(lua_State *L) {
  bridge_t *b = check_bridge(L, 1);
  if (clank_action_test(L, 2) == NULL) return luaL_argerror(L, 2, "expected an action");
  clank_bridge_step_t step = clank_bridge_user_step(L, b, 2, 3, !lua_toboolean(L, 4));
  if (step == CLANK_BRIDGE_PASS) {
    lua_pushboolean(L, 1);
    return 1;
  }
  const clank_bridge_refusal_t *r = clank_bridge_refusal(step);
  lua_pushboolean(L, 0);
  lua_pushinteger(L, r->status);
  lua_pushstring(L, r->code);
  lua_pushstring(L, r->message);
  return 4;
}

const luaL_Reg clank_bridge_auth_methods[] = {{"allows", l_allows}, {NULL, NULL}};
