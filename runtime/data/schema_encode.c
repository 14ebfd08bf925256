/* An action's output validated and written as canonical JSON in one walk
   (SPEC §4 output:parse, §5 step 8).

   The walk follows the schema: an object's properties come out in the
   schema's order (its keys sorted by bytes, as clank.json sorts them), each
   value validated as it is written, without a Lua string made or a key
   sorted. Anything invalid or unusual (a union, a pattern, a metatable other
   than the array mark, a table under s.unknown, a key the schema does not
   name, deep nesting) stops the walk: the caller then validates and encodes
   the general way, which says what is wrong, or writes what this walk would
   not. What it writes is byte for byte what clank_json_encode_node writes
   for the same value and schema, and it writes only values that
   clank_schema_validate finds valid. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "data/json.h"
#include "data/rows.h"
#include "data/schema_internal.h"
#include "core/values.h"

/* Deeper tables go the general way (which stops at 64). */
#define WALK_MAX_DEPTH 48

typedef struct {
  lua_State *L;
  clank_buf_t *out;
  const void *amt; /* the JSON array metatable, found at the first table that has one */
} walk_t;

static inline __attribute__((always_inline)) int walk_node(walk_t *w, const clank_schema_node_t *n,
                                                           int idx, int depth);

/* The bytes JSON strings hold as they are: ASCII but controls, '"' and '\\'. */
static const unsigned char plain[256] = {
    [0x20 ... 0x21] = 1, /* '"' is 0x22 */
    [0x23 ... 0x5B] = 1, /* '\\' is 0x5C */
    [0x5D ... 0x7F] = 1,
};

/* [","]"s"[":"]: text that needs no escape (short ASCII keys and values,
   the common case) copied byte by byte, the rest escaped by
   clank_json_escape, which checks UTF-8. */
static inline __attribute__((always_inline)) int put_quoted(walk_t *w, const char *s, size_t len,
                                                            int comma, int colon) {
  clank_buf_t *b = w->out;
  if (b->cap - b->len < len + 4 && clank_buf_reserve(b, len + 4) != 0) return 0;
  char *d = b->data + b->len;
  size_t i = 0;
  if (comma) *d++ = ',';
  *d++ = '"';
  for (; i < len && plain[(unsigned char)s[i]]; i++) d[i] = s[i];
  if (i == len) {
    d[i] = '"';
    d[i + 1] = ':';
    b->len = (size_t)(d - b->data) + len + 1 + (colon != 0);
    return 1;
  }
  b->len = (size_t)(d - b->data) + i;
  if (clank_json_escape(b, s + i, len - i) != 0 || clank_buf_appendc(b, '"') != 0) return 0;
  return !colon || clank_buf_appendc(b, ':') == 0;
}

static int put_string(walk_t *w, const char *s, size_t len) { return put_quoted(w, s, len, 0, 0); }

/* Numbers as clank.json writes them: integers exact, floats finite. */
static int put_integer(walk_t *w, lua_Integer i) {
  if (i < 0 && clank_buf_appendc(w->out, '-') != 0) return 0;
  return clank_buf_append_uint(w->out, i < 0 ? 0 - (uint64_t)i : (uint64_t)i) == 0;
}

static int put_float(walk_t *w, lua_Number d) {
  char s[64];
  if (!isfinite(d)) return 0;
  return clank_buf_append(w->out, s, clank_json_format_number(d, s)) == 0;
}

static int put_number(walk_t *w, int idx) {
  lua_State *L = w->L;
  if (lua_isinteger(L, idx)) return put_integer(w, lua_tointeger(L, idx));
  return put_float(w, lua_tonumber(L, idx));
}

/* Inlined where n is a constant: the copy is a store or two. */
static inline __attribute__((always_inline)) int put_lit(walk_t *w, const char *s, size_t n) {
  clank_buf_t *b = w->out;
  if (b->cap - b->len < n && clank_buf_reserve(b, n) != 0) return 0;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  return 1;
}

#define PUT_LIT(w, lit) put_lit(w, lit, sizeof lit - 1)

/* Up to 16 bytes copied in two moves that may overlap, without a call to memcpy (a key's JSON,
   mostly; a 20-row list writes 200 of them). */
static inline __attribute__((always_inline)) int put_short(walk_t *w, const char *s, size_t n) {
  clank_buf_t *b = w->out;
  if (b->cap - b->len < n && clank_buf_reserve(b, n) != 0) return 0;
  char *d = b->data + b->len;
  if (n >= 8 && n <= 16) {
    memcpy(d, s, 8);
    memcpy(d + n - 8, s + n - 8, 8);
  } else if (n >= 4 && n < 8) {
    memcpy(d, s, 4);
    memcpy(d + n - 4, s + n - 4, 4);
  } else {
    memcpy(d, s, n);
  }
  b->len += n;
  return 1;
}

/* [","]"key": of property p; its JSON made at build when it needs no escape. */
static inline __attribute__((always_inline)) int put_key(walk_t *w, const clank_schema_prop_t *p,
                                                         size_t first) {
  return p->json.s ? put_short(w, p->json.s + first, p->json.len - first)
                   : put_quoted(w, p->key.s, p->key.len, !first, 1);
}

/* A string, a finite number, a boolean or clank.null: what needs no schema. */
static int put_scalar(walk_t *w, int idx) {
  lua_State *L = w->L;
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
      size_t len;
      const char *s = lua_tolstring(L, idx, &len);
      return put_string(w, s, len);
    }
    case LUA_TNUMBER: return put_number(w, idx);
    case LUA_TBOOLEAN: return lua_toboolean(L, idx) ? PUT_LIT(w, "true") : PUT_LIT(w, "false");
    case LUA_TLIGHTUSERDATA: return clank_is_null(L, idx) && PUT_LIT(w, "null");
    default: return 0;
  }
}

static int walk_string(walk_t *w, const clank_schema_node_t *n, int idx) {
  size_t len;
  if (lua_type(w->L, idx) != LUA_TSTRING || n->pattern.s) return 0;
  const char *s = lua_tolstring(w->L, idx, &len);
  if (n->has_min || n->has_max) {
    ptrdiff_t cp = clank_schema_utf8_len(s, len);
    if (cp < 0 || (n->has_min && cp < n->min.i) || (n->has_max && cp > n->max.i)) return 0;
  }
  return put_string(w, s, len); /* UTF-8 checked on the way */
}

/* Validation takes 2.0 as the integer 2: a float compares with the bounds
   exactly (clank_schema_numcmp), so reading it as a float decides the same. */
static int put_bounded_number(walk_t *w, const clank_schema_node_t *n, clank_schema_num_t v) {
  if (!v.isint && (!isfinite(v.n) || (n->integer && floor(v.n) != v.n))) return 0;
  if (n->has_min && clank_schema_numcmp(&v, &n->min) < 0) return 0;
  if (n->has_max && clank_schema_numcmp(&v, &n->max) > 0) return 0;
  return v.isint ? put_integer(w, v.i) : put_float(w, v.n);
}

static int walk_number(walk_t *w, const clank_schema_node_t *n, int idx) {
  lua_State *L = w->L;
  clank_schema_num_t v;
  if (lua_type(L, idx) != LUA_TNUMBER) return 0;
  v.isint = lua_isinteger(L, idx);
  v.i = v.isint ? lua_tointeger(L, idx) : 0;
  v.n = v.isint ? 0 : lua_tonumber(L, idx);
  return put_bounded_number(w, n, v);
}

/* Equal bytes; short strings are interned, so equal ones share an address. */
static int same_bytes(const char *v, size_t len, const clank_schema_str_t *s) {
  return len == s->len && (v == s->s || (len > CLANK_SCHEMA_SHORTLEN && memcmp(v, s->s, len) == 0));
}

static int walk_literal(walk_t *w, const clank_schema_node_t *n, int idx) {
  lua_State *L = w->L;
  int t = lua_type(L, idx);
  switch (n->lit_type) {
    case LUA_TSTRING: {
      size_t len;
      if (t != LUA_TSTRING) return 0;
      const char *s = lua_tolstring(L, idx, &len);
      if (!same_bytes(s, len, &n->lit_str)) return 0;
      return put_string(w, s, len);
    }
    case LUA_TNUMBER: {
      clank_schema_num_t v;
      if (t != LUA_TNUMBER) return 0;
      v.isint = lua_isinteger(L, idx);
      v.i = v.isint ? lua_tointeger(L, idx) : 0;
      v.n = v.isint ? 0 : lua_tonumber(L, idx);
      if (clank_schema_numcmp(&v, &n->lit_num) != 0) return 0;
      return put_number(w, idx);
    }
    case LUA_TBOOLEAN:
      if (t != LUA_TBOOLEAN || lua_toboolean(L, idx) != n->lit_bool) return 0;
      return n->lit_bool ? PUT_LIT(w, "true") : PUT_LIT(w, "false");
    default: return clank_is_null(L, idx) && PUT_LIT(w, "null");
  }
}

static int walk_enum(walk_t *w, const clank_schema_node_t *n, int idx) {
  size_t len;
  if (lua_type(w->L, idx) != LUA_TSTRING) return 0;
  const char *s = lua_tolstring(w->L, idx, &len);
  for (size_t i = 0; i < n->n; i++)
    if (same_bytes(s, len, &n->values[i])) return put_string(w, s, len);
  return 0;
}

/* The items of a table whose keys lua_next did not give as 1, 2, ...: when
   they are exactly 1..len, written by index. */
static int walk_items_by_index(walk_t *w, const clank_schema_node_t *n, int idx, int depth,
                               lua_Integer len) {
  lua_State *L = w->L;
  lua_Integer count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) { /* exactly the keys 1..len */
    lua_Integer k;
    lua_pop(L, 1);
    if (!lua_isinteger(L, -1) || (k = lua_tointeger(L, -1)) < 1 || k > len) return 0;
    count++;
  }
  if (count != len || !PUT_LIT(w, "[")) return 0;
  for (lua_Integer i = 1; i <= len; i++) {
    if (i > 1 && !PUT_LIT(w, ",")) return 0;
    lua_rawgeti(L, idx, i);
    if (!walk_node(w, n->inner, lua_gettop(L), depth + 1)) return 0;
    lua_pop(L, 1);
  }
  return PUT_LIT(w, "]");
}

static int walk_array(walk_t *w, const clank_schema_node_t *n, int idx, int depth);

/* A string without pattern, as walk_string checks and writes it. */
static int put_bounded_string(walk_t *w, const clank_schema_node_t *n, const char *s, size_t len) {
  if (n->has_min || n->has_max) {
    ptrdiff_t cp = clank_schema_utf8_len(s, len);
    if (cp < 0 || (n->has_min && cp < n->min.i) || (n->has_max && cp > n->max.i)) return 0;
  }
  return put_string(w, s, len);
}

static int is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* JSON text holding an array of strings, for an array of plain strings:
   written as clank_json_decode's array of them would be walked, when every
   string is ASCII without escapes or UTF-8 put_string takes. Returns 1, or
   0 for anything else (escapes, other values, malformed text, too few or
   too many items), which goes through the decoder. */
static int put_json_strings(walk_t *w, const clank_schema_node_t *n, const char *s, size_t len) {
  const clank_schema_node_t *item = n->inner;
  if (item->kind != CLANK_SK_STRING || item->pattern.s || item->has_min || item->has_max) return 0;
  const char *p = s, *end = s + len;
  lua_Integer count = 0;
  while (p < end && is_json_space(*p)) p++;
  if (p == end || *p++ != '[' || !PUT_LIT(w, "[")) return 0;
  for (;;) {
    while (p < end && is_json_space(*p)) p++;
    if (p == end) return 0;
    if (*p == ']' && count == 0) break;
    if (*p++ != '"') return 0;
    const char *from = p;
    while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) p++;
    if (p == end || *p != '"') return 0; /* an escape or a control: the decoder's */
    if ((count++ > 0 && !PUT_LIT(w, ",")) || !put_string(w, from, (size_t)(p - from))) return 0;
    p++;
    while (p < end && is_json_space(*p)) p++;
    if (p == end) return 0;
    if (*p == ']') break;
    if (*p++ != ',') return 0;
  }
  p++;
  while (p < end && is_json_space(*p)) p++;
  if (p != end || (n->has_min && count < n->min.i) || (n->has_max && count > n->max.i)) return 0;
  return PUT_LIT(w, "]");
}

/* Property node's value c, as the driver holds it (n unwrapped, with its
   wrappers' flags), written the way clank_rows_push_field's Lua value would
   be walked, for the common cases (NULL, numbers, booleans, text as text or
   as one of an enum's values): returns 1 written, 0 absent, or -1 for the
   other cases, which go through Lua. */
static int walk_cell(walk_t *w, const clank_schema_node_t *n, int optional, int nullable,
                     const clank_rows_cell_t *c) {
  switch (c->kind) {
    case CLANK_CELL_NULL:
      if (nullable) return PUT_LIT(w, "null") ? 1 : -1;
      return optional ? 0 : -1;
    case CLANK_CELL_INTEGER:
      if (n->kind == CLANK_SK_NUMBER)
        return put_bounded_number(w, n, (clank_schema_num_t){1, c->i, 0}) ? 1 : -1;
      if (n->kind == CLANK_SK_BOOLEAN && (c->i == 0 || c->i == 1))
        return (c->i ? PUT_LIT(w, "true") : PUT_LIT(w, "false")) ? 1 : -1;
      if (n->kind == CLANK_SK_STRING && !n->pattern.s && !n->has_min && !n->has_max)
        /* the decimal text, which needs no escape */
        return PUT_LIT(w, "\"") && put_integer(w, c->i) && PUT_LIT(w, "\"") ? 1 : -1;
      return -1;
    case CLANK_CELL_FLOAT:
      if (n->kind != CLANK_SK_NUMBER) return -1;
      return put_bounded_number(w, n, (clank_schema_num_t){0, 0, c->d}) ? 1 : -1;
    case CLANK_CELL_BOOLEAN:
      if (n->kind != CLANK_SK_BOOLEAN) return -1;
      return (c->i ? PUT_LIT(w, "true") : PUT_LIT(w, "false")) ? 1 : -1;
    case CLANK_CELL_TEXT:
      if (n->kind == CLANK_SK_ARRAY) return put_json_strings(w, n, c->s, c->len) ? 1 : -1;
      if (n->kind == CLANK_SK_ENUM)
        return clank_schema_enum_find(n, c->s, c->len) >= 0 && put_string(w, c->s, c->len) ? 1 : -1;
      if (n->kind != CLANK_SK_STRING || n->pattern.s) return -1;
      return put_bounded_string(w, n, c->s, c->len) ? 1 : -1;
    default: return -1;
  }
}

/* A clank.Rows shaped by the array's item schema, written from the driver's
   buffer: each property's column read as a C value where walk_cell can
   write it, else made the Lua value the shape reads (clank_rows_push_field)
   and walked as a table's value would be. Once Lua asked for a row, the
   rows are that list, which Lua may have changed: it is walked instead. */
static int walk_rows(walk_t *w, const clank_schema_node_t *n, int idx, int depth) {
  lua_State *L = w->L;
  const clank_rows_t *r = clank_rows_at(L, idx);
  const clank_schema_node_t *item = n->inner;
  if (r == NULL || r->shape != item || item->n > 64 || depth + 1 >= WALK_MAX_DEPTH) return 0;
  if (clank_rows_push_made(L, idx)) {
    if (!walk_array(w, n, lua_gettop(L), depth)) return 0;
    lua_pop(L, 1);
    return 1;
  }
  if ((n->has_min && (lua_Integer)r->nrows < n->min.i) ||
      (n->has_max && (lua_Integer)r->nrows > n->max.i) || !lua_checkstack(L, 4))
    return 0;
  int top = lua_gettop(L);
  /* each property's node unwrapped once, not per row */
  const clank_schema_node_t *bare[64];
  int optional[64], nullable[64];
  for (size_t i = 0; i < item->n; i++)
    bare[i] = clank_schema_unwrap_flags(item->props[i].node, &optional[i], &nullable[i]);
  if (!PUT_LIT(w, "[")) return 0;
  for (size_t row = 0; row < r->nrows; row++) {
    if (row > 0 && !PUT_LIT(w, ",")) return 0;
    if (!PUT_LIT(w, "{")) return 0;
    for (size_t i = 0, first = 1; i < item->n; i++) {
      const clank_schema_prop_t *p = &item->props[i];
      int col = r->column_of[i];
      if (col < 0) {
        if (item->required_mask >> i & 1) return 0;
        continue;
      }
      /* the key, then the value; an absent value takes its key back */
      size_t key_at = w->out->len;
      if (!put_key(w, p, first)) return 0;
      clank_rows_cell_t cell;
      r->source->read_cell(r->data, row, col, &cell);
      int wrote = walk_cell(w, bare[i], optional[i], nullable[i], &cell);
      if (wrote < 0) { /* through Lua, as the list would have it */
        w->out->len = key_at;
        wrote = clank_rows_push_field(L, r, row, i);
        if (wrote && !(put_key(w, p, first) && walk_node(w, p->node, top + 1, depth + 2))) return 0;
        lua_settop(L, top);
      }
      if (wrote == 0) {
        w->out->len = key_at;
        if (item->required_mask >> i & 1) return 0;
        continue;
      }
      first = 0;
    }
    if (!PUT_LIT(w, "}")) return 0;
  }
  return PUT_LIT(w, "]");
}

/* The items 1..rawlen of a table with no other key, unmarked or marked as a
   JSON array (no other metatable); or a clank.Rows. */
static int walk_array(walk_t *w, const clank_schema_node_t *n, int idx, int depth) {
  lua_State *L = w->L;
  if (lua_type(L, idx) == LUA_TUSERDATA) return walk_rows(w, n, idx, depth);
  if (lua_type(L, idx) != LUA_TTABLE || depth >= WALK_MAX_DEPTH || !lua_checkstack(L, 4)) return 0;
  if (lua_getmetatable(L, idx)) {
    const void *mt = lua_topointer(L, -1);
    lua_pop(L, 1);
    if (w->amt == NULL) { /* the registry keeps it alive while we hold its address */
      clank_push_array_mt(L);
      w->amt = lua_topointer(L, -1);
      lua_pop(L, 1);
    }
    if (mt != w->amt) return 0;
  }
  lua_Integer len = (lua_Integer)lua_rawlen(L, idx), count = 0;
  if ((n->has_min && len < n->min.i) || (n->has_max && len > n->max.i)) return 0;
  /* One pass in the usual case: lua_next gives the keys 1, 2, ... (a list's
     array part, in order) and each item is written as it comes; when no
     other key followed, the keys were exactly 1..count, and count is len
     (the only border). */
  size_t start = w->out->len;
  if (!PUT_LIT(w, "[")) return 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) != count + 1) {
      lua_pop(L, 2); /* out of order, or not an index */
      w->out->len = start;
      return walk_items_by_index(w, n, idx, depth, len);
    }
    if (count++ > 0 && !PUT_LIT(w, ",")) return 0;
    if (!walk_node(w, n->inner, lua_gettop(L), depth + 1)) return 0;
    lua_pop(L, 1);
  }
  return PUT_LIT(w, "]");
}

/* A table without metatable whose keys are all properties of n, none
   required missing. One pass over the table leaves each value on the stack;
   they are then written in the schema's order. */
static int walk_object(walk_t *w, const clank_schema_node_t *n, int idx, int depth) {
  lua_State *L = w->L;
  if (lua_type(L, idx) != LUA_TTABLE || depth >= WALK_MAX_DEPTH || n->n > 64) return 0;
  if (lua_getmetatable(L, idx)) return 0; /* marked as an array, or a metatable of its own */
  if (!lua_checkstack(L, 2 * (int)n->n + 4)) return 0;
  int base = lua_gettop(L), top = base; /* the first value lands at base + 2 */
  int slot[64]; /* where property i's value sits, when bit i of seen is set */
  uint64_t seen = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) { /* each value stays, its key copied above it for the next */
    size_t klen;
    if (lua_type(L, -2) != LUA_TSTRING) return 0;
    const char *k = lua_tolstring(L, -2, &klen);
    ptrdiff_t p = clank_schema_find_lua_key(n, k, klen); /* as validation finds it */
    if (p < 0) return 0; /* unknown: refused when strict, kept otherwise (the general way) */
    seen |= UINT64_C(1) << p;
    slot[p] = top += 2; /* key and value stay */
    lua_pushvalue(L, -2);
  }
  if ((seen & n->required_mask) != n->required_mask) return 0; /* a required one is missing */
  if (!PUT_LIT(w, "{")) return 0;
  for (size_t i = 0, first = 1; i < n->n; i++) {
    if (!(seen >> i & 1)) continue;
    const clank_schema_prop_t *p = &n->props[i];
    if (!put_key(w, p, first)) return 0;
    first = 0;
    if (!walk_node(w, p->node, slot[i], depth + 1)) return 0;
  }
  lua_settop(L, base);
  return PUT_LIT(w, "}");
}

/* One node: wrappers unwrapped in a loop, so that this dispatcher is
   inlined into the walks of containers (a call less per value). */
static inline __attribute__((always_inline)) int walk_node(walk_t *w, const clank_schema_node_t *n,
                                                           int idx, int depth) {
  for (;;) {
    switch (n->kind) {
      case CLANK_SK_STRING: return walk_string(w, n, idx);
      case CLANK_SK_NUMBER: return walk_number(w, n, idx);
      case CLANK_SK_BOOLEAN:
        if (lua_type(w->L, idx) != LUA_TBOOLEAN) return 0;
        return lua_toboolean(w->L, idx) ? PUT_LIT(w, "true") : PUT_LIT(w, "false");
      case CLANK_SK_LITERAL: return walk_literal(w, n, idx);
      case CLANK_SK_ENUM: return walk_enum(w, n, idx);
      case CLANK_SK_UNKNOWN: return put_scalar(w, idx); /* a table: the general way */
      case CLANK_SK_ARRAY: return walk_array(w, n, idx, depth);
      case CLANK_SK_OBJECT: return walk_object(w, n, idx, depth);
      case CLANK_SK_OPTIONAL: /* nil is valid but not JSON: the general way says so */
        if (lua_isnil(w->L, idx)) return 0;
        n = n->inner;
        continue;
      case CLANK_SK_NULLABLE:
        if (lua_type(w->L, idx) == LUA_TLIGHTUSERDATA && clank_is_null(w->L, idx))
          return PUT_LIT(w, "null");
        n = n->inner;
        continue;
      default: return 0; /* a union: the general way */
    }
  }
}

int clank_schema_encode(lua_State *L, const clank_schema_node_t *n, int idx, clank_buf_t *out) {
  walk_t w = {L, out, NULL};
  int top = lua_gettop(L);
  size_t start = out->len;
  if (walk_node(&w, n, idx > 0 ? idx : lua_absindex(L, idx), 0)) return 1; /* the stack as it was */
  lua_settop(L, top);
  out->len = start;
  return 0;
}
