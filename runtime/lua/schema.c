/* clank.schema: placeholder until its issue lands. */
#include "lua/modules.h"

#include <lauxlib.h>

static const luaL_Reg schema_funcs[] = {{NULL, NULL}};

int luaopen_clank_schema(lua_State *L) {
  luaL_newlib(L, schema_funcs);
  return 1;
}

/* Placeholders until clank.schema lands. */
#include "lua/schema.h"
const clank_schema_node_t *clank_schema_node(lua_State *L, int idx) { (void)L; (void)idx; return NULL; }
int clank_schema_node_is_array(const clank_schema_node_t *n) { (void)n; return 0; }
const clank_schema_node_t *clank_schema_node_items(const clank_schema_node_t *n) { (void)n; return NULL; }
const clank_schema_node_t *clank_schema_node_property(const clank_schema_node_t *n, const char *key,
                                                      size_t len) { (void)n; (void)key; (void)len; return NULL; }
