/* h.<tag>(props, ...children) in C (SPEC §8): a live view builds its whole
   element tree again on every change, so making an element is on the event
   path. The rules and messages are lua/clank/ui/element.lua's, which keeps
   the API (h, h.<tag>, components, raw) and makes the maker, once:
   render_core.elementMaker(ELEMENT, RAW) → make(tag) → a builder for tag. */
#include <lauxlib.h>

#include "render/render_internal.h"

#define MAX_NESTING 64 /* lists in lists */

enum { UV_TAG = 1, UV_ELEMENT, UV_RAW };

static void bad_child(lua_State *L, int idx) {
  const char *name = NULL;
  if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) name = lua_tostring(L, -1);
  luaL_error(L, "clank.h: a child must be a string, a number, an element or a list (got %s)",
             name ? name : luaL_typename(L, idx));
}

/* Whether the table at idx is an element or raw HTML (else a list, or a bad child). */
static int is_node(lua_State *L, int idx) {
  if (!lua_getmetatable(L, idx)) return 0;
  int node = lua_rawequal(L, -1, lua_upvalueindex(UV_ELEMENT)) ||
             lua_rawequal(L, -1, lua_upvalueindex(UV_RAW));
  lua_pop(L, 1);
  if (!node) bad_child(L, idx); /* a table with a metatable of its own */
  return 1;
}

/* The child on top of the stack, popped, appended to the list at out after its *n items
   (nested lists flattened, nil and booleans skipped). */
static void add_child(lua_State *L, int out, lua_Integer *n, int depth) {
  int idx = lua_gettop(L);
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
    case LUA_TBOOLEAN: lua_pop(L, 1); return;
    case LUA_TSTRING:
    case LUA_TNUMBER: lua_rawseti(L, out, ++*n); return;
    case LUA_TTABLE:
      if (is_node(L, idx)) {
        lua_rawseti(L, out, ++*n);
        return;
      }
      if (depth > MAX_NESTING) luaL_error(L, "clank.h: children nested too deeply");
      luaL_checkstack(L, 2, "clank.h");
      for (lua_Integer i = 1, len = (lua_Integer)lua_rawlen(L, idx); i <= len; i++) {
        lua_rawgeti(L, idx, i);
        add_child(L, out, n, depth + 1);
      }
      lua_pop(L, 1);
      return;
    default: bad_child(L, idx);
  }
}

/* How many slots the children at first..last take, lists counted by their length (their own
   nested lists as one): the children table is made that size, not grown item by item. */
static int children_size(lua_State *L, int first, int last) {
  lua_Integer size = 0;
  for (int i = first; i <= last; i++) {
    if (lua_type(L, i) != LUA_TTABLE) {
      size++;
    } else if (lua_getmetatable(L, i)) {
      lua_pop(L, 1);
      size++;
    } else {
      size += (lua_Integer)lua_rawlen(L, i);
    }
  }
  return size > 1 << 20 ? 1 << 20 : (int)size;
}

/* builder(props, ...children) → { tag, props = a copy, children } with the
   element metatable. */
static int build(lua_State *L) {
  int nargs = lua_gettop(L);
  int props = 1;
  if (nargs >= 1 && !lua_isnil(L, 1) && (!lua_istable(L, 1) || lua_getmetatable(L, 1))) {
    if (lua_istable(L, 1)) lua_pop(L, 1);
    return luaL_error(L, "clank.h: props must be nil or a plain table (not an element, not %s)",
                      luaL_typename(L, 1));
  }
  /* Sized as most calls fill them, for fewer allocations per element: no
     props (h.td(nil, ...)) take no room, and the children given one slot
     each (a list among them grows the array). */
  int has_props = nargs >= 1 && lua_istable(L, props);
  lua_createtable(L, 0, 3); /* the element */
  int el = lua_gettop(L);
  lua_createtable(L, 0, has_props ? 4 : 0); /* its props */
  int copy = lua_gettop(L);
  lua_createtable(L, nargs > 1 ? children_size(L, 2, nargs) : 0, 0); /* its children */
  int children = lua_gettop(L);
  lua_Integer n = 0;
  if (has_props) {
    for (lua_pushnil(L); lua_next(L, props); lua_pop(L, 1)) {
      if (lua_type(L, -2) != LUA_TSTRING)
        return luaL_error(L, "clank.h: prop names must be strings (children go after the props)");
      lua_pushvalue(L, -2);
      lua_pushvalue(L, -2);
      lua_rawset(L, copy);
    }
    if (lua_getfield(L, copy, "children") != LUA_TNIL) {
      add_child(L, children, &n, 2);
      lua_pushnil(L);
      lua_setfield(L, copy, "children");
    } else {
      lua_pop(L, 1);
    }
  }
  for (int i = 2; i <= nargs; i++) {
    lua_pushvalue(L, i);
    add_child(L, children, &n, 2);
  }
  lua_setfield(L, el, "children");
  lua_setfield(L, el, "props");
  lua_pushvalue(L, lua_upvalueindex(UV_TAG));
  lua_setfield(L, el, "tag");
  lua_pushvalue(L, lua_upvalueindex(UV_ELEMENT));
  lua_setmetatable(L, el);
  return 1;
}

/* make(tag) → the builder of tag (upvalues: tag, ELEMENT, RAW) */
static int make(lua_State *L) {
  luaL_checkstring(L, 1);
  lua_settop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_pushcclosure(L, build, 3);
  return 1;
}

/* render_core.elementMaker(ELEMENT, RAW) → make */
int clank_render_element_maker(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  lua_pushcclosure(L, make, 2);
  return 1;
}
