/* The CSRF rule for the app's routes (SPEC §15): cookie sessions make a
   foreign page's form post look like the user's own. The Origin rules are
   the bridge's (bridge.checkOrigin), their one source. */
#include "host/csrf.h"

#include <lauxlib.h>

#include "host/host.h"
#include "host/lua_request.h"
#include "core/protect.h"

/* [request, app, bridge rules] → bridge.checkOrigin(request, app.allowedOrigins, and with the
   bridge's rules app.bridge.requireOrigin). */
static int origin_allowed(lua_State *L) {
  int bridge_rules = lua_toboolean(L, 3);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "clank.bridge");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "checkOrigin");
  lua_pushvalue(L, 1);
  lua_getfield(L, 2, "allowedOrigins");
  if (bridge_rules && lua_getfield(L, 2, "bridge") == LUA_TTABLE)
    lua_getfield(L, -1, "requireOrigin");
  else
    lua_pushboolean(L, 0);
  if (bridge_rules) lua_remove(L, -2);
  lua_call(L, 3, 1);
  return 1;
}

int clank_origin_allowed(clank_conn_t *c, clank_gen_t *g, int bridge_rules, const char *what) {
  lua_State *L = g->L;
  lua_pushcfunction(L, origin_allowed);
  clank_lua_request_push(L, &c->req);
  lua_rawgeti(L, LUA_REGISTRYINDEX, g->app_ref);
  lua_pushboolean(L, bridge_rules);
  int allowed = 0;
  if (clank_pcall(L, 3, 1) == LUA_OK)
    allowed = lua_toboolean(L, -1);
  else
    clank_log_msg(&((clank_host_t *)c->server->data)->log, "error",
                  "%s: the origin check failed: %s", what, clank_error_text(L, -1));
  lua_pop(L, 1);
  return allowed;
}

int clank_csrf_check(clank_conn_t *c, clank_gen_t *g) {
  const clank_request_t *r = &c->req;
  /* Neither header: a client that is no browser, or a same-origin one of old. */
  if (clank_request_header(r, "origin", 6, NULL) == NULL &&
      clank_request_header(r, "sec-fetch-site", 14, NULL) == NULL)
    return 1;
  int allowed = clank_origin_allowed(c, g, 0, "CSRF");
  if (!allowed) clank_conn_text(c, 403, "Cross-site request refused.");
  return allowed;
}
