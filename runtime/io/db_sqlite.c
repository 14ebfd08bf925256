/* clank.db.sqlite: the SQLite driver of clank.db (SPEC §12; the contract is
   in db.h). Each pool slot is one connection with a thread of its own
   (never libuv's shared pool): the loop posts a job to the slot (a lent
   conn's) or to the pool's queue (pool:run, a single query), a thread runs
   it and collects every value into C memory, and uv_async_send hands it
   back; values become Lua on the loop thread only. A connection is lent to
   one task at a time, and runs one job at a time. Writes are serialized by
   SQLite's own lock (WAL mode), waited for in the slot's thread by a busy
   handler that gives up after busyTimeout ms or when the query is
   interrupted; clank.db begins its transactions with BEGIN IMMEDIATE, so two
   transactions never deadlock upgrading a read lock. */
#include <lauxlib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/abort.h"
#include "data/rows.h"
#include "io/db.h"
#include "io/db_sqlite.h"
#include "core/values.h"

#define POOL_MT "clank.db.SqlitePool"
#define CONN_MT "clank.db.SqliteConn"
#define WAITER_MT "clank.db.SqliteWaiter"
#define RUN_MT "clank.db.SqliteRun"

/* ---- conns and waiters ---- */

struct sq_conn_s {
  clank_db_wait_t wait; /* first */
  sq_pool_t *pool;
  slot_t *slot; /* NULL once released; while set, the conn holds a share of the pool */
  int busy;     /* a run waits */
};

struct sq_waiter_s {
  clank_db_wait_t wait; /* first */
  sq_pool_t *pool;
  slot_t *slot; /* handed over, not yet delivered */
  int queued;
  sq_waiter_t *prev, *next;
};

/* pool:run's wait: the job it queued, until the job's result is delivered. */
struct sq_run_s {
  clank_db_wait_t wait; /* first */
  sq_pool_t *pool;      /* NULL once collected */
  job_t *job;
};

typedef struct pool_ud_s {
  sq_pool_t *pool; /* NULL once closed */
} pool_ud_t;

/* ---- the loop's side ---- */

static int post(sq_pool_t *p, slot_t *s, job_t *j) {
  if (!s->started) {
    if (uv_thread_create(&s->thread, clank_sqlite_thread, s) != 0) return -1;
    s->started = 1;
  }
  atomic_store(&s->stop, 0);
  uv_mutex_lock(&p->mu);
  s->job = j;
  uv_cond_signal(&s->cv);
  uv_mutex_unlock(&p->mu);
  return 0;
}

static void wake_soon(sq_pool_t *p);

/* The slot goes to a conn (or an internal job): its thread leaves the queue to the others. */
static void lend(sq_pool_t *p, slot_t *s) {
  s->lent = 1;
  uv_mutex_lock(&p->mu);
  s->reserved = 1;
  uv_mutex_unlock(&p->mu);
}

static void unlend(sq_pool_t *p, slot_t *s) {
  s->lent = 0;
  uv_mutex_lock(&p->mu);
  s->reserved = 0;
  int queued = p->queue != NULL;
  uv_mutex_unlock(&p->mu);
  if (queued) wake_soon(p);
}

static slot_t *free_slot(sq_pool_t *p) {
  slot_t *fresh = NULL;
  for (int i = 0; i < p->size; i++) {
    slot_t *s = &p->slots[i];
    if (s->lent) continue;
    if (s->started) return s;
    if (fresh == NULL) fresh = s;
  }
  return fresh;
}

static void unqueue(sq_waiter_t *w) {
  sq_pool_t *p = w->pool;
  if (!w->queued) return;
  if (w->prev)
    w->prev->next = w->next;
  else
    p->head = w->next;
  if (w->next)
    w->next->prev = w->prev;
  else
    p->tail = w->prev;
  w->prev = w->next = NULL;
  w->queued = 0;
}

/* Free slots go to waiters in order; each is resumed at the next tick. */
static void serve(sq_pool_t *p) {
  if (p->base.closed) return;
  while (p->head) {
    slot_t *s = free_slot(p);
    if (s == NULL) return;
    sq_waiter_t *w = p->head;
    unqueue(w);
    lend(p, s);
    w->slot = s;
    clank_db_wait_due(&w->wait);
  }
}

static void post_internal(sq_pool_t *p, slot_t *s, int kind) {
  job_t *j = calloc(1, sizeof *j);
  if (j) j->kind = kind;
  if (j == NULL || post(p, s, j) != 0) {
    free(j);
    unlend(p, s);
    serve(p);
  }
}

/* The slot comes back from a conn: rolled back, closed or free. */
static void slot_release(sq_pool_t *p, slot_t *s, int broken) {
  s->conn = NULL;
  if (p->base.closed) {
    unlend(p, s);
    return;
  }
  uv_mutex_lock(&p->mu);
  sqlite3 *db = s->db;
  uv_mutex_unlock(&p->mu);
  if (db && broken) {
    post_internal(p, s, JOB_CLOSE);
  } else if (db && !sqlite3_get_autocommit(db)) {
    post_internal(p, s, JOB_ROLLBACK);
  } else {
    unlend(p, s);
    serve(p);
  }
}

static void push_conn(lua_State *L, sq_pool_t *p, slot_t *s) {
  sq_conn_t *c = lua_newuserdatauv(L, sizeof *c, 0);
  memset(c, 0, sizeof *c);
  c->pool = p;
  c->slot = s;
  s->conn = c;
  clank_db_pool_ref(&p->base);
  luaL_setmetatable(L, CONN_MT);
}

/* A result kept for clank.Rows (mode "raw"): the job's cells, names and text. */
typedef struct kept_rows_s {
  cell_t *cells;
  char *text;
  size_t *cols;
  int ncols;
} kept_rows_t;

static void push_cell(lua_State *L, const char *text, const cell_t *c) {
  switch (c->type) {
    case SQLITE_INTEGER: lua_pushinteger(L, (lua_Integer)c->v.i); break;
    case SQLITE_FLOAT: lua_pushnumber(L, c->v.d); break;
    case SQLITE_TEXT:
    case SQLITE_BLOB: lua_pushlstring(L, text + c->v.s.off, c->v.s.n); break;
    default: clank_push_null(L); break;
  }
}

static void kept_push_cell(lua_State *L, void *data, size_t row, int col) {
  const kept_rows_t *k = data;
  push_cell(L, k->text, &k->cells[row * (size_t)k->ncols + (size_t)col]);
}

static void kept_read_cell(void *data, size_t row, int col, clank_rows_cell_t *out) {
  const kept_rows_t *k = data;
  const cell_t *c = &k->cells[row * (size_t)k->ncols + (size_t)col];
  switch (c->type) {
    case SQLITE_INTEGER:
      out->kind = CLANK_CELL_INTEGER;
      out->i = (lua_Integer)c->v.i;
      break;
    case SQLITE_FLOAT:
      out->kind = CLANK_CELL_FLOAT;
      out->d = c->v.d;
      break;
    case SQLITE_TEXT:
      out->kind = CLANK_CELL_TEXT;
      out->s = k->text + c->v.s.off;
      out->len = c->v.s.n;
      break;
    case SQLITE_BLOB: out->kind = CLANK_CELL_OTHER; break;
    default: out->kind = CLANK_CELL_NULL; break;
  }
}

static const char *kept_column_name(void *data, int col) {
  const kept_rows_t *k = data;
  return k->text + k->cols[col];
}

static void kept_free(void *data) {
  kept_rows_t *k = data;
  free(k->cells);
  free(k->text);
  free(k->cols);
  free(k);
}

static const clank_rows_source_t kept_source = {kept_push_cell, kept_read_cell, kept_column_name,
                                                kept_free};

/* The job's result as a clank.Rows, which takes its buffers over. */
static void push_kept(lua_State *L, job_t *j) {
  size_t nrows = j->ncols ? j->ncells / (size_t)j->ncols : 0;
  clank_rows_t *rows = clank_rows_push(L, &kept_source, nrows, j->ncols);
  kept_rows_t *k = malloc(sizeof *k);
  if (k == NULL) luaL_error(L, "clank.db.sqlite: out of memory");
  *k = (kept_rows_t){j->cells, j->text, j->cols, j->ncols};
  clank_rows_adopt(rows, k);
  j->cells = NULL;
  j->text = NULL;
  j->cols = NULL;
  j->ncols = 0;
  j->ncells = j->cap = 0;
  j->text_len = j->text_cap = 0;
}

static void push_result(lua_State *L, job_t *j) {
  if (j->rows == ROWS_KEPT) {
    push_kept(L, j);
    return;
  }
  if (!j->rows) {
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, (lua_Integer)j->changes);
    lua_setfield(L, -2, "changes");
    if (j->has_last_id) {
      lua_pushinteger(L, (lua_Integer)j->last_id);
      lua_setfield(L, -2, "lastId");
    }
    return;
  }
  size_t nrows = j->ncols ? j->ncells / (size_t)j->ncols : 0;
  lua_createtable(L, nrows > INT32_MAX ? 0 : (int)nrows, 0);
  int list = lua_gettop(L);
  /* the column names once, above the list: each row's keys are copies */
  for (int i = 0; i < j->ncols; i++) lua_pushstring(L, j->text + j->cols[i]);
  const cell_t *c = j->cells;
  for (size_t r = 0; r < nrows; r++) {
    lua_createtable(L, 0, j->ncols);
    for (int i = 0; i < j->ncols; i++, c++) {
      lua_pushvalue(L, list + 1 + i);
      push_cell(L, j->text, c);
      lua_rawset(L, -3);
    }
    lua_rawseti(L, list, (lua_Integer)r + 1);
  }
  lua_settop(L, list);
  clank_mark_array(L, -1);
}

/* What a finished job's wait gets: stopped, the database's error, or the result. */
static int push_outcome(lua_State *co, const clank_db_wait_t *w, job_t *j) {
  if (w->stopped) return clank_db_push_stopped(co, w);
  if (j->rc != SQLITE_OK)
    return clank_db_push_error(co, clank_sqlite_code_name(j->rc), j->errmsg ? j->errmsg : "error",
                               NULL);
  push_result(co, j);
  return 1;
}

static void run_finished(sq_pool_t *p, slot_t *s, job_t *j) {
  sq_conn_t *c = s->conn;
  if (c == NULL) { /* the conn was collected while its query ran */
    clank_sqlite_job_free(j);
    slot_release(p, s, 0);
    return;
  }
  c->busy = 0;
  lua_State *co = clank_db_wait_target(&c->wait);
  if (co == NULL) { /* its task is gone: the conn goes back, rolled back */
    clank_sqlite_job_free(j);
    c->slot = NULL;
    slot_release(p, s, 0);
    clank_db_pool_unref(&p->base); /* the conn's share, held with the slot */
    return;
  }
  int n = push_outcome(co, &c->wait, j);
  clank_sqlite_job_free(j);
  clank_db_wait_resume(&c->wait, n);
}

/* The run has no job any more, nor its share of the pool (held while it had one). */
static void run_detach(sq_run_t *q) {
  q->job = NULL;
  if (q->pool) clank_db_pool_unref(&q->pool->base);
  q->pool = NULL;
}

/* A queued job is back: its run gets the outcome (or it is dropped, nobody waiting). */
static void queued_finished(job_t *j) {
  sq_run_t *q = j->run;
  lua_State *co = q ? clank_db_wait_target(&q->wait) : NULL;
  if (q) run_detach(q);
  if (co == NULL) {
    clank_sqlite_job_free(j);
    return;
  }
  int n = push_outcome(co, &q->wait, j);
  clank_sqlite_job_free(j);
  clank_db_wait_resume(&q->wait, n);
}

static void handle_closed(uv_handle_t *h) {
  sq_pool_t *p = h->data;
  if (--p->open_handles == 0) clank_db_pool_handles_closed(&p->base);
}

/* Jobs of a list nobody will deliver: their runs forget them (and give up
   their share of the pool, unless it is being freed). */
static void jobs_drop(job_t *j, int unref) {
  while (j) {
    job_t *next = j->next;
    if (j->run && unref) {
      run_detach(j->run);
    } else if (j->run) {
      j->run->job = NULL;
      j->run->pool = NULL;
    }
    clank_sqlite_job_free(j);
    j = next;
  }
}

static void join_and_close(sq_pool_t *p) {
  if (!p->joined)
    for (int i = 0; i < p->size; i++)
      if (p->slots[i].started) uv_thread_join(&p->slots[i].thread);
  p->joined = 1;
  /* jobs nobody will collect: a Lua conn may still point at its slot */
  for (int i = 0; i < p->size; i++) {
    slot_t *s = &p->slots[i];
    clank_sqlite_job_free(s->job);
    s->job = NULL;
    s->finished = 0;
  }
  job_t *queued = p->queue, *finished = p->done;
  p->queue = p->queue_tail = p->done = p->done_tail = NULL;
  jobs_drop(queued, 1);
  jobs_drop(finished, 1);
  if (!p->closing) {
    p->closing = 1;
    uv_close((uv_handle_t *)&p->async, handle_closed);
    uv_close((uv_handle_t *)&p->prepare, handle_closed);
    uv_close((uv_handle_t *)&p->stall, handle_closed);
  }
}

static void on_async(uv_async_t *a) {
  sq_pool_t *p = a->data;
  if (p->joined) return;
  uv_mutex_lock(&p->mu);
  job_t *finished = p->done;
  p->done = p->done_tail = NULL;
  uv_mutex_unlock(&p->mu);
  while (finished) {
    job_t *j = finished;
    finished = j->next;
    j->next = NULL;
    if (p->base.closed) {
      if (j->run) run_detach(j->run);
      clank_sqlite_job_free(j);
    } else {
      queued_finished(j);
    }
  }
  for (int i = 0; i < p->size; i++) {
    slot_t *s = &p->slots[i];
    uv_mutex_lock(&p->mu);
    job_t *j = s->finished ? s->job : NULL;
    if (j) {
      s->job = NULL;
      s->finished = 0;
    }
    uv_mutex_unlock(&p->mu);
    if (j == NULL) continue;
    if (j->kind != JOB_RUN) {
      clank_sqlite_job_free(j);
      unlend(p, s);
      serve(p);
    } else if (p->base.closed) {
      clank_sqlite_job_free(j);
      if (s->conn) s->conn->busy = 0;
    } else {
      run_finished(p, s, j);
    }
  }
  uv_mutex_lock(&p->mu);
  int started = 0;
  for (int i = 0; i < p->size; i++) started += p->slots[i].started;
  int done = p->quitting && p->exited == started;
  uv_mutex_unlock(&p->mu);
  if (done) join_and_close(p);
}

static void pool_shutdown(clank_db_pool_t *base, int wait) {
  sq_pool_t *p = (sq_pool_t *)base;
  uv_mutex_lock(&p->mu);
  p->quitting = 1;
  for (int i = 0; i < p->size; i++) {
    slot_t *s = &p->slots[i];
    atomic_store(&s->stop, 1);
    if (s->running && s->db) sqlite3_interrupt(s->db);
    uv_cond_signal(&s->cv);
  }
  uv_mutex_unlock(&p->mu);
  int started = 0;
  for (int i = 0; i < p->size; i++) started += p->slots[i].started;
  if (wait || started == 0)
    join_and_close(p);
  else
    uv_async_send(&p->async); /* on_async joins once every thread is out */
}

static void pool_free(clank_db_pool_t *base) {
  sq_pool_t *p = (sq_pool_t *)base;
  jobs_drop(p->queue, 0);
  jobs_drop(p->done, 0);
  for (int i = 0; i < p->size; i++) {
    clank_sqlite_job_free(p->slots[i].job);
    uv_cond_destroy(&p->slots[i].cv);
  }
  uv_mutex_destroy(&p->mu);
  free(p->slots);
  free(p->path);
  free(p);
}

/* ---- the queue (pool:run) ---- */

static void on_stall(uv_timer_t *t);

/* Queued jobs nobody can run (no thread would start): they fail. */
static void fail_queue(sq_pool_t *p) {
  job_t *j;
  while ((j = p->queue) != NULL) {
    p->queue = j->next;
    j->rc = SQLITE_ERROR;
    free(j->errmsg);
    j->errmsg = strdup("cannot start a database thread");
    j->state = JOB_DONE;
    clank_sqlite_done_push(p, j);
  }
  p->queue_tail = NULL;
  uv_async_send(&p->async);
}

/* A thread for the queue. None is needed while one not reserved is awake:
   it looks at the queue before it sleeps. stalled: the queue has not moved
   for STALL_MS (a slow query), so one more joins in. */
static void wake_for_queue(sq_pool_t *p, int stalled) {
  if (p->closing) return;
  uv_mutex_lock(&p->mu);
  if (p->queue == NULL || p->quitting) {
    uv_mutex_unlock(&p->mu);
    return;
  }
  slot_t *idle = NULL, *fresh = NULL;
  int awake = 0;
  for (int i = 0; i < p->size; i++) {
    slot_t *s = &p->slots[i];
    if (s->reserved) continue;
    if (!s->started) {
      if (fresh == NULL) fresh = s;
    } else if (s->idle) {
      if (idle == NULL) idle = s;
    } else {
      awake++;
    }
  }
  if (awake == 0 || stalled) {
    if (idle) {
      idle->idle = 0; /* counted awake from now: one signal is enough */
      uv_cond_signal(&idle->cv);
    } else if (fresh) {
      if (uv_thread_create(&fresh->thread, clank_sqlite_thread, fresh) == 0)
        fresh->started = 1;
      else if (awake == 0)
        fail_queue(p);
    }
  }
  unsigned long completed = p->completed;
  int queued = p->queue != NULL;
  uv_mutex_unlock(&p->mu);
  if (queued && !uv_is_active((uv_handle_t *)&p->stall)) {
    p->stall_mark = completed;
    uv_timer_start(&p->stall, on_stall, STALL_MS, 0);
  }
}

static void on_stall(uv_timer_t *t) {
  sq_pool_t *p = t->data;
  uv_mutex_lock(&p->mu);
  unsigned long completed = p->completed;
  uv_mutex_unlock(&p->mu);
  int stalled = completed == p->stall_mark;
  p->stall_mark = completed;
  wake_for_queue(p, stalled);
}

/* Once the loop has queued all it will this turn, just before it polls. */
static void on_prepare(uv_prepare_t *h) {
  uv_prepare_stop(h);
  wake_for_queue(h->data, 0);
}

static void wake_soon(sq_pool_t *p) {
  if (!p->closing) uv_prepare_start(&p->prepare, on_prepare);
}

/* ---- Lua: the pool ---- */

/* The pool's methods hold its metatable as upvalue 1 and the run's as 2:
   no lookup by name on a query's way. */
static sq_pool_t *check_pool(lua_State *L) {
  pool_ud_t *u = lua_touserdata(L, 1);
  int ours = u && lua_getmetatable(L, 1);
  if (ours) {
    ours = lua_rawequal(L, -1, lua_upvalueindex(1));
    lua_pop(L, 1);
  }
  if (!ours) u = luaL_checkudata(L, 1, POOL_MT);
  if (u->pool == NULL) luaL_error(L, "clank.db.sqlite: the pool is closed");
  return u->pool;
}

static double opt_timeout(lua_State *L, int idx) {
  if (lua_isnoneornil(L, idx)) return 0;
  return luaL_checknumber(L, idx);
}

static int opt_signal(lua_State *L, int idx) {
  if (lua_isnoneornil(L, idx)) return 0;
  if (clank_abort_state(L, idx) < 0) luaL_checkudata(L, idx, CLANK_ABORT_MT); /* raises */
  return idx;
}

static void waiter_stop(clank_db_wait_t *w) {
  sq_waiter_t *q = (sq_waiter_t *)w;
  if (q->slot) return; /* already handed a connection: it is delivered */
  unqueue(q);
  clank_db_wait_due(w);
}

static void waiter_due(clank_db_wait_t *w) {
  sq_waiter_t *q = (sq_waiter_t *)w;
  sq_pool_t *p = q->pool;
  slot_t *s = q->slot;
  q->slot = NULL;
  lua_State *co = clank_db_wait_target(w);
  if (co == NULL) {
    if (s) slot_release(p, s, 0);
    return;
  }
  int n = 1;
  if (s)
    push_conn(co, p, s);
  else
    n = clank_db_push_stopped(co, w);
  clank_db_wait_resume(w, n);
}

static int waiter_gc(lua_State *L) {
  sq_waiter_t *q = lua_touserdata(L, 1);
  if (q->pool == NULL) return 0;
  unqueue(q);
  clank_db_wait_end(&q->wait);
  if (q->slot) slot_release(q->pool, q->slot, 0);
  q->slot = NULL;
  clank_db_pool_unref(&q->pool->base);
  q->pool = NULL;
  return 0;
}

/* pool:acquire(signal?, timeoutMs?) */
static int l_acquire(lua_State *L) {
  sq_pool_t *p = check_pool(L);
  int signal = opt_signal(L, 2);
  double timeout = opt_timeout(L, 3);
  if (p->base.closed) return clank_db_push_error(L, "CLOSED", "the pool is closed", NULL);
  if (clank_db_check_signal(L, signal)) return 2;
  slot_t *s = p->head ? NULL : free_slot(p);
  if (s) {
    lend(p, s);
    push_conn(L, p, s);
    return 1;
  }
  if (!clank_in_task(L)) return luaL_error(L, CLANK_WAIT_MESSAGE);
  sq_waiter_t *q = lua_newuserdatauv(L, sizeof *q, 0);
  memset(q, 0, sizeof *q);
  q->pool = p;
  clank_db_pool_ref(&p->base);
  luaL_setmetatable(L, WAITER_MT);
  q->wait.on_stop = waiter_stop;
  q->wait.on_due = waiter_due;
  q->queued = 1;
  q->prev = p->tail;
  if (p->tail)
    p->tail->next = q;
  else
    p->head = q;
  p->tail = q;
  return clank_db_wait(L, &q->wait, -1, signal, timeout, NULL);
}

static void queue_remove(sq_pool_t *p, job_t *j) {
  job_t *prev = NULL;
  for (job_t *x = p->queue; x; prev = x, x = x->next) {
    if (x != j) continue;
    if (prev)
      prev->next = j->next;
    else
      p->queue = j->next;
    if (p->queue_tail == j) p->queue_tail = prev;
    j->next = NULL;
    return;
  }
}

/* The run's job, given up: a queued one leaves the queue (1 is returned and
   the caller frees it); a running one is interrupted. */
static int job_give_up(sq_pool_t *p, job_t *j) {
  int dequeued = 0;
  uv_mutex_lock(&p->mu);
  if (j->state == JOB_QUEUED) {
    queue_remove(p, j);
    dequeued = 1;
  } else if (j->state == JOB_RUNNING) {
    atomic_store(&j->stop, 1);
    if (j->on && j->on->db) sqlite3_interrupt(j->on->db);
  }
  uv_mutex_unlock(&p->mu);
  return dequeued;
}

static void run_stop(clank_db_wait_t *w) {
  sq_run_t *q = (sq_run_t *)w;
  job_t *j = q->job;
  if (j == NULL || !job_give_up(q->pool, j)) return; /* the result will come, as stopped */
  run_detach(q);
  clank_sqlite_job_free(j);
  clank_db_wait_due(w);
}

static void run_due(clank_db_wait_t *w) {
  lua_State *co = clank_db_wait_target(w);
  if (co) clank_db_wait_resume(w, clank_db_push_stopped(co, w));
}

static int run_gc(lua_State *L) {
  sq_run_t *q = lua_touserdata(L, 1);
  clank_db_wait_end(&q->wait);
  job_t *j = q->job;
  if (j) {
    if (job_give_up(q->pool, j))
      clank_sqlite_job_free(j);
    else
      j->run = NULL; /* it ends on its own; the loop frees it */
  }
  run_detach(q);
  return 0;
}

static cell_t *read_params(lua_State *L, int idx, int *count);

/* conn:run's and pool:run's arguments, from index 2: sql, params (read
   later, by new_run_job), mode ("rows", "exec" or "raw": the rows as a
   clank.Rows), signal?, timeoutMs?. */
typedef struct run_args_s {
  const char *sql;
  size_t sql_len;
  int rows, signal; /* signal: its index, or 0 */
  double timeout;
} run_args_t;

static void check_run_args(lua_State *L, run_args_t *a) {
  static const char *const modes[] = {"rows", "exec", "raw", NULL};
  static const int as_rows[] = {ROWS_TABLES, ROWS_NONE, ROWS_KEPT};
  a->sql = luaL_checklstring(L, 2, &a->sql_len);
  a->rows = as_rows[luaL_checkoption(L, 4, NULL, modes)];
  a->signal = opt_signal(L, 5);
  a->timeout = opt_timeout(L, 6);
}

/* A JOB_RUN of sql with the params at index 3; raises on a value it cannot
   bind or out of memory. */
static job_t *new_run_job(lua_State *L, const char *sql, size_t sql_len, int rows) {
  int nparams;
  cell_t *params = read_params(L, 3, &nparams);
  job_t *j = calloc(1, sizeof *j);
  char *copy = j ? malloc(sql_len + 1) : NULL;
  if (copy == NULL) {
    free(j);
    clank_sqlite_cells_free(params, (size_t)nparams);
    luaL_error(L, "clank.db.sqlite: out of memory");
    return NULL;
  }
  memcpy(copy, sql, sql_len + 1);
  j->kind = JOB_RUN;
  j->rows = rows;
  j->sql = copy;
  j->sql_len = sql_len;
  j->params = params;
  j->nparams = nparams;
  return j;
}

/* pool:run(sql, params, mode, signal?, timeoutMs?): one query on whichever
   connection is free first, without lending one (the queue). */
static int l_run_queued(lua_State *L) {
  sq_pool_t *p = check_pool(L);
  run_args_t a;
  check_run_args(L, &a);
  if (p->base.closed) return clank_db_push_error(L, "CLOSED", "the pool is closed", NULL);
  if (!clank_in_task(L)) return luaL_error(L, CLANK_WAIT_MESSAGE);
  if (clank_db_check_signal(L, a.signal)) return 2;
  sq_run_t *q = lua_newuserdatauv(L, sizeof *q, 0);
  memset(q, 0, sizeof *q);
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_setmetatable(L, -2);
  job_t *j = new_run_job(L, a.sql, a.sql_len, a.rows);
  j->run = q;
  j->writes = clank_sqlite_single_write(a.sql, a.sql_len);
  q->job = j;
  q->pool = p;
  clank_db_pool_ref(&p->base);
  uv_mutex_lock(&p->mu);
  j->state = JOB_QUEUED;
  if (p->queue_tail)
    p->queue_tail->next = j;
  else
    p->queue = j;
  p->queue_tail = j;
  uv_mutex_unlock(&p->mu);
  wake_soon(p);
  q->wait.on_stop = run_stop;
  q->wait.on_due = run_due;
  return clank_db_wait(L, &q->wait, -1, a.signal, a.timeout, NULL);
}

static int l_pool_close(lua_State *L) {
  pool_ud_t *u = luaL_checkudata(L, 1, POOL_MT);
  if (u->pool) clank_db_pool_unref(&u->pool->base);
  u->pool = NULL;
  return 0;
}

static int l_pool_tostring(lua_State *L) {
  pool_ud_t *u = luaL_checkudata(L, 1, POOL_MT);
  lua_pushfstring(L, "clank.db.sqlite pool (%s)", u->pool ? u->pool->path : "closed");
  return 1;
}

/* ---- Lua: the conn ---- */

static int utf8_ok(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    if (c == 0) return 0;
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t len;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      min = 0x10000;
    } else {
      return 0;
    }
    if (i + len > n) return 0;
    unsigned cp = c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += len;
  }
  return 1;
}

/* params (at idx) → cells; on a value that cannot be bound, frees what it
   made and raises naming the position. */
static cell_t *read_params(lua_State *L, int idx, int *count) {
  *count = 0;
  if (lua_isnoneornil(L, idx)) return NULL;
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_Integer n;
  if (lua_getfield(L, idx, "n") == LUA_TNUMBER && lua_isinteger(L, -1))
    n = lua_tointeger(L, -1);
  else
    n = (lua_Integer)lua_rawlen(L, idx);
  lua_pop(L, 1);
  if (n < 0 || n > 32766) return luaL_error(L, "too many parameters (%I)", n), NULL;
  if (n == 0) return NULL;
  cell_t *cells = calloc((size_t)n, sizeof *cells);
  if (cells == NULL) return luaL_error(L, "clank.db.sqlite: out of memory"), NULL;
  for (lua_Integer i = 0; i < n; i++) {
    cell_t *c = &cells[i];
    int t = lua_rawgeti(L, idx, i + 1);
    const char *bad = NULL;
    switch (t) {
      case LUA_TNUMBER:
        if (lua_isinteger(L, -1)) {
          c->type = SQLITE_INTEGER;
          c->v.i = (sqlite3_int64)lua_tointeger(L, -1);
        } else {
          c->type = SQLITE_FLOAT;
          c->v.d = lua_tonumber(L, -1);
        }
        break;
      case LUA_TBOOLEAN:
        c->type = SQLITE_INTEGER;
        c->v.i = lua_toboolean(L, -1);
        break;
      case LUA_TSTRING: {
        size_t len;
        const char *str = lua_tolstring(L, -1, &len);
        c->v.s.p = malloc(len + 1);
        if (c->v.s.p == NULL) {
          bad = "out of memory";
          break;
        }
        memcpy(c->v.s.p, str, len + 1);
        c->v.s.n = len;
        c->type = utf8_ok((const unsigned char *)str, len) ? SQLITE_TEXT : SQLITE_BLOB;
        break;
      }
      case LUA_TLIGHTUSERDATA:
        if (clank_is_null(L, -1)) {
          c->type = SQLITE_NULL;
          break;
        }
        bad = "a userdata";
        break;
      case LUA_TNIL: bad = "nil"; break;
      case LUA_TTABLE: bad = "a table"; break;
      case LUA_TFUNCTION: bad = "a function"; break;
      case LUA_TTHREAD: bad = "a thread"; break;
      default: bad = "a userdata"; break;
    }
    lua_pop(L, 1);
    if (bad) {
      clank_sqlite_cells_free(cells, (size_t)n);
      return luaL_error(L, "parameter $%I: cannot bind %s", i + 1, bad), NULL;
    }
  }
  *count = (int)n;
  return cells;
}

static sq_conn_t *check_conn(lua_State *L) {
  sq_conn_t *c = luaL_checkudata(L, 1, CONN_MT);
  if (c->slot == NULL) luaL_error(L, "connection already released");
  return c;
}

static void conn_stop(clank_db_wait_t *w) {
  sq_conn_t *c = (sq_conn_t *)w;
  slot_t *s = c->slot;
  if (s == NULL) return;
  sq_pool_t *p = c->pool;
  atomic_store(&s->stop, 1);
  uv_mutex_lock(&p->mu);
  if (s->running && s->db) sqlite3_interrupt(s->db);
  uv_mutex_unlock(&p->mu);
}

static void conn_due(clank_db_wait_t *w) { (void)w; }

/* conn:run(sql, params, mode, signal?, timeoutMs?) */
static int l_run(lua_State *L) {
  sq_conn_t *c = check_conn(L);
  run_args_t a;
  check_run_args(L, &a);
  if (c->busy) return luaL_error(L, "connection busy");
  if (c->pool->base.closed) return clank_db_push_error(L, "CLOSED", "the pool is closed", NULL);
  if (!clank_in_task(L)) return luaL_error(L, CLANK_WAIT_MESSAGE);
  if (clank_db_check_signal(L, a.signal)) return 2;
  job_t *j = new_run_job(L, a.sql, a.sql_len, a.rows);
  if (post(c->pool, c->slot, j) != 0) {
    clank_sqlite_job_free(j);
    return clank_db_push_error(L, "SQLITE_ERROR", "cannot start a database thread", NULL);
  }
  c->busy = 1;
  c->wait.on_stop = conn_stop;
  c->wait.on_due = conn_due;
  return clank_db_wait(L, &c->wait, 1, a.signal, a.timeout, NULL);
}

/* conn:release(broken?) */
static int l_release(lua_State *L) {
  sq_conn_t *c = check_conn(L);
  if (c->busy) return luaL_error(L, "connection busy");
  slot_t *s = c->slot;
  c->slot = NULL;
  slot_release(c->pool, s, lua_toboolean(L, 2));
  clank_db_pool_unref(&c->pool->base); /* the conn's share, held with the slot */
  return 0;
}

static int conn_gc(lua_State *L) {
  sq_conn_t *c = lua_touserdata(L, 1);
  clank_db_wait_end(&c->wait);
  slot_t *s = c->slot;
  if (s == NULL) return 0; /* released: its share of the pool went with the slot */
  if (c->busy) {
    conn_stop(&c->wait); /* nobody wants the result: interrupt the query */
    s->conn = NULL;      /* it ends first; then the slot goes back, rolled back */
    c->slot = NULL;
  } else {
    c->slot = NULL;
    slot_release(c->pool, s, 0);
  }
  clank_db_pool_unref(&c->pool->base);
  return 0;
}

/* ---- the module ---- */

static int l_pool(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  luaL_argcheck(L, *path != '\0', 1, "expected a database path");
  lua_Integer size = 4, busy = 5000;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    if (lua_getfield(L, 2, "size") != LUA_TNIL) {
      size = luaL_checkinteger(L, -1);
      luaL_argcheck(L, size >= 1 && size <= 64, 2, "size must be an integer from 1 to 64");
    }
    if (lua_getfield(L, 2, "busyTimeout") != LUA_TNIL) {
      busy = luaL_checkinteger(L, -1);
      luaL_argcheck(L, busy >= 0 && busy <= 3600000, 2, "busyTimeout must be 0 to 3600000 ms");
    }
    lua_pop(L, 2);
  }
  clank_db_registry_t *r = clank_db_registry_of(L);
  lua_pushfstring(L, "sqlite\n%s\n%I/%I", path, size, busy);
  const char *key = lua_tostring(L, -1);
  pool_ud_t *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->pool = NULL;
  luaL_setmetatable(L, POOL_MT);
  sq_pool_t *p = (sq_pool_t *)clank_db_pool_find(r, key);
  if (p == NULL) {
    p = calloc(1, sizeof *p);
    slot_t *slots = p ? calloc((size_t)size, sizeof *slots) : NULL;
    char *copy = slots ? strdup(path) : NULL;
    if (copy == NULL) {
      free(slots);
      free(p);
      return luaL_error(L, "clank.db.sqlite: out of memory");
    }
    p->base.shutdown = pool_shutdown;
    p->base.free = pool_free;
    p->loop = clank_db_registry_loop(r);
    p->path = copy;
    p->size = (int)size;
    p->busy_ms = (int)busy;
    p->slots = slots;
    uv_mutex_init(&p->mu);
    for (int i = 0; i < p->size; i++) {
      slots[i].pool = p;
      uv_cond_init(&slots[i].cv);
    }
    uv_async_init(p->loop, &p->async, on_async);
    p->async.data = p;
    uv_prepare_init(p->loop, &p->prepare);
    p->prepare.data = p;
    uv_timer_init(p->loop, &p->stall);
    p->stall.data = p;
    p->open_handles = 3;
    clank_db_pool_add(r, &p->base, key);
  }
  u->pool = p;
  return 1;
}

static const luaL_Reg pool_methods[] = {
    {"acquire", l_acquire}, {"run", l_run_queued}, {"close", l_pool_close}, {NULL, NULL}};
static const luaL_Reg conn_methods[] = {{"run", l_run}, {"release", l_release}, {NULL, NULL}};
/* _singleWrite(sql): what groups (for the specs). */
static int l_single_write(lua_State *L) {
  size_t len;
  const char *sql = luaL_checklstring(L, 1, &len);
  lua_pushboolean(L, clank_sqlite_single_write(sql, len));
  return 1;
}

static const luaL_Reg funcs[] = {{"pool", l_pool}, {"_singleWrite", l_single_write}, {NULL, NULL}};

int luaopen_clank_db_sqlite(lua_State *L) {
  if (luaL_newmetatable(L, CONN_MT)) {
    luaL_newlib(L, conn_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, conn_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, WAITER_MT)) {
    lua_pushcfunction(L, waiter_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, RUN_MT)) {
    lua_pushcfunction(L, run_gc);
    lua_setfield(L, -2, "__gc");
  }
  int run_mt = lua_gettop(L);
  if (luaL_newmetatable(L, POOL_MT)) {
    lua_newtable(L);
    lua_pushvalue(L, -2);
    lua_pushvalue(L, run_mt);
    luaL_setfuncs(L, pool_methods, 2);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_pool_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_pool_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 2);
  luaL_newlib(L, funcs);
  return 1;
}
