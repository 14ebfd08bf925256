/* render_core.treeSwaps(old, new, outputs, deep) → olds, news | nil: the two trees of a mounted
   view's last render and its new one, when they are equal but for components' trees (keys of
   outputs), each new one where an old one was with the same key: then the update is what a swap
   of those trees is (lua/clank/ui/memo.lua's treeSwaps, which passes memo's outputs and equal).
   A list read again with one row changed compares a hundred rows here on every publish of every
   session, so the walk is in C.

   Elements (a metatable, a string tag) are equal when their tags, props and children are: props
   with the same fields, each the same value (1 and 1.0 are not: they render apart), any function
   for any other (an event handler's HTML names its event, not the function), or tables deep(a,
   b, 0) finds equal. Lists without a metatable compare item by item; strings by their text. */
#include <lauxlib.h>

#include "render/render_internal.h"

#define MAX_SWAPS 64
#define MAX_DEPTH 200

enum { OLD = 1, NEW, OUTPUTS, DEEP, OLDS, NEWS };

typedef struct {
  lua_State *L;
  lua_Integer swaps;
} walk_t;

static int same_tree(walk_t *w, int a, int b, int depth);

static int is_output(lua_State *L, int idx) {
  lua_pushvalue(L, idx);
  int yes = lua_rawget(L, OUTPUTS) != LUA_TNIL;
  lua_pop(L, 1);
  return yes;
}

/* The props at a and b (absolute indexes): render the same attributes. */
static int same_props(lua_State *L, int a, int b) {
  if (lua_rawequal(L, a, b)) return 1;
  if (!lua_istable(L, a) || !lua_istable(L, b)) return 0;
  if (lua_getmetatable(L, a) || lua_getmetatable(L, b)) {
    lua_pop(L, 1);
    return 0;
  }
  static const clank_same_fields_t how = {.deep = DEEP, .depth = 0, .any_function = 1, .count = -1};
  return clank_render_same_fields(L, a, b, &how);
}

/* The lists at a and b (absolute indexes): the same length, and the same trees in order. */
static int same_list(walk_t *w, int a, int b, int depth) {
  lua_State *L = w->L;
  if (lua_rawequal(L, a, b)) return 1;
  if (!lua_istable(L, a) || !lua_istable(L, b)) return 0;
  lua_Integer n = (lua_Integer)lua_rawlen(L, a);
  if (n != (lua_Integer)lua_rawlen(L, b)) return 0;
  luaL_checkstack(L, 4, "treeSwaps");
  int top = lua_gettop(L);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, a, i);
    lua_rawgeti(L, b, i);
    int same = same_tree(w, top + 1, top + 2, depth + 1);
    lua_settop(L, top);
    if (!same) return 0;
  }
  return 1;
}

/* t[name] of the table at idx, pushed, without metamethods → its type. */
static int raw_field(lua_State *L, int idx, const char *name) {
  idx = lua_absindex(L, idx);
  lua_pushstring(L, name);
  return lua_rawget(L, idx);
}

/* The key in the props of the tree at idx (pushed: nil when none). */
static void push_props_key(lua_State *L, int idx) {
  if (raw_field(L, idx, "props") == LUA_TTABLE) {
    raw_field(L, -1, "key");
    lua_remove(L, -2);
  } else {
    lua_pop(L, 1);
    lua_pushnil(L);
  }
}

/* A component's new tree b where its old one a was: one swap more, when the keys agree. */
static int swap(walk_t *w, int a, int b) {
  lua_State *L = w->L;
  if (w->swaps == MAX_SWAPS) return 0;
  push_props_key(L, a);
  push_props_key(L, b);
  int same = clank_render_same_raw(L, -2, -1);
  lua_pop(L, 2);
  if (!same) return 0;
  w->swaps++;
  lua_pushvalue(L, a);
  lua_rawseti(L, OLDS, w->swaps);
  lua_pushvalue(L, b);
  lua_rawseti(L, NEWS, w->swaps);
  return 1;
}

static int same_tree(walk_t *w, int a, int b, int depth) {
  lua_State *L = w->L;
  int t = lua_type(L, a);
  if (clank_render_same_raw(L, a, b)) return 1;
  if (t != lua_type(L, b) || t != LUA_TTABLE || depth > MAX_DEPTH) return 0; /* strings: rawequal */
  int old_out = is_output(L, a), new_out = is_output(L, b);
  if (old_out || new_out) return old_out && new_out && swap(w, a, b);
  int top = lua_gettop(L);
  int has_a = lua_getmetatable(L, a), has_b = lua_getmetatable(L, b);
  int same_mt = has_a == has_b && (!has_a || lua_rawequal(L, -1, -2));
  lua_settop(L, top);
  if (!same_mt) return 0;
  if (!has_a) return same_list(w, a, b, depth); /* a list of nodes */
  luaL_checkstack(L, 6, "treeSwaps");
  int same = raw_field(L, a, "tag") == LUA_TSTRING && raw_field(L, b, "tag") == LUA_TSTRING &&
             lua_rawequal(L, top + 1, top + 2);
  lua_settop(L, top);
  if (!same) return 0;
  raw_field(L, a, "props");
  raw_field(L, b, "props");
  same = same_props(L, top + 1, top + 2);
  lua_settop(L, top);
  if (!same) return 0;
  raw_field(L, a, "children");
  raw_field(L, b, "children");
  same = same_list(w, top + 1, top + 2, depth);
  lua_settop(L, top);
  return same;
}

int clank_render_tree_swaps(lua_State *L) {
  luaL_checktype(L, OUTPUTS, LUA_TTABLE);
  luaL_checktype(L, DEEP, LUA_TFUNCTION);
  lua_settop(L, DEEP);
  lua_newtable(L); /* OLDS */
  lua_newtable(L); /* NEWS */
  walk_t w = {L, 0};
  if (!same_tree(&w, OLD, NEW, 0)) {
    lua_pushnil(L);
    return 1;
  }
  return 2;
}
