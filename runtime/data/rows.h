/* A query's rows kept where the database driver put them, read as the
   objects of a schema (clank.db's queryAs, SPEC §12 extended).

   A driver pushes its result as a clank.Rows (clank_rows_push) and hands
   over its buffer; clank.rows.shape names the s.object schema each row is
   read as. An action's output walk then writes the rows straight from the
   buffer (schema_encode.c): no row table is made. Lua sees a list (#rows,
   rows[i], ipairs, pairs): its row tables are made the first time one is
   asked for, and kept. Where the schema is checked the general way, the
   Rows is replaced by that list first (clank_rows_settle). */
#ifndef CLANK_ROWS_H
#define CLANK_ROWS_H

#include <lua.h>
#include <stddef.h>

#include "data/schema.h"

/* A value as the driver holds it, read without making a Lua value. */
enum {
  CLANK_CELL_NULL,
  CLANK_CELL_INTEGER,
  CLANK_CELL_FLOAT,
  CLANK_CELL_BOOLEAN,
  CLANK_CELL_TEXT,
  CLANK_CELL_OTHER /* bytes, ...: read through push_cell */
};

typedef struct clank_rows_cell_s {
  int kind;
  lua_Integer i; /* an integer; a boolean's 0 or 1 */
  lua_Number d;
  const char *s; /* text: its bytes, valid while the buffer is */
  size_t len;
} clank_rows_cell_t;

/* What a driver's buffer answers. */
typedef struct clank_rows_source_s {
  /* Pushes the value at row, col (0-based) as db:query gives it (NULL as clank.null). */
  void (*push_cell)(lua_State *L, void *data, size_t row, int col);
  /* The same value in *cell: what push_cell would push, as a C value. */
  void (*read_cell)(void *data, size_t row, int col, clank_rows_cell_t *cell);
  /* The column's name, valid while data is. */
  const char *(*column_name)(void *data, int col);
  void (*free)(void *data);
} clank_rows_source_t;

typedef struct clank_rows_s {
  const void *tag; /* clank_tagged's */
  const clank_rows_source_t *source;
  void *data; /* the driver's buffer; NULL until handed over */
  size_t nrows;
  int ncols;
  const clank_schema_node_t *shape; /* an object schema; NULL until shaped */
  int *column_of;                   /* shape's property i is column column_of[i], or -1 */
} clank_rows_t;

/* Pushes an empty clank.Rows of nrows rows of ncols columns, read through
   source; the caller then hands its buffer over with clank_rows_adopt (a
   failure before that leaves the buffer the caller's). */
clank_rows_t *clank_rows_push(lua_State *L, const clank_rows_source_t *source, size_t nrows,
                              int ncols);
void clank_rows_adopt(clank_rows_t *rows, void *data);

/* The clank.Rows at idx, or NULL. */
clank_rows_t *clank_rows_at(lua_State *L, int idx);

/* Pushes property prop (its index in the shape) of row as the shape reads
   the column of its name, returning 1; returns 0 with nothing pushed when
   the property is absent (no such column, or NULL for an optional one). */
int clank_rows_push_field(lua_State *L, const clank_rows_t *rows, size_t row, size_t prop);

/* Pushes the list of row tables of the Rows at idx (Lua's view of it),
   made the first time and kept. */
void clank_rows_push_list(lua_State *L, int idx);

/* When the list of the Rows at idx was made (Lua asked for a row), pushes
   it and returns 1; else returns 0. */
int clank_rows_push_made(lua_State *L, int idx);

/* Replaces each clank.Rows inside the value at idx where the schema n has
   an array, and the value itself, by its list: what the general
   validation and encoding see. */
void clank_rows_settle(lua_State *L, const clank_schema_node_t *n, int idx);

int luaopen_clank_rows(lua_State *L);

#endif
