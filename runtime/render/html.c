/* Html buffers: a live session's renders are written into two of these instead of a new Lua
   string each time (a page of tens of KiB per update, for every session of a publish). The
   bytes come from the Lua state's allocator, so the memory cap counts them, but not as the
   collector's debt: a buffer is rewritten, not garbage, and a string per update made the
   collector walk every session's heap again and again.

     render_core.htmlBuffer()  → an empty buffer
     #buf, tostring(buf)       → its length, its text as a string
     buf:free()                → lets its memory go now (it is empty after) */
#define _GNU_SOURCE /* memmem */
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "render/render_internal.h"
#include "util/bytes.h"

typedef struct {
  char *data;
  size_t len, cap;
  lua_Alloc alloc;
  void *ud;
} html_t;

static const char HTML_MT = 0; /* the registry key of the metatable: its address */

static html_t *to_html(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return NULL;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &HTML_MT);
  int same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same ? lua_touserdata(L, idx) : NULL;
}

static void release(html_t *h) {
  if (h->data) h->alloc(h->ud, h->data, h->cap, 0);
  h->data = NULL;
  h->len = h->cap = 0;
}

int clank_render_is_html(lua_State *L, int idx) { return to_html(L, idx) != NULL; }

const char *clank_render_html_text(lua_State *L, int idx, size_t *len) {
  if (lua_type(L, idx) == LUA_TSTRING) return lua_tolstring(L, idx, len);
  html_t *h = to_html(L, idx);
  if (!h) luaL_typeerror(L, idx, "string or Html buffer");
  *len = h->len;
  return h->data ? h->data : "";
}

/* Gives h the room n bytes need and an eighth more (a page grows and shrinks by a few bytes an
   update), not much more: a smaller page gives back what a larger one took. → 0, or -1 when
   the allocator refused (h as it was). */
static int fit(html_t *h, size_t n) {
  if (h->cap >= n && h->cap <= n + n / 4 + 4096) return 0;
  size_t cap = n + n / 8 + 64;
  char *p = h->alloc(h->ud, h->data, h->data ? h->cap : 0, cap);
  if (!p) return -1;
  h->data = p;
  h->cap = cap;
  return 0;
}

int clank_render_html_set(lua_State *L, int idx, const char *s, size_t n) {
  html_t *h = to_html(L, idx);
  if (fit(h, n)) {
    release(h);
    return -1;
  }
  if (n) memcpy(h->data, s, n);
  h->len = n;
  return 0;
}

/* The first place of text[0..tn) in s[0..n) (0 < tn), or NULL. memmem looks for at most its
   first PROBE bytes, and the rest is compared at each place found: glibc's memmem skips ahead
   by up to the needle's length for needles up to 256 bytes, and walks byte by byte (two-way)
   for longer ones, such as a table row's HTML. */
#define PROBE 256
static const char *find_text(const char *s, size_t n, const char *text, size_t tn) {
  size_t probe = tn < PROBE ? tn : PROBE;
  while (n >= tn) {
    /* a place the whole text fits after: it starts at most n - tn bytes in */
    const char *p = memmem(s, n - (tn - probe), text, probe);
    if (!p) return NULL;
    if (memcmp(p + probe, text + probe, tn - probe) == 0) return p;
    n -= (size_t)(p + 1 - s);
    s = p + 1;
  }
  return NULL;
}

/* Where text[0..tn) is in s[0..n), when it is there exactly once; else -1. */
static long find_once(const char *s, size_t n, const char *text, size_t tn) {
  if (tn == 0 || tn > n) return -1;
  const char *p = find_text(s, n, text, tn);
  if (!p) return -1;
  size_t after = (size_t)(p - s) + 1;
  if (find_text(s + after, n - after, text, tn)) return -1;
  return (long)(p - s);
}

typedef struct {
  size_t at, len; /* the old text's place in the base */
  int text;       /* the stack index of the new one */
} piece_t;

static int by_place(const void *a, const void *b) {
  size_t x = ((const piece_t *)a)->at, y = ((const piece_t *)b)->at;
  return x < y ? -1 : x > y;
}

/* render_core.htmlPatch(base, into, olds, news) → whether into now holds base with each olds[i]
   (a text found there exactly once, none overlapping) replaced by news[i]; false (into as it
   was) when one is not; when true, then how many bytes into has the same as base at its start
   and at its end (what render_core.splices need not compare). base and into are Html buffers,
   olds and news lists of strings (at most 64). A live session's update where only components'
   trees changed. */
int clank_render_html_patch(lua_State *L) {
  html_t *base = to_html(L, 1), *into = to_html(L, 2);
  if (!base) luaL_typeerror(L, 1, "Html buffer");
  if (!into || into == base) luaL_typeerror(L, 2, "another Html buffer");
  luaL_checktype(L, 3, LUA_TTABLE);
  luaL_checktype(L, 4, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 3);
  if (n < 1 || n > 64 || luaL_len(L, 4) != n)
    return luaL_error(L, "htmlPatch: 1 to 64 olds, as many news");
  luaL_checkstack(L, (int)(2 * n + 2), NULL);
  piece_t pieces[64];
  size_t total = base->len;
  for (lua_Integer i = 1; i <= n; i++) {
    size_t on, nn;
    lua_rawgeti(L, 3, i);
    const char *o = lua_tolstring(L, -1, &on);
    lua_rawgeti(L, 4, i);
    if (!o || !lua_tolstring(L, -1, &nn))
      return luaL_error(L, "htmlPatch: olds and news are strings");
    long at = find_once(base->data, base->len, o, on);
    if (at < 0) {
      lua_pushboolean(L, 0);
      return 1;
    }
    pieces[i - 1] = (piece_t){(size_t)at, on, lua_gettop(L)};
    total = total - on + nn;
  }
  qsort(pieces, (size_t)n, sizeof *pieces, by_place);
  for (lua_Integer i = 1; i < n; i++) {
    if (pieces[i].at < pieces[i - 1].at + pieces[i - 1].len) {
      lua_pushboolean(L, 0);
      return 1;
    }
  }
  if (fit(into, total)) {
    release(into);
    return luaL_error(L, "not enough memory");
  }
  size_t from = 0, len = 0;
  for (lua_Integer i = 0; i < n; i++) {
    size_t tn;
    const char *t = lua_tolstring(L, pieces[i].text, &tn);
    memcpy(into->data + len, base->data + from, pieces[i].at - from);
    len += pieces[i].at - from;
    memcpy(into->data + len, t, tn);
    len += tn;
    from = pieces[i].at + pieces[i].len;
  }
  memcpy(into->data + len, base->data + from, base->len - from);
  into->len = len + base->len - from;
  lua_pushboolean(L, 1);
  lua_pushinteger(L, (lua_Integer)pieces[0].at);       /* bytes the same at the start, */
  lua_pushinteger(L, (lua_Integer)(base->len - from)); /* and at the end */
  return 3;
}

/* render_core.htmlPatchInPlace(buf, old, new) → the place (in UTF-16 units, as a browser's
   string counts) where the text old was in the Html buffer buf, which now holds new there
   instead; nil when old is not there exactly once, false when the text before it is not valid
   UTF-8 (buf as it was either way). A live session's update where one component's tree
   changed: the buffer its connection holds is patched where it is, the diff made from old and
   new alone (no second copy of the page to write and compare). */
int clank_render_html_patch_in_place(lua_State *L) {
  html_t *h = to_html(L, 1);
  if (!h) luaL_typeerror(L, 1, "Html buffer");
  size_t on, nn;
  const char *old = luaL_checklstring(L, 2, &on);
  const char *text = luaL_checklstring(L, 3, &nn);
  long at = h->data ? find_once(h->data, h->len, old, on) : -1;
  if (at < 0) {
    lua_pushnil(L);
    return 1;
  }
  size_t units = clank_utf16_units(h->data, (size_t)at);
  if (units == CLANK_UTF8_BAD) {
    lua_pushboolean(L, 0);
    return 1;
  }
  size_t total = h->len - on + nn;
  /* grown only (the text after the old one is still to move) */
  if (h->cap < total && fit(h, total)) return luaL_error(L, "not enough memory");
  size_t after = (size_t)at + on;
  memmove(h->data + at + nn, h->data + after, h->len - after);
  memcpy(h->data + at, text, nn);
  h->len = total;
  lua_pushinteger(L, (lua_Integer)units);
  return 1;
}

static html_t *check(lua_State *L) {
  html_t *h = to_html(L, 1);
  if (!h) luaL_typeerror(L, 1, "Html buffer");
  return h;
}

static int html_gc(lua_State *L) {
  release(check(L));
  return 0;
}

static int html_len(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check(L)->len);
  return 1;
}

static int html_tostring(lua_State *L) {
  html_t *h = check(L);
  lua_pushlstring(L, h->data ? h->data : "", h->len);
  return 1;
}

static int html_free(lua_State *L) {
  release(check(L));
  return 0;
}

int clank_render_html_buffer(lua_State *L) {
  html_t *h = lua_newuserdatauv(L, sizeof *h, 0);
  memset(h, 0, sizeof *h);
  h->alloc = lua_getallocf(L, &h->ud);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &HTML_MT) != LUA_TTABLE) {
    lua_pop(L, 1);
    static const luaL_Reg meta[] = {
        {"__gc", html_gc}, {"__len", html_len}, {"__tostring", html_tostring}, {NULL, NULL}};
    luaL_newlibtable(L, meta);
    luaL_setfuncs(L, meta, 0);
    lua_pushliteral(L, "clank.Html");
    lua_setfield(L, -2, "__name");
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, html_free);
    lua_setfield(L, -2, "free");
    lua_setfield(L, -2, "__index");
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &HTML_MT);
  }
  lua_setmetatable(L, -2);
  return 1;
}
