/* clank.schema internals shared by its files: the compiled node and the
   functions each part exports to the others.

   A schema is compiled once, by its builder, into one clank_schema_node_t that
   lives inside the clank.Schema userdata, a string's pattern compiled into
   the userdata's extra bytes (so nothing is malloc'ed and nothing needs
   freeing). Strings the node points at (keys, enum values, description,
   ...) and child schemas are kept alive by the userdata's uservalue, a plain
   list; Lua never moves strings or userdata, so the pointers stay valid. The
   messages a node can report are made by its builder too, held by registry
   refs that __gc releases: an issue pushes them, it formats nothing. */
#ifndef CLANK_SCHEMA_INTERNAL_H
#define CLANK_SCHEMA_INTERNAL_H

#include <lua.h>
#include <lauxlib.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "data/schema.h"
#include "data/schema_match.h"
#include "util/buf.h"

/* Validation is mostly calls into the Lua API: with GCC, the hot ones are
   called through the GOT without the PLT stub (what -fno-plt does), which
   the benchmark (bench/schema.lua) measures as about 10% faster. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__PIC__)
#define CLANK_SCHEMA_NOPLT __attribute__((noplt))
LUA_API int(lua_gettop)(lua_State *L) CLANK_SCHEMA_NOPLT;
LUA_API void(lua_settop)(lua_State *L, int idx) CLANK_SCHEMA_NOPLT;
LUA_API void(lua_pushvalue)(lua_State *L, int idx) CLANK_SCHEMA_NOPLT;
LUA_API int(lua_checkstack)(lua_State *L, int n) CLANK_SCHEMA_NOPLT;
LUA_API int(lua_type)(lua_State *L, int idx) CLANK_SCHEMA_NOPLT;
LUA_API lua_Number(lua_tonumberx)(lua_State *L, int idx, int *isnum) CLANK_SCHEMA_NOPLT;
LUA_API lua_Integer(lua_tointegerx)(lua_State *L, int idx, int *isnum) CLANK_SCHEMA_NOPLT;
LUA_API const char *(lua_tolstring)(lua_State *L, int idx, size_t *len)CLANK_SCHEMA_NOPLT;
LUA_API lua_Unsigned(lua_rawlen)(lua_State *L, int idx) CLANK_SCHEMA_NOPLT;
LUA_API void *(lua_touserdata)(lua_State *L, int idx)CLANK_SCHEMA_NOPLT;
LUA_API int(lua_rawequal)(lua_State *L, int idx1, int idx2) CLANK_SCHEMA_NOPLT;
LUA_API const void *(lua_topointer)(lua_State *L, int idx)CLANK_SCHEMA_NOPLT;
LUA_API void(lua_pushnil)(lua_State *L) CLANK_SCHEMA_NOPLT;
LUA_API int(lua_rawgeti)(lua_State *L, int idx, lua_Integer n) CLANK_SCHEMA_NOPLT;
LUA_API int(lua_getmetatable)(lua_State *L, int objindex) CLANK_SCHEMA_NOPLT;
LUA_API int(lua_next)(lua_State *L, int idx) CLANK_SCHEMA_NOPLT;
#endif

#define CLANK_SCHEMA_MT "clank.Schema"
#define CLANK_SCHEMA_ERROR_MT "clank.ValidationError"
#define CLANK_SCHEMA_MAX_ISSUES 100
#define CLANK_SCHEMA_MAX_DEPTH 64
/* Lua 5.4 interns strings up to LUAI_MAXSHORTLEN (40) bytes: equal short
   strings share one address, longer ones must be compared by their bytes. */
#define CLANK_SCHEMA_SHORTLEN 40
/* Array items stay on the stack in batches: one lua_settop per batch. */
#define CLANK_SCHEMA_ITEM_BATCH 8
/* Nesting of schemas themselves (wrappers included), bounding C recursion. */
#define CLANK_SCHEMA_MAX_HEIGHT 200

enum {
  CLANK_SK_STRING,
  CLANK_SK_NUMBER,
  CLANK_SK_BOOLEAN,
  CLANK_SK_LITERAL,
  CLANK_SK_ENUM,
  CLANK_SK_UNKNOWN,
  CLANK_SK_ARRAY,
  CLANK_SK_OBJECT,
  CLANK_SK_OPTIONAL,
  CLANK_SK_NULLABLE,
  CLANK_SK_UNION
};

/* The literal's type when it is clank.null. */
#define CLANK_SK_LITNULL (-1)

typedef struct clank_schema_str_s {
  const char *s; /* NULL when absent */
  size_t len;
} clank_schema_str_t;

typedef struct clank_schema_num_s {
  int isint;
  lua_Integer i;
  lua_Number n;
} clank_schema_num_t;

/* A message (or a literal's expected text) made once, when the node is
   built: its bytes for the JSON answer, and where its Lua string is held for
   issue tables: a registry ref (node messages) or k, an index in the table of
   constants (fixed messages). */
typedef struct clank_schema_msg_s {
  const char *s;
  size_t len;
  int ref; /* LUA_NOREF when absent or fixed */
  int k;   /* 0 unless fixed */
} clank_schema_msg_t;

typedef struct clank_schema_prop_s {
  clank_schema_str_t key;
  /* `,"key":` as the encoder writes the key (without the comma when first),
     made at build; s is NULL when the key needs escaping (then written the
     slow way, which also refuses a key that is not valid UTF-8) */
  clank_schema_str_t json;
  const clank_schema_node_t *node;
} clank_schema_prop_t;

struct clank_schema_node_s {
  int kind;
  int height;            /* nesting of the schema itself, bounded at build */
  int slots;             /* Lua stack slots a walk of this schema may use */
  unsigned char strict;  /* object */
  unsigned char integer; /* number */
  unsigned char has_min, has_max;
  unsigned char nil_ok;        /* validating nil gives no issue */
  unsigned char optional_key;  /* leaves `required` when it is an object property */
  clank_schema_num_t min, max; /* lengths (string, array) or bounds (number) */
  clank_schema_str_t description, format;
  clank_schema_str_t pattern; /* the Lua pattern as given */
  clank_schema_str_t regex;   /* its ECMA-262 translation */
  const clank_match_t *match; /* the pattern compiled, in the node's extra bytes */
  int lit_type; /* literal: LUA_TSTRING, LUA_TNUMBER, LUA_TBOOLEAN, CLANK_SK_LITNULL */
  int lit_bool;
  clank_schema_num_t lit_num;
  clank_schema_str_t lit_str;
  clank_schema_str_t json;             /* literal: the value as JSON; enum: "a, b, c" */
  const clank_schema_node_t *inner;    /* array item; optional and nullable inner */
  size_t n;                            /* count of props, members or values */
  size_t nrequired;                    /* object: props whose schema refuses nil */
  uint64_t required_mask;              /* object: bit i when props[i] is one (i < 64) */
  clank_schema_prop_t *props;          /* object, sorted by key bytes */
  const clank_schema_node_t **members; /* union, in order */
  clank_schema_str_t *values;          /* enum, in order */
  /* min and max: too short, too long, too small or too large; other: the
     pattern, enum or literal message; expected: the literal as JSON. */
  clank_schema_msg_t msg_min, msg_max, msg_other, expected;
  /* object: its keys in props order; enum: its values in order. A registry
     ref to the list of those strings, so schema_decode.c can put them in a
     table without hashing their bytes again. */
  int strs_ref;
  /* object of at most 64 props: an open-addressed table of 1 << keybits
     slots, by the address of each key of at most CLANK_SCHEMA_SHORTLEN bytes
     (clank_schema_keyhash), holding its index in props + 1, or 0 */
  const unsigned char *keyslot;
  unsigned keybits;
};

/* The constants validation pushes (keys, fixed messages and expected
   names): a Lua list made once per state, indexed by these. */
enum {
  CLANK_SK_K_PATH = 1,
  CLANK_SK_K_MESSAGE,
  CLANK_SK_K_EXPECTED,
  CLANK_SK_K_RECEIVED,
  CLANK_SK_K_ISSUES,
  CLANK_SK_K_SUCCESS,
  CLANK_SK_K_DATA,
  CLANK_SK_K_ERROR,
  CLANK_SK_K_COUNT_KEYS /* fixed messages and expected names follow */
};

/* Exact comparison of two numbers, integers or floats: -1, 0 or 1. long
   double holds every int64 and every double exactly on x86-64. */
static inline int clank_schema_numcmp(const clank_schema_num_t *a, const clank_schema_num_t *b) {
  if (a->isint && b->isint) return (a->i > b->i) - (a->i < b->i);
  long double x = a->isint ? (long double)a->i : (long double)a->n;
  long double y = b->isint ? (long double)b->i : (long double)b->n;
  return (x > y) - (x < y);
}

/* Index of property key in an object node, or -1 (by its bytes: props are
   sorted). */
/* n without its optional and nullable wrappers, and whether it had each. */
static inline const clank_schema_node_t *clank_schema_unwrap_flags(const clank_schema_node_t *n,
                                                                   int *optional, int *nullable) {
  *optional = *nullable = 0;
  for (;; n = n->inner) {
    if (n->kind == CLANK_SK_OPTIONAL)
      *optional = 1;
    else if (n->kind == CLANK_SK_NULLABLE)
      *nullable = 1;
    else
      return n;
  }
}

ptrdiff_t clank_schema_find_prop(const clank_schema_node_t *n, const char *key, size_t len);

/* The slot of a short key's address in an object's keyslot table: a
   Fibonacci hash of the address (Lua allocates strings 8-byte aligned). */
static inline size_t clank_schema_keyhash(const char *key, unsigned bits) {
  return (size_t)((((uint64_t)(uintptr_t)key >> 3) * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - bits));
}

/* Index of property key, a Lua string, in an object node, or -1. Short
   strings are interned, so an equal one has the key's very address: found in
   the keyslot table without reading a byte; longer ones by their bytes. */
static inline ptrdiff_t clank_schema_find_lua_key(const clank_schema_node_t *n, const char *key,
                                                  size_t len) {
  if (len > CLANK_SCHEMA_SHORTLEN || n->keyslot == NULL) return clank_schema_find_prop(n, key, len);
  size_t mask = ((size_t)1 << n->keybits) - 1;
  for (size_t h = clank_schema_keyhash(key, n->keybits);; h = (h + 1) & mask) {
    unsigned i = n->keyslot[h];
    if (i == 0) return -1;
    if (n->props[i - 1].key.s == key) return (ptrdiff_t)i - 1;
  }
}

/* schema.c */
int clank_schema_keycmp(const char *a, size_t la, const char *b, size_t lb);
const clank_schema_node_t *clank_schema_tonode(lua_State *L, int idx);

/* schema_build.c: registers the builders into the module table on top. */
void clank_schema_open_builders(lua_State *L);

/* schema_validate.c. The caller leaves at least 16 free stack slots, as
   Lua guarantees a C function (LUA_MINSTACK); more are reserved when the
   schema needs them. amt is the index of the JSON array metatable
   (CLANK_ARRAY_MT) and k that of the constants; positive or
   pseudo-indices (a method's upvalues) as they are, negative ones made
   absolute. check answers whether the value at idx is valid without
   allocating; collect answers the same in one walk that also pushes the list
   of issues, or nil when valid (a valid value costs about what a check does);
   collect_json returns 1 when the value is valid (out as it was), else
   appends the error object of the 422 answer to out (see
   clank_schema_validate_json), returning 0, or -1 when out could not grow or
   a text is not valid UTF-8 (out as it was). */
int clank_schema_check(lua_State *L, const clank_schema_node_t *n, int idx, int amt);
int clank_schema_collect(lua_State *L, const clank_schema_node_t *n, int idx, int amt, int k);
int clank_schema_collect_json(lua_State *L, const clank_schema_node_t *n, int idx, int amt,
                              clank_buf_t *out);
/* Pushes the list of constants. */
void clank_schema_push_constants(lua_State *L);

/* schema_jsonschema.c: pushes a fresh JSON Schema table for n. */
void clank_schema_push_jsonschema(lua_State *L, const clank_schema_node_t *n);

/* schema_pattern.c: translate checks the Lua pattern p and adds its ECMA-262
   translation to b; returns NULL, or why the pattern cannot be used.
   schema_match.c matches it. */
const char *clank_schema_translate_pattern(const char *p, size_t len, luaL_Buffer *b);

/* Whether the n bytes at a and at b are the same: short runs (keys and
   enum values mostly are) compared a word or two at a time, without a call. */
static inline int clank_schema_same_bytes(const char *a, const char *b, size_t n) {
  if (n >= 8) {
    if (n > 16) return memcmp(a, b, n) == 0;
    uint64_t x, y, u, v; /* the first 8 and the last 8, overlapping */
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    memcpy(&u, a + n - 8, 8);
    memcpy(&v, b + n - 8, 8);
    return ((x ^ y) | (u ^ v)) == 0;
  }
  if (n >= 4) {
    uint32_t x, y, u, v;
    memcpy(&x, a, 4);
    memcpy(&y, b, 4);
    memcpy(&u, a + n - 4, 4);
    memcpy(&v, b + n - 4, 4);
    return ((x ^ y) | (u ^ v)) == 0;
  }
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}

/* The index of n's enum value whose bytes are the len at s, or -1: for text
   Lua has not interned (JSON being decoded, a database's cell). */
static inline ptrdiff_t clank_schema_enum_find(const clank_schema_node_t *n, const char *s,
                                               size_t len) {
  for (size_t i = 0; i < n->n; i++)
    if (n->values[i].len == len && clank_schema_same_bytes(s, n->values[i].s, len))
      return (ptrdiff_t)i;
  return -1;
}

/* schema_validate.c: code points in s, or -1 when s is not valid UTF-8. */
ptrdiff_t clank_schema_utf8_len(const char *s, size_t len);

#endif
