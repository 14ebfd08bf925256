/* Html buffers: a live session's renders are written into two of these instead of a new Lua
   string each time (a page of tens of KiB per update, for every session of a publish). The
   bytes come from the Lua state's allocator, so the memory cap counts them, but not as the
   collector's debt: a buffer is rewritten, not garbage, and a string per update made the
   collector walk every session's heap again and again.

     render_core.htmlBuffer()  → an empty buffer
     #buf, tostring(buf)       → its length, its text as a string
     buf:free()                → lets its memory go now (it is empty after) */
#include <lauxlib.h>
#include <string.h>

#include "render/render_internal.h"

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

int clank_render_html_set(lua_State *L, int idx, const char *s, size_t n) {
  html_t *h = to_html(L, idx);
  /* the room it needs and an eighth more (a page grows and shrinks by a few bytes an update),
     not much more: a smaller page gives back what a larger one took */
  if (h->cap < n || h->cap > n + n / 4 + 4096) {
    size_t cap = n + n / 8 + 64;
    char *p = h->alloc(h->ud, h->data, h->data ? h->cap : 0, cap);
    if (!p) {
      release(h);
      return -1;
    }
    h->data = p;
    h->cap = cap;
  }
  if (n) memcpy(h->data, s, n);
  h->len = n;
  return 0;
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
