/* The ctx an action run by the bridge gets (SPEC §5 step 8): the context's
   fields, then request, requestId, log, progress and signal, the last ones
   served lazily by a metatable when first read, so a handler that reads
   none of them costs no closure, table or string. Owns the metatables of
   such ctxs: one per action, held by the action (clank_action_set_held),
   and one for ctxs made for no action (bridge.context), held by the
   scheduler (CLANK_HELD_CTX_META). */
#include <stdint.h>
#include <string.h>

#include "agent/action.h"
#include "agent/bridge_internal.h"
#include "core/abort.h"
#include "util/bytes.h"

/* Only their addresses matter. In a ctx the bridge made: the key of its
   request's maker (a request not built yet), of its request id as the
   integer of a made-up one (16 hex digits, as the server makes them), and
   the mark that ctx.signal was given once (cleared by the action afterwards,
   it stays cleared). In the metatable of such ctxs (one per action, held by
   the action), the key of the action, whose log and progress ctx serves. */
static const char maker_key = 0;
static const char id_key = 0;
static const char given_key = 0;
static const char action_key = 0;

/* The integer of a request id of 16 lowercase hex digits, in *n. */
static int id_number(const char *id, lua_Integer *n) {
  /* a digit's value + 1, 0 for any other byte */
  static const unsigned char digit[256] = {
      ['0'] = 1, ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,  ['7'] = 8,
      ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
  };
  uint64_t v = 0;
  for (int i = 0; i < 16; i++) {
    unsigned d = digit[(unsigned char)id[i]];
    if (d == 0) return 0;
    v = v << 4 | (d - 1);
  }
  if (id[16] != '\0') return 0;
  *n = (lua_Integer)v;
  return 1;
}

/* ctx.requestId from the integer at id_key, kept in ctx; the integer goes
   (a requestId cleared afterwards stays cleared). */
static int give_request_id(lua_State *L) {
  if (lua_rawgetp(L, 1, &id_key) != LUA_TNUMBER) return 1;
  uint64_t n = (uint64_t)lua_tointeger(L, -1);
  lua_pushnil(L);
  lua_rawsetp(L, 1, &id_key);
  char id[16];
  for (int i = 15; i >= 0; i--, n >>= 4) id[i] = clank_hex_digits[n & 15];
  lua_pushlstring(L, id, sizeof id);
  lua_pushvalue(L, -1);
  lua_setfield(L, 1, "requestId");
  return 1;
}

/* __index of such a ctx: ctx.request builds the request (calling the maker
   ctx holds: no closure per request) and ctx.signal makes the request's
   signal, ctx being its holder (abort.h), so that a driver which aborted it
   before gives one born aborted; each is kept in ctx. ctx.requestId is
   written out when first read; ctx.log and ctx.progress are the action's. */
static int ctx_index(lua_State *L) {
  size_t n = 0;
  const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &n) : NULL;
  if (key == NULL) return 0;
  if (n == 7 && memcmp(key, "request", 7) == 0) {
    if (lua_rawgetp(L, 1, &maker_key) == LUA_TNIL) return 1;
    lua_call(L, 0, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, 1, "request");
    return 1;
  }
  if (n == 9 && memcmp(key, "requestId", 9) == 0) return give_request_id(L);
  if (n == 6 && memcmp(key, "signal", 6) == 0) {
    if (lua_rawgetp(L, 1, &given_key) != LUA_TNIL) return 0;
    lua_pushboolean(L, 1);
    lua_rawsetp(L, 1, &given_key);
    lua_pushvalue(L, 1);
    clank_abort_resolve(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, 1, "signal");
    return 1;
  }
  if (!lua_getmetatable(L, 1) || lua_rawgetp(L, -1, &action_key) != LUA_TUSERDATA) return 0;
  return clank_action_give_log_field(L, lua_gettop(L), key, n);
}

/* next for a lazy ctx: the keys only the runtime uses (light userdata) are
   skipped. */
static int ctx_next(lua_State *L) {
  lua_settop(L, 2);
  while (lua_next(L, 1)) {
    if (lua_type(L, -2) != LUA_TLIGHTUSERDATA) return 2;
    lua_pop(L, 1);
  }
  lua_pushnil(L);
  return 1;
}

/* __pairs of a lazy ctx: what is served when read is read first and kept,
   so pairs lists what a ctx made at once listed (its request aside, as
   before), and nothing of the runtime's own keys. */
static int ctx_pairs(lua_State *L) {
  static const char *const served[] = {"requestId", "log", "progress", "signal"};
  luaL_checktype(L, 1, LUA_TTABLE);
  for (size_t i = 0; i < sizeof served / sizeof *served; i++) {
    lua_pushstring(L, served[i]);
    if (lua_rawget(L, 1) == LUA_TNIL && lua_getfield(L, 1, served[i]) != LUA_TNIL)
      lua_setfield(L, 1, served[i]);
    lua_settop(L, 1);
  }
  lua_pushcfunction(L, ctx_next);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

/* Pushes a new metatable for ctxs: their lazy fields served by ctx_index,
   listed by ctx_pairs. */
static void new_ctx_meta(lua_State *L) {
  lua_createtable(L, 0, 3);
  lua_pushcfunction(L, ctx_index);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, ctx_pairs);
  lua_setfield(L, -2, "__pairs");
}

/* Pushes the metatable of the ctxs made for the action at action (0: for
   none), made once per state and action: held by the action itself (its
   slot for the bridge, no lookup), the one for none by the scheduler. */
static void push_ctx_meta(lua_State *L, clank_sched_t *s, int action) {
  if (action) {
    if (clank_action_push_held(L, action) == LUA_TTABLE) return;
    lua_pop(L, 1);
    new_ctx_meta(L);
    lua_pushvalue(L, action);
    lua_rawsetp(L, -2, &action_key);
    lua_pushvalue(L, -1);
    clank_action_set_held(L, action);
    return;
  }
  int *meta = &s->held[CLANK_HELD_CTX_META];
  if (*meta != 0) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, *meta);
    return;
  }
  new_ctx_meta(L);
  lua_pushvalue(L, -1);
  *meta = luaL_ref(L, LUA_REGISTRYINDEX);
}

/* What an action gets before its signal. A request not built yet (a maker)
   is built when ctx.request is first read. action: 0, or the index of the
   action ctx is for: then ctx is lazy, its log, progress, signal
   (bridge_run.c's hold_signal) and request id served when read, and the
   context's own `signal` gives way. t: the running task (clank_task_of),
   whose request id ctx carries; s: the scheduler, or NULL. src, req and
   action are positive indices. */
void clank_bridge_push_ctx(lua_State *L, int src, int req, clank_task_t *t, int action,
                           clank_sched_t *s) {
  int copied = lua_istable(L, src);
  /* room for what is set now and for some of what is served when read
     (the request or its maker, the request id): no rehash on the way (a
     context's fields may take more) */
  lua_createtable(L, 0, copied ? 8 : 4);
  lua_Integer id;
  int maker = lua_type(L, req) == LUA_TUSERDATA;
  if (t && t->request_id[0]) { /* x-request-id (SPEC §13); the context may still override it */
    if (action && id_number(t->request_id, &id)) {
      lua_pushinteger(L, id);
      lua_rawsetp(L, -2, &id_key);
    } else {
      lua_pushstring(L, t->request_id);
      lua_setfield(L, -2, "requestId");
    }
  }
  if (copied) {
    for (lua_pushnil(L); lua_next(L, src); lua_pop(L, 1)) {
      lua_pushvalue(L, -2);
      lua_pushvalue(L, -2);
      lua_rawset(L, -5);
    }
    if (action) {
      lua_pushnil(L);
      lua_setfield(L, -2, "signal");
      if (lua_getfield(L, -1, "requestId") != LUA_TNIL) { /* the context's, overriding */
        lua_pushnil(L);
        lua_rawsetp(L, -3, &id_key);
      }
      lua_pop(L, 1);
    }
  }
  int lazy = action != 0;
  if (!maker) {
    lua_pushvalue(L, req);
    lua_setfield(L, -2, "request");
  } else {
    if (copied) { /* the context's own `request` gives way, as it would to the table */
      lua_pushnil(L);
      lua_setfield(L, -2, "request");
    }
    lua_pushvalue(L, req);
    lua_rawsetp(L, -2, &maker_key);
    lazy = 1;
  }
  if (lazy) {
    push_ctx_meta(L, s ? s : clank_sched_get(L), action);
    lua_setmetatable(L, -2);
  }
}

static int context_k(lua_State *L, int status, lua_KContext k) {
  (void)status;
  (void)k;
  clank_bridge_push_ctx(L, 3, 2, clank_task_of(L), 0, NULL);
  return 1;
}

/* bridge.context(source, request) → ctx as handle() builds it: the fields
   of source (a table, or a function(request) returning one; it may wait),
   then request. The run adds the signal. */
static int l_context(lua_State *L) {
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  if (lua_isfunction(L, 1)) {
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_callk(L, 1, 1, 0, context_k);
  } else {
    lua_pushvalue(L, 1);
  }
  return context_k(L, LUA_OK, 0);
}

const luaL_Reg clank_bridge_ctx_funcs[] = {{"context", l_context}, {NULL, NULL}};
