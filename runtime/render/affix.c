/* render_core.commonAffixes(a, b) → p, s: the lengths in bytes of the longest common prefix of
   the strings a and b, and of their longest common suffix that does not overlap it (in either).
   What lua/clank/live/diff.lua starts from, for two renders of a page (tens of KiB) on every
   update: a memcmp-speed scan instead of Lua substrings. */
#include <lauxlib.h>
#include <string.h>

#include "render/render_internal.h"
#include "util/bytes.h"

int clank_render_common_affixes(lua_State *L) {
  size_t na, nb;
  const char *a = luaL_checklstring(L, 1, &na);
  const char *b = luaL_checklstring(L, 2, &nb);
  size_t limit = na < nb ? na : nb, p = 0, s = 0;
  /* word at a time while they agree, then byte at a time */
  while (p + 8 <= limit && memcmp(a + p, b + p, 8) == 0) p += 8;
  while (p < limit && a[p] == b[p]) p++;
  size_t rest = limit - p;
  while (s + 8 <= rest && memcmp(a + na - s - 8, b + nb - s - 8, 8) == 0) s += 8;
  while (s < rest && a[na - s - 1] == b[nb - s - 1]) s++;
  lua_pushinteger(L, (lua_Integer)p);
  lua_pushinteger(L, (lua_Integer)s);
  return 2;
}

/* render_core.utf16Units(s, i, j) → the UTF-16 code units of s[i..j] (1-based, inclusive, as
   string.sub counts; j < i is empty), or nil when those bytes are not whole valid UTF-8: the
   diff's positions, which a browser counts in UTF-16, over tens of KiB per update. */
int clank_render_utf16_units(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  lua_Integer i = luaL_checkinteger(L, 2), j = luaL_checkinteger(L, 3);
  if (j < i) {
    lua_pushinteger(L, 0);
    return 1;
  }
  luaL_argcheck(L, i >= 1 && (size_t)j <= n, 2, "out of bounds");
  size_t units = clank_utf16_units(s + i - 1, (size_t)(j - i + 1));
  if (units == CLANK_UTF8_BAD)
    lua_pushnil(L);
  else
    lua_pushinteger(L, (lua_Integer)units);
  return 1;
}
