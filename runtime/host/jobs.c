/* Durable jobs' hands in clank-run (jobs.h). The runner itself is Lua
   (lua/clank/jobs/runner.lua); here it is started, stopped, and its running
   jobs counted into the generation's in-flight work. */
#include "host/jobs.h"

#include <lauxlib.h>

#include "core/protect.h"
#include "core/scheduler.h"

/* How long past a job's own time limit a retired generation waits for it. */
#define JOB_LINGER_MS 5000

/* hold(delta, ms): upvalues h and g. */
static int hold(lua_State *L) {
  clank_host_t *h = lua_touserdata(L, lua_upvalueindex(1));
  clank_gen_t *g = lua_touserdata(L, lua_upvalueindex(2));
  int delta = (int)luaL_checkinteger(L, 1);
  lua_Integer ms = luaL_optinteger(L, 2, 0);
  g->inflight += delta;
  g->jobs_held += delta;
  h->jobs_held += delta;
  if (delta > 0 && g->retired && ms > 0) {
    uint64_t bound = uv_now(&h->loop) + (uint64_t)ms + JOB_LINGER_MS;
    if (bound > g->retire_deadline) g->retire_deadline = bound;
  }
  if (delta < 0) {
    clank_host_gen_idle(h, g);
    clank_host_stop_if_done(h);
  }
  return 0;
}

/* runner:method(...) for the runner of g, the arguments on top (popped). */
static void call_runner(clank_host_t *h, clank_gen_t *g, const char *method, int nargs) {
  lua_State *L = g->L;
  if (lua_getfield(L, LUA_REGISTRYINDEX, CLANK_JOBS_KEY) != LUA_TTABLE) {
    lua_pop(L, 1 + nargs);
    return;
  }
  lua_getfield(L, -1, method);
  lua_insert(L, -2 - nargs);
  lua_insert(L, -1 - nargs); /* [method, runner, args...] */
  if (clank_pcall(L, nargs + 1, 0) != LUA_OK) {
    clank_log_msg(&h->log, "error", "jobs: %s failed: %s", method, clank_error_text(L, -1));
    lua_pop(L, 1);
  }
}

void clank_jobs_attach(clank_host_t *h, clank_gen_t *g) {
  lua_State *L = g->L;
  lua_pushlightuserdata(L, h);
  lua_pushlightuserdata(L, g);
  lua_pushcclosure(L, hold, 2);
  lua_setfield(L, LUA_REGISTRYINDEX, CLANK_HOLD_KEY);
  if (h->opts.check) return;
  call_runner(h, g, "start", 0);
}

void clank_jobs_stop(clank_host_t *h, uint64_t ms) {
  for (clank_gen_t *g = h->retired; g; g = g->next_retired) {
    lua_pushinteger(g->L, (lua_Integer)ms);
    call_runner(h, g, "stop", 1);
  }
  if (h->gen) {
    lua_pushinteger(h->gen->L, (lua_Integer)ms);
    call_runner(h, h->gen, "stop", 1);
  }
}
