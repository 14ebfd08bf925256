/* A generation: one loaded version of the app in its own Lua state. Nothing
   here is global, so an old and a new generation can serve side by side. */
#ifndef CLANK_GENERATION_H
#define CLANK_GENERATION_H

#include <lua.h>
#include <stddef.h>

#include "lua/scheduler.h"
#include "util/buf.h"

typedef struct clank_route_s {
  int method; /* llhttp_method_t */
  const char *path;
  size_t path_len;
  int handler_ref;
} clank_route_t;

#define CLANK_THREAD_POOL 64

typedef struct clank_gen_s {
  lua_State *L;
  clank_sched_t sched;
  char *name;
  int app_ref;
  int context_ref; /* LUA_NOREF without app.context */
  clank_route_t *routes;
  int nroutes;
  char **allowed_hosts; /* host[:port] of allowedOrigins, lower-case */
  int nallowed_hosts;
  int has_views;
  int inflight;
  int pool[CLANK_THREAD_POOL]; /* registry refs of finished coroutines, for reuse */
  lua_State *pool_threads[CLANK_THREAD_POOL];
  int npool;
  clank_buf_t scratch; /* response bodies encoded as JSON */
} clank_gen_t;

/* Loads app_path into a new Lua state. On failure returns NULL with the error
   (file:line first) in err. */
clank_gen_t *clank_gen_load(uv_loop_t *loop, const char *app_path, char *err, size_t errlen);
void clank_gen_close(clank_gen_t *g);

const clank_route_t *clank_gen_route(const clank_gen_t *g, int method, const char *path,
                                     size_t path_len);

/* A coroutine to run a handler in (reused when possible), anchored by *ref. */
lua_State *clank_gen_thread(clank_gen_t *g, int *ref);
void clank_gen_thread_done(clank_gen_t *g, lua_State *co, int ref, int reusable);

#endif
