/* clank.core: the runtime's own functions (version, waiting, the log). */
#include <lauxlib.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <time.h>

#include "core/alloc.h"
#include "core/protect.h"
#include "io/db.h"
#include "modules/modules.h"
#include "core/scheduler.h"
#include "core/abort.h"
#include "core/values.h"
#include "client/client_js.h"

static int sleep_done(lua_State *L, int status, lua_KContext ctx) {
  (void)L;
  (void)status;
  (void)ctx;
  return 0;
}

static double check_ms(lua_State *L, int arg) {
  lua_Number ms = luaL_checknumber(L, arg);
  luaL_argcheck(L, ms >= 0 && ms <= 2147483647.0, arg, "expected milliseconds from 0 to 2^31-1");
  return ms;
}

/* clank.sleep(ms): suspends the calling task. */
static int core_sleep(lua_State *L) { return clank_sched_sleep(L, check_ms(L, 1), sleep_done, 0); }

static void abort_with(clank_wait_t *w, const char *reason) {
  lua_rawgeti(w->L, LUA_REGISTRYINDEX, w->ref);
  clank_abort_fire(w->L, -1, reason);
  lua_pop(w->L, 1);
}

static void timeout_fired(clank_wait_t *w) { abort_with(w, "timeout"); }
static void timeout_retired(clank_wait_t *w) { abort_with(w, "reload"); }

/* clank.timeout(ms): an abort signal that aborts after ms, reason "timeout"
   (or "reload", when a reload retires the generation first). */
static int core_timeout(lua_State *L) {
  double ms = check_ms(L, 1);
  clank_abort_push(L);
  clank_wait_t *w = clank_sched_timer(L, ms, timeout_fired, lua_gettop(L));
  w->retire = timeout_retired;
  return 1;
}

/* clank.spawn(fn): fn runs in a task of its own, cancelled with its generation. */
static int core_spawn(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  clank_sched_spawn(L);
  return 0;
}

/* clank.core.spawnThen(fn, done): clank.spawn(fn), and done() once fn's task
   ended, whether it returned, failed or was stopped over its budget (a
   queue whose runner was stopped goes on). */
static int core_spawn_then(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_settop(L, 2);
  clank_sched_spawn_then(L);
  return 0;
}

/* clank.core.spawnKept(fn, done, signal?): clank.core.spawnThen(fn, done) for a durable job: a
   reload does not drop the task, and signal is the abort signal its waits watch. */
static int core_spawn_kept(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  if (!lua_isnoneornil(L, 3)) luaL_checkudata(L, 3, CLANK_ABORT_MT);
  lua_settop(L, 3);
  clank_sched_spawn_kept(L);
  return 0;
}

/* clank.core.newSignal() → an abort signal only clank.core.abort aborts (a job's: its runner
   watches the time, so no timer waits per job). */
static int core_new_signal(lua_State *L) {
  clank_abort_push(L);
  return 1;
}

/* clank.core.abort(signal, reason): aborts a signal the runtime made (a job's, when it is
   cancelled or given back). */
static int core_abort(lua_State *L) {
  luaL_checkudata(L, 1, CLANK_ABORT_MT);
  const char *reason = luaL_checkstring(L, 2);
  clank_abort_fire(L, 1, reason);
  return 0;
}

/* clank.core.mkdir(path) → true (made, or a folder already), or nil, err: the default jobs
   database's folder (.clank next to the app). */
static int core_mkdir(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  struct stat st;
  if (mkdir(path, 0777) != 0 && !(errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
    return luaL_fileresult(L, 0, path);
  lua_pushboolean(L, 1);
  return 1;
}

/* clank.core.wake(co) → true when the task running co was in clank.sleep, which ends now. */
static int core_wake(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTHREAD);
  lua_pushboolean(L, clank_sched_wake(clank_task_of(lua_tothread(L, 1))));
  return 1;
}

/* clank.core.hold(delta, ms?): delta units of work (durable jobs) the generation must finish
   before it closes, though a reload retired it: up to ms more (default: its request bound).
   clank-run keeps the count (CLANK_HOLD_KEY); elsewhere nothing closes a state under its work. */
static int core_hold(lua_State *L) {
  lua_Integer delta = luaL_checkinteger(L, 1);
  lua_Integer ms = luaL_optinteger(L, 2, 0);
  if (lua_getfield(L, LUA_REGISTRYINDEX, CLANK_HOLD_KEY) != LUA_TFUNCTION) return 0;
  lua_pushinteger(L, delta);
  lua_pushinteger(L, ms);
  lua_call(L, 2, 0);
  return 0;
}

/* clank.core.count(what, ...): one runtime event for /__clank/metrics, when
   clank-run counts them (CLANK_COUNT_EVENT_KEY); what follows is the event's
   (a job's queue, how its run ended and its seconds). */
static int core_count(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, CLANK_COUNT_EVENT_KEY) != LUA_TFUNCTION) return 0;
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 0);
  return 0;
}

/* clank.core.relay(topic, payload_text?) → true when the publish went on to
   other workers or instances (CLANK_RELAY_KEY), false when there are none. */
static int core_relay(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, CLANK_RELAY_KEY) != LUA_TFUNCTION) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 0);
  lua_pushboolean(L, 1);
  return 1;
}

/* clank.core.memoryTight() → true when no new live session should be
   mounted: the generation holds over 80 % of its memory cap (alloc.h). */
static int core_memory_tight(lua_State *L) {
  lua_pushboolean(L, clank_alloc_tight(L));
  return 1;
}

/* clank.core.sha256(data) → 32 raw bytes */
static int core_sha256(lua_State *L) {
  size_t n;
  const char *data = luaL_checklstring(L, 1, &n);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!EVP_Digest(data, n, md, &len, EVP_sha256(), NULL)) return luaL_error(L, "sha256 failed");
  lua_pushlstring(L, (const char *)md, len);
  return 1;
}

/* clank.core.hmacSHA256(key, data) → 32 raw bytes */
static int core_hmac_sha256(lua_State *L) {
  size_t klen, n;
  const char *key = luaL_checklstring(L, 1, &klen);
  const char *data = luaL_checklstring(L, 2, &n);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)data, n, md, &len))
    return luaL_error(L, "hmacSHA256 failed");
  lua_pushlstring(L, (const char *)md, len);
  return 1;
}

/* clank.core.randomBytes(n) → n bytes from the system's CSPRNG */
static int core_random_bytes(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  luaL_argcheck(L, n >= 0 && n <= 65536, 1, "expected 0 to 65536 bytes");
  luaL_Buffer b;
  unsigned char *p = (unsigned char *)luaL_buffinitsize(L, &b, (size_t)n);
  if (n > 0 && RAND_bytes(p, (int)n) != 1) return luaL_error(L, "randomBytes failed");
  luaL_pushresultsize(&b, (size_t)n);
  return 1;
}

/* clank.core.log(level, message): one line through the host's logger
   (clank-run's --log text|json; stderr in plain lua5.4). */
static int core_log(lua_State *L) {
  static const char *const levels[] = {"debug", "info", "warn", "error", NULL};
  const char *level = levels[luaL_checkoption(L, 1, NULL, levels)];
  const char *message = luaL_checkstring(L, 2);
  clank_sched_log(L, level, "%s", message);
  return 0;
}

/* clank.core.appSecret() → clank-run's app secret (32 bytes: CLANK_SECRET's SHA-256, else
   made per run), or nil outside clank-run. */
static int core_app_secret(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, "clank.app_secret");
  return 1;
}

/* clank.core.clientScript() → "/__clank/client.<hash>.js", the script's bytes (SPEC §11) */
static int core_client_script(lua_State *L) {
  lua_pushfstring(L, "/__clank/client.%s.js", clank_client_js_hash);
  lua_pushlstring(L, clank_client_js, clank_client_js_len);
  return 2;
}

static int core_array(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  clank_mark_array(L, 1);
  return 1;
}

/* clank.core.currentSignal() → the running task's abort signal (a request's
   ctx.signal, which an action's task inherits), or nil; and whether it aborts
   at a deadline of its own (an action's, at its timeout). For clank.db and
   clank.fetch. */
static int core_current_signal(lua_State *L) {
  lua_pushboolean(L, clank_abort_push_current(L));
  return 2;
}

/* clank.core.requestId([id]) → the running task's request id (SPEC §13: the
   x-request-id its log lines carry), or false. With id (a string of 1–64
   of A-Za-z0-9._-, or false for none) it becomes the task's, and the one
   before is returned: a live event is a request of its own, run by the
   session's task. */
static int core_request_id(lua_State *L) {
  clank_task_t *t = clank_task_of(L);
  if (t && t->request_id[0])
    lua_pushstring(L, t->request_id);
  else
    lua_pushboolean(L, 0);
  if (lua_isnoneornil(L, 1)) return 1;
  size_t len = 0;
  const char *id = lua_toboolean(L, 1) ? luaL_checklstring(L, 1, &len) : "";
  luaL_argcheck(L, len < sizeof t->request_id, 1, "a request id has at most 64 characters");
  for (size_t i = 0; i < len; i++) {
    char c = id[i];
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-';
    luaL_argcheck(L, ok, 1, "a request id is made of A-Za-z0-9._-");
  }
  if (t) memcpy(t->request_id, id, len + 1);
  return 1;
}

/* clank.core.dbRegistry() → the clank.db registry this state's pools come
   from now (a light userdata): a generation built off the loop changes it
   when it joins the loop, and clank.db opens its pools again there. */
static int core_db_registry(lua_State *L) {
  lua_pushlightuserdata(L, clank_db_registry_of(L));
  return 1;
}

/* pcall(fn, ...) with no yield across it: the watchdog does not preempt fn
   (it still stops it at the CPU limit), and a wait inside fails. For Lua
   code that sets state of the Lua state around a call (signal.lua's
   observer), which another task must not see. */
static int core_pcall_atomic(lua_State *L) {
  luaL_checkany(L, 1);
  int st = clank_pcall(L, lua_gettop(L) - 1, LUA_MULTRET);
  lua_pushboolean(L, st == LUA_OK);
  lua_insert(L, 1);
  return lua_gettop(L);
}

/* clank.core.nowMs() → the wall clock in integer milliseconds since the epoch (jobs' run times,
   leases and schedules are stored as such). */
static int core_now_ms(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  lua_pushinteger(L, (lua_Integer)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
  return 1;
}

static const luaL_Reg core_funcs[] = {{"pcallAtomic", core_pcall_atomic},
                                      {"nowMs", core_now_ms},
                                      {"sleep", core_sleep},
                                      {"timeout", core_timeout},
                                      {"spawn", core_spawn},
                                      {"spawnThen", core_spawn_then},
                                      {"spawnKept", core_spawn_kept},
                                      {"wake", core_wake},
                                      {"abort", core_abort},
                                      {"newSignal", core_new_signal},
                                      {"mkdir", core_mkdir},
                                      {"hold", core_hold},
                                      {"memoryTight", core_memory_tight},
                                      {"count", core_count},
                                      {"relay", core_relay},
                                      {"sha256", core_sha256},
                                      {"hmacSHA256", core_hmac_sha256},
                                      {"randomBytes", core_random_bytes},
                                      {"array", core_array},
                                      {"clientScript", core_client_script},
                                      {"log", core_log},
                                      {"currentSignal", core_current_signal},
                                      {"requestId", core_request_id},
                                      {"appSecret", core_app_secret},
                                      {"dbRegistry", core_db_registry},
                                      {NULL, NULL}};

int luaopen_clank_core(lua_State *L) {
  luaL_newlib(L, core_funcs);
  lua_pushliteral(L, CLANK_VERSION);
  lua_setfield(L, -2, "version");
  clank_push_null(L);
  lua_setfield(L, -2, "null");
  return 1;
}
