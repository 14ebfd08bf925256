/* clank_schema_decode: the JSON text read once, guided by the schema.

   The walk builds what clank_json_decode builds, in the same order (tables
   of the same sizes, keys set in the order they come, so even their
   iteration order is the same), and checks the schema's constraints with
   what it has already scanned: a key is matched against the properties by
   its bytes, a string's length in code points is counted while its bytes
   are checked, a pattern is matched by the schema's compiled matcher (as
   the validator matches it), an enum value is compared by bytes, required
   properties are a bitmask; object keys and enum values that match are pushed from
   strings the schema holds (no hashing of their bytes). A constraint that
   fails does not stop the walk: the value is only no longer known valid,
   and the caller validates it as before. What the walk does not read
   itself (values no schema describes, strings with escapes, numbers beyond
   the plain decoder's own fast path) it leaves to the plain decoder, value
   by value, so the two cannot disagree on what the text means or on
   whether it is JSON. */
#include "data/schema_decode.h"

#include <lauxlib.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "data/json.h"
#include "data/json_scan.h"
#include "data/schema_internal.h"
#include "core/values.h"

#define MAXDEPTH 64 /* as clank_json_decode's */
#define SLOTS 6     /* stack slots a container takes: see enter() */
#define RESERVED 2  /* containers whose slots are checked at once */

typedef struct {
  lua_State *L;
  const char *p, *end;
  int depth; /* containers entered, as the plain decoder counts them */
  int mt;    /* stack index of the array metatable */
  int valid; /* 0 once anything fails or is not checked */
} sd_t;

static inline void skip_ws(sd_t *d) { d->p = clank_json_skip_ws(d->p, d->end); }

/* The plain decoder for the value at d->p. */
static int plain(sd_t *d) { return clank_json_decode_part(d->L, &d->p, d->end, d->depth, d->mt); }

/* The plain bytes of a string from p, as the plain decoder checks them: where
   they stop (at '"' or '\\'), or NULL on a control character, a byte that is
   not well-formed UTF-8 or the end of input. Their code points go to *cp.
   Eight bytes at a time while eight remain. */
static inline __attribute__((always_inline)) const char *scan(const char *p, const char *end,
                                                              size_t *cp) {
  const char *from = p;
  size_t extra = 0; /* bytes after the first of each character */
  for (;;) {
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w, m = 0;
    while (end - p >= 8 && (memcpy(&w, p, 8), (m = clank_json_stop_bytes(w)) == 0)) p += 8;
    if (m != 0)
      p += __builtin_ctzll(m) >> 3;
    else
#endif
      while (p < end && clank_json_plain_byte[(unsigned char)*p]) p++;
    if (p == end) return NULL;
    unsigned char c = (unsigned char)*p;
    if (c == '"' || c == '\\') break;
    if (c < 0x20) return NULL;
    size_t k = clank_json_utf8_char((const unsigned char *)p, (size_t)(end - p));
    if (k == 0) return NULL;
    p += k;
    extra += k - 1;
  }
  *cp = (size_t)(p - from) - extra;
  return p;
}

/* Index of the property of n named by the len bytes at k, or -1: few
   properties are compared one by one, lengths first, from the one after
   the last found (keys mostly come in the schema's order). */
static ptrdiff_t find_prop(const clank_schema_node_t *n, const char *k, size_t len, size_t from) {
  if (n->n > 16) return clank_schema_find_prop(n, k, len);
  for (size_t j = 0, i = from < n->n ? from : 0; j < n->n; j++, i = i + 1 < n->n ? i + 1 : 0) {
    const clank_schema_str_t *key = &n->props[i].key;
    if (key->len == len && clank_schema_same_bytes(key->s, k, len)) return (ptrdiff_t)i;
  }
  return -1;
}

/* The string at d->p (its opening quote): 1 when it has no escapes, its
   bytes in *s and *len, not pushed (the caller pushes them, or a string it
   holds with the same bytes); 0 when it had escapes and is pushed decoded,
   its bytes in *s and *len; -1 when it is malformed. Code points in *cp. */
static inline __attribute__((always_inline)) int string(sd_t *d, const char **s, size_t *len,
                                                        size_t *cp) {
  const char *p = d->p + 1, *q = scan(p, d->end, cp);
  if (q == NULL) return -1;
  if (*q == '"') {
    *s = p;
    *len = (size_t)(q - p);
    d->p = q + 1;
    return 1;
  }
  if (plain(d) != 0) return -1;
  *s = lua_tolstring(d->L, -1, len);
  *cp = (size_t)clank_schema_utf8_len(*s, *len); /* valid: the decoder checked it */
  return 0;
}

/* The number on top, as schema_validate.c's check_number judges it. */
static int number_ok(lua_State *L, const clank_schema_node_t *n) {
  clank_schema_num_t v;
  v.i = lua_tointegerx(L, -1, &v.isint); /* 2.0 too: integral either way */
  if (v.isint) {
    v.n = 0;
  } else {
    v.i = 0;
    v.n = lua_tonumber(L, -1);
    if (!isfinite(v.n)) return 0;
    if (n->integer && floor(v.n) != v.n) return 0;
  }
  if (n->has_min && clank_schema_numcmp(&v, &n->min) < 0) return 0;
  if (n->has_max && clank_schema_numcmp(&v, &n->max) > 0) return 0;
  return 1;
}

/* A short number read as the plain decoder's fast path reads it (the same
   digits, the same single division, so the same value), pushed and checked
   without asking Lua what it is; 0 when it is not short (or not a number),
   with nothing pushed and d->p where it was. */
static int short_number(sd_t *d, const clank_schema_node_t *n) {
  const char *p = d->p, *end = d->end, *digits;
  int neg = *p == '-';
  uint64_t m = 0;
  size_t idigits, fdigits = 0;
  int isint = 1;
  p += neg;
  for (digits = p; p < end && (unsigned)(*p - '0') < 10; p++) m = m * 10 + (uint64_t)(*p - '0');
  idigits = (size_t)(p - digits);
  if (idigits == 0 || (*digits == '0' && idigits > 1)) return 0;
  if (p < end && *p == '.') {
    isint = 0;
    for (digits = ++p; p < end && (unsigned)(*p - '0') < 10; p++) m = m * 10 + (uint64_t)(*p - '0');
    fdigits = (size_t)(p - digits);
    if (fdigits == 0 || idigits + fdigits > 15) return 0;
  } else if (idigits > 18) {
    return 0;
  }
  if (p < end && (*p == 'e' || *p == 'E')) return 0;
  clank_schema_num_t v = {isint, 0, 0};
  if (isint) {
    v.i = neg ? -(lua_Integer)m : (lua_Integer)m;
    lua_pushinteger(d->L, v.i);
  } else {
    double x = (double)m / clank_json_exact_tens[fdigits];
    v.n = neg ? -x : x;
    lua_pushnumber(d->L, v.n);
    if (n->integer && floor(v.n) != v.n) d->valid = 0;
  }
  if ((n->has_min && clank_schema_numcmp(&v, &n->min) < 0) ||
      (n->has_max && clank_schema_numcmp(&v, &n->max) > 0))
    d->valid = 0;
  d->p = p;
  return 1;
}

static int value(sd_t *d, const clank_schema_node_t *n, int sdepth);

/* The plain decoder's enter, for a container of schema depth sdepth (the
   validator refuses containers at 64 and deeper). */
static int enter(sd_t *d, int sdepth) {
  if (++d->depth > MAXDEPTH) return -1;
  if (sdepth >= CLANK_SCHEMA_MAX_DEPTH) d->valid = 0;
  /* the held keys, the table, a key, a value and two more for an enum's;
     the first RESERVED containers' are checked once, by clank_schema_decode */
  if (d->depth > RESERVED) luaL_checkstack(d->L, SLOTS, "clank.json.decode");
  d->p++;
  skip_ws(d);
  return 0;
}

static int array(sd_t *d, const clank_schema_node_t *n, int sdepth) {
  lua_State *L = d->L;
  lua_Integer i = 0;
  if (enter(d, sdepth) != 0) return -1;
  lua_createtable(L, 4, 0); /* as the plain decoder makes it */
  lua_pushvalue(L, d->mt);
  lua_setmetatable(L, -2);
  if (d->p < d->end && *d->p == ']') {
    d->p++;
  } else {
    for (;;) {
      if (value(d, n->inner, sdepth + 1) != 0) return -1;
      lua_rawseti(L, -2, ++i);
      skip_ws(d);
      if (d->p < d->end && *d->p == ',') {
        d->p++;
        continue;
      }
      if (d->p < d->end && *d->p == ']') break;
      return -1;
    }
    d->p++;
  }
  d->depth--;
  if ((n->has_min && i < n->min.i) || (n->has_max && i > n->max.i)) d->valid = 0;
  return 0;
}

static int object(sd_t *d, const clank_schema_node_t *n, int sdepth) {
  lua_State *L = d->L;
  uint64_t seen = 0;
  size_t next = 0; /* where find_prop starts */
  if (enter(d, sdepth) != 0) return -1;
  lua_createtable(L, 0, 4);                       /* as the plain decoder makes it */
  lua_rawgeti(L, LUA_REGISTRYINDEX, n->strs_ref); /* the keys, held, above it */
  int keys = lua_gettop(L);
  if (d->p < d->end && *d->p == '}') {
    d->p++;
  } else {
    for (;;) {
      const clank_schema_node_t *child = NULL;
      const char *k;
      size_t klen, cp;
      skip_ws(d);
      if (d->p == d->end || *d->p != '"') return -1;
      int plain_key = string(d, &k, &klen, &cp);
      if (plain_key < 0) return -1;
      ptrdiff_t i = find_prop(n, k, klen, next);
      if (plain_key) {
        if (i >= 0)
          lua_rawgeti(L, keys, i + 1);
        else
          lua_pushlstring(L, k, klen);
      }
      if (i >= 0) {
        next = (size_t)i + 1;
        uint64_t bit = UINT64_C(1) << i; /* n->n <= 64: see value() */
        if (seen & bit) d->valid = 0;    /* a duplicate: the last one wins */
        seen |= bit;
        child = n->props[i].node;
      } else if (n->strict) {
        d->valid = 0;
      }
      skip_ws(d);
      if (d->p == d->end || *d->p != ':') return -1;
      d->p++;
      if (value(d, child, sdepth + 1) != 0) return -1;
      lua_rawset(L, -4);
      skip_ws(d);
      if (d->p < d->end && *d->p == ',') {
        d->p++;
        continue;
      }
      if (d->p < d->end && *d->p == '}') break;
      return -1;
    }
    d->p++;
  }
  lua_pop(L, 1); /* the keys */
  d->depth--;
  if ((seen & n->required_mask) != n->required_mask) d->valid = 0;
  return 0;
}

/* The value at d->p pushed and checked against n (NULL: anything). sdepth
   is the schema depth the validator would be at. */
static int value(sd_t *d, const clank_schema_node_t *n, int sdepth) {
  skip_ws(d);
  if (d->p == d->end) return -1;
  char c = *d->p;
  const char *s;
  size_t len, cp;
  int r;
  /* JSON has no nil: optional is its inner schema; null passes nullable */
  while (n && (n->kind == CLANK_SK_OPTIONAL || (n->kind == CLANK_SK_NULLABLE && c != 'n')))
    n = n->inner;
  if (n == NULL || n->kind == CLANK_SK_UNKNOWN || n->kind == CLANK_SK_NULLABLE) return plain(d);
  switch (n->kind) {
    case CLANK_SK_OBJECT:
      if (c == '{' && n->n <= 64 && n->strs_ref != LUA_NOREF) return object(d, n, sdepth);
      break;
    case CLANK_SK_ARRAY:
      if (c == '[') return array(d, n, sdepth);
      break;
    case CLANK_SK_STRING:
      if (c != '"') break;
      if ((r = string(d, &s, &len, &cp)) < 0) return -1;
      if (r) lua_pushlstring(d->L, s, len);
      if ((n->has_min && (lua_Integer)cp < n->min.i) ||
          (n->has_max && (lua_Integer)cp > n->max.i) ||
          (n->match && !clank_match_find(n->match, s, len)))
        d->valid = 0;
      return 0;
    case CLANK_SK_ENUM:
      if (c != '"') break;
      if ((r = string(d, &s, &len, &cp)) < 0) return -1;
      ptrdiff_t i = clank_schema_enum_find(n, s, len);
      if (i >= 0) {
        if (r && n->strs_ref == LUA_NOREF) {
          lua_pushlstring(d->L, s, len);
        } else if (r) { /* the value, held */
          lua_rawgeti(d->L, LUA_REGISTRYINDEX, n->strs_ref);
          lua_rawgeti(d->L, -1, (lua_Integer)i + 1);
          lua_replace(d->L, -2);
        }
        return 0;
      }
      if (r) lua_pushlstring(d->L, s, len);
      d->valid = 0;
      return 0;
    case CLANK_SK_NUMBER:
      if (c != '-' && (c < '0' || c > '9')) break;
      if (short_number(d, n)) return 0;
      if (plain(d) != 0) return -1;
      if (!number_ok(d->L, n)) d->valid = 0;
      return 0;
    case CLANK_SK_BOOLEAN:
      if (c == 't' || c == 'f') return plain(d);
      break;
    default: break; /* literals and unions: the validator's */
  }
  d->valid = 0;
  return plain(d);
}

int clank_schema_decode(lua_State *L, const clank_schema_node_t *n, const char *s, size_t len) {
  int base = lua_gettop(L);
  sd_t d = {L, s, s + len, 0, base + 1, 1};
  luaL_checkstack(L, 1 + RESERVED * SLOTS + 1, "clank.json.decode");
  clank_push_array_mt(L); /* fetched once for every array of the value */
  if (value(&d, n, 0) == 0) {
    skip_ws(&d);
    if (d.p == d.end) {
      lua_replace(L, base + 1);
      return d.valid ? CLANK_SCHEMA_DECODE_VALID : CLANK_SCHEMA_DECODE_UNSURE;
    }
  }
  lua_settop(L, base);
  return CLANK_SCHEMA_DECODE_MALFORMED;
}
