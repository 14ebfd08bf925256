/* Loading an app (SPEC §2): a generation's Lua state, its paths and
   print, the app file run (off the loop for a reload), and what the app
   returned read into the generation: name, context, views, statics, allowed
   hosts, the bridge, the MCP env, the live object, the routes (router.c).
   Owns the generation and its state until clank_gen_close. */
#include "host/generation.h"

#include <ctype.h>
#include <lauxlib.h>
#include <limits.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/exchange.h"
#include "host/lua_dir.h"
#include "host/lua_request.h"
#include "host/static.h"
#include "agent/bridge.h"
#include "io/db.h"
#include "modules/modules.h"
#include "core/base.h"
#include "core/protect.h"
#include "util/bytes.h"

/* print(...) in an app: one line through the logger (SPEC §13), so stdout
   carries only the start-up line. */
static int log_print(lua_State *L) {
  int n = lua_gettop(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; i++) {
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_tolstring(L, i, NULL);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  clank_sched_log(L, "info", "%s", lua_tostring(L, -1));
  return 0;
}

/* Prepends the runtime's and the app's folders, keeping the defaults and
   LUA_PATH_5_4 / LUA_CPATH_5_4 that luaL_openlibs put there. */
static void set_paths(lua_State *L, const char *app_path, char app_dir[PATH_MAX]) {
  char lua_dir[PATH_MAX];
  clank_find_lua_dir(lua_dir, sizeof lua_dir);
  if (realpath(app_path, app_dir) == NULL) snprintf(app_dir, PATH_MAX, "%s", app_path);
  char *slash = strrchr(app_dir, '/');
  if (slash) *slash = '\0';
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s/?.lua;%s/?/init.lua;%s", lua_dir, lua_dir, app_dir,
                  app_dir, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 1);
  lua_getfield(L, -1, "cpath");
  lua_pushfstring(L, "%s/?.so;%s", app_dir, lua_tostring(L, -1));
  lua_setfield(L, -3, "cpath");
  lua_pop(L, 2);
  lua_pushstring(L, app_dir); /* the app's folder: where its default jobs database goes */
  lua_setfield(L, LUA_REGISTRYINDEX, "clank.app_dir");
}

/* app.static = { ["/assets"] = "public" }: folders next to app.lua (their
   real paths, so a symlink inside cannot lead out of them). */
static void read_static(clank_gen_t *g, lua_State *L, const char *app_path) {
  if (lua_getfield(L, 1, "static") != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  char app_dir[PATH_MAX];
  if (realpath(app_path, app_dir) == NULL) snprintf(app_dir, sizeof app_dir, "%s", app_path);
  char *slash = strrchr(app_dir, '/');
  if (slash) *slash = '\0';
  int n = 0;
  for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) n++;
  g->statics = calloc((size_t)n + 1, sizeof *g->statics);
  for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
    const char *prefix = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
    const char *folder = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    size_t plen = prefix ? strlen(prefix) : 0;
    if (!prefix || prefix[0] != '/' || (plen > 1 && prefix[plen - 1] == '/') || !folder)
      luaL_error(L, "clank.app: static must map \"/prefix\" = \"folder\" (got %s)",
                 prefix ? prefix : "a key that is not a string");
    char joined[PATH_MAX * 2], real[PATH_MAX];
    snprintf(joined, sizeof joined, "%s/%s", folder[0] == '/' ? "" : app_dir, folder);
    if (realpath(folder[0] == '/' ? folder : joined, real) == NULL)
      luaL_error(L, "clank.app: static folder %s for %s does not exist", folder, prefix);
    clank_static_t *st = &g->statics[g->nstatics++];
    st->prefix = strndup(prefix, plen == 1 ? 0 : plen);
    st->prefix_len = plen == 1 ? 0 : plen;
    st->root = strdup(real);
  }
  lua_pop(L, 1);
}

/* allowedOrigins → the host[:port] each allows in a Host header. */
static void read_allowed_hosts(clank_gen_t *g, lua_State *L) {
  if (lua_getfield(L, -1, "allowedOrigins") == LUA_TTABLE) {
    lua_Integer n = luaL_len(L, -1);
    g->allowed_hosts = calloc((size_t)n + 1, sizeof *g->allowed_hosts);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, -1, i);
      const char *origin = lua_tostring(L, -1);
      const char *sep = origin ? strstr(origin, "://") : NULL;
      if (sep) {
        char *host = strdup(sep + 3);
        for (char *p = host; *p; p++) *p = (char)tolower((unsigned char)*p);
        g->allowed_hosts[g->nallowed_hosts++] = host;
      }
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

/* The app's bridge: createAgentBridge(app.actions, options from the app). */
static int make_bridge(lua_State *L) {
  lua_settop(L, 1);
  lua_getfield(L, 1, "bridge");
  lua_newtable(L); /* 3: options */
  if (lua_istable(L, 2)) {
    for (lua_pushnil(L); lua_next(L, 2); lua_pop(L, 1)) {
      lua_pushvalue(L, -2);
      lua_pushvalue(L, -2);
      lua_settable(L, 3);
    }
  }
  static const char *const copied[] = {"name",           "description",   "views",
                                       "allowedOrigins", "actionTimeout", NULL};
  for (int i = 0; copied[i]; i++) {
    lua_getfield(L, 1, copied[i]);
    lua_setfield(L, 3, copied[i]);
  }
  lua_getfield(L, 1, "auth"); /* an app with accounts: actions need a user unless they say */
  lua_pushboolean(L, !lua_isnil(L, -1));
  lua_setfield(L, 3, "auth");
  lua_pop(L, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "clank.bridge");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "createAgentBridge");
  if (lua_getfield(L, 1, "actions") == LUA_TNIL) {
    lua_pop(L, 1);
    lua_newtable(L);
  }
  lua_pushvalue(L, 3);
  lua_call(L, 2, 1);
  return 1;
}

/* [app, bridge, secret] → the env clank.mcp.handle(request, env) gets. */
static int make_mcp_env(lua_State *L) {
  lua_createtable(L, 0, 9);
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, "app");
  lua_pushvalue(L, 2);
  lua_setfield(L, -2, "bridge");
  clank_bridge_push_actions(L, 2);
  lua_setfield(L, -2, "actions");
  /* the bridge's contract hash with app.mcp.tools folded in (SPEC §6): a
     reload that changes only those options makes old sessions 404 too */
  lua_getglobal(L, "require");
  lua_pushliteral(L, "clank.mcp.tools");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "contract_hash");
  lua_remove(L, -2);
  clank_bridge_push_contract_hash(L, 2);
  lua_pushvalue(L, 1);
  lua_call(L, 2, 1);
  lua_setfield(L, -2, "contractHash");
  lua_pushinteger(L, (lua_Integer)clank_bridge_max_bytes(L, 2));
  lua_setfield(L, -2, "maxRequestBytes");
  lua_pushvalue(L, 3);
  lua_setfield(L, -2, "secret");
  lua_getfield(L, 1, "context");
  lua_setfield(L, -2, "context");
  lua_pushcfunction(L, clank_stream_begin);
  lua_setfield(L, -2, "stream");
  clank_bridge_push_runner(L, 2);
  lua_setfield(L, -2, "run");
  return 1;
}

static void read_app(clank_gen_t *g, lua_State *L, const char *app_path) {
  if (lua_getfield(L, -1, "name") == LUA_TSTRING) {
    g->name = strdup(lua_tostring(L, -1));
  } else {
    const char *base = strrchr(app_path, '/');
    base = base ? base + 1 : app_path;
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".lua") == 0) n -= 4;
    g->name = strndup(base, n);
  }
  lua_pop(L, 1);
  if (lua_getfield(L, -1, "context") == LUA_TFUNCTION)
    g->context_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  else
    lua_pop(L, 1);
  if (lua_getfield(L, -1, "views") == LUA_TTABLE) g->has_views = luaL_len(L, -1) > 0;
  lua_pop(L, 1);
  lua_getfield(L, -1, "actionTimeout");
  g->action_timeout_ms =
      lua_isnumber(L, -1) ? lua_tonumber(L, -1) : CLANK_BRIDGE_DEFAULT_ACTION_TIMEOUT;
  lua_pop(L, 1);
  lua_getfield(L, -1, "cpuLimit"); /* app.cpuLimit wins over --cpu-limit (SPEC §13) */
  if (lua_isnumber(L, -1) && lua_tonumber(L, -1) > 0)
    g->sched.cpu_limit_ns = (uint64_t)(lua_tonumber(L, -1) * 1e6);
  lua_pop(L, 1);
  read_allowed_hosts(g, L);
}

/* package.searchers[2] wrapped: a Lua file found in the app's folder is
   reported (upvalues: the original searcher, the app folder, the options). */
static int recording_searcher(lua_State *L) {
  lua_settop(L, 1);
  size_t dlen;
  const char *dir = lua_tolstring(L, lua_upvalueindex(2), &dlen);
  const clank_gen_opts_t *o = lua_touserdata(L, lua_upvalueindex(3));
  /* Found first, then loaded: a module with a syntax error is watched too,
     so that fixing it reloads. */
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "searchpath");
  lua_pushvalue(L, 1);
  lua_getfield(L, -3, "path");
  lua_call(L, 2, 1);
  char real[PATH_MAX];
  if (lua_type(L, -1) == LUA_TSTRING && o && o->on_file && realpath(lua_tostring(L, -1), real) &&
      strncmp(real, dir, dlen) == 0 && real[dlen] == '/')
    o->on_file(o->ud, real, NULL);
  lua_settop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, 1);
  lua_call(L, 1, 2);
  return 2;
}

/* Files the app loads: told at once, or kept while it loads off the loop,
   each as "path\0", a byte saying whether a hash follows, and the 32 bytes
   of the hash taken now, before the load reads it. */
static void gen_file(void *ud, const char *path, const unsigned char *seen) {
  clank_gen_t *g = ud;
  (void)seen;
  if (g->private_loop) {
    unsigned char hash[32] = {0};
    char has = g->file_hash != NULL;
    if (has) g->file_hash(path, hash);
    clank_buf_append(&g->kept_files, path, strlen(path) + 1);
    clank_buf_append(&g->kept_files, &has, 1);
    clank_buf_append(&g->kept_files, (const char *)hash, sizeof hash);
  } else if (g->on_file) {
    g->on_file(g->on_file_ud, path, NULL);
  }
}

/* Log lines of a load off the loop wait for clank_gen_attach. */
static void keep_log(void *ud, const char *level, const char *msg, const char *request_id) {
  clank_gen_t *g = ud;
  (void)request_id;
  clank_buf_append(&g->kept_log, level, strlen(level) + 1);
  clank_buf_append(&g->kept_log, msg, strlen(msg) + 1);
}

static void record_loads(lua_State *L, clank_gen_t *g, const clank_gen_opts_t *o,
                         const char *app_dir) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "searchers");
  lua_rawgeti(L, -1, 2);
  lua_pushstring(L, app_dir);
  /* the options live as long as the load; afterwards only on_file/ud are
     read, so they are copied into the state */
  clank_gen_opts_t *copy = lua_newuserdatauv(L, sizeof *copy, 0);
  *copy = *o;
  copy->app_path = NULL;
  copy->secret = NULL;
  copy->on_file = gen_file; /* kept while the generation loads off the loop */
  copy->ud = g;
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, "clank.gen_opts");
  lua_pushcclosure(L, recording_searcher, 3);
  lua_rawseti(L, -2, 2);
  lua_pop(L, 2);
}

/* The line of the app file's last `clank.app` call, or 0: where an error
   raised by clank.app through `return clank.app {...}` (a tail call, which
   leaves no caller line in the stack) was made. */
static int app_call_line(const char *app_path) {
  FILE *f = fopen(app_path, "r");
  if (f == NULL) return 0;
  char line[4096];
  int n = 0, found = 0;
  while (fgets(line, sizeof line, f)) {
    n++;
    if (strstr(line, "clank.app")) found = n;
  }
  fclose(f);
  return found;
}

/* Errors name the file and line first. require wraps a module's error as
   "error loading module 'm' from file 'f':\n\tf:3: ..."; the inner
   "f:3: ..." leads then, and the module's name follows. place: "file:line"
   of the app's frame that raised (load_handler), or NULL. */
static void describe_load_error(const char *app_path, const char *msg, const char *place, char *err,
                                size_t errlen) {
  static const char wrapped[] = "error loading module '";
  if (msg == NULL) msg = "error loading the app";
  const char *inner = strncmp(msg, wrapped, sizeof wrapped - 1) == 0 ? strstr(msg, "':\n\t") : NULL;
  if (inner == NULL) {
    /* An error without a position (error(msg, 0), a table, a C function's):
       the app's frame that raised; else (clank.app's, raised through the
       usual `return clank.app {...}` tail call, which leaves no app frame)
       the line of that call; else the app file at least. */
    const char *colon = strchr(msg, ':');
    int placed = colon && colon > msg && colon[1] >= '0' && colon[1] <= '9' &&
                 !memchr(msg, '\n', (size_t)(colon - msg));
    int line = placed || place ? 0 : app_call_line(app_path);
    if (placed)
      snprintf(err, errlen, "%s", msg);
    else if (place)
      snprintf(err, errlen, "%s: %s", place, msg);
    else if (line > 0)
      snprintf(err, errlen, "%s:%d: %s", app_path, line, msg);
    else
      snprintf(err, errlen, "%s: %s", app_path, msg);
    return;
  }
  inner += 4;
  const char *end = strchr(inner, '\n');
  size_t name_len = strcspn(msg + sizeof wrapped - 1, "'");
  snprintf(err, errlen, "%.*s (loading module '%.*s')%s",
           (int)(end ? (size_t)(end - inner) : strlen(inner)), inner, (int)name_len,
           msg + sizeof wrapped - 1, end ? end : "");
}

/* [app, bridge ...] → g->live_ref: require("clank.live").new{ app, bridge,
   secret, limits, dev, worker? }, the owner of the app's view sessions (SPEC §11). */
static void make_live(lua_State *L, clank_gen_t *g, const clank_gen_opts_t *o) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "clank.live");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "new");
  lua_createtable(L, 0, 6);
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, "app");
  lua_pushvalue(L, 2);
  lua_setfield(L, -2, "bridge");
  lua_pushlstring(L, (const char *)o->secret, CLANK_SECRET_BYTES);
  lua_setfield(L, -2, "secret");
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, (lua_Integer)o->live_idle_ms);
  lua_setfield(L, -2, "idleMs");
  lua_pushinteger(L, (lua_Integer)o->live_max_idle);
  lua_setfield(L, -2, "maxIdle");
  lua_pushinteger(L, (lua_Integer)o->live_hibernate_ms);
  lua_setfield(L, -2, "hibernateMs");
  lua_setfield(L, -2, "limits");
  lua_pushboolean(L, o->development);
  lua_setfield(L, -2, "dev");
  if (o->worker_count > 1) {
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, o->worker_index);
    lua_setfield(L, -2, "index");
    lua_pushinteger(L, o->worker_count);
    lua_setfield(L, -2, "count");
    lua_setfield(L, -2, "worker");
  }
  lua_call(L, 1, 1);
  g->live_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pop(L, 1);
}

/* [g, opts] → runs the app file and reads what it returned. All of it runs
   protected: an app whose fields raise when read (a views table with a
   __len that errors) fails to load like a syntax error would. */
/* An error outside any protected call: a runtime bug, never an app's. */
static int panic(lua_State *L) {
  const char *msg = lua_tostring(L, -1);
  fprintf(stderr, "clank-run: unprotected Lua error: %s\n", msg ? msg : "(not a string)");
  fflush(stderr);
  abort();
}

/* ---- loading off the loop ---- */

#define CLANK_LOAD_LIMIT_NS (30 * 1000000000ull)
#define LOAD_HOOK_COUNT 100000

/* Only its address matters: the registry key of the load's deadline. */
static const char load_deadline_key = 0;

/* Coroutines made while loading inherit the hook: once loaded, it finds no
   deadline and returns. */
static void load_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  int set = lua_rawgetp(L, LUA_REGISTRYINDEX, &load_deadline_key) == LUA_TNUMBER;
  uint64_t deadline = set ? (uint64_t)lua_tointeger(L, -1) : 0;
  lua_pop(L, 1);
  if (set && uv_hrtime() > deadline)
    luaL_error(L, "loading the app took more than %d s",
               (int)(CLANK_LOAD_LIMIT_NS / 1000000000ull));
}

/* The top-level code of a generation built off the loop waits on a loop of
   its own; its pools and timers are not the host's. */
static int use_private_loop(clank_gen_t *g) {
  g->private_loop = malloc(sizeof *g->private_loop);
  if (g->private_loop == NULL || uv_loop_init(g->private_loop) != 0) {
    free(g->private_loop);
    g->private_loop = NULL;
    return -1;
  }
  g->sched.loop = g->private_loop;
  g->sched.loop_running = 0;
  g->sched.log = keep_log;
  g->sched.log_ud = g;
  clank_db_registry_attach(&g->sched, NULL); /* a private registry, made on first use */
  g->sched.watchdog = NULL;
  g->sched.defer_spawn = 1;
  return 0;
}

static void close_leftover(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* Everything the load left on its private loop closes before the switch:
   timers, the fetch pool, the clank.db pools it opened (their threads
   joined); db objects made at the top level find the host's pools on their
   next use. */
static void release_private_loop(clank_gen_t *g) {
  if (g->private_loop == NULL) return;
  lua_State *L = g->L;
  clank_sched_cancel_all(&g->sched);
  if (lua_getfield(L, LUA_REGISTRYINDEX, "clank.db.registry") == LUA_TUSERDATA) {
    clank_db_registry_t **box = lua_touserdata(L, -1);
    if (*box) clank_db_registry_close(*box);
    *box = NULL;
  }
  lua_pop(L, 1);
  clank_db_registry_attach(&g->sched, NULL);
  uv_run(g->private_loop, UV_RUN_NOWAIT);
  uv_walk(g->private_loop, close_leftover, NULL);
  while (uv_loop_close(g->private_loop) == UV_EBUSY) uv_run(g->private_loop, UV_RUN_NOWAIT);
  free(g->private_loop);
  g->private_loop = NULL;
  g->sched.loop = NULL;
}

/* Registry slot: "file:line" of the app's frame that raised while the app's
   top-level code ran (load_handler), for describe_load_error. */
static const char load_place_key = 0;

/* 1 when the chunk source src ("@file") is the app's: the app file, or a
   file in its folder that is not the runtime's own Lua. Upvalues: the app
   file as loaded, its folder and the runtime's Lua folder (real paths). */
static int app_source(lua_State *L, const char *src) {
  if (src[0] != '@') return 0;
  src++;
  if (strcmp(src, lua_tostring(L, lua_upvalueindex(1))) == 0) return 1;
  size_t dn, ln;
  const char *dir = lua_tolstring(L, lua_upvalueindex(2), &dn);
  const char *lua_dir = lua_tolstring(L, lua_upvalueindex(3), &ln);
  return strncmp(src, dir, dn) == 0 && src[dn] == '/' &&
         !(strncmp(src, lua_dir, ln) == 0 && src[ln] == '/');
}

/* The message handler of the app's top-level code, in the task running it:
   an error without a position (error(msg, 0), a table) would otherwise be
   placed at `return clank.app {`, since the stack is gone by the time the
   load reports it; the innermost app frame is where it was raised. */
static int load_handler(lua_State *L) {
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.currentline > 0 && app_source(L, ar.source)) {
      lua_pushfstring(L, "%s:%d", ar.source + 1, ar.currentline);
      lua_rawsetp(L, LUA_REGISTRYINDEX, &load_place_key);
      break;
    }
  }
  lua_settop(L, 1);
  return 1;
}

static int chunk_done(lua_State *L, int status, lua_KContext ctx) {
  (void)ctx;
  if (status != LUA_OK && status != LUA_YIELD) return lua_error(L); /* the same error */
  return lua_gettop(L) - 1;
}

/* [handler, chunk] → the chunk's results, run under the handler. */
static int run_chunk(lua_State *L) {
  return chunk_done(L, lua_pcallk(L, 0, LUA_MULTRET, 1, 0, chunk_done), 0);
}

static int load_app(lua_State *L) {
  clank_gen_t *g = lua_touserdata(L, 1);
  const clank_gen_opts_t *o = lua_touserdata(L, 2);
  lua_settop(L, 0);
  lua_pushcfunction(L, run_chunk);
  lua_pushstring(L, o->app_path);
  char dir[PATH_MAX], lua_dir[PATH_MAX];
  if (realpath(o->app_path, dir) == NULL) snprintf(dir, sizeof dir, "%s", o->app_path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  lua_pushstring(L, dir);
  clank_find_lua_dir(lua_dir, sizeof lua_dir);
  lua_pushstring(L, lua_dir);
  lua_pushcclosure(L, load_handler, 3);
  if (luaL_loadfile(L, o->app_path) != LUA_OK) return lua_error(L);
  /* In a task: top-level code may wait (clank.sleep, clank.db, clank.fetch),
     the loop running until it returns (SPEC §13). */
  clank_sched_call(L, 2);
  lua_settop(L, 1); /* 1: the app */
  int is_app = 0;
  if (lua_istable(L, 1) && luaL_getmetafield(L, 1, "__name") != LUA_TNIL) {
    is_app = lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "clank.App") == 0;
    lua_pop(L, 1);
  }
  if (!is_app)
    return luaL_error(L, "%s: must return clank.app { ... } (it returned a %s value)", o->app_path,
                      luaL_typename(L, 1));
  read_app(g, L, o->app_path);
  lua_pushlstring(L, (const char *)o->secret, CLANK_SECRET_BYTES);
  lua_setfield(L, LUA_REGISTRYINDEX, "clank.app_secret"); /* core.appSecret() */
  lua_pushcfunction(L, make_bridge);
  lua_pushvalue(L, 1);
  lua_call(L, 1, 1); /* 2: the bridge */
  g->bridge_max_bytes = clank_bridge_max_bytes(L, 2);
  lua_pushcfunction(L, make_mcp_env);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_pushlstring(L, (const char *)o->secret, CLANK_SECRET_BYTES);
  lua_call(L, 3, 1);
  g->mcp_env_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  g->bridge_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  g->bridge_route.handler_ref = LUA_NOREF;
  g->mcp_route.handler_ref = LUA_NOREF;
  g->auth_route.handler_ref = LUA_NOREF;
  g->auth_route.takes_request = 1;
  if (lua_getfield(L, 1, "auth") !=
      LUA_TNIL) { /* its pages: require("clank.auth.bind").route(app) */
    lua_getglobal(L, "require");
    lua_pushliteral(L, "clank.auth.bind");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "route");
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1);
    g->auth_route.handler_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  g->page_route.handler_ref = LUA_NOREF;
  g->live_http_route.handler_ref = LUA_NOREF;
  g->live_route.handler_ref = LUA_NOREF;
  g->static_route.handler_ref = LUA_NOREF;
  if (g->has_views) make_live(L, g, o);
  read_static(g, L, o->app_path);
  clank_router_read(L, &g->router);
  g->app_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

clank_gen_t *clank_gen_load(const clank_gen_opts_t *o, char *err, size_t errlen) {
  uv_loop_t *loop = o->loop;
  const char *app_path = o->app_path;
  clank_gen_t *g = calloc(1, sizeof *g);
  lua_State *L = g ? lua_newstate(clank_alloc, &g->alloc) : NULL;
  if (g == NULL || L == NULL) {
    snprintf(err, errlen, "out of memory");
    if (L) lua_close(L);
    if (g) clank_alloc_drain(&g->alloc);
    free(g);
    return NULL;
  }
  g->L = L;
  g->context_ref = LUA_NOREF;
  g->live_ref = LUA_NOREF;
  g->sched.loop = loop;
  g->sched.loop_running = o->loop_running;
  g->sched.log = o->log;
  g->sched.log_ud = o->log_ud;
  clank_db_registry_attach(&g->sched, o->db);
  g->sched.watchdog = NULL; /* loading has its own limit (load_hook), not a request's */
  if (o->off_loop && use_private_loop(g) != 0) {
    snprintf(err, errlen, "cannot make a loop to load the app on");
    lua_close(L);
    clank_alloc_drain(&g->alloc);
    free(g);
    return NULL;
  }
  g->sched.cpu_limit_ns = o->cpu_limit_ms * 1000000ull;
  g->public_origin =
      (clank_bridge_public_t){o->public_origin, o->public_origin_len, o->public_host_at};
  if (o->public_origin) /* before any request table is made */
    clank_bridge_set_public(&g->sched, &g->public_origin);
  g->alloc.sched = &g->sched;
  g->alloc.cap = o->memory_limit;
  lua_atpanic(L, panic);
  lua_setwarnf(L, NULL, NULL);
  luaL_openlibs(L);
  clank_base_install(L);
  clank_preload_modules(L);
  clank_sched_install(L, &g->sched);
  lua_pushcfunction(L, log_print);
  lua_setglobal(L, "print");
  char app_dir[PATH_MAX];
  set_paths(L, app_path, app_dir);
  g->on_file = o->on_file;
  g->on_file_ud = o->ud;
  g->file_hash = o->file_hash;
  if (o->on_file) {
    char real[PATH_MAX];
    if (realpath(app_path, real)) gen_file(g, real, NULL);
    record_loads(L, g, o, app_dir);
  }

  /* A load is limited to CLANK_LOAD_LIMIT_NS of Lua (SPEC §13). */
  lua_pushinteger(L, (lua_Integer)(uv_hrtime() + CLANK_LOAD_LIMIT_NS));
  lua_rawsetp(L, LUA_REGISTRYINDEX, &load_deadline_key);
  lua_sethook(L, load_hook, LUA_MASKCOUNT, LOAD_HOOK_COUNT);
  lua_pushcfunction(L, load_app);
  lua_pushlightuserdata(L, g);
  lua_pushlightuserdata(L, (void *)o);
  int status = clank_pcall(L, 2, 0);
  lua_sethook(L, NULL, 0, 0);
  lua_pushnil(L);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &load_deadline_key);
  if (status != LUA_OK) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &load_place_key);
    const char *place = lua_tostring(L, -1);
    describe_load_error(app_path, clank_error_text(L, -2), place, err, errlen);
    lua_settop(L, 0);
    release_private_loop(g);
    if (o->failed_log) *o->failed_log = g->kept_log;
    if (o->failed_files) *o->failed_files = g->kept_files;
    if (!o->failed_log) clank_buf_free(&g->kept_log);
    if (!o->failed_files) clank_buf_free(&g->kept_files);
    clank_gen_close(g);
    return NULL;
  }
  lua_settop(L, 0);
  release_private_loop(g);
  if (!o->off_loop) g->sched.watchdog = o->watchdog;
  return g;
}

/* clank.db's databases opened by the top-level code take the host's pools. */
static void rebind_databases(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, "clank.db") == LUA_TTABLE &&
      lua_getfield(L, -1, "_rebind") == LUA_TFUNCTION && clank_pcall(L, 0, 0) != LUA_OK) {
    clank_sched_log(L, "error", "clank.db: reopening the pools after a reload: %s",
                    clank_error_message(L, -1));
    lua_pop(L, 1);
  }
  lua_settop(L, 0);
}

void clank_gen_tell_kept(const clank_gen_opts_t *o, const clank_buf_t *log,
                         const clank_buf_t *files) {
  for (size_t at = 0; at < log->len;) {
    const char *level = log->data + at;
    const char *msg = level + strlen(level) + 1;
    o->log(o->log_ud, level, msg, NULL);
    at = (size_t)(msg - log->data) + strlen(msg) + 1;
  }
  for (size_t at = 0; at < files->len;) { /* records of gen_file's */
    const char *path = files->data + at;
    const unsigned char *flag = (const unsigned char *)path + strlen(path) + 1;
    if (o->on_file) o->on_file(o->ud, path, *flag ? flag + 1 : NULL);
    at = (size_t)((const char *)flag + 1 + 32 - files->data);
  }
}

void clank_gen_attach(clank_gen_t *g, const clank_gen_opts_t *o) {
  g->sched.loop = o->loop;
  g->sched.loop_running = 1;
  g->sched.log = o->log;
  g->sched.log_ud = o->log_ud;
  clank_db_registry_attach(&g->sched, o->db);
  g->sched.watchdog = o->watchdog;
  clank_gen_tell_kept(o, &g->kept_log, &g->kept_files);
  rebind_databases(g->L);
  clank_buf_free(&g->kept_log);
  clank_buf_free(&g->kept_files);
  clank_sched_run_deferred(g->L);
}

void clank_gen_close(clank_gen_t *g) {
  clank_sched_cancel_all(&g->sched);
  lua_close(g->L);
  clank_alloc_drain(&g->alloc);
  clank_buf_free(&g->scratch);
  clank_router_free(&g->router);
  for (int i = 0; i < g->nstatics; i++) {
    free(g->statics[i].prefix);
    free(g->statics[i].root);
  }
  free(g->statics);
  for (int i = 0; i < g->nallowed_hosts; i++) free(g->allowed_hosts[i]);
  free(g->allowed_hosts);
  free(g->name);
  free(g);
}
