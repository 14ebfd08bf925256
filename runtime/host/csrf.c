/* The CSRF rule for the app's routes (SPEC §15): cookie sessions make a
   foreign page's form post look like the user's own. The Origin rules are
   the bridge's (bridge.checkOrigin), their one source. */
#include "host/csrf.h"

#include <lauxlib.h>

#include "host/host.h"
#include "host/lua_request.h"
#include "lua/protect.h"

/* [request, app] → bridge.checkOrigin(request, app.allowedOrigins). */
static int origin_allowed(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "clank.bridge");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "checkOrigin");
  lua_pushvalue(L, 1);
  lua_getfield(L, 2, "allowedOrigins");
  lua_call(L, 2, 1);
  return 1;
}

int clank_csrf_check(clank_conn_t *c, clank_gen_t *g) {
  const clank_request_t *r = &c->req;
  /* Neither header: a client that is no browser, or a same-origin one of old. */
  if (clank_request_header(r, "origin", 6, NULL) == NULL &&
      clank_request_header(r, "sec-fetch-site", 14, NULL) == NULL)
    return 1;
  lua_State *L = g->L;
  lua_pushcfunction(L, origin_allowed);
  clank_request_push(L, r);
  lua_rawgeti(L, LUA_REGISTRYINDEX, g->app_ref);
  int allowed = 0;
  if (clank_pcall(L, 2, 1) == LUA_OK) {
    allowed = lua_toboolean(L, -1);
  } else {
    clank_log_msg(&((clank_host_t *)c->server->data)->log, "error", "the CSRF check failed: %s",
                  clank_error_text(L, -1));
  }
  lua_pop(L, 1);
  if (!allowed) clank_conn_text(c, 403, "Cross-site request refused.");
  return allowed;
}
