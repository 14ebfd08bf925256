/* clank.db.postgres's values (SPEC §12): parameters as text (bytea in
   binary for bytes that are not UTF-8 text), results by type OID. */
#include "io/db_postgres.h"

#include <lauxlib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/db.h"
#include "data/json.h"
#include "data/rows.h"
#include "core/values.h"
#include "util/bytes.h"

/* Type OIDs (catalog/pg_type_d.h, not installed by libpq-dev). */
#define BOOLOID 16
#define BYTEAOID 17
#define INT8OID 20
#define INT2OID 21
#define INT4OID 23
#define OIDOID 26
#define FLOAT4OID 700
#define FLOAT8OID 701

static int is_text(const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == 0) return 0;
    if (ch < 0x80) {
      i++;
      continue;
    }
    size_t k = clank_json_utf8_char((const unsigned char *)s + i, n - i);
    if (k == 0) return 0;
    i += k;
  }
  return 1;
}

static int bind_error(lua_State *L, int pos, int t) {
  if (t == LUA_TNIL) return luaL_error(L, "parameter $%d: cannot bind nil", pos);
  return luaL_error(L, "parameter $%d: cannot bind a %s", pos, lua_typename(L, t));
}

/* The parameter count of the list at idx: params.n, else its length. */
static lua_Integer param_count(lua_State *L, int idx) {
  lua_Integer n;
  if (lua_getfield(L, idx, "n") == LUA_TNUMBER)
    n = lua_tointeger(L, -1);
  else
    n = (lua_Integer)lua_rawlen(L, idx);
  lua_pop(L, 1);
  return n;
}

/* Decimal text of v at out (room for 21 bytes and the NUL); returns its length. */
static size_t format_integer(lua_Integer v, char *out) {
  char tmp[24];
  size_t n = 0;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  size_t len = 0;
  if (v < 0) out[len++] = '-';
  while (n) out[len++] = tmp[--n];
  out[len] = '\0';
  return len;
}

#define NUMBER_ROOM 32 /* a number's text: clank_json_format_number needs 32 */

/* Copies sql and the parameters of the list at idx (0: none) into q. Two
   walks of the list: the bytes needed, then the copy. */
void clank_pg_bind_query(lua_State *L, clank_pg_query_t *q, const char *sql, size_t sqllen,
                         int idx) {
  lua_Integer n = idx ? param_count(L, idx) : 0;
  if (n < 0 || n > 65535) luaL_error(L, "%d parameters: PostgreSQL takes at most 65535", (int)n);
  size_t arrays = (size_t)n * (sizeof(char *) + 2 * sizeof(int) + sizeof(Oid));
  size_t bytes = sqllen + 1;
  for (int i = 1; i <= (int)n; i++) {
    size_t len = NUMBER_ROOM;
    if (lua_rawgeti(L, idx, i) == LUA_TSTRING) {
      lua_tolstring(L, -1, &len);
      len++;
    }
    lua_pop(L, 1);
    bytes += len;
  }
  if (arrays + bytes > q->cap) {
    size_t cap = q->cap * 2 > arrays + bytes ? q->cap * 2 : arrays + bytes;
    if (cap < 256) cap = 256;
    char *mem = realloc(q->mem, cap);
    if (mem == NULL) luaL_error(L, "clank.db.postgres: out of memory");
    q->mem = mem;
    q->cap = cap;
  }
  char *mem = q->mem;
  q->n = (int)n;
  q->values = (const char **)mem;
  q->lengths = (int *)(mem + (size_t)n * sizeof(char *));
  q->formats = q->lengths + n;
  q->types = (Oid *)(q->formats + n);
  char *at = mem + arrays;
  memcpy(at, sql, sqllen);
  at[sqllen] = '\0';
  q->sql = at;
  q->sqllen = sqllen;
  at += sqllen + 1;
  for (int i = 0; i < (int)n; i++) {
    int t = lua_rawgeti(L, idx, i + 1);
    q->values[i] = at;
    q->lengths[i] = 0;
    q->formats[i] = 0;
    q->types[i] = 0;
    switch (t) {
      case LUA_TNUMBER:
        if (lua_isinteger(L, -1)) {
          at += format_integer(lua_tointeger(L, -1), at) + 1;
          q->types[i] = INT8OID;
        } else {
          at += clank_json_format_number(lua_tonumber(L, -1), at) + 1;
          q->types[i] = FLOAT8OID;
        }
        break;
      case LUA_TBOOLEAN:
        q->values[i] = lua_toboolean(L, -1) ? "true" : "false";
        q->types[i] = BOOLOID;
        break;
      case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        memcpy(at, s, len);
        at[len] = '\0';
        at += len + 1;
        if (!is_text(s, len)) { /* raw bytes: bytea, sent as they are */
          q->lengths[i] = (int)len;
          q->formats[i] = 1;
          q->types[i] = BYTEAOID;
        }
        break;
      }
      case LUA_TLIGHTUSERDATA:
        if (clank_is_null(L, -1)) {
          q->values[i] = NULL;
          break;
        }
        /* fall through */
      default: bind_error(L, i + 1, t);
    }
    lua_pop(L, 1);
  }
}

/* Large values: their memory goes (a query of small ones reuses it). */
void clank_pg_query_trim(clank_pg_query_t *q) {
  if (q->cap <= 64 * 1024) return;
  clank_pg_query_free(q);
}

void clank_pg_query_free(clank_pg_query_t *q) {
  free(q->mem);
  memset(q, 0, sizeof *q);
}

/* Checks every parameter's type before bind_params pushes anything. */
void clank_pg_check_params(lua_State *L, int idx) {
  if (idx == 0) return;
  lua_Integer n = param_count(L, idx);
  for (lua_Integer i = 1; i <= n && i <= 65535; i++) {
    int t = lua_rawgeti(L, idx, i);
    int ok = t == LUA_TNUMBER || t == LUA_TBOOLEAN || t == LUA_TSTRING ||
             (t == LUA_TLIGHTUSERDATA && clank_is_null(L, -1));
    lua_pop(L, 1);
    if (!ok) bind_error(L, (int)i, t);
  }
}

/* A hex digit of bytea's output (PostgreSQL writes only valid ones). */
static int hexval(char ch) {
  int v = clank_hex_value((unsigned char)ch);
  return v < 0 ? 0 : v;
}

static void push_bytea(lua_State *L, const char *v, size_t len) {
  if (len >= 2 && v[0] == '\\' && v[1] == 'x') { /* bytea_output = hex, the default */
    size_t n = (len - 2) / 2;
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, n);
    for (size_t i = 0; i < n; i++)
      out[i] = (char)(hexval(v[2 + 2 * i]) << 4 | hexval(v[3 + 2 * i]));
    luaL_pushresultsize(&b, n);
    return;
  }
  size_t n = 0;
  unsigned char *raw = PQunescapeBytea((const unsigned char *)v, &n);
  if (raw == NULL) {
    lua_pushlstring(L, v, len);
    return;
  }
  lua_pushlstring(L, (const char *)raw, n);
  PQfreemem(raw);
}

/* int2, int4, int8, oid as PostgreSQL writes them: an optional '-', then
   digits that fit (strtoll's checks are not needed, and cost as much as
   the rest of a value). */
static lua_Integer parse_integer(const char *v) {
  int neg = *v == '-';
  uint64_t u = 0;
  for (const char *p = v + neg; *p >= '0' && *p <= '9'; p++) u = u * 10 + (uint64_t)(*p - '0');
  return (lua_Integer)(neg ? 0 - u : u);
}

/* float4, float8: a whole number of up to 15 digits is exact in a double
   (no strtod for the estimate 3); anything else (1.5, 1e+300, NaN) is not. */
static lua_Number parse_float(const char *v, size_t len) {
  int neg = *v == '-';
  size_t n = len - (size_t)neg;
  if (n > 0 && n <= 15) {
    uint64_t u = 0;
    size_t i = 0;
    for (const char *p = v + neg; i < n && p[i] >= '0' && p[i] <= '9'; i++)
      u = u * 10 + (uint64_t)(p[i] - '0');
    if (i == n) return neg ? -(lua_Number)u : (lua_Number)u; /* "-0" too */
  }
  return (lua_Number)strtod(v, NULL);
}

/* The value at row, col of a column of type type. libpq gives NULL as an
   empty value: only an empty one is asked whether it is NULL. */
static void read_value(const PGresult *r, int row, int col, Oid type, clank_rows_cell_t *out) {
  size_t len = (size_t)PQgetlength(r, row, col);
  if (len == 0 && PQgetisnull(r, row, col)) {
    out->kind = CLANK_CELL_NULL;
    return;
  }
  const char *v = PQgetvalue(r, row, col);
  out->s = v;
  out->len = len;
  switch (type) {
    case BOOLOID:
      out->kind = CLANK_CELL_BOOLEAN;
      out->i = v[0] == 't';
      break;
    case INT2OID:
    case INT4OID:
    case INT8OID:
    case OIDOID:
      out->kind = CLANK_CELL_INTEGER;
      out->i = parse_integer(v);
      break;
    case FLOAT4OID:
    case FLOAT8OID:
      out->kind = CLANK_CELL_FLOAT;
      out->d = parse_float(v, len);
      break;
    case BYTEAOID: out->kind = CLANK_CELL_OTHER; break; /* bytea: unescaped when pushed */
    default: out->kind = CLANK_CELL_TEXT; /* text, varchar, numeric (SPEC §12), ... */
  }
}

/* The value at row, col of a column of type type, as read_value reads it. */
static void push_value(lua_State *L, const PGresult *r, int row, int col, Oid type) {
  clank_rows_cell_t c;
  read_value(r, row, col, type, &c);
  switch (c.kind) {
    case CLANK_CELL_NULL: clank_push_null(L); break;
    case CLANK_CELL_BOOLEAN: lua_pushboolean(L, (int)c.i); break;
    case CLANK_CELL_INTEGER: lua_pushinteger(L, c.i); break;
    case CLANK_CELL_FLOAT: lua_pushnumber(L, c.d); break;
    case CLANK_CELL_OTHER: push_bytea(L, c.s, c.len); break;
    default: lua_pushlstring(L, c.s, c.len);
  }
}

/* Columns whose types are looked up once per result; the rest are looked up
   per value. */
#define TYPES_KEPT 32

/* The column names are made Lua strings once per result and kept on the
   stack: each row's keys are those strings (lua_rawset), not a lookup of
   the name's text per value (lua_setfield). */
void clank_pg_push_rows(lua_State *L, const PGresult *r) {
  int rows = PQntuples(r), cols = PQnfields(r);
  Oid types[TYPES_KEPT];
  luaL_checkstack(L, cols + 4, "too many columns");
  lua_createtable(L, rows, 0);
  int list = lua_gettop(L), names = list + 1;
  for (int j = 0; j < cols; j++) lua_pushstring(L, PQfname(r, j));
  for (int j = 0; j < cols && j < TYPES_KEPT; j++) types[j] = PQftype(r, j);
  for (int i = 0; i < rows; i++) {
    lua_createtable(L, 0, cols);
    for (int j = 0; j < cols; j++) {
      lua_pushvalue(L, names + j);
      push_value(L, r, i, j, j < TYPES_KEPT ? types[j] : PQftype(r, j));
      lua_rawset(L, -3);
    }
    lua_rawseti(L, list, i + 1);
  }
  lua_settop(L, list);
  clank_mark_array(L, -1);
}

static void kept_push_cell(lua_State *L, void *data, size_t row, int col) {
  const PGresult *r = data;
  push_value(L, r, (int)row, col, PQftype(r, col));
}

static void kept_read_cell(void *data, size_t row, int col, clank_rows_cell_t *out) {
  const PGresult *r = data;
  read_value(r, (int)row, col, PQftype(r, col), out);
}

static const char *kept_column_name(void *data, int col) { return PQfname(data, col); }

static void kept_free(void *data) { PQclear(data); }

static const clank_rows_source_t kept_source = {kept_push_cell, kept_read_cell, kept_column_name,
                                                kept_free};

void clank_pg_push_kept(lua_State *L, PGresult *r) {
  clank_rows_t *rows = clank_rows_push(L, &kept_source, (size_t)PQntuples(r), PQnfields(r));
  clank_rows_adopt(rows, r);
}

void clank_pg_push_exec(lua_State *L, const PGresult *r) {
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)strtoll(PQcmdTuples((PGresult *)r), NULL, 10));
  lua_setfield(L, -2, "changes");
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && PQnfields(r) > 0 &&
      !PQgetisnull(r, 0, 0)) {
    push_value(L, r, 0, 0, PQftype(r, 0)); /* RETURNING id */
    lua_setfield(L, -2, "lastId");
  }
}

void clank_pg_push_result_error(lua_State *L, const PGresult *r) {
  const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  const char *code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  if (msg == NULL) {
    /* libpq's whole message, without its trailing newline */
    const char *whole = PQresultErrorMessage(r);
    size_t n = whole ? strlen(whole) : 0;
    while (n > 0 && (whole[n - 1] == '\n' || whole[n - 1] == ' ' || whole[n - 1] == '\t')) n--;
    lua_pushlstring(L, n ? whole : "query failed", n ? n : strlen("query failed"));
    clank_db_push_error(L, code ? code : "QUERY", lua_tostring(L, -1), NULL);
    lua_remove(L, -2);
  } else {
    clank_db_push_error(L, code ? code : "QUERY", msg, NULL);
  }
  const char *detail = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL);
  if (detail) {
    lua_pushstring(L, detail);
    lua_setfield(L, -2, "detail");
  }
  const char *hint = PQresultErrorField(r, PG_DIAG_MESSAGE_HINT);
  if (hint) {
    lua_pushstring(L, hint);
    lua_setfield(L, -2, "hint");
  }
}
