/* render_core.commonAffixes(a, b) → p, s: the lengths in bytes of the longest common prefix of
   the strings a and b, and of their longest common suffix that does not overlap it (in either).
   What lua/clank/live/diff.lua starts from, for two renders of a page (tens of KiB) on every
   update: a memcmp-speed scan instead of Lua substrings. */
#include <lauxlib.h>
#include <string.h>

#include "render/render_internal.h"

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
