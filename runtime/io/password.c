/* clank.password (password.h): Argon2id through libsodium, on libuv's thread
   pool; the calling task waits through clank.db's waits (io/db.h). */
#include "io/password.h"

#include <lauxlib.h>
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/abort.h"
#include "core/protect.h"
#include "core/scheduler.h"
#include "io/db.h"

#define WAIT_MT "clank.password.Wait"
#define PREFIX "$argon2id$"

/* password.DEFAULT, libsodium's INTERACTIVE: one hash took 62-85 ms on the
   2-core machine it was measured on (median of 30: 83 ms; best: 66 ms), the
   time wanted being 50-100 ms. Opslimit 3 at 64 MiB took 81-108 ms, too
   close to the top; 3 at 48 MiB as long as this, but with less memory, which
   is what makes Argon2 dear to attack. */
#define DEFAULT_OPSLIMIT 2
#define DEFAULT_MEMLIMIT (64u << 20)

/* The cost a hash is made with; the state's default is an upvalue. */
typedef struct cost_s {
  unsigned long long ops;
  size_t mem;
} cost_t;

typedef struct wait_s wait_t;

/* A hash or a verify, owned by its wait until the wait lets go of it (the
   result went to the task, an abort, __gc); then by itself, freed when the
   thread is done with it. */
typedef struct job_s {
  uv_work_t req;
  wait_t *wait; /* NULL once let go of; only the loop's thread reads it */
  int verify;
  cost_t cost;
  size_t pwlen;
  char *pw;     /* into data; wiped before it is freed */
  char *stored; /* into data, NUL-terminated (verify) */
  int rc;       /* written by the thread */
  int failed;   /* the pool did not run it */
  char out[crypto_pwhash_STRBYTES];
  char data[];
} job_t;

/* The userdata a task waits on (the wait's owner). */
struct wait_s {
  clank_db_wait_t wait; /* first: db.h waits on the userdata */
  job_t *job;           /* in flight, NULL when none */
};

/* ---- jobs ---- */

static job_t *job_new(const char *pw, size_t pwlen, const char *stored, size_t storedlen) {
  if (pwlen > SIZE_MAX - sizeof(job_t) - storedlen - 2) return NULL;
  job_t *j = malloc(sizeof *j + pwlen + 1 + storedlen + 1);
  if (j == NULL) return NULL;
  memset(j, 0, sizeof *j);
  j->req.data = j;
  j->pw = j->data;
  memcpy(j->pw, pw, pwlen);
  j->pw[pwlen] = '\0';
  j->pwlen = pwlen;
  j->stored = j->data + pwlen + 1;
  memcpy(j->stored, stored, storedlen);
  j->stored[storedlen] = '\0';
  return j;
}

static void job_free(job_t *j) {
  sodium_memzero(j->pw, j->pwlen);
  free(j);
}

/* On a thread of the pool. */
static void job_run(uv_work_t *req) {
  job_t *j = req->data;
  if (j->verify)
    j->rc = crypto_pwhash_str_verify(j->stored, j->pw, j->pwlen);
  else
    j->rc = crypto_pwhash_str_alg(j->out, j->pw, j->pwlen, j->cost.ops, j->cost.mem,
                                  crypto_pwhash_ALG_ARGON2ID13);
}

/* The wait gives up on its job: it frees itself when done, and does not
   start if it has not yet (uv_cancel; job_done is called either way). */
static void let_go(wait_t *w) {
  job_t *j = w->job;
  if (j == NULL) return;
  w->job = NULL;
  j->wait = NULL;
  uv_cancel((uv_req_t *)&j->req);
}

/* pushes the hash, or nil, err (protected: the allocator may refuse) */
static int push_hash(lua_State *L) {
  const job_t *j = lua_touserdata(L, 1);
  if (j->failed)
    return clank_db_push_error(L, "THREAD", "clank.password: the hash never ran", NULL);
  if (j->rc != 0)
    return clank_db_push_error(L, "OUT_OF_MEMORY", "clank.password: no memory for the hash", NULL);
  lua_pushstring(L, j->out);
  return 1;
}

/* On the loop: the thread is done. */
static void job_done(uv_work_t *req, int status) {
  job_t *j = req->data;
  wait_t *w = j->wait;
  if (w == NULL) { /* let go of (a cancelled one among them) */
    job_free(j);
    return;
  }
  w->job = NULL;
  j->failed = status != 0;
  lua_State *co = clank_db_wait_target(&w->wait);
  if (co == NULL) { /* its task is gone */
    job_free(j);
    return;
  }
  int n = 1;
  if (j->verify) {
    lua_pushboolean(co, !j->failed && j->rc == 0);
  } else {
    lua_State *L = w->wait.L;
    int base = lua_gettop(L);
    lua_pushcfunction(L, push_hash);
    lua_pushlightuserdata(L, j);
    if (clank_pcall(L, 1, LUA_MULTRET) != LUA_OK) {
      lua_settop(L, base);
      lua_pushnil(L);
      lua_pushliteral(L, "clank.password: out of memory");
    }
    n = lua_gettop(L) - base;
    lua_xmove(L, co, n);
  }
  job_free(j);
  clank_db_wait_resume(&w->wait, n);
}

/* ---- waits ---- */

/* Abort (maybe from inside Lua: an abort listener): resume soon. */
static void wait_stop(clank_db_wait_t *dw) {
  let_go((wait_t *)dw);
  clank_db_wait_due(dw);
}

static void wait_due(clank_db_wait_t *dw) {
  lua_State *co = clank_db_wait_target(dw);
  if (co == NULL) return;
  clank_db_wait_resume(dw, clank_db_push_stopped(co, dw));
}

static int wait_gc(lua_State *L) {
  wait_t *w = lua_touserdata(L, 1);
  let_go(w);
  clank_db_wait_end(&w->wait);
  return 0;
}

/* Runs a job on the pool (a verify of stored when it is not NULL, else a
   hash at cost) and suspends the task until it is done, or the signal at
   index signal (0: none) aborts. */
static int run(lua_State *L, int signal, const char *pw, size_t pwlen, const char *stored,
               size_t storedlen, cost_t cost) {
  /* all that may raise comes before the job's memory */
  uv_loop_t *loop = clank_db_registry_loop(clank_db_registry_of(L));
  wait_t *w = lua_newuserdatauv(L, sizeof *w, 0);
  memset(w, 0, sizeof *w);
  w->wait.co_ref = w->wait.owner_ref = LUA_NOREF;
  w->wait.on_stop = wait_stop;
  w->wait.on_due = wait_due;
  luaL_setmetatable(L, WAIT_MT);
  job_t *j = job_new(pw, pwlen, stored ? stored : "", storedlen);
  if (j == NULL) return luaL_error(L, "clank.password: out of memory");
  j->verify = stored != NULL;
  j->cost = cost;
  int rc = uv_queue_work(loop, &j->req, job_run, job_done);
  if (rc != 0) {
    job_free(j);
    return clank_db_push_error(L, "THREAD", uv_strerror(rc), NULL);
  }
  w->job = j;
  j->wait = w;
  return clank_db_wait(L, &w->wait, -1, signal, 0, NULL);
}

/* ---- arguments ---- */

static const char *check_bytes(lua_State *L, int arg, size_t *len) {
  luaL_checktype(L, arg, LUA_TSTRING);
  return lua_tolstring(L, arg, len);
}

static lua_Integer cost_field(lua_State *L, int arg, const char *name, lua_Integer def,
                              lua_Integer lo, lua_Integer hi) {
  int type = lua_getfield(L, arg, name);
  if (type == LUA_TNIL) {
    lua_pop(L, 1);
    return def;
  }
  int isint = 0;
  lua_Integer v = type == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
  if (!isint)
    return luaL_argerror(
        L, arg, lua_pushfstring(L, "%s: an integer expected, got %s", name, luaL_typename(L, -1)));
  lua_pop(L, 1);
  if (v < lo || v > hi)
    return luaL_argerror(L, arg, lua_pushfstring(L, "%s must be from %I to %I", name, lo, hi));
  return v;
}

/* params at arg (none or nil: the default), checked against libsodium's limits */
static cost_t check_cost(lua_State *L, int arg) {
  const cost_t *def = lua_touserdata(L, lua_upvalueindex(1));
  if (lua_isnoneornil(L, arg)) return *def;
  luaL_checktype(L, arg, LUA_TTABLE);
  cost_t c;
  c.ops = (unsigned long long)cost_field(L, arg, "opslimit", (lua_Integer)def->ops,
                                         (lua_Integer)crypto_pwhash_opslimit_min(),
                                         (lua_Integer)crypto_pwhash_opslimit_max());
  c.mem = (size_t)cost_field(L, arg, "memlimit", (lua_Integer)def->mem,
                             (lua_Integer)crypto_pwhash_memlimit_min(),
                             (lua_Integer)crypto_pwhash_memlimit_max());
  return c;
}

/* The index of the signal to watch, pushed when it is the task's; 0: none.
   Raises the SPEC §1 message outside a task. */
static int wait_signal(lua_State *L, int arg) {
  if (!lua_isnoneornil(L, arg)) luaL_checkudata(L, arg, CLANK_ABORT_MT);
  if (!clank_in_task(L)) luaL_error(L, CLANK_WAIT_MESSAGE);
  if (!lua_isnoneornil(L, arg)) return arg;
  lua_settop(L, arg);
  clank_abort_push_current(L);
  return lua_isnil(L, -1) ? 0 : lua_gettop(L);
}

/* An Argon2id encoded hash by its shape: the rest is libsodium's to read. */
static int is_argon2id(const char *s, size_t len) {
  return len < crypto_pwhash_STRBYTES && strlen(s) == len &&
         strncmp(s, PREFIX, sizeof PREFIX - 1) == 0;
}

/* ---- the module ---- */

static int password_hash(lua_State *L) {
  size_t pwlen;
  const char *pw = check_bytes(L, 1, &pwlen);
  luaL_argcheck(L, pwlen <= crypto_pwhash_passwd_max(), 1, "password too long");
  cost_t cost = check_cost(L, 2);
  int signal = wait_signal(L, 3);
  if (clank_db_check_signal(L, signal)) return 2;
  return run(L, signal, pw, pwlen, NULL, 0, cost);
}

static int password_verify(lua_State *L) {
  size_t len, pwlen;
  const char *stored = check_bytes(L, 1, &len);
  const char *pw = check_bytes(L, 2, &pwlen);
  int signal = wait_signal(L, 3);
  if (!is_argon2id(stored, len) || pwlen > crypto_pwhash_passwd_max()) {
    lua_pushboolean(L, 0);
    return 1;
  }
  if (clank_db_check_signal(L, signal)) return 2;
  cost_t none = {0, 0};
  return run(L, signal, pw, pwlen, stored, len, none);
}

static int password_needs_rehash(lua_State *L) {
  size_t len;
  const char *stored = check_bytes(L, 1, &len);
  cost_t cost = check_cost(L, 2);
  lua_pushboolean(L, !is_argon2id(stored, len) ||
                         crypto_pwhash_str_needs_rehash(stored, cost.ops, cost.mem) != 0);
  return 1;
}

static const luaL_Reg password_funcs[] = {{"hash", password_hash},
                                          {"verify", password_verify},
                                          {"needsRehash", password_needs_rehash},
                                          {NULL, NULL}};

int luaopen_clank_password(lua_State *L) {
  if (sodium_init() < 0) return luaL_error(L, "clank.password: libsodium failed to start");
  const char *env = getenv("CLANK_PASSWORD_COST");
  cost_t def = {DEFAULT_OPSLIMIT, DEFAULT_MEMLIMIT};
  if (env && strcmp(env, "fast") == 0) {
    def.ops = crypto_pwhash_OPSLIMIT_MIN;
    def.mem = crypto_pwhash_MEMLIMIT_MIN;
  } else if (env && *env) {
    return luaL_error(L, "clank.password: CLANK_PASSWORD_COST is 'fast' or unset, not '%s'", env);
  }
  if (luaL_newmetatable(L, WAIT_MT)) {
    lua_pushcfunction(L, wait_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  luaL_newlibtable(L, password_funcs);
  cost_t *up = lua_newuserdatauv(L, sizeof *up, 0); /* the default, for hash and needsRehash */
  *up = def;
  luaL_setfuncs(L, password_funcs, 1);
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)def.ops);
  lua_setfield(L, -2, "opslimit");
  lua_pushinteger(L, (lua_Integer)def.mem);
  lua_setfield(L, -2, "memlimit");
  lua_setfield(L, -2, "DEFAULT");
  return 1;
}
