/* clank.schema seen from C: what clank.json needs to encode guided by a schema
   (empty tables as [] where the schema says array). */
#ifndef CLANK_SCHEMA_H
#define CLANK_SCHEMA_H

#include <lua.h>
#include <stddef.h>

#include "util/buf.h"

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

/* Validates the value at idx against n as clank_schema_validate does, but
   builds no Lua values: returns 1 when valid (out untouched), 0 when invalid
   after appending to out the canonical JSON of the error object of SPEC §5
   step 9, {"code":"INVALID_INPUT","details":[...],"message":"..."}, the
   issues with 0-based paths, in the same order and with the same text as
   clank_schema_validate's (byte for byte what the bridge answers today),
   and -1 when out could not grow (or a text is not valid UTF-8, which
   clank.json.encode refuses too); out is left as it was then. Like
   clank_schema_validate, it may raise (a pattern too complex for
   string.find, no stack space). */
int clank_schema_validate_json(lua_State *L, const clank_schema_node_t *n, int idx,
                               clank_buf_t *out);

/* Pushes the message of the issue list at idx (a ValidationError's `issues`):
   each issue as `<path joined by "." or "value">: <message>`, joined by "; ".
   Lua paths hold 1-based indexes; zero_based shifts them for JSON renderings. */
void clank_schema_push_message(lua_State *L, int idx, int zero_based);

int luaopen_clank_schema(lua_State *L);

#endif
