/* Registers every C module of `require "clank"` in package.preload
   (modules.h). */
#include "modules/modules.h"

#include "agent/action.h"
#include "agent/bridge.h"
#include "agent/runner.h"
#include "data/json.h"
#include "data/rows.h"
#include "data/schema.h"
#include "io/db_postgres.h"
#include "io/db_sqlite.h"
#include "io/fetch.h"
#include "io/multipart.h"
#include "io/password.h"
#include "render/render_internal.h"

#include <lauxlib.h>

static const luaL_Reg clank_modules[] = {{"clank.core", luaopen_clank_core},
                                         {"clank.json", luaopen_clank_json},
                                         {"clank.schema", luaopen_clank_schema},
                                         {"clank.rows", luaopen_clank_rows},
                                         {"clank.action", luaopen_clank_action},
                                         {"clank.runner", luaopen_clank_runner},
                                         {"clank.bridge", luaopen_clank_bridge},
                                         {"clank.render_core", luaopen_clank_render_core},
                                         {"clank.db.sqlite", luaopen_clank_db_sqlite},
                                         {"clank.db.postgres", luaopen_clank_db_postgres},
                                         {"clank.fetch.core", luaopen_clank_fetch_core},
                                         {"clank.multipart", luaopen_clank_multipart},
                                         {"clank.password", luaopen_clank_password},
                                         {NULL, NULL}};

void clank_preload_modules(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (const luaL_Reg *m = clank_modules; m->func; m++) {
    lua_pushcfunction(L, m->func);
    lua_setfield(L, -2, m->name);
  }
  lua_pop(L, 1);
}
