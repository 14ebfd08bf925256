/* Values shared by the C modules: JSON null and the JSON-array mark.
   Both live per Lua state (no C globals), so two generations never share them. */
#ifndef CLANK_VALUES_H
#define CLANK_VALUES_H

#include <lua.h>
#include <stddef.h>

/* clank.null: a light userdata whose address is unique to Clank, so the check
   is one comparison. Truthy in Lua, distinct from nil (an absent key). */
void clank_push_null(lua_State *L);
int clank_is_null(lua_State *L, int idx);

/* Arrays decoded from JSON, or marked with clank.json.array(t), carry one
   shared metatable (registry key CLANK_ARRAY_MT), so [] and {} stay distinct. */
#define CLANK_ARRAY_MT "clank.json.array"
void clank_mark_array(lua_State *L, int idx);
void clank_push_array_mt(lua_State *L); /* that metatable, made when first asked for */
int clank_is_marked_array(lua_State *L, int idx);

/* The userdata at idx when it is size bytes and its first field is tag (the
   address of a static that only its maker writes there), else NULL: a kind
   of userdata told without a registry lookup by name. */
void *clank_tagged(lua_State *L, int idx, size_t size, const void *tag);

#endif
