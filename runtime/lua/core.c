/* clank.core: the runtime's own functions (version, waiting). */
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "lua/modules.h"
#include "lua/scheduler.h"
#include "lua/values.h"

#define SCHED_KEY "clank.scheduler"

/* Only its address matters: the registry key of the thread → task table. */
static const char tasks_key = 0;

static void push_tasks(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &tasks_key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_newtable(L); /* weak keys: the table never keeps a thread alive */
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &tasks_key);
}

clank_task_t *clank_task_of(lua_State *co) {
  push_tasks(co);
  lua_pushthread(co);
  lua_rawget(co, -2);
  clank_task_t *t = lua_touserdata(co, -1);
  lua_pop(co, 2);
  return t;
}

static void set_task(lua_State *co, clank_task_t *t) {
  push_tasks(co);
  lua_pushthread(co);
  if (t)
    lua_pushlightuserdata(co, t);
  else
    lua_pushnil(co);
  lua_rawset(co, -3);
  lua_pop(co, 1);
}

void clank_task_bind(clank_task_t *t, lua_State *co) {
  t->co = co;
  set_task(co, t);
}

void clank_task_unbind(lua_State *co) { set_task(co, NULL); }

/* Plain lua5.4 has no host: the first wait makes a loop of its own, owned by
   a userdata in the registry whose __gc closes it. */
typedef struct own_loop_s {
  clank_sched_t sched;
  uv_loop_t loop;
} own_loop_t;

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

static int own_loop_gc(lua_State *L) {
  own_loop_t *o = lua_touserdata(L, 1);
  clank_sched_cancel_all(&o->sched);
  uv_walk(&o->loop, close_walk, NULL);
  while (uv_loop_close(&o->loop) == UV_EBUSY) uv_run(&o->loop, UV_RUN_DEFAULT);
  return 0;
}

clank_sched_t *clank_sched_get(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, SCHED_KEY);
  clank_sched_t *s = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (s != NULL) return s;
  own_loop_t *o = lua_newuserdatauv(L, sizeof *o, 0);
  memset(o, 0, sizeof *o);
  uv_loop_init(&o->loop);
  o->sched.loop = &o->loop;
  lua_newtable(L);
  lua_pushcfunction(L, own_loop_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "clank.own_loop");
  clank_sched_install(L, &o->sched);
  return &o->sched;
}

void clank_sched_install(lua_State *L, clank_sched_t *s) {
  lua_pushlightuserdata(L, s);
  lua_setfield(L, LUA_REGISTRYINDEX, SCHED_KEY);
}

static void wait_unlink(clank_wait_t *w) {
  if (w->prev)
    w->prev->next = w->next;
  else if (w->sched)
    w->sched->waits = w->next;
  if (w->next) w->next->prev = w->prev;
  if (w->task) w->task->wait = NULL;
  w->prev = w->next = NULL;
  w->sched = NULL;
  w->task = NULL;
}

static void wait_closed(uv_handle_t *h) { free(h->data); }

static void wait_fired(uv_timer_t *t) {
  clank_wait_t *w = t->data;
  clank_task_t *task = w->task;
  wait_unlink(w);
  uv_close((uv_handle_t *)&w->timer, wait_closed);
  task->resume(task, 0);
}

void clank_sched_cancel(clank_task_t *t) {
  clank_wait_t *w = t->wait;
  if (w == NULL) return;
  wait_unlink(w);
  uv_close((uv_handle_t *)&w->timer, wait_closed);
}

void clank_sched_cancel_all(clank_sched_t *s) {
  while (s->waits) {
    clank_wait_t *w = s->waits;
    wait_unlink(w);
    uv_close((uv_handle_t *)&w->timer, wait_closed);
  }
}

int clank_sched_sleep(lua_State *L, double ms, lua_KFunction k) {
  clank_task_t *task = clank_task_of(L);
  if (task == NULL || !lua_isyieldable(L))
    return luaL_error(L, "clank.sleep: cannot wait here (not in a handler coroutine)");
  clank_sched_t *s = task->sched;
  clank_wait_t *w = calloc(1, sizeof *w);
  if (w == NULL) return luaL_error(L, "clank.sleep: out of memory");
  uv_timer_init(s->loop, &w->timer);
  w->timer.data = w;
  w->task = task;
  w->sched = s;
  w->next = s->waits;
  if (s->waits) s->waits->prev = w;
  s->waits = w;
  task->wait = w;
  uv_timer_start(&w->timer, wait_fired, (uint64_t)ms, 0);
  /* The scheduler's address tells the driver this yield is a runtime wait. */
  lua_pushlightuserdata(L, s);
  return lua_yieldk(L, 1, 0, k);
}

static int sleep_done(lua_State *L, int status, lua_KContext ctx) {
  (void)L; (void)status; (void)ctx;
  return 0;
}

/* clank.sleep(ms): suspends the calling task. */
static int core_sleep(lua_State *L) {
  lua_Number ms = luaL_checknumber(L, 1);
  luaL_argcheck(L, ms >= 0 && ms <= 2147483647.0, 1, "expected milliseconds between 0 and 2^31-1");
  return clank_sched_sleep(L, ms, sleep_done);
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
