/* clank.core: the runtime's own functions (version, waiting). */
#include <lauxlib.h>
#include <stdlib.h>

#include "lua/modules.h"
#include "lua/scheduler.h"
#include "lua/values.h"

#define SCHED_KEY "clank.scheduler"

clank_sched_t *clank_sched_get(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, SCHED_KEY);
  clank_sched_t *s = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return s;
}

void clank_sched_install(lua_State *L, clank_sched_t *s) {
  lua_pushlightuserdata(L, s);
  lua_setfield(L, LUA_REGISTRYINDEX, SCHED_KEY);
}

/* A runtime coroutine carries its host's exchange in its extra space; threads
   made by coroutine.create copy the main thread's, which stays NULL. */
static int is_runtime_thread(lua_State *L) { return *(void **)lua_getextraspace(L) != NULL; }

static void wait_unlink(clank_wait_t *w) {
  if (w->prev)
    w->prev->next = w->next;
  else if (w->sched)
    w->sched->waits = w->next;
  if (w->next) w->next->prev = w->prev;
  w->prev = w->next = NULL;
  w->sched = NULL;
}

static void wait_closed(uv_handle_t *h) { free(h->data); }

static void wait_fired(uv_timer_t *t) {
  clank_wait_t *w = t->data;
  clank_sched_t *s = w->sched;
  lua_State *co = w->co;
  wait_unlink(w);
  uv_close((uv_handle_t *)&w->timer, wait_closed);
  s->resume(s, co, 0);
}

void clank_sched_cancel_all(clank_sched_t *s) {
  while (s->waits) {
    clank_wait_t *w = s->waits;
    wait_unlink(w);
    uv_close((uv_handle_t *)&w->timer, wait_closed);
  }
}

static int sleep_done(lua_State *L, int status, lua_KContext ctx) {
  (void)L; (void)status; (void)ctx;
  return 0;
}

/* clank.sleep(ms): suspends the calling runtime coroutine. */
static int core_sleep(lua_State *L) {
  lua_Number ms = luaL_checknumber(L, 1);
  luaL_argcheck(L, ms >= 0 && ms <= 2147483647.0, 1, "expected milliseconds between 0 and 2^31-1");
  clank_sched_t *s = clank_sched_get(L);
  if (s == NULL || !lua_isyieldable(L) || !is_runtime_thread(L))
    return luaL_error(L, "clank.sleep: cannot wait here (not in a handler coroutine)");
  clank_wait_t *w = calloc(1, sizeof *w);
  if (w == NULL) return luaL_error(L, "clank.sleep: out of memory");
  uv_timer_init(s->loop, &w->timer);
  w->timer.data = w;
  w->co = L;
  w->sched = s;
  w->next = s->waits;
  if (s->waits) s->waits->prev = w;
  s->waits = w;
  uv_timer_start(&w->timer, wait_fired, (uint64_t)ms, 0);
  /* The scheduler's address tells the host this yield is a runtime wait. */
  lua_pushlightuserdata(L, s);
  return lua_yieldk(L, 1, 0, sleep_done);
}

static int core_array(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  clank_mark_array(L, 1);
  return 1;
}

static const luaL_Reg core_funcs[] = {
  {"sleep", core_sleep},
  {"array", core_array},
  {NULL, NULL}
};

int luaopen_clank_core(lua_State *L) {
  luaL_newlib(L, core_funcs);
  lua_pushliteral(L, CLANK_VERSION);
  lua_setfield(L, -2, "version");
  clank_push_null(L);
  lua_setfield(L, -2, "null");
  return 1;
}
