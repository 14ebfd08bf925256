/* clank.Rows: a query's rows read as the objects of a schema (rows.h). */
#include "data/rows.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "core/values.h"
#include "data/json.h"
#include "data/schema_internal.h"

static const char rows_tag = 0;
static const char rows_mt_key = 0;

/* The uservalues of a clank.Rows. */
enum { UV_SCHEMA = 1, UV_LIST = 2 };

clank_rows_t *clank_rows_at(lua_State *L, int idx) {
  return clank_tagged(L, idx, sizeof(clank_rows_t), &rows_tag);
}

static clank_rows_t *check_rows(lua_State *L, int idx) {
  clank_rows_t *r = clank_rows_at(L, idx);
  if (r == NULL) luaL_typeerror(L, idx, "clank.Rows");
  return r;
}

clank_rows_t *clank_rows_push(lua_State *L, const clank_rows_source_t *source, size_t nrows,
                              int ncols) {
  clank_rows_t *r = lua_newuserdatauv(L, sizeof *r, 2);
  memset(r, 0, sizeof *r);
  r->tag = &rows_tag;
  r->source = source;
  r->nrows = nrows;
  r->ncols = ncols;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &rows_mt_key);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    luaL_requiref(L, "clank.rows", luaopen_clank_rows, 0);
    lua_pop(L, 1);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &rows_mt_key);
  }
  lua_setmetatable(L, -2);
  return r;
}

void clank_rows_adopt(clank_rows_t *rows, void *data) { rows->data = data; }

/* ---- reading a column as the schema says ---- */

static int is_string_node(const clank_schema_node_t *n) {
  return n->kind == CLANK_SK_STRING || n->kind == CLANK_SK_ENUM ||
         (n->kind == CLANK_SK_LITERAL && n->lit_type == LUA_TSTRING);
}

/* The value on top, as the database gave it, turned into what the property
   of schema n holds (the rules of doc/data.md, "Rows read as a schema's
   objects"): returns 1, or 0 after popping it when the property is absent.
   What cannot be turned stays as it is, for the validation to refuse. */
static int coerce(lua_State *L, const clank_schema_node_t *n) {
  int optional, nullable;
  n = clank_schema_unwrap_flags(n, &optional, &nullable);
  switch (lua_type(L, -1)) {
    case LUA_TLIGHTUSERDATA: /* NULL: null where the schema allows it, else absent */
      if (optional && !nullable && clank_is_null(L, -1)) {
        lua_pop(L, 1);
        return 0;
      }
      return 1;
    case LUA_TNUMBER: {
      if (!lua_isinteger(L, -1)) return 1;
      lua_Integer i = lua_tointeger(L, -1);
      if (n->kind == CLANK_SK_BOOLEAN && (i == 0 || i == 1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, i == 1);
      } else if (is_string_node(n)) {
        lua_pushfstring(L, "%I", (LUAI_UACINT)i);
        lua_replace(L, -2);
      }
      return 1;
    }
    case LUA_TSTRING: {
      int want = n->kind == CLANK_SK_NUMBER                                ? LUA_TNUMBER
                 : n->kind == CLANK_SK_ARRAY || n->kind == CLANK_SK_OBJECT ? LUA_TTABLE
                                                                           : LUA_TNONE;
      if (want == LUA_TNONE) return 1;
      size_t len;
      const char *s = lua_tolstring(L, -1, &len);
      int pushed = clank_json_decode(L, s, len);
      /* an array for an array, an object for an object: decoded arrays are marked */
      if (pushed == 1 && lua_type(L, -1) == want &&
          (want != LUA_TTABLE || clank_is_marked_array(L, -1) == (n->kind == CLANK_SK_ARRAY))) {
        lua_replace(L, -2);
        return 1;
      }
      lua_pop(L, pushed); /* the text stays */
      return 1;
    }
    default: return 1;
  }
}

int clank_rows_push_field(lua_State *L, const clank_rows_t *rows, size_t row, size_t prop) {
  int col = rows->column_of[prop];
  if (col < 0) return 0;
  rows->source->push_cell(L, rows->data, row, col);
  return coerce(L, rows->shape->props[prop].node);
}

/* ---- the list Lua sees ---- */

int clank_rows_push_made(lua_State *L, int idx) {
  if (lua_getiuservalue(L, idx, UV_LIST) == LUA_TTABLE) return 1;
  lua_pop(L, 1);
  return 0;
}

void clank_rows_push_list(lua_State *L, int idx) {
  clank_rows_t *r = check_rows(L, idx);
  idx = lua_absindex(L, idx);
  if (clank_rows_push_made(L, idx)) return;
  if (r->shape == NULL) luaL_error(L, "clank.Rows: not shaped");
  const clank_schema_node_t *n = r->shape;
  luaL_checkstack(L, 4, "clank.Rows");
  lua_createtable(L, r->nrows > INT32_MAX ? 0 : (int)r->nrows, 0);
  for (size_t row = 0; row < r->nrows; row++) {
    lua_createtable(L, 0, n->n > INT32_MAX ? 0 : (int)n->n);
    for (size_t p = 0; p < n->n; p++) {
      if (!clank_rows_push_field(L, r, row, p)) continue;
      lua_pushlstring(L, n->props[p].key.s, n->props[p].key.len);
      lua_insert(L, -2);
      lua_rawset(L, -3);
    }
    lua_rawseti(L, -2, (lua_Integer)row + 1);
  }
  clank_mark_array(L, -1);
  lua_pushvalue(L, -1);
  lua_setiuservalue(L, idx, UV_LIST);
}

static const clank_schema_node_t *unwrap(const clank_schema_node_t *n) {
  while (n->kind == CLANK_SK_OPTIONAL || n->kind == CLANK_SK_NULLABLE) n = n->inner;
  return n;
}

/* Whether a value of schema n may be, or hold, a clank.Rows. */
static int may_hold(const clank_schema_node_t *n) {
  n = unwrap(n);
  return n->kind == CLANK_SK_ARRAY || n->kind == CLANK_SK_OBJECT;
}

/* Settles the value on top (for n); returns 1 when it was replaced there. */
static int settle(lua_State *L, const clank_schema_node_t *n, int depth) {
  int top = lua_gettop(L);
  n = unwrap(n);
  if (n->kind == CLANK_SK_ARRAY && clank_rows_at(L, top)) {
    clank_rows_push_list(L, top);
    lua_replace(L, top);
    return 1;
  }
  if (lua_type(L, top) != LUA_TTABLE || depth >= 64 || !lua_checkstack(L, 4)) return 0;
  if (n->kind == CLANK_SK_ARRAY && may_hold(n->inner)) {
    lua_Integer len = (lua_Integer)lua_rawlen(L, top);
    for (lua_Integer i = 1; i <= len; i++) {
      lua_rawgeti(L, top, i);
      if (settle(L, n->inner, depth + 1))
        lua_rawseti(L, top, i);
      else
        lua_pop(L, 1);
    }
  } else if (n->kind == CLANK_SK_OBJECT) {
    for (size_t p = 0; p < n->n; p++) {
      if (!may_hold(n->props[p].node)) continue;
      lua_pushlstring(L, n->props[p].key.s, n->props[p].key.len);
      lua_pushvalue(L, -1);
      lua_rawget(L, top);
      if (settle(L, n->props[p].node, depth + 1))
        lua_rawset(L, top);
      else
        lua_pop(L, 2);
    }
  }
  return 0;
}

void clank_rows_settle(lua_State *L, const clank_schema_node_t *n, int idx) {
  if (n == NULL) return;
  idx = lua_absindex(L, idx);
  lua_pushvalue(L, idx);
  if (settle(L, n, 0))
    lua_replace(L, idx);
  else
    lua_pop(L, 1);
}

/* ---- the Lua API ---- */

/* clank.rows.shape(rows, schema): reads each row as the object schema's
   (every property the schema requires must have its column), returns rows. */
static int l_shape(lua_State *L) {
  clank_rows_t *r = check_rows(L, 1);
  const clank_schema_node_t *n = clank_schema_node(L, 2);
  if (n == NULL || n->kind != CLANK_SK_OBJECT) return luaL_argerror(L, 2, "not an s.object schema");
  if (r->shape != NULL) return luaL_error(L, "clank.Rows: already shaped");
  int *column_of = malloc((n->n ? n->n : 1) * sizeof *column_of);
  if (column_of == NULL) return luaL_error(L, "clank.Rows: out of memory");
  free(r->column_of); /* a shape that failed before */
  r->column_of = column_of;
  /* the columns' names and lengths found once, not once per property (up to 64 of them) */
  const char *names[64];
  size_t lens[64];
  int known = r->data ? (r->ncols < 64 ? r->ncols : 64) : 0;
  for (int c = 0; c < known; c++) {
    names[c] = r->source->column_name(r->data, c);
    lens[c] = strlen(names[c]);
  }
  for (size_t p = 0; p < n->n; p++) {
    column_of[p] = -1;
    for (int c = 0; c < r->ncols && r->data; c++) {
      const char *name = c < known ? names[c] : r->source->column_name(r->data, c);
      size_t len = c < known ? lens[c] : strlen(name);
      if (len == n->props[p].key.len && memcmp(name, n->props[p].key.s, len) == 0) {
        column_of[p] = c;
        break;
      }
    }
    /* without rows no column is needed (SQLite names none then) */
    if (column_of[p] < 0 && r->nrows > 0 && !n->props[p].node->optional_key) {
      lua_pushfstring(L, "the result has no column \"%s\", which the schema requires",
                      n->props[p].key.s);
      return lua_error(L); /* no position: the caller names its own */
    }
  }
  r->shape = n;
  lua_pushvalue(L, 2);
  lua_setiuservalue(L, 1, UV_SCHEMA);
  lua_settop(L, 1);
  return 1;
}

/* clank.rows.isShape(v): whether v is an s.object schema, which shape takes. */
static int l_is_shape(lua_State *L) {
  const clank_schema_node_t *n = clank_schema_node(L, 1);
  lua_pushboolean(L, n != NULL && n->kind == CLANK_SK_OBJECT);
  return 1;
}

static int rows_len(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check_rows(L, 1)->nrows);
  return 1;
}

static int rows_index(lua_State *L) {
  clank_rows_t *r = check_rows(L, 1);
  lua_Integer i = lua_isinteger(L, 2) ? lua_tointeger(L, 2) : 0;
  if (i < 1 || (lua_Unsigned)i > r->nrows) return 0;
  clank_rows_push_list(L, 1);
  lua_rawgeti(L, -1, i);
  return 1;
}

static int list_next(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  if (lua_next(L, 1)) return 2;
  lua_pushnil(L);
  return 1;
}

static int rows_pairs(lua_State *L) {
  check_rows(L, 1);
  lua_pushcfunction(L, list_next);
  clank_rows_push_list(L, 1);
  lua_pushnil(L);
  return 3;
}

static int rows_tostring(lua_State *L) {
  lua_pushfstring(L, "clank.Rows (%I rows)", (LUAI_UACINT)check_rows(L, 1)->nrows);
  return 1;
}

static int rows_gc(lua_State *L) {
  clank_rows_t *r = clank_rows_at(L, 1);
  if (r == NULL) return 0;
  if (r->data) r->source->free(r->data);
  free(r->column_of);
  r->data = NULL;
  r->column_of = NULL;
  return 0;
}

int luaopen_clank_rows(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &rows_mt_key);
  if (lua_isnil(L, -1)) {
    static const luaL_Reg meta[] = {{"__len", rows_len},     {"__index", rows_index},
                                    {"__pairs", rows_pairs}, {"__tostring", rows_tostring},
                                    {"__gc", rows_gc},       {NULL, NULL}};
    lua_pop(L, 1);
    luaL_newlib(L, meta);
    lua_pushliteral(L, "clank.Rows");
    lua_setfield(L, -2, "__name");
    lua_pushliteral(L, "clank.Rows");
    lua_setfield(L, -2, "__metatable");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &rows_mt_key);
  } else {
    lua_pop(L, 1);
  }
  static const luaL_Reg funcs[] = {{"shape", l_shape}, {"isShape", l_is_shape}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}
