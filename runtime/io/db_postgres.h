/* clank.db.postgres's values: Lua parameters to libpq's arrays, results to
   Lua (SPEC §12's types both ways). Internal to db_postgres*.c. */
#ifndef CLANK_DB_POSTGRES_H
#define CLANK_DB_POSTGRES_H

#include <libpq-fe.h>
#include <lua.h>

typedef struct clank_pg_params_s {
  int n;
  const char **values;
  int *lengths, *formats;
  Oid *types;
} clank_pg_params_t;

/* Reads the list at idx into pp. The strings stay on the stack (so do the
   arrays, in a userdata): an error leaks nothing. Raises on a value that
   cannot be bound, naming its position. */
void clank_pg_bind_params(lua_State *L, int idx, clank_pg_params_t *pp);
/* Raises, naming the position, on a list at idx that cannot be bound (before waiting). */
void clank_pg_check_params(lua_State *L, int idx);
/* Pushes the rows of r: a JSON-array-marked list of column name -> value. */
void clank_pg_push_rows(lua_State *L, const PGresult *r);
/* Pushes { changes, lastId? } for a statement's result. */
void clank_pg_push_exec(lua_State *L, const PGresult *r);
/* Pushes the error table { message, code, detail?, hint? } of a failed result. */
void clank_pg_push_result_error(lua_State *L, const PGresult *r);

int luaopen_clank_db_postgres(lua_State *L);

#endif
