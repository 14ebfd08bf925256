/* clank.db.sqlite's two halves (db_sqlite.c: the loop's side and Lua;
   db_sqlite_thread.c: a slot's thread) share these types. Fields marked
   "under mu" are read and written with the pool's mutex held. */
#ifndef CLANK_DB_SQLITE_H
#define CLANK_DB_SQLITE_H

#include <sqlite3.h>
#include <stdatomic.h>
#include <stddef.h>
#include <uv.h>

#include "io/db.h"

/* ---- values in C memory ---- */

typedef struct cell_s {
  int type; /* SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB, SQLITE_NULL */
  union {
    sqlite3_int64 i;
    double d;
    struct {
      char *p;
      size_t n;
    } s;
  } v;
} cell_t;

enum { JOB_RUN, JOB_ROLLBACK, JOB_CLOSE };

typedef struct job_s {
  int kind;
  int rows; /* mode "rows" */
  char *sql;
  size_t sql_len;
  cell_t *params;
  int nparams;
  /* results, written by the slot's thread */
  int rc;
  char *errmsg;
  char **cols; /* of the last statement that returned columns */
  int ncols;
  cell_t *cells;
  size_t ncells, cap;
  sqlite3_int64 changes, last_id;
  int has_last_id;
} job_t;

/* ---- pools and slots ---- */

typedef struct sq_pool_s sq_pool_t;
typedef struct sq_conn_s sq_conn_t;
typedef struct sq_waiter_s sq_waiter_t;

typedef struct slot_s {
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
  sq_conn_t *conn; /* the conn it is lent to (loop only) */
} slot_t;

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
  int joined, async_closing;
  sq_waiter_t *head, *tail; /* acquire, FIFO (loop only) */
};

void clank_sqlite_cells_free(cell_t *c, size_t n);
void clank_sqlite_job_free(job_t *j);
/* "SQLITE_CONSTRAINT" for any SQLITE_CONSTRAINT_* result code. */
const char *clank_sqlite_code_name(int rc);
/* A slot's thread (arg: the slot_t): runs posted jobs until the pool quits. */
void clank_sqlite_thread(void *arg);

int luaopen_clank_db_sqlite(lua_State *L);

#endif
