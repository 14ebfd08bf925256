/* clank.schema seen from C: what clank.json needs to encode guided by a schema
   (empty tables as [] where the schema says array). */
#ifndef CLANK_SCHEMA_H
#define CLANK_SCHEMA_H

#include <lua.h>
#include <stddef.h>

typedef struct clank_schema_node_s clank_schema_node_t;

/* The compiled schema held by the clank.Schema userdata at idx, or NULL. */
const clank_schema_node_t *clank_schema_node(lua_State *L, int idx);
/* optional/nullable unwrapped; 1 when the node is an array schema. */
int clank_schema_node_is_array(const clank_schema_node_t *n);
/* The item schema of an array node, else NULL. */
const clank_schema_node_t *clank_schema_node_items(const clank_schema_node_t *n);
/* The schema of property `key` of an object node, else NULL. */
const clank_schema_node_t *clank_schema_node_property(const clank_schema_node_t *n, const char *key,
                                                      size_t len);

/* Validates the value at idx against n, as schema:parse does: returns 1 when
   it is valid (nothing allocated, nothing pushed), else 0 with a
   ValidationError pushed. */
int clank_schema_validate(lua_State *L, const clank_schema_node_t *n, int idx);

/* Pushes the message of the issue list at idx (a ValidationError's `issues`):
   each issue as `<path joined by "." or "value">: <message>`, joined by "; ".
   Lua paths hold 1-based indexes; zero_based shifts them for JSON renderings. */
void clank_schema_push_message(lua_State *L, int idx, int zero_based);

#endif
