/* clank.db.sqlite's two halves (db_sqlite.c: the loop's side and Lua;
   db_sqlite_thread.c: a slot's thread) share these types. Fields marked
   "under mu" are read and written with the pool's mutex held.

   Two ways a job reaches a thread. A conn (pool:acquire, a transaction)
   reserves a slot and posts its jobs to that slot's thread, one at a time.
   A single query (pool:run) goes to the pool's queue, which every thread
   not reserved drains, back to back; finished ones collect on the done
   list and the loop is told once the thread runs out of work (or after
   BATCH_MS), so a busy pool costs a few thread switches per loop turn, not
   two per query. Writes queued one after another commit as a group: a
   durable commit costs a sync of the log, and one sync serves them all.
   The loop wakes a thread for the queue when it is about to poll (a
   uv_prepare), after it has queued all it will this turn. */
#ifndef CLANK_DB_SQLITE_H
#define CLANK_DB_SQLITE_H

#include <sqlite3.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "io/db.h"

/* ---- values in C memory ---- */

typedef struct cell_s {
  int type; /* SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB, SQLITE_NULL */
  union {
    sqlite3_int64 i;
    double d;
    struct {
      char *p;    /* a parameter's own copy */
      size_t off; /* a result's: where it starts in the job's text */
      size_t n;
    } s;
  } v;
} cell_t;

enum { JOB_RUN, JOB_ROLLBACK, JOB_CLOSE };
enum { ROWS_NONE, ROWS_TABLES, ROWS_KEPT };
enum { JOB_POSTED, JOB_QUEUED, JOB_RUNNING, JOB_DONE };

typedef struct sq_pool_s sq_pool_t;
typedef struct sq_conn_s sq_conn_t;
typedef struct sq_waiter_s sq_waiter_t;
typedef struct sq_run_s sq_run_t;
typedef struct slot_s slot_t;

typedef struct job_s {
  int kind;
  int rows; /* ROWS_NONE (mode "exec"), ROWS_TABLES ("rows") or ROWS_KEPT ("raw") */
  char *sql;
  size_t sql_len;
  cell_t *params;
  int nparams;
  /* a queued job (pool:run) */
  int state;          /* under mu */
  struct job_s *next; /* in the queue or the done list (under mu) */
  slot_t *on;         /* the slot running it (under mu) */
  atomic_int stop;    /* interrupted: the busy handler gives up */
  sq_run_t *run;      /* who waits for it (loop only); NULL once gone */
  int writes;         /* one INSERT, UPDATE, DELETE or REPLACE: it may commit with others */
  /* results, written by the slot's thread */
  int rc;
  char *errmsg;
  size_t *cols; /* offsets in text of the column names of the last statement with columns */
  int ncols;
  cell_t *cells;
  size_t ncells, cap;
  char *text; /* every name and text or blob value, each followed by a NUL */
  size_t text_len, text_cap;
  sqlite3_int64 changes, last_id;
  int has_last_id;
} job_t;

/* ---- pools and slots ---- */

/* Prepared statements a connection keeps, by SQL text (single statements only). */
#define STMT_CACHE_SIZE 32

typedef struct stmt_entry_s {
  uint64_t hash;
  char *sql;
  size_t len;
  sqlite3_stmt *st;
  uint64_t used; /* for eviction: the least recently used goes */
} stmt_entry_t;

struct slot_s {
  sq_pool_t *pool;
  uv_thread_t thread;
  int started;
  uv_cond_t cv;
  sqlite3 *db;     /* the thread's connection (set under mu) */
  job_t *job;      /* posted; the thread runs it (under mu) */
  int running;     /* under mu */
  int finished;    /* under mu: the loop collects job */
  atomic_int stop; /* interrupted: the busy handler gives up */
  int lent;        /* a conn, a hand-over or an internal job holds it (loop only) */
  int reserved;    /* under mu: lent, so the thread leaves the queue alone */
  int idle;        /* under mu: the thread waits on cv */
  sq_conn_t *conn; /* the conn it is lent to (loop only) */
  /* the thread's own */
  atomic_int *stopping; /* the flag of the job it runs, for the busy handler */
  stmt_entry_t cache[STMT_CACHE_SIZE];
  uint64_t clock;
};

struct sq_pool_s {
  clank_db_pool_t base; /* first */
  uv_loop_t *loop;
  uv_async_t async;
  uv_mutex_t mu;
  char *path;
  int size, busy_ms;
  slot_t *slots;
  int quitting; /* under mu: threads exit once idle */
  int exited;   /* under mu */
  int joined, closing;
  int open_handles;         /* async, prepare, stall: the pool is freed once all are closed */
  sq_waiter_t *head, *tail; /* acquire, FIFO (loop only) */
  /* pool:run's queue and its finished jobs (under mu) */
  job_t *queue, *queue_tail;
  job_t *done, *done_tail;
  unsigned long completed;  /* under mu: queued jobs finished so far */
  unsigned long stall_mark; /* loop only: completed when the stall timer last looked */
  uv_prepare_t prepare;     /* wakes a thread for the queue before the loop polls */
  uv_timer_t stall;         /* wakes another when the queue stops moving */
};

/* A queued job waits for a thread this long without any finishing before
   another thread is woken for the queue (a slow query does not hold up the
   rest); a thread draining the queue tells the loop at least this often. */
#define STALL_MS 2
#define BATCH_MS 1
/* Queued writes next to each other commit together, up to this many: one
   transaction (a savepoint each, so one failing undoes only itself) and
   one sync of the log for all of them. */
#define GROUP_MAX 64

void clank_sqlite_cells_free(cell_t *c, size_t n);
/* 1 for the text of a single INSERT, UPDATE, DELETE or REPLACE (no ';' but
   trailing ones), which may run inside a group's transaction. */
int clank_sqlite_single_write(const char *sql, size_t len);
void clank_sqlite_job_free(job_t *j);
/* "SQLITE_CONSTRAINT" for any SQLITE_CONSTRAINT_* result code. */
const char *clank_sqlite_code_name(int rc);
/* Appends a finished queued job to the pool's done list (under mu). */
void clank_sqlite_done_push(sq_pool_t *p, job_t *j);
/* A slot's thread (arg: the slot_t): runs posted jobs until the pool quits. */
void clank_sqlite_thread(void *arg);

int luaopen_clank_db_sqlite(lua_State *L);

#endif
