/* Paths of data-clank-key back to elements (README, Live views): a live event names its target
   by the path render_attrs.c wrote, dots between segments, each the index of an element among
   its parent's element children ("0", "2") or "k:" and a key percent-encoded ("k:rows",
   "k:a%2Eb"). Checked and walked on every event, over lists of hundreds of rows, so in C.

     render_core.keyFinder(ELEMENT) → find(tree, path): the element at path in tree (an element
                                      or a list of them), or nil
     render_core.validKeyPath(path) → whether path is in that one form

   A keyed segment in a long list (INDEXED_CHILDREN or more) is looked up in an index of the
   list's keys, made on the first such lookup and kept, weakly, as long as the list lives: a
   scan reads every row's props and key, cold in a large heap, and an event on a list of a
   hundred rows cost more in the scan than anywhere else but the collector. What the index
   gives is checked (the element there has that key) and, where it does not or where it has no
   such key, the list is scanned as before and its index made again on the next lookup: an
   event or a component's new tree may have changed the list in place. */
#include <lauxlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "render/render_internal.h"
#include "util/bytes.h"

enum { UV_ELEMENT = 1, UV_PROPS, UV_CHILDREN, UV_KEY, UV_INDEXES };

#define INDEXED_CHILDREN 16

/* Whether s[0..n) is a key as key_segment writes it: plain bytes as they are, every other
   byte %XX in upper-case hex (and no plain byte escaped). */
static int canonical_key(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (clank_render_key_byte_plain(c)) continue;
    if (c != '%' || n - i < 3) return 0;
    int hi = clank_hex_value((unsigned char)s[i + 1]),
        lo = clank_hex_value((unsigned char)s[i + 2]);
    if (hi < 0 || lo < 0) return 0;
    if (s[i + 1] != clank_hex_upper[hi] || s[i + 2] != clank_hex_upper[lo]) return 0;
    if (clank_render_key_byte_plain((unsigned char)(hi * 16 + lo))) return 0;
    i += 2;
  }
  return 1;
}

static int valid_segment(const char *s, size_t n) {
  if (n == 0) return 0;
  if (n >= 2 && s[0] == 'k' && s[1] == ':') return canonical_key(s + 2, n - 2);
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  return 1;
}

static int valid_path(const char *s, size_t n) {
  if (n == 0) return 0;
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && s[i] != '.') continue;
    if (!valid_segment(s + start, i - start)) return 0;
    start = i + 1;
  }
  return 1;
}

int clank_render_valid_key_path(lua_State *L) {
  size_t n;
  const char *s = lua_tolstring(L, 1, &n);
  lua_pushboolean(L, lua_type(L, 1) == LUA_TSTRING && valid_path(s, n));
  return 1;
}

static int is_element(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx)) return 0;
  int same = lua_rawequal(L, -1, lua_upvalueindex(UV_ELEMENT));
  lua_pop(L, 1);
  return same;
}

/* The byte of the encoded segment e at *i (valid_path checked its escapes), *i moved past it. */
static int decoded_byte(const char *e, size_t *i) {
  int c = (unsigned char)e[*i];
  if (c != '%') {
    *i += 1;
    return c;
  }
  c = clank_hex_value((unsigned char)e[*i + 1]) * 16 + clank_hex_value((unsigned char)e[*i + 2]);
  *i += 3;
  return c;
}

/* Pushes the key of the element at idx as a path names it (a string, or an integer's digits)
   → 1, or pushes nothing → 0 (no key, or one of another type). */
static int push_key_text(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_pushvalue(L, lua_upvalueindex(UV_PROPS));
  lua_gettable(L, idx);
  if (lua_type(L, -1) != LUA_TTABLE) {
    lua_pop(L, 1);
    return 0;
  }
  lua_pushvalue(L, lua_upvalueindex(UV_KEY));
  lua_gettable(L, -2);
  if (lua_type(L, -1) == LUA_TSTRING) {
    lua_remove(L, -2);
    return 1;
  }
  if (lua_isinteger(L, -1)) {
    char digits[32];
    int n = snprintf(digits, sizeof digits, LUA_INTEGER_FMT, lua_tointeger(L, -1));
    lua_pop(L, 2);
    lua_pushlstring(L, digits, (size_t)n);
    return 1;
  }
  lua_pop(L, 2);
  return 0;
}

/* Whether the element at idx has the key the encoded segment e[0..n) names: its props.key a
   string of those bytes, or an integer of those digits. */
static int has_key(lua_State *L, int idx, const char *e, size_t n) {
  if (!push_key_text(L, idx)) return 0;
  size_t kn;
  const char *k = lua_tolstring(L, -1, &kn);
  size_t i = 0, j = 0; /* compared with the segment decoded */
  int found = 1;
  while (i < n && found) {
    int c = decoded_byte(e, &i);
    found = j < kn && (unsigned char)k[j++] == c;
  }
  lua_pop(L, 1);
  return found && j == kn;
}

/* Pushes the index of the list at stack index list: each key → the position of the first
   element child with it (the one a scan finds), made now unless it was before. */
static void push_index(lua_State *L, int list) {
  lua_pushvalue(L, list);
  if (lua_rawget(L, lua_upvalueindex(UV_INDEXES)) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_createtable(L, 0, (int)lua_rawlen(L, list));
  int index = lua_gettop(L);
  for (lua_Integer c = 1; lua_rawgeti(L, list, c) != LUA_TNIL; c++) {
    if (is_element(L, -1) && push_key_text(L, -1)) {
      lua_pushvalue(L, -1);
      if (lua_rawget(L, index) == LUA_TNIL) {
        lua_pop(L, 1);
        lua_pushinteger(L, c);
        lua_rawset(L, index);
      } else {
        lua_pop(L, 2);
      }
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1); /* the nil that ended the list */
  lua_pushvalue(L, list);
  lua_pushvalue(L, index);
  lua_rawset(L, lua_upvalueindex(UV_INDEXES));
}

/* Pushes the key the encoded segment e[0..n) names. */
static void push_decoded(lua_State *L, const char *e, size_t n) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (size_t i = 0; i < n;) luaL_addchar(&b, (char)decoded_byte(e, &i));
  luaL_pushresult(&b);
}

/* The element of the list at 3 with the key e[0..n), found through the list's index: replaces
   the list at 3 → 1; or 0, the stack as it was, and the index dropped (the next lookup makes it
   again) when the key is not there or the element there no longer has it. */
static int find_indexed(lua_State *L, const char *e, size_t n) {
  int top = lua_gettop(L);
  push_index(L, 3);
  push_decoded(L, e, n);
  if (lua_rawget(L, top + 1) == LUA_TNUMBER) {
    lua_rawgeti(L, 3, lua_tointeger(L, -1));
    if (is_element(L, -1) && has_key(L, -1, e, n)) {
      lua_replace(L, 3);
      lua_settop(L, top);
      return 1;
    }
  }
  lua_settop(L, top);
  lua_pushvalue(L, 3);
  lua_pushnil(L);
  lua_rawset(L, lua_upvalueindex(UV_INDEXES));
  return 0;
}

/* find(tree, path): pushes the element, or nil (none there, or a path not in its form). */
static int find(lua_State *L) {
  size_t n;
  const char *path = luaL_checklstring(L, 2, &n);
  lua_settop(L, 2);
  if (!valid_path(path, n)) {
    lua_pushnil(L);
    return 1;
  }
  luaL_checkstack(L, 8, "clank.live");
  /* the children searched at each level: the tree itself as a one-element list, or a list */
  int single = is_element(L, 1);
  if (!single && lua_type(L, 1) != LUA_TTABLE) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushvalue(L, 1); /* 3: the list (or the single element), then the node found */
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && path[i] != '.') continue;
    const char *seg = path + start;
    size_t len = i - start;
    start = i + 1;
    int keyed = len >= 2 && seg[0] == 'k' && seg[1] == ':';
    uint64_t want = 0;
    if (!keyed) {
      for (size_t d = 0; d < len; d++) {
        if (want > UINT32_MAX) break; /* no list is that long: not found */
        want = want * 10 + (uint64_t)(seg[d] - '0');
      }
    }
    int found = 0;
    if (single) {
      if ((keyed && has_key(L, 3, seg + 2, len - 2)) || (!keyed && want == 0)) found = 1;
    } else if (keyed && lua_rawlen(L, 3) >= INDEXED_CHILDREN && find_indexed(L, seg + 2, len - 2)) {
      found = 1;
    } else {
      uint64_t nth = 0;
      for (lua_Integer c = 1; lua_rawgeti(L, 3, c) != LUA_TNIL; c++) {
        if (is_element(L, -1)) {
          if (keyed ? has_key(L, -1, seg + 2, len - 2) : nth == want) {
            lua_replace(L, 3);
            found = 1;
            break;
          }
          nth++;
        }
        lua_pop(L, 1);
      }
      if (!found) lua_pop(L, 1); /* the nil that ended the list */
    }
    if (!found) {
      lua_pushnil(L);
      return 1;
    }
    if (i == n) break;
    /* the next level: the node's children */
    lua_pushvalue(L, lua_upvalueindex(UV_CHILDREN));
    lua_gettable(L, 3);
    if (lua_type(L, -1) != LUA_TTABLE) {
      lua_pushnil(L);
      return 1;
    }
    lua_replace(L, 3);
    single = 0;
  }
  lua_settop(L, 3);
  return 1;
}

int clank_render_key_finder(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_pushstring(L, "props");
  lua_pushstring(L, "children");
  lua_pushstring(L, "key");
  lua_newtable(L); /* the lists' indexes, weak-keyed: each goes with its list */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushcclosure(L, find, 5);
  return 1;
}
