/* clank.db (SPEC §12): the driver contract, the registry of shared pools,
   and the waits every driver shares.

   ==== The driver contract ====

   A driver is a C module (`clank.db.sqlite`, `clank.db.postgres`) whose
   luaopen_ returns a table with one function:

     driver.pool(target, opts) -> pool userdata
       sqlite:   require("clank.db.sqlite").pool(path, { size = N, busyTimeout = MS })
       postgres: require("clank.db.postgres").pool(url, { size = N })
     size defaults to 4. No I/O happens here: connections open lazily, on
     first acquire. Pools are shared per target (driver + target + options)
     within a process through the registry below (clank_db_registry_of(L)):
     every Lua state (every app generation) asking for the same target gets a
     userdata referring to the same C pool, refcounted. A bad target or bad
     opts raise (luaL_error / luaL_argerror), any password redacted.

   pool:acquire(signal?, timeoutMs?) -> conn | nil, err
     Waits in the calling task, FIFO among waiters, until a connection is
     free or a new one may be opened (up to size). Never blocks the loop.
     Outside a task it raises "clank.sleep: cannot wait here (not in a handler
     coroutine)" (the SPEC §1 message), like clank.sleep; when a connection is
     free at once it returns without waiting (so without needing a task).
     signal: a clank.AbortSignal (abort.h). Already aborted, or aborted while
     waiting -> nil, { message = "aborted: <reason>", code = "ABORTED",
     reason = <reason> }. timeoutMs (> 0): after that long -> nil,
     { message = "timeout", code = "TIMEOUT", reason = "timeout" }.
     A closed pool -> nil, { message = "the pool is closed", code = "CLOSED" }.

   conn:run(sql, params, mode, signal?, timeoutMs?) -> result | nil, err
     mode "rows": a list (marked with clank.json.array) of rows, each a table
       column name -> value.
     mode "exec": { changes = N, lastId = id-or-nil }.
     params: a Lua list; params.n, when present, gives the count (so nil
       holes are seen). Placeholders are $1..$n in the SQL on both databases
       (SQLite binds them by name "$1", "$2", ...).
     Lua -> database: integer -> INTEGER / int8; float -> REAL / float8;
       string -> TEXT when valid UTF-8 without NUL, else BLOB / bytea;
       boolean -> INTEGER 0/1 in SQLite, boolean in PostgreSQL;
       clank.null -> NULL.
       nil, a table (other than clank.null), a function, a userdata, a thread
       -> raises (a programming error) naming the position:
       "parameter $3: cannot bind a table" / "parameter $2: cannot bind nil".
     Database -> Lua: NULL -> clank.null; INTEGER / int2/4/8 -> integer;
       REAL / float4/8 -> float; TEXT -> string; BLOB / bytea -> string (raw
       bytes); PostgreSQL boolean -> boolean, numeric -> string, others -> text.
     Errors: nil, { message = <the database's message>, code = <SQLSTATE, or
       "SQLITE_CONSTRAINT"-style names of the primary result code> }.
     Abort of signal / timeoutMs while running: the query is interrupted
       (sqlite3_interrupt / PQcancel off the loop) and the call returns
       nil, { code = "ABORTED", reason = ..., message = "aborted: <reason>" }
       or nil, { code = "TIMEOUT", reason = "timeout", message = "timeout" },
       once the connection is idle again (it can run ROLLBACK next).
     A conn runs one query at a time: run while another run of the same conn
     waits raises "connection busy".

   pool:run(sql, params, mode, signal?, timeoutMs?) -> result | nil, err
     One query as conn:run runs it, on whichever connection comes free
     first, without lending a connection to Lua: the driver sends it the
     moment one is free and takes the connection back when the result is
     in. Its waits, errors and values are conn:run's; the time limit covers
     the wait for a connection too. A query stopped before it started never
     runs. clank.db uses it for db:query, db:one and db:exec (a driver
     without it gets acquire, run and release).

   conn:release(broken?) -> nothing
     Back to the pool; broken = true closes it instead (a new one opens on a
     later acquire). A connection left inside a transaction is rolled back
     before it is lent again. A connection must be released exactly once
     (a second release raises "connection already released"). A conn that is
     garbage collected unreleased (its coroutine died, its generation was
     dropped) is rolled back and returned the same way.

   pool:close() -> nothing
     Drops this userdata's share of the pool (also done by __gc). When no Lua
     state refers to the C pool any more, idle connections close, lent ones
     close when released, and its threads / handles go.

   The C side: a driver's pool struct begins with a clank_db_pool_t; a
   driver's waiting userdata begins with a clank_db_wait_t. */
#ifndef CLANK_DB_H
#define CLANK_DB_H

#include <lua.h>
#include <uv.h>

#include "core/scheduler.h"

typedef struct clank_db_registry_s clank_db_registry_t;
typedef struct clank_db_pool_s clank_db_pool_t;
typedef struct clank_db_wait_s clank_db_wait_t;

/* ---- the registry: C pools by key, shared by every Lua state of a loop ---- */

struct clank_db_pool_s {
  clank_db_registry_t *reg;
  char *key;  /* "<driver>\n<target>\n<options>"; NULL once out of the lookup */
  int refs;   /* pool and conn userdata of every Lua state */
  int closed; /* the registry closed: no more work, no Lua touched */
  /* refs reached 0 (wait = 0: stop without blocking; free through
     clank_db_pool_gone once every handle is closed) or the registry closes
     (wait = 1: the process ends; stop now, joining threads, and close
     handles; Lua states may still hold refs, freed by the last unref). */
  void (*shutdown)(clank_db_pool_t *p, int wait);
  void (*free)(clank_db_pool_t *p);
  int handles_closed; /* the driver's handles are closed: free when refs == 0 */
  clank_db_pool_t *prev, *next;
};

/* The host makes one per loop and hands it to every generation
   (clank_db_registry_attach). */
clank_db_registry_t *clank_db_registry_new(uv_loop_t *loop);
/* Before the loop's handles are walked and closed: every pool shuts down
   (joining its threads). The registry frees itself once its last pool is freed. */
void clank_db_registry_close(clank_db_registry_t *r);
/* The registry attached to s (NULL: none, one is made on first use). */
void clank_db_registry_attach(clank_sched_t *s, clank_db_registry_t *r);
/* The attached registry, or in plain lua5.4 a registry of the state's own. */
clank_db_registry_t *clank_db_registry_of(lua_State *L);
uv_loop_t *clank_db_registry_loop(clank_db_registry_t *r);

/* A pool by key with one more ref, or NULL. */
clank_db_pool_t *clank_db_pool_find(clank_db_registry_t *r, const char *key);
/* Adds p (refs = 1) under a copy of key. */
void clank_db_pool_add(clank_db_registry_t *r, clank_db_pool_t *p, const char *key);
void clank_db_pool_ref(clank_db_pool_t *p);
void clank_db_pool_unref(clank_db_pool_t *p);
/* The driver's handles are closed: the pool is freed now or at its last unref. */
void clank_db_pool_handles_closed(clank_db_pool_t *p);

/* ---- waits: a task suspended on a driver's object ---- */

struct clank_db_wait_s {
  clank_db_registry_t *reg;
  lua_State *L;  /* the main thread */
  lua_State *co; /* the waiting coroutine */
  clank_task_t *task;
  int co_ref, owner_ref;
  int active;
  unsigned serial;     /* a listener of an older wait is ignored */
  uint64_t deadline;   /* loop time; 0: none */
  unsigned long due;   /* resume at the next timer tick (in this order), 0: not due */
  const char *stopped; /* "ABORTED" or "TIMEOUT" once stopped */
  char reason[64];
  /* The wait is stopped (abort, timeout): the driver interrupts its work or
     leaves its queue. May be called from inside Lua (an abort listener):
     never resume there; call clank_db_wait_due(w) to be resumed soon. */
  void (*on_stop)(clank_db_wait_t *w);
  /* Due (clank_db_wait_due, or the deadline passed for a queued wait): the
     driver resumes it, from the loop. */
  void (*on_due)(clank_db_wait_t *w);
  clank_db_wait_t *prev, *next; /* the registry's active waits */
};

/* Suspends the running task on w (the first member of the userdata at
   owner), watching signal (0: none) and timeout_ms (<= 0: none). Call as
   `return clank_db_wait(...)`; k gets ctx = the stack top before the wait,
   and should return lua_gettop(L) - ctx. Raises the SPEC §1 message outside
   a task. */
int clank_db_wait(lua_State *L, clank_db_wait_t *w, int owner, int signal, double timeout_ms,
                  lua_KFunction k);
/* The coroutine to push results on, or NULL when its task is gone (the wait
   is then ended). */
lua_State *clank_db_wait_target(clank_db_wait_t *w);
/* Ends the wait and resumes the task with the nargs values on its stack. */
void clank_db_wait_resume(clank_db_wait_t *w, int nargs);
/* Ends the wait without resuming (the owner's __gc). */
void clank_db_wait_end(clank_db_wait_t *w);
/* Resume at the next timer tick, through on_due. */
void clank_db_wait_due(clank_db_wait_t *w);
/* 1 if the signal at idx is aborted (and pushes nil, err), else 0. */
int clank_db_check_signal(lua_State *L, int idx);

/* Pushes nil, { message, code [, reason] }; returns 2. */
int clank_db_push_error(lua_State *L, const char *code, const char *message, const char *reason);
/* Pushes nil, err for a stopped wait; returns 2. */
int clank_db_push_stopped(lua_State *L, const clank_db_wait_t *w);

#endif
