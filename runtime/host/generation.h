/* A generation: one loaded version of the app in its own Lua state. Nothing
   here is global, so an old and a new generation can serve side by side. */
#ifndef CLANK_GENERATION_H
#define CLANK_GENERATION_H

#include <lua.h>
#include <stddef.h>

#include "agent/bridge.h"
#include "core/alloc.h"
#include "core/scheduler.h"
#include "host/router.h"
#include "util/buf.h"

typedef struct clank_gen_s {
  clank_bridge_public_t public_origin; /* --public-origin, hung on sched (agent/bridge.h) */
  lua_State *L;
  clank_sched_t sched;
  clank_alloc_t alloc; /* its Lua memory, capped (SPEC §13) */
  /* While built off the loop (clank_gen_opts_t.off_loop): the private loop,
     the log lines ("level\0message\0" records) and files seen meanwhile,
     and where files go once attached. */
  uv_loop_t *private_loop;
  clank_buf_t kept_log, kept_files;
  void (*on_file)(void *ud, const char *path, const unsigned char *seen);
  void *on_file_ud;
  void (*file_hash)(const char *path, unsigned char out[32]);
  char *name;
  int app_ref;
  int context_ref;       /* LUA_NOREF without app.context */
  int names_ref;         /* the field names' table (lua_request.h) by ref: 0 until first used */
  clank_router_t router; /* app.routes (SPEC §15) */
  char **allowed_hosts;  /* host[:port] of allowedOrigins, lower-case */
  int nallowed_hosts;
  int has_views;
  int bridge_ref; /* the app's agent bridge (SPEC §2, §5) */
  long long bridge_max_bytes;
  clank_route_t bridge_route;    /* the pseudo-route requests for the bridge take */
  clank_route_t mcp_route;       /* and those for /__clank/mcp (SPEC §6) */
  clank_route_t auth_route;      /* /__clank/auth/...: app.auth's pages (issue 30), or NOREF */
  clank_route_t page_route;      /* GET / and /views/:name (SPEC §11) */
  clank_route_t live_http_route; /* /__clank/views/... and /__clank/sessions/... surfaces */
  clank_route_t live_route;      /* /__clank/sessions/:id/live, the WebSocket */
  int live_ref;                  /* the app's clank.live object, LUA_NOREF without views */
  clank_route_t static_route;    /* app.static (SPEC §15) */
  struct clank_static_s *statics;
  int nstatics;
  int mcp_env_ref;          /* the env table clank.mcp.handle gets */
  double action_timeout_ms; /* app.actionTimeout: how long a retired generation may linger */
  int retired;              /* a reload replaced it: it closes once idle */
  uint64_t retire_deadline; /* loop time after which its requests are dropped */
  struct clank_gen_s *next_retired;
  int inflight;
  int jobs_held; /* of inflight, the durable jobs running in it (host/jobs.h) */
  void *spare;   /* finished exchanges with their coroutines, for reuse (dispatch.c) */
  int nspare;
  void *late; /* exchanges whose action timed out while it waited, until it ends (dispatch.c) */
  clank_buf_t scratch; /* response bodies encoded as JSON */
  void *host;          /* the clank_host_t serving it, for callbacks that have only g */
} clank_gen_t;

/* Loads app_path into a new Lua state. On failure returns NULL with the error
   (file:line first) in err. */
#define CLANK_SECRET_BYTES 32

typedef struct clank_gen_opts_s {
  uv_loop_t *loop;
  const char *app_path;
  const unsigned char *secret; /* the per-run MCP session key, the same for every generation */
  int loop_running;            /* loading from inside the loop (a reload): app code may not wait */
  /* Told of every Lua file the app loads from its folder (app.lua included),
     at load and later, for hot reload to watch: seen is the hash file_hash
     gave just before the load read the file, or NULL (it is read now). */
  void (*on_file)(void *ud, const char *path, const unsigned char *seen);
  void *ud;
  /* Hashes a file's contents; called on the loading thread, so that a file
     changed while a load off the loop ran is told as the load read it. */
  void (*file_hash)(const char *path, unsigned char out[32]);
  uint64_t live_idle_ms;          /* view sessions (SPEC §11): idle ones end after this */
  unsigned live_max_idle;         /* and at most this many are kept */
  uint64_t live_hibernate_ms;     /* quiet this long, a session lets its tree go */
  int worker_index, worker_count; /* --workers (SPEC §13): new view sessions are this one's */
  int development;                /* errors go to the open pages in full (options.h) */
  void *db;                       /* the host's clank.db registry: pools outlive generations */
  clank_log_fn log;               /* the host's log sink, for C and Lua alike */
  void *log_ud;
  struct clank_watchdog_s *watchdog; /* preemption (core/preempt.h), NULL: none */
  uint64_t cpu_limit_ms;             /* --cpu-limit; app.cpuLimit wins */
  size_t memory_limit;               /* bytes of Lua memory (--memory-limit), 0: none */
  const char *public_origin;         /* --public-origin, NULL: none; the host holds it */
  size_t public_origin_len, public_host_at;
  /* Built off the loop's thread (a reload, SPEC §13): the app's top-level
     code waits on a private loop, closed before clank_gen_attach; log lines
     and loaded files are kept until then, and clank.spawn calls deferred. */
  int off_loop;
  /* And when that load fails: where its kept lines and files go (the files
     of a module that failed to load are watched too). */
  clank_buf_t *failed_log, *failed_files;
} clank_gen_opts_t;

clank_gen_t *clank_gen_load(const clank_gen_opts_t *o, char *err, size_t errlen);
/* On the loop's thread, a generation built off_loop joins it: its scheduler
   gets the loop, the clank.db registry and the watchdog; the kept log lines
   and files are told; deferred clank.spawn calls start. */
void clank_gen_attach(clank_gen_t *g, const clank_gen_opts_t *o);
/* Tells o's log and on_file the records of kept lines and files. */
void clank_gen_tell_kept(const clank_gen_opts_t *o, const clank_buf_t *log,
                         const clank_buf_t *files);
void clank_gen_close(clank_gen_t *g);

#endif
