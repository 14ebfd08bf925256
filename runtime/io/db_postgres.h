/* clank.db.postgres's values: Lua parameters to libpq's arrays, results to
   Lua (SPEC §12's types both ways). Internal to db_postgres*.c. */
#ifndef CLANK_DB_POSTGRES_H
#define CLANK_DB_POSTGRES_H

#include <libpq-fe.h>
#include <lua.h>
#include <stddef.h>

/* ---- a query: its text and parameters (db_postgres_values.c) ---- */

/* Copied out of Lua into memory the connection owns and reuses: no
   allocation per query, and nothing of the caller's stack is needed once
   the query is sent. */
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
/* Pushes the error table { message, code, detail?, hint? } of a failed result. */
void clank_pg_push_result_error(lua_State *L, const PGresult *r);

int luaopen_clank_db_postgres(lua_State *L);

#endif
