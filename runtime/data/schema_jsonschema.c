/* schema:toJSONSchema(): the compiled node as a JSON Schema (2020-12, no
   $schema), a fresh table per call. Lists are marked as JSON arrays so the
   canonical encoder writes them as arrays even when empty. */
#include "data/schema_internal.h"
#include "core/values.h"

static void set_string(lua_State *L, const char *k, const clank_schema_str_t *s) {
  if (!s->s) return;
  lua_pushlstring(L, s->s, s->len);
  lua_setfield(L, -2, k);
}

static void set_num(lua_State *L, const char *k, int has, const clank_schema_num_t *v) {
  if (!has) return;
  if (v->isint)
    lua_pushinteger(L, v->i);
  else
    lua_pushnumber(L, v->n);
  lua_setfield(L, -2, k);
}

static void set_type(lua_State *L, const char *type) {
  lua_pushstring(L, type);
  lua_setfield(L, -2, "type");
}

/* {anyOf = {...}} for the n schemas in list. */
static void push_anyof(lua_State *L, const clank_schema_node_t *const *list, size_t n, int null) {
  lua_createtable(L, 0, 2);
  lua_createtable(L, (int)n + null, 0);
  for (size_t i = 0; i < n; i++) {
    clank_schema_push_jsonschema(L, list[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  if (null) {
    lua_createtable(L, 0, 1);
    set_type(L, "null");
    lua_rawseti(L, -2, (lua_Integer)n + 1);
  }
  clank_mark_array(L, -1);
  lua_setfield(L, -2, "anyOf");
}

void clank_schema_push_jsonschema(lua_State *L, const clank_schema_node_t *n) {
  luaL_checkstack(L, 8, "clank.schema: toJSONSchema");
  switch (n->kind) {
    case CLANK_SK_STRING:
      lua_createtable(L, 0, 6);
      set_type(L, "string");
      set_num(L, "minLength", n->has_min, &n->min);
      set_num(L, "maxLength", n->has_max, &n->max);
      set_string(L, "pattern", &n->regex);
      set_string(L, "format", &n->format);
      break;
    case CLANK_SK_NUMBER:
      lua_createtable(L, 0, 4);
      set_type(L, n->integer ? "integer" : "number");
      set_num(L, "minimum", n->has_min, &n->min);
      set_num(L, "maximum", n->has_max, &n->max);
      break;
    case CLANK_SK_BOOLEAN:
      lua_createtable(L, 0, 2);
      set_type(L, "boolean");
      break;
    case CLANK_SK_LITERAL:
      lua_createtable(L, 0, 2);
      switch (n->lit_type) {
        case LUA_TSTRING: lua_pushlstring(L, n->lit_str.s, n->lit_str.len); break;
        case LUA_TNUMBER:
          set_num(L, "const", 1, &n->lit_num);
          lua_pushnil(L);
          break;
        case LUA_TBOOLEAN: lua_pushboolean(L, n->lit_bool); break;
        default: clank_push_null(L); break;
      }
      if (lua_isnil(L, -1))
        lua_pop(L, 1);
      else
        lua_setfield(L, -2, "const");
      break;
    case CLANK_SK_ENUM:
      lua_createtable(L, 0, 3);
      set_type(L, "string");
      lua_createtable(L, (int)n->n, 0);
      for (size_t i = 0; i < n->n; i++) {
        lua_pushlstring(L, n->values[i].s, n->values[i].len);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
      }
      clank_mark_array(L, -1);
      lua_setfield(L, -2, "enum");
      break;
    case CLANK_SK_UNKNOWN: lua_createtable(L, 0, 1); break;
    case CLANK_SK_ARRAY:
      lua_createtable(L, 0, 5);
      set_type(L, "array");
      clank_schema_push_jsonschema(L, n->inner);
      lua_setfield(L, -2, "items");
      set_num(L, "minItems", n->has_min, &n->min);
      set_num(L, "maxItems", n->has_max, &n->max);
      break;
    case CLANK_SK_OBJECT: {
      lua_Integer nreq = 0;
      lua_createtable(L, 0, 5);
      set_type(L, "object");
      lua_createtable(L, 0, (int)n->n);
      for (size_t i = 0; i < n->n; i++) {
        lua_pushlstring(L, n->props[i].key.s, n->props[i].key.len);
        clank_schema_push_jsonschema(L, n->props[i].node);
        lua_rawset(L, -3);
      }
      lua_setfield(L, -2, "properties");
      lua_createtable(L, (int)n->nrequired, 0); /* props are sorted already */
      for (size_t i = 0; i < n->n; i++) {
        if (n->props[i].node->optional_key) continue;
        lua_pushlstring(L, n->props[i].key.s, n->props[i].key.len);
        lua_rawseti(L, -2, ++nreq);
      }
      clank_mark_array(L, -1);
      lua_setfield(L, -2, "required");
      lua_pushboolean(L, !n->strict);
      lua_setfield(L, -2, "additionalProperties");
      break;
    }
    case CLANK_SK_OPTIONAL: clank_schema_push_jsonschema(L, n->inner); return;
    case CLANK_SK_NULLABLE: push_anyof(L, &n->inner, 1, 1); return;
    default: push_anyof(L, n->members, n->n, 0); break;
  }
  set_string(L, "description", &n->description);
}
