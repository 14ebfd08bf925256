/* Whether a component's props equal last time's (lua/clank/ui/memo.lua): a live list compares
   every row's props on every change, so the loop is here. props has no metatable and the same
   fields as before, each the same value (1 and 1.0 are not: they render apart), or tables or
   functions deep(a, b, 1) finds equal. */
#include <lauxlib.h>

#include "render/render_internal.h"

int clank_render_same_raw(lua_State *L, int a, int b) {
  if (!lua_rawequal(L, a, b)) return 0;
  return lua_type(L, a) != LUA_TNUMBER || lua_isinteger(L, a) == lua_isinteger(L, b);
}

/* The values at a and b, both present (see clank_render_same_fields). */
static int same_value(lua_State *L, int a, int b, const clank_same_fields_t *how) {
  if (clank_render_same_raw(L, a, b)) return 1; /* the common case */
  int ta = lua_type(L, a);
  if ((ta != LUA_TTABLE && ta != LUA_TFUNCTION) || ta != lua_type(L, b)) return 0;
  if (ta == LUA_TFUNCTION && how->any_function) return 1;
  lua_pushvalue(L, how->deep);
  lua_pushvalue(L, a);
  lua_pushvalue(L, b);
  lua_pushinteger(L, how->depth);
  lua_call(L, 3, 1);
  int yes = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return yes;
}

int clank_render_same_fields(lua_State *L, int a, int b, const clank_same_fields_t *how) {
  luaL_checkstack(L, 8, "props");
  int top = lua_gettop(L);
  lua_Integer n = 0;
  lua_pushnil(L);
  while (lua_next(L, b)) { /* key at top + 1, value at top + 2 */
    lua_pushvalue(L, top + 1);
    if (lua_rawget(L, a) == LUA_TNIL || !same_value(L, top + 2, top + 3, how)) {
      lua_settop(L, top);
      return 0;
    }
    lua_settop(L, top + 1);
    n++;
  }
  if (how->count >= 0) return n == how->count;
  lua_pushnil(L);
  while (lua_next(L, a)) {
    lua_pop(L, 1);
    if (--n < 0) {
      lua_settop(L, top);
      return 0;
    }
  }
  return n == 0;
}

/* The fields of a component call's props as memo keeps them in its entry (an array): up to
   max_pairs names and values in slots first, first + 1, ... in the order the caller's table
   gave them (the same constructor gives them in the same order next time: each name is found
   at once), their count in slot count; more fields than that are compared with the props table
   in slot props. */
enum { SM_DEEP = 1, SM_COUNT, SM_PROPS, SM_FIRST, SM_MAX };

static lua_Integer upvalue_integer(lua_State *L, int i) {
  return lua_tointeger(L, lua_upvalueindex(i));
}

/* same(entry, props) → whether props (the caller's table) equal the fields entry keeps, as
   the file's opening comment says. */
static int same_slots(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  lua_pushvalue(L, lua_upvalueindex(SM_DEEP)); /* 3 */
  clank_same_fields_t how = {.deep = 3, .depth = 1, .count = -1};
  if (lua_type(L, 2) != LUA_TTABLE || lua_getmetatable(L, 2)) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lua_rawgeti(L, 1, upvalue_integer(L, SM_COUNT));
  lua_Integer count = lua_tointeger(L, -1);
  lua_pop(L, 1);
  if (count > upvalue_integer(L, SM_MAX)) { /* the props table's fields */
    how.count = count;
    lua_rawgeti(L, 1, upvalue_integer(L, SM_PROPS)); /* 4 */
    lua_pushboolean(L, lua_type(L, 4) == LUA_TTABLE && clank_render_same_fields(L, 4, 2, &how));
    return 1;
  }
  luaL_checkstack(L, 8, "props");
  lua_Integer first = upvalue_integer(L, SM_FIRST), n = 0;
  lua_pushnil(L);
  while (lua_next(L, 2)) { /* name at 4, value at 5 */
    if (n == count) {
      lua_pushboolean(L, 0);
      return 1;
    }
    lua_Integer at = first + 2 * n;
    lua_rawgeti(L, 1, at);        /* 6 */
    if (!lua_rawequal(L, 4, 6)) { /* another order: look for the name */
      at = -1;
      for (lua_Integer i = 0; i < count; i++) {
        lua_rawgeti(L, 1, first + 2 * i);
        int found = lua_rawequal(L, 4, -1);
        lua_pop(L, 1);
        if (found) {
          at = first + 2 * i;
          break;
        }
      }
      if (at < 0) {
        lua_pushboolean(L, 0);
        return 1;
      }
    }
    lua_rawgeti(L, 1, at + 1); /* 7 */
    if (!same_value(L, 7, 5, &how)) {
      lua_pushboolean(L, 0);
      return 1;
    }
    lua_settop(L, 4);
    n++;
  }
  lua_pushboolean(L, n == count);
  return 1;
}

/* render_core.slotsMatcher(deep, countSlot, propsSlot, firstSlot, maxPairs) → same */
int clank_render_slots_matcher(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  for (int i = 2; i <= 5; i++) luaL_checkinteger(L, i);
  lua_settop(L, 5);
  lua_pushcclosure(L, same_slots, 5);
  return 1;
}
