/* clank.schema: the module table, the clank.Schema methods (parse,
   safeParse, toJSONSchema), ValidationError, and the C view of schemas for
   clank.json. The builders are in schema_build.c, validation in
   schema_validate.c, the JSON Schema in schema_jsonschema.c, Lua patterns in
   schema_pattern.c. */
#include <string.h>

#include "data/schema_internal.h"
#include "core/values.h"

int clank_schema_keycmp(const char *a, size_t la, const char *b, size_t lb) {
  int r = memcmp(a, b, la < lb ? la : lb);
  if (r != 0) return r;
  return (la > lb) - (la < lb);
}

/* Registry slots found by address (lua_rawgetp) rather than by name, which
   hashes and compares the name on every call: the constants of
   validation, and the metatables (also registered under their names, for luaL_checkudata and
   the other modules). Only the addresses matter; nothing is written. */
static const char reg_constants = 0, reg_schema_mt = 0, reg_error_mt = 0;

const clank_schema_node_t *clank_schema_tonode(lua_State *L, int idx) {
  const clank_schema_node_t *n = clank_schema_node(L, idx);
  return n ? n : luaL_checkudata(L, idx, CLANK_SCHEMA_MT); /* raises the usual error */
}

/* Pushes the JSON array metatable and the constants; returns the index of
   the first. */
static int push_context(lua_State *L) {
  clank_push_array_mt(L);
  int base = lua_gettop(L);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &reg_constants);
  return base;
}

/* One walk each: collecting costs about what checking does on what is valid. */
int clank_schema_validate(lua_State *L, const clank_schema_node_t *n, int idx) {
  idx = lua_absindex(L, idx);
  luaL_checkstack(L, 3 + 16, "clank.schema"); /* the context, the list, what a walk wants free */
  int base = push_context(L);
  if (clank_schema_collect(L, n, idx, base, base + 1)) {
    lua_settop(L, base - 1);
    return 1;
  }
  lua_createtable(L, 0, 1);
  lua_rawgeti(L, base + 1, CLANK_SK_K_ISSUES);
  lua_pushvalue(L, base + 2); /* the list */
  lua_rawset(L, -3);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &reg_error_mt);
  lua_setmetatable(L, -2);
  lua_replace(L, base);
  lua_settop(L, base);
  return 0;
}

int clank_schema_validate_json(lua_State *L, const clank_schema_node_t *n, int idx,
                               clank_buf_t *out) {
  idx = lua_absindex(L, idx);
  luaL_checkstack(L, 2 + 16, "clank.schema");
  int base = push_context(L);
  int r = clank_schema_collect_json(L, n, idx, base, out);
  lua_settop(L, base - 1);
  return r;
}

/* ======================================================================
   ValidationError
   ====================================================================== */

/* Pushes the path of the issue at idx as text: keys and indexes joined by
   ".", or "value" for the root. */
static void push_path(lua_State *L, int issue, int zero_based) {
  luaL_Buffer b;
  lua_getfield(L, issue, "path");
  int p = lua_gettop(L);
  lua_Integer n = lua_istable(L, p) ? luaL_len(L, p) : 0;
  if (n <= 0) {
    lua_pop(L, 1);
    lua_pushliteral(L, "value");
    return;
  }
  luaL_buffinit(L, &b);
  for (lua_Integer j = 1; j <= n; j++) {
    if (j > 1) luaL_addchar(&b, '.');
    lua_geti(L, p, j);
    if (lua_isinteger(L, -1)) {
      lua_Integer v = lua_tointeger(L, -1);
      lua_pop(L, 1);
      lua_pushfstring(L, "%I", (LUAI_UACINT)(v - (zero_based ? 1 : 0)));
    } else if (lua_type(L, -1) != LUA_TSTRING) {
      luaL_tolstring(L, -1, NULL);
      lua_remove(L, -2);
    }
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  lua_remove(L, p);
}

void clank_schema_push_message(lua_State *L, int idx, int zero_based) {
  luaL_Buffer b;
  idx = lua_absindex(L, idx);
  lua_Integer n = lua_istable(L, idx) ? luaL_len(L, idx) : 0;
  luaL_buffinit(L, &b);
  for (lua_Integer i = 1; i <= n; i++) {
    if (i > 1) luaL_addstring(&b, "; ");
    lua_geti(L, idx, i);
    int issue = lua_gettop(L);
    if (lua_istable(L, issue)) {
      push_path(L, issue, zero_based);
      lua_pushliteral(L, ": ");
      lua_getfield(L, issue, "message");
      luaL_tolstring(L, -1, NULL);
      lua_remove(L, -2);
      lua_concat(L, 3);
    } else {
      luaL_tolstring(L, issue, NULL);
    }
    lua_remove(L, issue);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
}

static int error_tostring(lua_State *L) {
  lua_getfield(L, 1, "issues");
  clank_schema_push_message(L, -1, 0);
  return 1;
}

/* err.message, computed when asked for. */
static int error_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "message") == 0)
    return error_tostring(L);
  return 0;
}

static int is_validation_error(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx)) return 0;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &reg_error_mt);
  int yes = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return yes;
}

/* Upvalues of the methods. */
#define UP_SCHEMA_MT lua_upvalueindex(1)
#define UP_ARRAY_MT lua_upvalueindex(2)
#define UP_ERROR_MT lua_upvalueindex(3)
#define UP_K lua_upvalueindex(4)
#define UP_SUCCESS lua_upvalueindex(5) /* the keys of results and errors */
#define UP_DATA lua_upvalueindex(6)
#define UP_ERROR lua_upvalueindex(7)
#define UP_ISSUES lua_upvalueindex(8)
#define NUPVALUES 8

/* Pushes a ValidationError for the (invalid) value at idx. */
static void push_error(lua_State *L, const clank_schema_node_t *n, int idx) {
  lua_createtable(L, 0, 1);
  lua_pushvalue(L, UP_ISSUES);
  clank_schema_collect(L, n, idx, UP_ARRAY_MT, UP_K);
  lua_rawset(L, -3);
  lua_pushvalue(L, UP_ERROR_MT);
  lua_setmetatable(L, -2);
}

/* ======================================================================
   Methods
   ====================================================================== */

/* self, checked against the clank.Schema metatable without a registry
   lookup. Leaves the stack as self, value, metatable. */
static const clank_schema_node_t *self_node(lua_State *L) {
  if (lua_gettop(L) != 2) lua_settop(L, 2);
  if (lua_getmetatable(L, 1) && lua_rawequal(L, 3, UP_SCHEMA_MT)) {
    const clank_schema_node_t *n = lua_touserdata(L, 1);
    if (n) return n;
  }
  return clank_schema_tonode(L, 1); /* raises the usual error */
}

static int schema_parse(lua_State *L) {
  const clank_schema_node_t *n = self_node(L);
  if (clank_schema_check(L, n, 2, UP_ARRAY_MT)) {
    lua_pushvalue(L, 2);
    return 1;
  }
  push_error(L, n, 2);
  return lua_error(L);
}

/* One walk: the list of issues (stack slot 4) is made at the first issue. */
static int schema_safe_parse(lua_State *L) {
  const clank_schema_node_t *n = self_node(L);
  int ok = clank_schema_collect(L, n, 2, UP_ARRAY_MT, UP_K);
  lua_createtable(L, 0, 2);
  lua_pushvalue(L, UP_SUCCESS);
  lua_pushboolean(L, ok);
  lua_rawset(L, -3);
  if (ok) {
    lua_pushvalue(L, UP_DATA);
    lua_pushvalue(L, 2);
  } else {
    lua_pushvalue(L, UP_ERROR);
    lua_createtable(L, 0, 1);
    lua_pushvalue(L, UP_ISSUES);
    lua_pushvalue(L, 4);
    lua_rawset(L, -3);
    lua_pushvalue(L, UP_ERROR_MT);
    lua_setmetatable(L, -2);
  }
  lua_rawset(L, -3);
  return 1;
}

/* For specs and bench/schema.lua only, kept out of the module: the
   metatable's __json422(schema, value) → true when valid, else the bytes
   clank_schema_validate_json writes (nil and a message when it fails). The
   buffer would leak if the walk raised (no stack, no memory): not on their
   inputs. */
static int schema_json422(lua_State *L) {
  const clank_schema_node_t *n = clank_schema_tonode(L, 1);
  clank_buf_t out = {0};
  lua_settop(L, 2);
  int r = clank_schema_validate_json(L, n, 2, &out);
  if (r == 1)
    lua_pushboolean(L, 1);
  else if (r == 0)
    lua_pushlstring(L, out.data, out.len);
  else
    lua_pushnil(L);
  clank_buf_free(&out);
  if (r >= 0) return 1;
  lua_pushliteral(L, "clank.schema: cannot write the answer");
  return 2;
}

static int schema_to_json_schema(lua_State *L) {
  clank_schema_push_jsonschema(L, clank_schema_tonode(L, 1));
  return 1;
}

static void unref(lua_State *L, int *ref) {
  if (*ref != LUA_NOREF) {
    luaL_unref(L, LUA_REGISTRYINDEX, *ref);
    *ref = LUA_NOREF;
  }
}

static int schema_gc(lua_State *L) {
  clank_schema_node_t *n = lua_touserdata(L, 1);
  unref(L, &n->msg_min.ref);
  unref(L, &n->msg_max.ref);
  unref(L, &n->msg_other.ref);
  unref(L, &n->expected.ref);
  unref(L, &n->strs_ref);
  return 0;
}

static int schema_tostring(lua_State *L) {
  static const char *const kinds[] = {"string", "number", "boolean",  "literal",  "enum", "unknown",
                                      "array",  "object", "optional", "nullable", "union"};
  const clank_schema_node_t *n = clank_schema_tonode(L, 1);
  lua_pushfstring(L, "clank.Schema (%s): %p", kinds[n->kind], (const void *)n);
  return 1;
}

static int s_is_schema(lua_State *L) {
  lua_pushboolean(L, clank_schema_node(L, 1) != NULL);
  return 1;
}

static int s_is_validation_error(lua_State *L) {
  lua_pushboolean(L, is_validation_error(L, 1));
  return 1;
}

static const luaL_Reg schema_methods[] = {{"parse", schema_parse},
                                          {"safeParse", schema_safe_parse},
                                          {"toJSONSchema", schema_to_json_schema},
                                          {NULL, NULL}};

static const luaL_Reg schema_funcs[] = {
    {"isSchema", s_is_schema}, {"isValidationError", s_is_validation_error}, {NULL, NULL}};

int luaopen_clank_schema(lua_State *L) {
  luaL_newlib(L, schema_funcs);
  clank_schema_open_builders(L);
  clank_push_null(L);
  lua_setfield(L, -2, "null");
  /* metatable of clank.Schema */
  luaL_newmetatable(L, CLANK_SCHEMA_MT);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &reg_schema_mt);
  lua_createtable(L, 0, 3); /* metatable.__index = methods */
  lua_pushvalue(L, -2);     /* the clank.Schema metatable */
  clank_push_array_mt(L);   /* created if need be */
  luaL_newmetatable(L, CLANK_SCHEMA_ERROR_MT);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &reg_error_mt);
  clank_schema_push_constants(L);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &reg_constants);
  int k = lua_gettop(L);
  lua_rawgeti(L, k, CLANK_SK_K_SUCCESS);
  lua_rawgeti(L, k, CLANK_SK_K_DATA);
  lua_rawgeti(L, k, CLANK_SK_K_ERROR);
  lua_rawgeti(L, k, CLANK_SK_K_ISSUES);
  /* upvalues: Schema mt, array mt, error mt, constants, 4 keys */
  luaL_setfuncs(L, schema_methods, NUPVALUES);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, schema_json422);
  lua_setfield(L, -2, "__json422");
  lua_pushcfunction(L, schema_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, schema_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  /* metatable of ValidationError, also the module's s.ValidationError */
  luaL_newmetatable(L, CLANK_SCHEMA_ERROR_MT);
  lua_pushcfunction(L, error_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushcfunction(L, error_index);
  lua_setfield(L, -2, "__index");
  lua_setfield(L, -2, "ValidationError");
  return 1;
}

/* ======================================================================
   The C view (schema.h)
   ====================================================================== */

static const clank_schema_node_t *unwrap(const clank_schema_node_t *n) {
  while (n && (n->kind == CLANK_SK_OPTIONAL || n->kind == CLANK_SK_NULLABLE)) n = n->inner;
  return n;
}

/* luaL_testudata, with the metatable found by address. */
const clank_schema_node_t *clank_schema_node(lua_State *L, int idx) {
  void *p = lua_touserdata(L, idx);
  if (p == NULL || !lua_getmetatable(L, idx)) return NULL;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &reg_schema_mt);
  if (!lua_rawequal(L, -1, -2)) p = NULL;
  lua_pop(L, 2);
  return p;
}

int clank_schema_node_is_array(const clank_schema_node_t *n) {
  n = unwrap(n);
  return n && n->kind == CLANK_SK_ARRAY;
}

const clank_schema_node_t *clank_schema_node_items(const clank_schema_node_t *n) {
  n = unwrap(n);
  return n && n->kind == CLANK_SK_ARRAY ? n->inner : NULL;
}

const clank_schema_node_t *clank_schema_node_property(const clank_schema_node_t *n, const char *key,
                                                      size_t len) {
  n = unwrap(n);
  if (!n || n->kind != CLANK_SK_OBJECT) return NULL;
  ptrdiff_t i = clank_schema_find_prop(n, key, len);
  return i < 0 ? NULL : n->props[i].node;
}
