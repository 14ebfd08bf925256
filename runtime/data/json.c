/* clank.json: the Lua face of the decoder (json_decode.c), the canonical
   encoder (json_encode.c) and the number formatter (json_number.c). */
#include <lauxlib.h>

#include "data/json.h"
#include "data/schema.h"
#include "core/values.h"

#define BUFFER_MT "clank.json.Buffer"

/* decode(s) -> value | nil, message */
static int json_decode(lua_State *L) {
  size_t len;
  luaL_checktype(L, 1, LUA_TSTRING); /* no silent number-to-string */
  const char *s = lua_tolstring(L, 1, &len);
  return clank_json_decode(L, s, len);
}

static int buffer_gc(lua_State *L) {
  clank_buf_free(luaL_checkudata(L, 1, BUFFER_MT));
  return 0;
}

/* encode(value, schema?) -> string. The output buffer is boxed in a userdata
   so that an encoding error, which unwinds past us, leaves it to __gc. */
static int json_encode(lua_State *L) {
  luaL_checkany(L, 1);
  lua_settop(L, 2);
  if (!lua_isnil(L, 2) && clank_schema_node(L, 2) == NULL) luaL_typeerror(L, 2, "clank.Schema");
  clank_buf_t *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->data = NULL;
  b->len = b->cap = 0;
  luaL_setmetatable(L, BUFFER_MT);
  clank_json_encode(L, 1, lua_isnil(L, 2) ? 0 : 2, b);
  lua_pushlstring(L, b->data ? b->data : "", b->len);
  clank_buf_free(b); /* now, not at the next collection */
  return 1;
}

/* array(t?) -> t, marked as a JSON array; a new empty one without t. */
static int json_array(lua_State *L) {
  if (lua_isnoneornil(L, 1)) {
    lua_settop(L, 0);
    lua_newtable(L);
  }
  luaL_checktype(L, 1, LUA_TTABLE);
  clank_mark_array(L, 1);
  lua_settop(L, 1);
  return 1;
}

static int json_isArray(lua_State *L) {
  lua_pushboolean(L, lua_istable(L, 1) && clank_is_marked_array(L, 1));
  return 1;
}

/* formatNumber(n): integers exactly, floats as ECMAScript prints them. */
static int json_formatNumber(lua_State *L) {
  luaL_checktype(L, 1, LUA_TNUMBER);
  if (lua_isinteger(L, 1)) {
    lua_pushfstring(L, "%I", lua_tointeger(L, 1));
  } else {
    char s[32];
    size_t n = clank_json_format_number(lua_tonumber(L, 1), s);
    lua_pushlstring(L, s, n);
  }
  return 1;
}

static const luaL_Reg json_funcs[] = {{"decode", json_decode},
                                      {"encode", json_encode},
                                      {"array", json_array},
                                      {"isArray", json_isArray},
                                      {"formatNumber", json_formatNumber},
                                      {"null", NULL},
                                      {NULL, NULL}};

int luaopen_clank_json(lua_State *L) {
  luaL_newlib(L, json_funcs);
  clank_push_null(L);
  lua_setfield(L, -2, "null");
  if (luaL_newmetatable(L, BUFFER_MT)) {
    lua_pushcfunction(L, buffer_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  return 1;
}
