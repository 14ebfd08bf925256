/* Paths of data-clank-key back to elements (README, Live views): a live event names its target
   by the path render_attrs.c wrote, dots between segments, each the index of an element among
   its parent's element children ("0", "2") or "k:" and a key percent-encoded ("k:rows",
   "k:a%2Eb"). Checked and walked on every event, over lists of hundreds of rows, so in C.

     render_core.keyFinder(ELEMENT) → find(tree, path): the element at path in tree (an element
                                      or a list of them), or nil
     render_core.validKeyPath(path) → whether path is in that one form */
#include <lauxlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "render/render_internal.h"
#include "util/bytes.h"

enum { UV_ELEMENT = 1, UV_PROPS, UV_CHILDREN, UV_KEY };

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

/* Whether the element at idx has the key the encoded segment e[0..n) names: its props.key a
   string of those bytes, or an integer of those digits. */
static int has_key(lua_State *L, int idx, const char *e, size_t n) {
  int found = 0;
  idx = lua_absindex(L, idx);
  lua_pushvalue(L, lua_upvalueindex(UV_PROPS));
  lua_gettable(L, idx);
  if (lua_type(L, -1) != LUA_TTABLE) {
    lua_pop(L, 1);
    return 0;
  }
  lua_pushvalue(L, lua_upvalueindex(UV_KEY));
  lua_gettable(L, -2);
  char digits[32];
  const char *k = NULL;
  size_t kn = 0;
  if (lua_type(L, -1) == LUA_TSTRING) {
    k = lua_tolstring(L, -1, &kn);
  } else if (lua_isinteger(L, -1)) {
    kn = (size_t)snprintf(digits, sizeof digits, LUA_INTEGER_FMT, lua_tointeger(L, -1));
    k = digits;
  }
  if (k) { /* compare with the segment decoded */
    size_t i = 0, j = 0;
    found = 1;
    while (i < n && found) {
      int c = (unsigned char)e[i];
      if (c == '%') {
        c = clank_hex_value((unsigned char)e[i + 1]) * 16 +
            clank_hex_value((unsigned char)e[i + 2]);
        i += 3;
      } else {
        i++;
      }
      found = j < kn && (unsigned char)k[j++] == c;
    }
    found = found && j == kn;
  }
  lua_pop(L, 2);
  return found;
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
  lua_pushcclosure(L, find, 4);
  return 1;
}
