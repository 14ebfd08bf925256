/* clank.db.sqlite: a slot's thread. It owns the slot's connection (opened
   on its first job, closed when the pool quits) and the statements it keeps
   prepared, runs its conn's posted jobs and the pool's queued ones, and
   collects every value into C memory; the loop turns them into Lua. */
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ctype.h>

#include "io/db_sqlite.h"

void clank_sqlite_cells_free(cell_t *c, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (c[i].type == SQLITE_TEXT || c[i].type == SQLITE_BLOB) free(c[i].v.s.p);
  free(c);
}

static void job_clear_rows(job_t *j) {
  free(j->cols);
  j->cols = NULL;
  j->ncols = 0;
  free(j->cells); /* a result's text is in j->text */
  j->cells = NULL;
  j->ncells = j->cap = 0;
  j->text_len = 0;
}

void clank_sqlite_job_free(job_t *j) {
  if (j == NULL) return;
  job_clear_rows(j);
  free(j->text);
  clank_sqlite_cells_free(j->params, (size_t)j->nparams);
  free(j->sql);
  free(j->errmsg);
  free(j);
}

static const char *const primary_names[] = {
    "SQLITE_OK",       "SQLITE_ERROR",   "SQLITE_INTERNAL", "SQLITE_PERM",     "SQLITE_ABORT",
    "SQLITE_BUSY",     "SQLITE_LOCKED",  "SQLITE_NOMEM",    "SQLITE_READONLY", "SQLITE_INTERRUPT",
    "SQLITE_IOERR",    "SQLITE_CORRUPT", "SQLITE_NOTFOUND", "SQLITE_FULL",     "SQLITE_CANTOPEN",
    "SQLITE_PROTOCOL", "SQLITE_EMPTY",   "SQLITE_SCHEMA",   "SQLITE_TOOBIG",   "SQLITE_CONSTRAINT",
    "SQLITE_MISMATCH", "SQLITE_MISUSE",  "SQLITE_NOLFS",    "SQLITE_AUTH",     "SQLITE_FORMAT",
    "SQLITE_RANGE",    "SQLITE_NOTADB",  "SQLITE_NOTICE",   "SQLITE_WARNING"};

const char *clank_sqlite_code_name(int rc) {
  int primary = rc & 0xff;
  if (primary >= 0 && (size_t)primary < sizeof primary_names / sizeof primary_names[0])
    return primary_names[primary];
  return "SQLITE_ERROR";
}

static int busy_wait(void *arg, int count) {
  slot_t *s = arg;
  if (s->stopping && atomic_load(s->stopping)) return 0;
  /* 1 ms steps for 10 ms, then 5 ms steps */
  long waited = count < 10 ? count : 10 + (long)(count - 10) * 5;
  if (waited >= s->pool->busy_ms) return 0;
  uv_sleep(count < 10 ? 1 : 5);
  return 1;
}

static void job_fail(job_t *j, int rc, const char *msg) {
  j->rc = rc;
  free(j->errmsg);
  j->errmsg = strdup(msg ? msg : sqlite3_errstr(rc));
}

static int slot_open(slot_t *s, job_t *j) {
  sqlite3 *db = NULL;
  /* NOMUTEX: only this thread uses the connection (the loop calls
     sqlite3_interrupt, which needs no mutex, and sqlite3_get_autocommit
     while the thread is idle), so SQLite need not lock around every call:
     a row of ten columns made thirty lock and unlock pairs. */
  int rc = sqlite3_open_v2(s->pool->path, &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_handler(db, busy_wait, s);
    /* Switching a new file to WAL takes an exclusive lock without calling
       the busy handler, so two first opens at once would fail: wait here. */
    rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
    for (int count = 0; (rc & 0xff) == SQLITE_BUSY && busy_wait(s, count); count++)
      rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
  }
  if (rc != SQLITE_OK) {
    job_fail(j, rc, db ? sqlite3_errmsg(db) : NULL);
    sqlite3_close_v2(db);
    return -1;
  }
  uv_mutex_lock(&s->pool->mu);
  s->db = db;
  uv_mutex_unlock(&s->pool->mu);
  return 0;
}

/* Copies n bytes and a NUL into the job's text; *off is where they start. */
static int text_put(job_t *j, const void *p, size_t n, size_t *off) {
  if (j->text_cap - j->text_len < n + 1) {
    size_t cap = j->text_cap ? j->text_cap : 1024;
    while (cap - j->text_len < n + 1) {
      if (cap > SIZE_MAX / 2) return -1;
      cap *= 2;
    }
    char *t = realloc(j->text, cap);
    if (t == NULL) return -1;
    j->text = t;
    j->text_cap = cap;
  }
  if (n) memcpy(j->text + j->text_len, p, n);
  j->text[j->text_len + n] = '\0';
  *off = j->text_len;
  j->text_len += n + 1;
  return 0;
}

static int collect(job_t *j, sqlite3_stmt *st) {
  int n = sqlite3_column_count(st);
  if (j->ncols == 0) {
    j->cols = malloc((size_t)(n ? n : 1) * sizeof *j->cols);
    if (j->cols == NULL) return -1;
    for (int i = 0; i < n; i++) {
      const char *name = sqlite3_column_name(st, i);
      if (name == NULL) name = "?";
      if (text_put(j, name, strlen(name), &j->cols[i]) != 0) return -1;
    }
    j->ncols = n;
  }
  if (j->ncells + (size_t)n > j->cap) {
    size_t cap = j->cap ? j->cap * 2 : 64;
    while (cap < j->ncells + (size_t)n) cap *= 2;
    cell_t *c = realloc(j->cells, cap * sizeof *c);
    if (c == NULL) return -1;
    j->cells = c;
    j->cap = cap;
  }
  /* Each column's value is read through sqlite3_value_*: the sqlite3_column_* calls each look
     the column up again and check for a failed allocation, about half of what a row's copy
     costs here. The value is unprotected, which is safe: only this thread uses this
     connection (SQLITE_OPEN_NOMUTEX). A text whose conversion or terminating copy could not
     allocate comes back NULL, and fails the job as text_put's own failure does. */
  for (int i = 0; i < n; i++) {
    cell_t *c = &j->cells[j->ncells++];
    sqlite3_value *v = sqlite3_column_value(st, i);
    c->type = sqlite3_value_type(v);
    switch (c->type) {
      case SQLITE_INTEGER: c->v.i = sqlite3_value_int64(v); break;
      case SQLITE_FLOAT: c->v.d = sqlite3_value_double(v); break;
      case SQLITE_TEXT:
      case SQLITE_BLOB: {
        const void *p =
            c->type == SQLITE_TEXT ? (const void *)sqlite3_value_text(v) : sqlite3_value_blob(v);
        size_t len = (size_t)sqlite3_value_bytes(v);
        c->v.s.p = NULL;
        c->v.s.n = len;
        if ((p == NULL && len > 0) || text_put(j, p, len, &c->v.s.off) != 0) {
          c->type = SQLITE_NULL;
          return -1;
        }
        break;
      }
      default: c->type = SQLITE_NULL; break;
    }
  }
  return 0;
}

static int bind_params(job_t *j, sqlite3 *db, sqlite3_stmt *st) {
  int count = sqlite3_bind_parameter_count(st);
  for (int i = 1; i <= count; i++) {
    const char *name = sqlite3_bind_parameter_name(st, i);
    char *end = NULL;
    long k = name && name[0] == '$' ? strtol(name + 1, &end, 10) : 0;
    if (end == NULL || *end != '\0' || k < 1) {
      char msg[128];
      snprintf(msg, sizeof msg, "placeholder %s: use $1 ... $n", name ? name : "?");
      job_fail(j, SQLITE_RANGE, msg);
      return -1;
    }
    if (k > j->nparams) {
      char msg[128];
      snprintf(msg, sizeof msg, "no value for parameter $%ld (%d given)", k, j->nparams);
      job_fail(j, SQLITE_RANGE, msg);
      return -1;
    }
    const cell_t *c = &j->params[k - 1];
    int rc;
    switch (c->type) {
      case SQLITE_INTEGER: rc = sqlite3_bind_int64(st, i, c->v.i); break;
      case SQLITE_FLOAT: rc = sqlite3_bind_double(st, i, c->v.d); break;
      case SQLITE_TEXT:
        rc = sqlite3_bind_text64(st, i, c->v.s.p, c->v.s.n, SQLITE_STATIC, SQLITE_UTF8);
        break;
      case SQLITE_BLOB: rc = sqlite3_bind_blob64(st, i, c->v.s.p, c->v.s.n, SQLITE_STATIC); break;
      default: rc = sqlite3_bind_null(st, i); break;
    }
    if (rc != SQLITE_OK) {
      job_fail(j, rc, sqlite3_errmsg(db));
      return -1;
    }
  }
  return 0;
}

static int starts_with_insert(const char *sql) {
  while (*sql == ' ' || *sql == '\t' || *sql == '\n' || *sql == '\r') sql++;
  return strncasecmp(sql, "INSERT", 6) == 0 || strncasecmp(sql, "REPLACE", 7) == 0;
}

/* ---- prepared statements kept by SQL text ---- */

static uint64_t sql_hash(const char *sql, size_t len) {
  uint64_t h = 1469598103934665603u; /* FNV-1a */
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)sql[i]) * 1099511628211u;
  return h;
}

static stmt_entry_t *cache_find(slot_t *s, uint64_t hash, const char *sql, size_t len) {
  for (int i = 0; i < STMT_CACHE_SIZE; i++) {
    stmt_entry_t *e = &s->cache[i];
    if (e->st && e->hash == hash && e->len == len && memcmp(e->sql, sql, len) == 0) return e;
  }
  return NULL;
}

static void cache_drop(stmt_entry_t *e) {
  sqlite3_finalize(e->st);
  free(e->sql);
  memset(e, 0, sizeof *e);
}

/* Keeps st for sql (the least recently used entry goes); 0 when it could not. */
static int cache_keep(slot_t *s, uint64_t hash, const char *sql, size_t len, sqlite3_stmt *st) {
  stmt_entry_t *slot = &s->cache[0];
  for (int i = 0; i < STMT_CACHE_SIZE; i++) {
    stmt_entry_t *e = &s->cache[i];
    if (e->st == NULL) {
      slot = e;
      break;
    }
    if (e->used < slot->used) slot = e;
  }
  char *copy = malloc(len);
  if (copy == NULL) return 0;
  memcpy(copy, sql, len);
  if (slot->st) cache_drop(slot);
  slot->hash = hash;
  slot->sql = copy;
  slot->len = len;
  slot->st = st;
  slot->used = ++s->clock;
  return 1;
}

/* Every kept statement goes (before the connection closes). */
static void cache_clear(slot_t *s) {
  for (int i = 0; i < STMT_CACHE_SIZE; i++)
    if (s->cache[i].st) cache_drop(&s->cache[i]);
}

static int only_space(const char *p, const char *end) {
  for (; p < end; p++)
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != ';') return 0;
  return 1;
}

/* Runs one prepared statement: binds, steps (collecting rows when asked),
   records changes and the last id. 0, or -1 with the job failed. */
static int run_statement(job_t *j, sqlite3 *db, sqlite3_stmt *st, const char *sql,
                         sqlite3_int64 before) {
  if (bind_params(j, db, st) != 0) return -1;
  int first_row = 1, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (!j->rows) continue;
    if (first_row) job_clear_rows(j);
    first_row = 0;
    if (collect(j, st) != 0) {
      rc = SQLITE_NOMEM;
      break;
    }
  }
  if (rc != SQLITE_DONE) {
    job_fail(j, rc, rc == SQLITE_NOMEM ? NULL : sqlite3_errmsg(db));
    return -1;
  }
  if (!sqlite3_stmt_readonly(st)) {
    j->changes = sqlite3_changes64(db);
    sqlite3_int64 id = sqlite3_last_insert_rowid(db);
    if (id != before || (j->changes > 0 && starts_with_insert(sql))) {
      j->last_id = id;
      j->has_last_id = 1;
    }
  }
  return 0;
}

/* Every statement of the SQL in turn; "rows" keeps those of the last one
   that returned columns. A text of one statement runs on the connection's
   kept statement for it, prepared the first time. */
static void run_statements(slot_t *s, job_t *j) {
  sqlite3 *db = s->db;
  const char *sql = j->sql, *end = j->sql + j->sql_len;
  sqlite3_int64 before = sqlite3_last_insert_rowid(db);
  uint64_t hash = sql_hash(j->sql, j->sql_len);
  stmt_entry_t *kept = cache_find(s, hash, j->sql, j->sql_len);
  if (kept) {
    kept->used = ++s->clock;
    run_statement(j, db, kept->st, sql, before);
    sqlite3_reset(kept->st);
    sqlite3_clear_bindings(kept->st);
    return;
  }
  while (sql < end) {
    sqlite3_stmt *st = NULL;
    const char *tail = NULL;
    int whole = sql == j->sql;
    int rc = sqlite3_prepare_v3(db, sql, (int)(end - sql), SQLITE_PREPARE_PERSISTENT, &st, &tail);
    if (rc != SQLITE_OK) {
      job_fail(j, rc, sqlite3_errmsg(db));
      return;
    }
    if (st == NULL) break; /* only whitespace or comments left */
    int failed = run_statement(j, db, st, sql, before) != 0;
    if (whole && only_space(tail, end) && cache_keep(s, hash, j->sql, j->sql_len, st)) {
      sqlite3_reset(st);
      sqlite3_clear_bindings(st);
    } else {
      sqlite3_finalize(st);
    }
    if (failed) return;
    sql = tail;
  }
}

static void slot_close(slot_t *s) {
  cache_clear(s);
  uv_mutex_lock(&s->pool->mu);
  sqlite3 *db = s->db;
  s->db = NULL;
  uv_mutex_unlock(&s->pool->mu);
  sqlite3_close_v2(db); /* an open transaction rolls back */
}

static void run_job(slot_t *s, job_t *j, atomic_int *stop) {
  s->stopping = stop;
  if (s->db == NULL && j->kind != JOB_RUN) return;
  if (s->db == NULL && slot_open(s, j) != 0) return;
  switch (j->kind) {
    case JOB_ROLLBACK: sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL); break;
    case JOB_CLOSE: slot_close(s); break;
    default:
      if (atomic_load(stop)) {
        job_fail(j, SQLITE_INTERRUPT, "interrupted");
        break;
      }
      run_statements(s, j);
      break;
  }
}

static int starts_with_word(const char *sql, size_t len, const char *word) {
  size_t n = strlen(word);
  return len >= n && strncasecmp(sql, word, n) == 0 &&
         (len == n || !(isalnum((unsigned char)sql[n]) || sql[n] == '_'));
}

int clank_sqlite_single_write(const char *sql, size_t len) {
  while (len && isspace((unsigned char)*sql)) sql++, len--;
  if (!starts_with_word(sql, len, "INSERT") && !starts_with_word(sql, len, "UPDATE") &&
      !starts_with_word(sql, len, "DELETE") && !starts_with_word(sql, len, "REPLACE"))
    return 0;
  const char *semi = memchr(sql, ';', len);
  return semi == NULL || only_space(semi, sql + len);
}

/* Runs one of the connection's kept statements for fixed SQL (BEGIN, SAVEPOINT, ...). */
static int exec_kept(slot_t *s, const char *sql) {
  size_t len = strlen(sql);
  uint64_t hash = sql_hash(sql, len);
  stmt_entry_t *kept = cache_find(s, hash, sql, len);
  sqlite3_stmt *st = kept ? kept->st : NULL;
  if (st == NULL) {
    if (sqlite3_prepare_v3(s->db, sql, (int)len, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK)
      return sqlite3_errcode(s->db);
    if (!cache_keep(s, hash, sql, len, st)) {
      int rc = sqlite3_step(st);
      sqlite3_finalize(st);
      return rc == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(s->db);
    }
  } else {
    kept->used = ++s->clock;
  }
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(s->db);
}

/* Queued writes (a list through next) in one transaction, each under a
   savepoint of its own: a failing one is undone alone and gets its error;
   when the transaction itself is lost (COMMIT fails, or a job's error
   rolled it back), every job it held gets that error, for none of their
   changes were kept. A group that cannot begin runs its jobs one by one. */
static void run_group(slot_t *s, job_t *group) {
  s->stopping = NULL; /* a group waits for the write lock at most busyTimeout */
  if (s->db == NULL && slot_open(s, group) != 0) {
    for (job_t *j = group->next; j; j = j->next) job_fail(j, group->rc, group->errmsg);
    return;
  }
  if (exec_kept(s, "BEGIN IMMEDIATE") != SQLITE_OK) {
    for (job_t *j = group; j; j = j->next) run_job(s, j, &j->stop);
    return;
  }
  job_t *j = group;
  for (; j; j = j->next) {
    if (exec_kept(s, "SAVEPOINT clank_group_job") != SQLITE_OK) break;
    run_statements(s, j);
    if (j->rc != SQLITE_OK && !sqlite3_get_autocommit(s->db))
      exec_kept(s, "ROLLBACK TO clank_group_job");
    if (sqlite3_get_autocommit(s->db) || exec_kept(s, "RELEASE clank_group_job") != SQLITE_OK)
      break;
  }
  int rc = SQLITE_OK;
  const char *msg = NULL;
  if (j == NULL) {
    rc = exec_kept(s, "COMMIT");
  } else { /* the transaction is lost, or about to be */
    rc = j->rc != SQLITE_OK ? j->rc : sqlite3_errcode(s->db);
    if (rc == SQLITE_OK) rc = SQLITE_ERROR;
    msg = j->errmsg;
  }
  if (rc != SQLITE_OK) {
    char *text = strdup(msg ? msg : sqlite3_errmsg(s->db));
    if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    for (job_t *k = group; k && k != (j ? j->next : NULL); k = k->next)
      if (k->rc == SQLITE_OK || k == j) job_fail(k, rc, text);
    free(text);
    /* those after the one that lost the transaction never ran: alone now */
    for (job_t *k = j ? j->next : NULL; k; k = k->next) run_job(s, k, &k->stop);
  }
}

static int has_work(slot_t *s) { return s->job && !s->running && !s->finished; }

static job_t *queue_pop(sq_pool_t *p) {
  job_t *j = p->queue;
  if (j == NULL) return NULL;
  p->queue = j->next;
  if (p->queue == NULL) p->queue_tail = NULL;
  j->next = NULL;
  return j;
}

void clank_sqlite_done_push(sq_pool_t *p, job_t *j) {
  j->next = NULL;
  if (p->done_tail)
    p->done_tail->next = j;
  else
    p->done = j;
  p->done_tail = j;
}

/* Runs the slot's posted job first, else (not reserved) the pool's queued
   ones; tells the loop when it runs out of work, or every BATCH_MS while it
   has some, so results are not held back. */
void clank_sqlite_thread(void *arg) {
  slot_t *s = arg;
  sq_pool_t *p = s->pool;
  int unsent = 0;
  uint64_t batch_start = 0;
  uv_mutex_lock(&p->mu);
  for (;;) {
    job_t *j = NULL;
    int queued = 0;
    if (has_work(s)) {
      j = s->job;
      s->running = 1;
    } else if (!s->reserved && !p->quitting && (j = queue_pop(p)) != NULL) {
      queued = 1;
      j->state = JOB_RUNNING;
      j->on = s;
      /* writes next to it join it; a group is never interrupted (one job's
         abort must not undo the others), its jobs are short */
      job_t *last = j;
      for (int n = 1; j->writes && n < GROUP_MAX && p->queue && p->queue->writes; n++) {
        job_t *g = queue_pop(p);
        g->state = JOB_RUNNING;
        last->next = g;
        last = g;
      }
      if (j->next) j->on = NULL;
    }
    if (j == NULL) {
      if (unsent) {
        unsent = 0;
        uv_mutex_unlock(&p->mu);
        uv_async_send(&p->async);
        uv_mutex_lock(&p->mu);
        continue; /* work may have come meanwhile */
      }
      if (p->quitting) break;
      s->idle = 1;
      uv_cond_wait(&s->cv, &p->mu);
      s->idle = 0;
      continue;
    }
    uv_mutex_unlock(&p->mu);
    if (!unsent) batch_start = uv_hrtime();
    if (queued && j->next)
      run_group(s, j);
    else
      run_job(s, j, queued ? &j->stop : &s->stop);
    /* a queued BEGIN (not db:transaction) leaves no transaction behind for
       the next caller: as a released connection is, it is rolled back */
    if (queued && s->db && !sqlite3_get_autocommit(s->db))
      sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    uv_mutex_lock(&p->mu);
    if (queued) {
      while (j) {
        job_t *next = j->next;
        j->on = NULL;
        j->state = JOB_DONE;
        clank_sqlite_done_push(p, j);
        p->completed++;
        j = next;
      }
    } else {
      s->running = 0;
      s->finished = 1;
    }
    unsent = 1;
    if (uv_hrtime() - batch_start >= (uint64_t)BATCH_MS * 1000000u) {
      unsent = 0;
      uv_mutex_unlock(&p->mu);
      uv_async_send(&p->async);
      uv_mutex_lock(&p->mu);
    }
  }
  uv_mutex_unlock(&p->mu);
  slot_close(s);
  uv_mutex_lock(&p->mu);
  p->exited++;
  uv_mutex_unlock(&p->mu);
  uv_async_send(&p->async);
}
