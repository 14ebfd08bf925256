/* clank.db's shared C side (see db.h): the registry of pools, and waits. */
#include "io/db.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/abort.h"

struct clank_db_registry_s {
  uv_loop_t *loop;
  uv_timer_t timer; /* deadlines and due waits */
  int closed, timer_closed;
  clank_db_pool_t *pools;
  clank_db_wait_t *waits;
  unsigned long due_seq; /* due waits resume in the order they became due */
};

static void registry_maybe_free(clank_db_registry_t *r) {
  if (r->closed && r->timer_closed && r->pools == NULL && r->waits == NULL) free(r);
}

static void tick(uv_timer_t *t);

clank_db_registry_t *clank_db_registry_new(uv_loop_t *loop) {
  clank_db_registry_t *r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  r->loop = loop;
  uv_timer_init(loop, &r->timer);
  r->timer.data = r;
  return r;
}

uv_loop_t *clank_db_registry_loop(clank_db_registry_t *r) { return r->loop; }

static void timer_closed(uv_handle_t *h) {
  clank_db_registry_t *r = h->data;
  r->timer_closed = 1;
  registry_maybe_free(r);
}

void clank_db_registry_close(clank_db_registry_t *r) {
  if (r == NULL || r->closed) return;
  r->closed = 1;
  for (clank_db_pool_t *p = r->pools, *next; p; p = next) {
    next = p->next;
    p->closed = 1;
    if (!p->handles_closed) p->shutdown(p, 1); /* also those still stopping */
  }
  uv_close((uv_handle_t *)&r->timer, timer_closed);
}

/* Plain lua5.4: the registry belongs to the state, closed by this __gc
   (after every pool and conn userdata, which were made after it). */
static int own_registry_gc(lua_State *L) {
  clank_db_registry_t **box = lua_touserdata(L, 1);
  if (*box) clank_db_registry_close(*box);
  *box = NULL;
  return 0;
}

/* Only its address matters: the scheduler slot of the registry. */
static const char registry_slot = 0;

void clank_db_registry_attach(clank_sched_t *s, clank_db_registry_t *r) {
  clank_sched_set_slot(s, &registry_slot, r, NULL);
}

clank_db_registry_t *clank_db_registry_of(lua_State *L) {
  clank_sched_t *s = clank_sched_get(L);
  clank_db_registry_t *shared = clank_sched_slot(s, &registry_slot);
  if (shared) return shared;
  clank_db_registry_t **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = clank_db_registry_new(s->loop);
  if (*box == NULL) luaL_error(L, "clank.db: out of memory");
  lua_newtable(L);
  lua_pushcfunction(L, own_registry_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "clank.db.registry");
  clank_db_registry_attach(s, *box);
  return *box;
}

/* ---- pools ---- */

clank_db_pool_t *clank_db_pool_find(clank_db_registry_t *r, const char *key) {
  for (clank_db_pool_t *p = r->pools; p; p = p->next)
    if (p->key && !p->closed && strcmp(p->key, key) == 0) {
      p->refs++;
      return p;
    }
  return NULL;
}

void clank_db_pool_add(clank_db_registry_t *r, clank_db_pool_t *p, const char *key) {
  p->reg = r;
  p->key = strdup(key);
  p->refs = 1;
  p->closed = r->closed;
  p->prev = NULL;
  p->next = r->pools;
  if (r->pools) r->pools->prev = p;
  r->pools = p;
}

void clank_db_pool_ref(clank_db_pool_t *p) { p->refs++; }

static void pool_free(clank_db_pool_t *p) {
  clank_db_registry_t *r = p->reg;
  if (p->prev)
    p->prev->next = p->next;
  else
    r->pools = p->next;
  if (p->next) p->next->prev = p->prev;
  free(p->key);
  p->free(p);
  registry_maybe_free(r);
}

void clank_db_pool_unref(clank_db_pool_t *p) {
  if (--p->refs > 0) return;
  if (p->handles_closed) {
    pool_free(p);
    return;
  }
  free(p->key); /* out of the lookup: a new open makes a new pool */
  p->key = NULL;
  if (!p->closed) {
    p->closed = 1;
    p->shutdown(p, 0);
  }
}

void clank_db_pool_handles_closed(clank_db_pool_t *p) {
  p->handles_closed = 1;
  if (p->refs == 0) pool_free(p);
}

/* ---- waits ---- */

static void schedule(clank_db_registry_t *r) {
  if (r->closed) return;
  uint64_t now = uv_now(r->loop), next = UINT64_MAX;
  for (clank_db_wait_t *w = r->waits; w; w = w->next) {
    if (w->due) {
      next = now;
      break;
    }
    if (w->deadline && !w->stopped && w->deadline < next) next = w->deadline;
  }
  if (next == UINT64_MAX) {
    uv_timer_stop(&r->timer);
    return;
  }
  uv_timer_start(&r->timer, tick, next > now ? next - now : 0, 0);
}

static void tick(uv_timer_t *t) {
  clank_db_registry_t *r = t->data;
  uint64_t now = uv_now(r->loop);
  for (;;) {
    clank_db_wait_t *w = NULL;
    for (clank_db_wait_t *x = r->waits; x; x = x->next) {
      if (x->due && (w == NULL || !w->due || x->due < w->due))
        w = x;
      else if (w == NULL && !x->due && x->deadline && !x->stopped && x->deadline <= now)
        w = x;
    }
    if (w == NULL) break;
    if (w->due) {
      w->due = 0;
      w->on_due(w);
    } else {
      w->stopped = "TIMEOUT";
      strcpy(w->reason, "timeout");
      w->on_stop(w);
    }
  }
  schedule(r);
}

void clank_db_wait_due(clank_db_wait_t *w) {
  if (!w->active || w->due) return;
  w->due = ++w->reg->due_seq;
  schedule(w->reg);
}

static int wait_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  return lua_gettop(L) - (int)ctx;
}

static int on_abort(lua_State *L) {
  clank_db_wait_t *w = lua_touserdata(L, lua_upvalueindex(1));
  lua_Integer serial = lua_tointeger(L, lua_upvalueindex(2));
  if (w == NULL || !w->active || (lua_Integer)w->serial != serial || w->stopped) return 0;
  const char *reason = luaL_tolstring(L, 1, NULL);
  w->stopped = "ABORTED";
  snprintf(w->reason, sizeof w->reason, "%s", reason);
  w->on_stop(w);
  return 0;
}

int clank_db_wait(lua_State *L, clank_db_wait_t *w, int owner, int signal, double timeout_ms,
                  lua_KFunction k) {
  clank_task_t *task = lua_isyieldable(L) ? clank_task_of(L) : NULL;
  if (task == NULL) return luaL_error(L, CLANK_WAIT_MESSAGE);
  owner = lua_absindex(L, owner);
  if (signal) signal = lua_absindex(L, signal);
  clank_db_registry_t *r = clank_db_registry_of(L);
  w->reg = r;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  w->L = lua_tothread(L, -1);
  lua_pop(L, 1);
  w->co = L;
  w->task = task;
  lua_pushthread(L);
  w->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, owner);
  w->owner_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  w->active = 1;
  w->serial++;
  w->due = 0;
  w->stopped = NULL;
  w->reason[0] = '\0';
  w->deadline = 0;
  w->prev = NULL;
  w->next = r->waits;
  if (r->waits) r->waits->prev = w;
  r->waits = w;
  if (timeout_ms > 0) {
    uv_update_time(r->loop);
    w->deadline = uv_now(r->loop) + (uint64_t)timeout_ms;
    if (w->deadline == 0) w->deadline = 1;
    schedule(r);
  }
  if (signal) {
    /* signal:onAbort(listener); the listener names this wait by its serial */
    lua_pushvalue(L, owner);
    lua_pushinteger(L, (lua_Integer)w->serial);
    lua_pushcclosure(L, on_abort, 2);
    clank_abort_listen(L, signal);
  }
  int base = lua_gettop(L);
  lua_pushlightuserdata(L, task->sched);
  return lua_yieldk(L, 1, base, k ? k : wait_k);
}

void clank_db_wait_end(clank_db_wait_t *w) {
  if (!w->active) return;
  clank_db_registry_t *r = w->reg;
  w->active = 0;
  w->due = 0;
  if (w->prev)
    w->prev->next = w->next;
  else
    r->waits = w->next;
  if (w->next) w->next->prev = w->prev;
  w->prev = w->next = NULL;
  luaL_unref(w->L, LUA_REGISTRYINDEX, w->co_ref);
  luaL_unref(w->L, LUA_REGISTRYINDEX, w->owner_ref);
  w->co_ref = w->owner_ref = LUA_NOREF;
  registry_maybe_free(r);
}

lua_State *clank_db_wait_target(clank_db_wait_t *w) {
  if (!w->active) return NULL;
  lua_State *co = w->co;
  if (lua_status(co) != LUA_YIELD || !lua_checkstack(co, 8) || clank_task_of(co) != w->task) {
    clank_db_wait_end(w);
    return NULL;
  }
  return co;
}

void clank_db_wait_resume(clank_db_wait_t *w, int nargs) {
  clank_task_t *task = w->task;
  clank_db_wait_end(w);
  task->resume(task, nargs);
}

int clank_db_push_error(lua_State *L, const char *code, const char *message, const char *reason) {
  lua_pushnil(L);
  lua_createtable(L, 0, 3);
  lua_pushstring(L, message);
  lua_setfield(L, -2, "message");
  lua_pushstring(L, code);
  lua_setfield(L, -2, "code");
  if (reason) {
    lua_pushstring(L, reason);
    lua_setfield(L, -2, "reason");
  }
  return 2;
}

int clank_db_push_stopped(lua_State *L, const clank_db_wait_t *w) {
  if (w->stopped && strcmp(w->stopped, "TIMEOUT") == 0)
    return clank_db_push_error(L, "TIMEOUT", "timeout", "timeout");
  char msg[96];
  snprintf(msg, sizeof msg, "aborted: %s", w->reason);
  return clank_db_push_error(L, "ABORTED", msg, w->reason);
}

int clank_db_check_signal(lua_State *L, int idx) {
  if (idx == 0 || lua_isnoneornil(L, idx)) return 0;
  int state = clank_abort_state(L, idx);
  if (state < 0) luaL_checkudata(L, idx, CLANK_ABORT_MT); /* raises */
  if (state == 0) return 0;
  lua_getfield(L, idx, "reason");
  const char *reason = lua_isstring(L, -1) ? lua_tostring(L, -1) : "aborted";
  char msg[96];
  snprintf(msg, sizeof msg, "aborted: %s", reason);
  lua_pushstring(L, reason);
  clank_db_push_error(L, "ABORTED", msg, lua_tostring(L, -1));
  lua_remove(L, -3);
  lua_remove(L, -3);
  return 1;
}
