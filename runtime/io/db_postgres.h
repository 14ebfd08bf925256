/* clank.db.postgres's values: Lua parameters to libpq's arrays, results to
   Lua (SPEC §12's types both ways), and the prepared statements a connection
   keeps. Internal to db_postgres*.c. */
#ifndef CLANK_DB_POSTGRES_H
#define CLANK_DB_POSTGRES_H

#include <libpq-fe.h>
#include <lua.h>
#include <stddef.h>
#include <stdint.h>

/* ---- a query: its text and parameters (db_postgres_values.c) ---- */

/* Copied out of Lua into memory the connection owns, so that a query sent in
   steps (prepare, then execute; again after a stale plan) needs nothing of
   the caller's stack, which a cancelled task may drop meanwhile. */
typedef struct clank_pg_query_s {
  const char *sql; /* NUL-terminated */
  size_t sqllen;
  int n;
  const char **values;
  int *lengths, *formats;
  Oid *types; /* what the server is told: 0 (text, NULL: it infers), int8, float8, bool, bytea */
  char *mem;  /* owns all of the above; kept for the next query */
  size_t cap;
} clank_pg_query_t;

/* Copies sql and the parameters of the list at idx (0: none) into q. Raises
   on a value that cannot be bound, naming its position, or on a lack of
   memory; q keeps what it owns, so nothing leaks. */
void clank_pg_bind_query(lua_State *L, clank_pg_query_t *q, const char *sql, size_t sqllen,
                         int idx);
/* Gives back the memory of a query with large values (the next one allocates afresh). */
void clank_pg_query_trim(clank_pg_query_t *q);
void clank_pg_query_free(clank_pg_query_t *q);
/* Raises, naming the position, on a list at idx that cannot be bound (before waiting). */
void clank_pg_check_params(lua_State *L, int idx);

/* ---- results ---- */

/* Pushes the rows of r: a JSON-array-marked list of column name -> value. */
void clank_pg_push_rows(lua_State *L, const PGresult *r);
/* Pushes { changes, lastId? } for a statement's result. */
void clank_pg_push_exec(lua_State *L, const PGresult *r);
/* The rows of r as a clank.Rows, which takes r over (once this returned). */
void clank_pg_push_kept(lua_State *L, PGresult *r);

/* What a query answers (conn:run's mode). */
enum { PG_ROWS, PG_EXEC, PG_KEPT };
/* Pushes the error table { message, code, detail?, hint? } of a failed result. */
void clank_pg_push_result_error(lua_State *L, const PGresult *r);

/* ---- prepared statements of one connection (db_postgres_stmts.c) ---- */

/* A connection prepares a statement (named clank_s<id> on the server) the
   second time it runs the same text with the same parameter types, and then
   only executes it. Bounded: CLANK_PG_STMTS statements, the least recently
   used evicted; an evicted or stale name waits among the doomed until it is
   deallocated (outside a transaction, CLANK_PG_DOOMED_BATCH at a time). No
   I/O here: db_postgres.c sends what these decide. */
#define CLANK_PG_STMTS 64
#define CLANK_PG_SEEN 256      /* texts run once, by hash (direct-mapped: a collision forgets) */
#define CLANK_PG_DOOMED_MAX 16 /* no new statement while this many wait to be deallocated */
#define CLANK_PG_DOOMED_BATCH 8
#define CLANK_PG_NAME_SIZE 24

typedef struct clank_pg_stmt_s {
  uint64_t hash; /* 0: a free slot */
  char *key;     /* the SQL text (NUL-terminated), then the n parameter types */
  size_t sqllen;
  int n;
  unsigned id;
  uint64_t used; /* the tick of its last use */
} clank_pg_stmt_t;

typedef struct clank_pg_stmts_s {
  clank_pg_stmt_t slots[CLANK_PG_STMTS];
  clank_pg_stmt_t pending; /* sent to be prepared: into the slots once the server made it */
  int count;
  uint64_t seen[CLANK_PG_SEEN];
  /* Names on the server no slot holds. slots + doomed never exceed
     CLANK_PG_STMTS + CLANK_PG_DOOMED_MAX (clank_pg_stmts_begin). */
  unsigned doomed[CLANK_PG_STMTS + CLANK_PG_DOOMED_MAX];
  int ndoomed;
  unsigned next_id;
  uint64_t tick;
} clank_pg_stmts_t;

/* The cache key's hash: the SQL text and the parameter types (never 0). */
uint64_t clank_pg_stmt_hash(const clank_pg_query_t *q);
/* 1 if the text may be prepared: one statement the planner caches plans for
   (SELECT, INSERT, UPDATE, DELETE, MERGE, WITH, VALUES, TABLE), by its first
   word; never BEGIN, SET, DEALLOCATE, DISCARD, DDL... */
int clank_pg_preparable(const char *sql);
/* The statement prepared for q (its use noted), or NULL. */
clank_pg_stmt_t *clank_pg_stmts_find(clank_pg_stmts_t *s, const clank_pg_query_t *q, uint64_t h);
/* 1 if a query of hash h ran before (as far as the table remembers); notes it. */
int clank_pg_stmts_seen(clank_pg_stmts_t *s, uint64_t h);
/* The pending statement for q, to be prepared now, or NULL: too many names
   wait to be deallocated, or no memory. */
clank_pg_stmt_t *clank_pg_stmts_begin(clank_pg_stmts_t *s, const clank_pg_query_t *q, uint64_t h);
/* The server prepared the pending statement: its slot (a free one, or the
   least recently used one's, whose name is then doomed). */
clank_pg_stmt_t *clank_pg_stmts_commit(clank_pg_stmts_t *s);
/* The server did not prepare it (an error, a cancel). */
void clank_pg_stmts_abandon(clank_pg_stmts_t *s);
/* Forgets a slot's statement; exists: it is still on the server (doomed). */
void clank_pg_stmts_drop(clank_pg_stmts_t *s, clank_pg_stmt_t *st, int exists);
/* Writes "DEALLOCATE clank_s1;DEALLOCATE clank_s2..." for every doomed name
   into out (size CLANK_PG_DEALLOCATE_SIZE) and forgets them. */
#define CLANK_PG_DEALLOCATE_SIZE \
  ((CLANK_PG_STMTS + CLANK_PG_DOOMED_MAX) * (CLANK_PG_NAME_SIZE + 12))
void clank_pg_stmts_deallocate_sql(clank_pg_stmts_t *s, char *out);
/* The server has none of them any more (DEALLOCATE ALL, DISCARD ALL): all forgotten. */
void clank_pg_stmts_clear(clank_pg_stmts_t *s);
/* Frees what it holds (the connection is gone): the same as clear. */
void clank_pg_stmts_free(clank_pg_stmts_t *s);
/* Its name on the server, into out (CLANK_PG_NAME_SIZE bytes). */
void clank_pg_stmt_name(unsigned id, char *out);

int luaopen_clank_db_postgres(lua_State *L);

#endif
