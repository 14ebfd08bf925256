/* clank.null and the JSON-array mark (values.h), made once per Lua state and
   held in the scheduler's held slot. */
#include "core/values.h"

#include <lauxlib.h>

#include "core/scheduler.h"

/* Only its address matters; it is never written. */
static const char null_tag = 0;

void clank_push_null(lua_State *L) { lua_pushlightuserdata(L, (void *)&null_tag); }

int clank_is_null(lua_State *L, int idx) {
  return lua_type(L, idx) == LUA_TLIGHTUSERDATA && lua_touserdata(L, idx) == &null_tag;
}

/* Only its address matters: the registry key under which the array
   metatable is held too, found without hashing its name. */
static const char array_mt_key = 0;

void clank_push_array_mt(lua_State *L) {
  /* in clank-run, held by the scheduler too: one array read, no hashing */
  clank_sched_t *s = clank_sched_held(L);
  if (s && s->held[CLANK_HELD_ARRAY_MT]) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->held[CLANK_HELD_ARRAY_MT]);
    return;
  }
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &array_mt_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    luaL_newmetatable(L, CLANK_ARRAY_MT); /* or the one registered already */
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &array_mt_key);
  }
  if (s) {
    lua_pushvalue(L, -1);
    s->held[CLANK_HELD_ARRAY_MT] = luaL_ref(L, LUA_REGISTRYINDEX);
  }
}

void clank_mark_array(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  clank_push_array_mt(L);
  lua_setmetatable(L, idx);
}

int clank_is_marked_array(lua_State *L, int idx) {
  if (!lua_getmetatable(L, idx)) return 0;
  clank_push_array_mt(L);
  int marked = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return marked;
}

void *clank_tagged(lua_State *L, int idx, size_t size, const void *tag) {
  void *p = lua_touserdata(L, idx); /* NULL unless a userdata; a light one has no length */
  if (p == NULL || lua_rawlen(L, idx) != size) return NULL;
  return *(const void *const *)p == tag ? p : NULL;
}
