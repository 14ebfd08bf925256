/* clank.AbortSignal (abort.h): making, reading and firing signals; a
   signal's state (aborted, reason, onAbort callbacks) lives in its Lua table. */
#include "core/abort.h"

#include <lauxlib.h>
#include <string.h>

#include "core/protect.h"
#include "core/scheduler.h"

/* The userdata holds the flag; its uservalue is { reason = ..., [i] = listener },
   made when first needed: most signals are never listened to nor aborted. */
typedef struct abort_s {
  int aborted;
} abort_t;

static abort_t *check_signal(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, CLANK_ABORT_MT);
}

/* Pushes the uservalue of the signal at idx, made now if it was not yet. */
static void push_state(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_getiuservalue(L, idx, 1) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_setiuservalue(L, idx, 1);
}

static int signal_on_abort(lua_State *L) {
  abort_t *a = check_signal(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  push_state(L, 1);
  if (a->aborted) {
    /* Too late to wait for it: tell the listener at once. */
    lua_pushvalue(L, 2);
    lua_getfield(L, -2, "reason");
    lua_call(L, 1, 0);
    return 0;
  }
  lua_pushvalue(L, 2);
  lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
  return 0;
}

static int signal_index(lua_State *L) {
  abort_t *a = check_signal(L, 1);
  const char *key = luaL_checkstring(L, 2);
  if (strcmp(key, "aborted") == 0) {
    lua_pushboolean(L, a->aborted);
  } else if (strcmp(key, "reason") == 0) {
    if (lua_getiuservalue(L, 1, 1) == LUA_TTABLE) lua_getfield(L, -1, "reason");
  } else if (strcmp(key, "onAbort") == 0) {
    lua_pushcfunction(L, signal_on_abort);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

static int signal_tostring(lua_State *L) {
  abort_t *a = check_signal(L, 1);
  lua_pushstring(L, a->aborted ? "clank.AbortSignal (aborted)" : "clank.AbortSignal");
  return 1;
}

/* Only its address matters: the registry key the metatable is held under
   for clank_abort_push, which runs on every action (its name is interned on
   each lookup; luaL_checkudata still finds it by name). */
static const char meta_key = 0;

void clank_abort_push(lua_State *L) {
  abort_t *a = lua_newuserdatauv(L, sizeof *a, 1);
  a->aborted = 0;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &meta_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    if (luaL_newmetatable(L, CLANK_ABORT_MT)) {
      lua_pushcfunction(L, signal_index);
      lua_setfield(L, -2, "__index");
      lua_pushcfunction(L, signal_tostring);
      lua_setfield(L, -2, "__tostring");
    }
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &meta_key);
  }
  lua_setmetatable(L, -2);
}

/* The signal at idx, or NULL when it is something else: by the metatable's
   registry key, not its name, for the waits that check on every query. */
static abort_t *to_signal(lua_State *L, int idx) {
  abort_t *a = lua_touserdata(L, idx);
  if (a == NULL || !lua_getmetatable(L, idx)) return NULL;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &meta_key);
  int same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same ? a : NULL;
}

int clank_abort_state(lua_State *L, int idx) {
  abort_t *a = to_signal(L, idx);
  return a ? a->aborted : -1;
}

void clank_abort_listen(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  abort_t *a = to_signal(L, idx);
  if (a == NULL) luaL_checkudata(L, idx, CLANK_ABORT_MT); /* raises */
  push_state(L, idx);
  if (a->aborted) { /* too late to wait for it: tell the listener at once */
    lua_getfield(L, -1, "reason");
    lua_remove(L, -2);
    lua_call(L, 1, 0);
    return;
  }
  lua_insert(L, -2);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  lua_pop(L, 1);
}

/* Only its address matters: a holder's [&held_key] is its signal, or the
   reason it was fired with before its signal was made. */
static const char held_key = 0;

void clank_abort_resolve(lua_State *L) {
  if (!lua_istable(L, -1)) return;
  int holder = lua_gettop(L);
  int type = lua_rawgetp(L, holder, &held_key);
  if (type == LUA_TUSERDATA) {
    lua_replace(L, holder);
    return;
  }
  clank_abort_push(L);
  if (type == LUA_TSTRING) clank_abort_fire(L, -1, lua_tostring(L, -2)); /* born aborted */
  lua_pushvalue(L, -1);
  lua_rawsetp(L, holder, &held_key);
  lua_replace(L, holder);
  lua_pop(L, 1);
}

int clank_abort_push_current(lua_State *L) {
  clank_task_t *t = clank_task_of(L);
  if (t) clank_task_hold_signal(t); /* an action's handler without ctx: its holder now */
  if (t && t->signal_ref == 0 && t->wants_signal) {
    /* A route's first wait: the request's signal is made now. It has no
       deadline. */
    clank_abort_push(L);
    lua_pushvalue(L, -1);
    t->signal_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    t->signal_lazy = 1;
  } else if (t && t->signal_ref > 0) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->signal_ref);
    clank_abort_resolve(L); /* a bridge's request holds its signal in its ctx */
  } else {
    lua_pushnil(L);
  }
  return t && t->signal_ref > 0 && !t->signal_lazy;
}

void clank_abort_fire(lua_State *L, int idx, const char *reason) {
  idx = lua_absindex(L, idx);
  if (lua_istable(L, idx)) { /* a holder */
    int type = lua_rawgetp(L, idx, &held_key);
    if (type == LUA_TUSERDATA) {
      clank_abort_fire(L, -1, reason);
    } else if (type != LUA_TSTRING) { /* the first reason is the one */
      lua_pushstring(L, reason);
      lua_rawsetp(L, idx, &held_key);
    }
    lua_pop(L, 1);
    return;
  }
  abort_t *a = luaL_testudata(L, idx, CLANK_ABORT_MT);
  if (a == NULL || a->aborted) return;
  a->aborted = 1;
  push_state(L, idx);
  lua_pushstring(L, reason);
  lua_setfield(L, -2, "reason");
  lua_Integer n = luaL_len(L, -1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, -1, i);
    lua_pushstring(L, reason);
    if (clank_pcall(L, 1, 0) != LUA_OK) {
      clank_sched_log(L, "error", "an onAbort listener failed: %s", clank_error_text(L, -1));
      lua_pop(L, 2);
    }
    lua_pushnil(L);
    lua_rawseti(L, -2, i);
  }
  lua_pop(L, 1);
}
