/* The memory a list's render reads next, asked for ahead (lua/clank/ui/memo.lua). A publish
   renders a thousand sessions' lists again, and each row's call reads its entry from last
   time: a table whose header and array part are each a cache miss away, since the sessions'
   entries together are far larger than the caches. The row's own work does not depend on the
   next row's entry, so the processor can fetch that while it works: then a call finds its
   entry in the cache (a publish to a thousand sessions of a 100-row list spent about a sixth
   of its CPU waiting for the loads of entries' slots before).

   The public C API reads a table's slots only by loading them, which waits. So this reads
   one field of Lua's own Table structure: the pointer to its array part, with its length
   beside it. That struct is the same in every Lua 5.4 release (lobject.h); module open checks
   it against a table of its own making, and where it differs, only headers are fetched. A
   prefetch never faults, whatever the address. */
#include <lauxlib.h>
#include <stddef.h>
#include <stdint.h>

#include "render/render_internal.h"

#define CACHE_LINE 64

/* Lua 5.4's Table: CommonHeader (next, tt, marked), flags, lsizenode, then these. */
typedef struct {
  void *next;
  unsigned char tt, marked, flags, lsizenode;
  unsigned int alimit; /* the array part's size (or less: a hint, then the size is more) */
  const char *array;   /* TValues of 16 bytes */
} lua54_table_head_t;

#define TVALUE_BYTES 16

/* Whether a table's head reads as lua54_table_head_t says: a table of five slots, the first
   holding another table (a TValue's first field is its object's pointer). */
static int layout_checked(lua_State *L) {
#if LUA_VERSION_NUM == 504
  lua_createtable(L, 5, 0);
  lua_createtable(L, 0, 0);
  const void *inner = lua_topointer(L, -1);
  lua_rawseti(L, -2, 1);
  for (int i = 2; i <= 5; i++) {
    lua_pushinteger(L, i);
    lua_rawseti(L, -2, i);
  }
  const lua54_table_head_t *t = lua_topointer(L, -1);
  int known = t->alimit == 5 && t->array != NULL && *(const void *const *)t->array == inner;
  lua_pop(L, 1);
  return known;
#else
  (void)L;
  return 0;
#endif
}

enum { PF_SLOTS = 1, PF_ARRAYS };

static void prefetch_array(const void *p, lua_Integer slots) {
  const lua54_table_head_t *t = p;
  lua_Integer n = t->alimit < slots ? (lua_Integer)t->alimit : slots;
  const char *array = t->array;
  for (lua_Integer at = 0; at < n * TVALUE_BYTES; at += CACHE_LINE) __builtin_prefetch(array + at);
}

/* prefetch(order, n): the calls after the n-th of a list: order[n + 2]'s head and, when the
   layout is known, the first slots of order[n + 1]'s array part (its head was asked for one call
   earlier, so reading where its array is does not wait). Anything that is not a table is
   skipped. */
static int prefetch_calls(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  if (n > LUA_MAXINTEGER - 2) return 0; /* (nothing is after it) */
  if (lua_rawgeti(L, 1, n + 2) == LUA_TTABLE) __builtin_prefetch(lua_topointer(L, -1));
  if (lua_toboolean(L, lua_upvalueindex(PF_ARRAYS)) && lua_rawgeti(L, 1, n + 1) == LUA_TTABLE)
    prefetch_array(lua_topointer(L, -1), lua_tointeger(L, lua_upvalueindex(PF_SLOTS)));
  return 0;
}

/* render_core.callsPrefetcher(slots) → prefetch(order, n); and whether it fetches array parts */
int clank_render_calls_prefetcher(lua_State *L) {
  lua_Integer slots = luaL_checkinteger(L, 1);
  luaL_argcheck(L, slots >= 0 && slots <= 1024, 1, "expected 0 to 1024 slots");
  lua_settop(L, 1);
  int known = layout_checked(L);
  lua_pushboolean(L, known);
  lua_pushcclosure(L, prefetch_calls, 2);
  lua_pushboolean(L, known);
  return 2;
}
