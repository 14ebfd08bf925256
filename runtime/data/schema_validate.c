/* Validation: walks the compiled nodes against a Lua value.

   One walker serves two modes. Checking (ctx.issues == 0) stops at the first
   problem and allocates nothing: object keys are matched while iterating the
   table (interned short strings by address, longer ones by bytes), and only
   values that already exist are pushed (table slots, metatables).
   Collecting runs only after a failed check and builds the issue tables in
   the contract's order. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "data/json.h"
#include "data/schema_internal.h"
#include "core/values.h"

/* What a walk does with the problems it finds. */
enum {
  M_CHECK,     /* nothing: stops at the first */
  M_TABLES,    /* issue tables into the list at c->issues */
  M_MSGS,      /* messages only into that list: a union's members */
  M_JSON,      /* the details of the 422 answer into c->out */
  M_JSON_MSGS, /* messages only, escaped, into c->out: a union's members */
};

typedef struct pathel_s {
  const char *s;     /* a key's bytes (alive in the schema or the value), or NULL */
  size_t len;        /* of the key */
  lua_Integer index; /* 1-based index when s == NULL */
} pathel_t;

/* Where an issue's message and path sit in the JSON answer: the message
   of the error object is made from them once every issue is written. */
typedef struct jissue_s {
  size_t msg0, msg1, path0, path1;
} jissue_t;

typedef struct vctx_s {
  lua_State *L;
  int amt;          /* index of the JSON array metatable */
  const void *amtp; /* the same, compared by address: cheaper than lua_rawequal */
  int k;            /* index of the constants */
  int mode;         /* M_* */
  int issues;       /* M_TABLES, M_MSGS: stack index of the list */
  int count;        /* issues in that list */
  int nmsgs;        /* M_MSGS, M_JSON_MSGS: messages of the current union so far */
  int failed;       /* M_JSON: out could not grow, or a text is not valid UTF-8 */
  clank_buf_t *out;
  jissue_t *jissues; /* M_JSON: CLANK_SCHEMA_MAX_ISSUES of them */
  int npath;
  pathel_t path[CLANK_SCHEMA_MAX_DEPTH + 8];
  clank_schema_str_t unknown[CLANK_SCHEMA_MAX_ISSUES]; /* a strict object's unknown keys */
} vctx_t;

/* t is lua_type(L, idx), known to most callers already. */
static int validate(vctx_t *c, const clank_schema_node_t *n, int idx, int t, int depth);

#define ITEM_BATCH CLANK_SCHEMA_ITEM_BATCH

/* validate() stays small, with scalars inline; containers and the paths that
   report problems live in their own frames. */
#define NOINLINE __attribute__((noinline))
#define COLD __attribute__((noinline, cold))

/* ======================================================================
   Constants
   ====================================================================== */

enum {
  K_STRING = CLANK_SK_K_COUNT_KEYS,
  K_UTF8,
  K_NUMBER,
  K_INTEGER,
  K_BOOLEAN,
  K_ARRAY,
  K_OBJECT,
  K_DEEP,
  K_UNKNOWN,
  K_E_STRING,
  K_E_NUMBER,
  K_E_INTEGER,
  K_E_BOOLEAN,
  K_E_ENUM,
  K_E_ARRAY,
  K_E_OBJECT,
  K_E_UNION,
  K_END
};

static const char *const constants[K_END] = {NULL,
                                             "path",
                                             "message",
                                             "expected",
                                             "received",
                                             "issues",
                                             "success",
                                             "data",
                                             "error",
                                             "Expected a string.",
                                             "Must be valid UTF-8.",
                                             "Expected a finite number.",
                                             "Expected an integer.",
                                             "Expected a boolean.",
                                             "Expected an array.",
                                             "Expected an object.",
                                             "Nested too deeply.",
                                             "Unknown property.",
                                             "string",
                                             "number",
                                             "integer",
                                             "boolean",
                                             "enum",
                                             "array",
                                             "object",
                                             "union"};

void clank_schema_push_constants(lua_State *L) {
  lua_createtable(L, K_END - 1, 0);
  for (int i = 1; i < K_END; i++) {
    lua_pushstring(L, constants[i]);
    lua_rawseti(L, -2, i);
  }
}

#define FIXED(k, lit) \
  { lit, sizeof lit - 1, LUA_NOREF, k }

static const clank_schema_msg_t m_string = FIXED(K_STRING, "Expected a string.");
static const clank_schema_msg_t m_utf8 = FIXED(K_UTF8, "Must be valid UTF-8.");
static const clank_schema_msg_t m_number = FIXED(K_NUMBER, "Expected a finite number.");
static const clank_schema_msg_t m_integer = FIXED(K_INTEGER, "Expected an integer.");
static const clank_schema_msg_t m_boolean = FIXED(K_BOOLEAN, "Expected a boolean.");
static const clank_schema_msg_t m_array = FIXED(K_ARRAY, "Expected an array.");
static const clank_schema_msg_t m_object = FIXED(K_OBJECT, "Expected an object.");
static const clank_schema_msg_t m_deep = FIXED(K_DEEP, "Nested too deeply.");
static const clank_schema_msg_t m_unknown = FIXED(K_UNKNOWN, "Unknown property.");
static const clank_schema_msg_t e_string = FIXED(K_E_STRING, "string");
static const clank_schema_msg_t e_number = FIXED(K_E_NUMBER, "number");
static const clank_schema_msg_t e_integer = FIXED(K_E_INTEGER, "integer");
static const clank_schema_msg_t e_boolean = FIXED(K_E_BOOLEAN, "boolean");
static const clank_schema_msg_t e_enum = FIXED(K_E_ENUM, "enum");
static const clank_schema_msg_t e_array = FIXED(K_E_ARRAY, "array");
static const clank_schema_msg_t e_object = FIXED(K_E_OBJECT, "object");
static const clank_schema_msg_t e_union = FIXED(K_E_UNION, "union");

/* ======================================================================
   UTF-8 and numbers
   ====================================================================== */

/* UTF-8 is checked by a DFA without branches: in text that mixes scripts
   the branches of a decoder mispredict at every change of sequence length
   (an eighth of safeParse's time on bench/schema.lua's CreateTask). A state is a shift (0, 6, ...,
   48) into the 64-bit row of the byte read, whose 6 bits there are the next
   state; the error state (48) keeps to itself. The loads depend on the bytes
   only, so one shift per byte is all that waits on the previous byte. */
enum {
  U8_OK = 0,
  U8_1 = 6,   /* one continuation byte expected */
  U8_2 = 12,  /* two */
  U8_3 = 18,  /* three */
  U8_E0 = 24, /* after E0: A0..BF, then one (no overlong) */
  U8_ED = 30, /* after ED: 80..9F, then one (no surrogate) */
  U8_F0 = 36, /* after F0: 90..BF, then two (no overlong) */
  U8_F4 = 42, /* after F4: 80..8F, then two (nothing above U+10FFFF) */
  U8_ERR = 48
};

#define U8_T(from, to) ((uint64_t)(to) << (from))
#define U8_ROW(ok, s1, s2, s3, e0, ed, f0, f4)                                            \
  (U8_T(U8_OK, ok) | U8_T(U8_1, s1) | U8_T(U8_2, s2) | U8_T(U8_3, s3) | U8_T(U8_E0, e0) | \
   U8_T(U8_ED, ed) | U8_T(U8_F0, f0) | U8_T(U8_F4, f4) | U8_T(U8_ERR, U8_ERR))
#define U8_LEAD(to) U8_ROW(to, U8_ERR, U8_ERR, U8_ERR, U8_ERR, U8_ERR, U8_ERR, U8_ERR)

static const uint64_t utf8_rows[256] = {
    [0x00 ... 0x7F] = U8_LEAD(U8_OK),
    [0x80 ... 0x8F] = U8_ROW(U8_ERR, U8_OK, U8_1, U8_2, U8_ERR, U8_1, U8_ERR, U8_2),
    [0x90 ... 0x9F] = U8_ROW(U8_ERR, U8_OK, U8_1, U8_2, U8_ERR, U8_1, U8_2, U8_ERR),
    [0xA0 ... 0xBF] = U8_ROW(U8_ERR, U8_OK, U8_1, U8_2, U8_1, U8_ERR, U8_2, U8_ERR),
    [0xC0 ... 0xC1] = U8_LEAD(U8_ERR),
    [0xC2 ... 0xDF] = U8_LEAD(U8_1),
    [0xE0] = U8_LEAD(U8_E0),
    [0xE1 ... 0xEC] = U8_LEAD(U8_2),
    [0xED] = U8_LEAD(U8_ED),
    [0xEE ... 0xEF] = U8_LEAD(U8_2),
    [0xF0] = U8_LEAD(U8_F0),
    [0xF1 ... 0xF3] = U8_LEAD(U8_3),
    [0xF4] = U8_LEAD(U8_F4),
    [0xF5 ... 0xFF] = U8_LEAD(U8_ERR),
};

/* An ASCII start is skipped eight bytes at a time (long ASCII text is
   common; where scripts mix, a check per word would mispredict as a decoder
   does). Valid text has one lead byte per code point: the count is the
   length less the continuation bytes, counted on the way when asked for
   (else the length is returned). */
static inline ptrdiff_t utf8_scan(const char *s, size_t len, int count) {
  const unsigned char *p = (const unsigned char *)s;
  uint64_t state = U8_OK, w;
  size_t cont = 0, i = 0;
  while (len - i >= 8 && (memcpy(&w, p + i, 8), (w & UINT64_C(0x8080808080808080)) == 0)) i += 8;
  for (; i < len; i++) {
    unsigned b = p[i];
    state = utf8_rows[b] >> (state & 63);
    if (count) cont += (b & 0xC0) == 0x80;
  }
  if ((state & 63) != U8_OK) return -1;
  return (ptrdiff_t)(len - cont);
}

ptrdiff_t clank_schema_utf8_len(const char *s, size_t len) { return utf8_scan(s, len, 1); }

/* ======================================================================
   Issues
   ====================================================================== */

static void push_msg(vctx_t *c, const clank_schema_msg_t *m) {
  if (m->k)
    lua_rawgeti(c->L, c->k, m->k);
  else
    lua_rawgeti(c->L, LUA_REGISTRYINDEX, m->ref);
}

/* Adds the issue whose message is on top of the stack (popped) to the list:
   in M_TABLES with the current path, expected and received (only when
   expected is not NULL); in M_MSGS the message alone. */
COLD static void table_issue(vctx_t *c, const clank_schema_msg_t *expected, int recv) {
  lua_State *L = c->L;
  if (c->count >= CLANK_SCHEMA_MAX_ISSUES) {
    lua_pop(L, 1);
    return;
  }
  if (c->mode == M_MSGS) { /* every member's, one after the other */
    c->count++;
    lua_rawseti(L, c->issues, ++c->nmsgs);
    return;
  }
  luaL_checkstack(L, 5, "clank.schema: issue");
  if (c->count == 0 && c->mode == M_TABLES) { /* the list, made at the first issue */
    lua_createtable(L, 1, 0);
    lua_pushvalue(L, c->amt); /* marked as a JSON array */
    lua_setmetatable(L, -2);
    lua_replace(L, c->issues);
  }
  lua_createtable(L, 0, expected ? 4 : 2);
  lua_rawgeti(L, c->k, CLANK_SK_K_MESSAGE);
  lua_pushvalue(L, -3);
  lua_rawset(L, -3);
  lua_replace(L, -2);
  lua_rawgeti(L, c->k, CLANK_SK_K_PATH);
  lua_createtable(L, c->npath, 0);
  for (int i = 0; i < c->npath; i++) {
    const pathel_t *p = &c->path[i];
    if (p->s)
      lua_pushlstring(L, p->s, p->len);
    else
      lua_pushinteger(L, p->index);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushvalue(L, c->amt); /* marked as a JSON array */
  lua_setmetatable(L, -2);
  lua_rawset(L, -3);
  if (expected) {
    lua_rawgeti(L, c->k, CLANK_SK_K_EXPECTED);
    push_msg(c, expected);
    lua_rawset(L, -3);
    lua_rawgeti(L, c->k, CLANK_SK_K_RECEIVED);
    lua_pushvalue(L, recv);
    lua_rawset(L, -3);
  }
  lua_rawseti(L, c->issues, ++c->count);
}

static void put(vctx_t *c, const char *s, size_t n) {
  if (clank_buf_append(c->out, s, n) != 0) c->failed = 1;
}

#define PUT(c, lit) put(c, lit, sizeof lit - 1)

static void put_text(vctx_t *c, const char *s, size_t n) {
  if (clank_json_escape(c->out, s, n) != 0) c->failed = 1;
}

/* M_JSON: opens the issue {"expected":...,"message":" — its message follows. */
static void json_open(vctx_t *c, const clank_schema_msg_t *expected) {
  if (c->count > 0)
    PUT(c, ",");
  else /* the first: nothing is written for a valid value */
    PUT(c, "{\"code\":\"INVALID_INPUT\",\"details\":[");
  if (expected) {
    PUT(c, "{\"expected\":\"");
    put_text(c, expected->s, expected->len);
    PUT(c, "\",\"message\":\"");
  } else {
    PUT(c, "{\"message\":\"");
  }
  c->jissues[c->count++].msg0 = c->out->len;
}

/* M_JSON: closes the message of the last issue, then its path (0-based). */
static void json_close(vctx_t *c) {
  jissue_t *ji = &c->jissues[c->count - 1];
  ji->msg1 = c->out->len;
  PUT(c, "\",\"path\":[");
  ji->path0 = c->out->len;
  for (int i = 0; i < c->npath; i++) {
    const pathel_t *p = &c->path[i];
    if (i > 0) PUT(c, ",");
    if (p->s) {
      PUT(c, "\"");
      put_text(c, p->s, p->len);
      PUT(c, "\"");
    } else if (clank_buf_append_uint(c->out, (uint64_t)(p->index - 1)) != 0) {
      c->failed = 1;
    }
  }
  ji->path1 = c->out->len;
  PUT(c, "]}");
}

/* M_JSON_MSGS: the separator before a union member's message. */
static void json_sep(vctx_t *c) {
  if (c->nmsgs++ > 0) PUT(c, "; ");
}

/* Reports a problem: returns 0 at once when only checking. */
static int report(vctx_t *c, const clank_schema_msg_t *m, const clank_schema_msg_t *expected,
                  int recv);

static inline int fail(vctx_t *c, const clank_schema_msg_t *m, const clank_schema_msg_t *expected,
                       int recv) {
  if (c->mode == M_CHECK) return 0;
  return report(c, m, expected, recv);
}

COLD static int report(vctx_t *c, const clank_schema_msg_t *m, const clank_schema_msg_t *expected,
                       int recv) {
  if (c->count >= CLANK_SCHEMA_MAX_ISSUES || c->failed) return 0;
  switch (c->mode) {
    case M_JSON:
      json_open(c, expected);
      put_text(c, m->s, m->len);
      json_close(c);
      break;
    case M_JSON_MSGS:
      c->count++;
      json_sep(c);
      put_text(c, m->s, m->len);
      break;
    default: push_msg(c, m); table_issue(c, expected, recv);
  }
  return 0;
}

static void path_key(vctx_t *c, const char *s, size_t len) {
  pathel_t *p = &c->path[c->npath++];
  p->s = s;
  p->len = len;
}

static void path_index(vctx_t *c, lua_Integer i) {
  pathel_t *p = &c->path[c->npath++];
  p->s = NULL;
  p->index = i;
}

/* ======================================================================
   Scalars
   ====================================================================== */

NOINLINE static int check_string(vctx_t *c, const clank_schema_node_t *n, int idx, int t) {
  lua_State *L = c->L;
  size_t len;
  if (t != LUA_TSTRING) return fail(c, &m_string, &e_string, idx);
  const char *s = lua_tolstring(L, idx, &len);
  /* code points are counted only for a bound */
  ptrdiff_t cp = n->has_min || n->has_max ? utf8_scan(s, len, 1) : utf8_scan(s, len, 0);
  if (cp < 0) return fail(c, &m_utf8, NULL, idx);
  if (n->has_min && cp < n->min.i) return fail(c, &n->msg_min, NULL, idx);
  if (n->has_max && cp > n->max.i) return fail(c, &n->msg_max, NULL, idx);
  if (n->match && !clank_match_find(n->match, s, len)) return fail(c, &n->msg_other, NULL, idx);
  return 1;
}

NOINLINE static int check_number(vctx_t *c, const clank_schema_node_t *n, int idx, int t) {
  lua_State *L = c->L;
  clank_schema_num_t v;
  if (t != LUA_TNUMBER) return fail(c, &m_number, &e_number, idx);
  v.i = lua_tointegerx(L, idx, &v.isint); /* 2.0 too: integral either way */
  if (v.isint) {
    v.n = 0;
  } else {
    v.i = 0;
    v.n = lua_tonumber(L, idx);
    if (!isfinite(v.n)) return fail(c, &m_number, &e_number, idx);
    if (n->integer && floor(v.n) != v.n) return fail(c, &m_integer, &e_integer, idx);
  }
  if (n->has_min && clank_schema_numcmp(&v, &n->min) < 0) return fail(c, &n->msg_min, NULL, idx);
  if (n->has_max && clank_schema_numcmp(&v, &n->max) > 0) return fail(c, &n->msg_max, NULL, idx);
  return 1;
}

static int same_bytes(const char *v, size_t len, const clank_schema_str_t *s) {
  return len == s->len && (v == s->s || (len > CLANK_SCHEMA_SHORTLEN && memcmp(v, s->s, len) == 0));
}

static int same_string(lua_State *L, int idx, const clank_schema_str_t *s) {
  size_t len;
  const char *v = lua_tolstring(L, idx, &len);
  return same_bytes(v, len, s);
}

static int literal_equal(lua_State *L, const clank_schema_node_t *n, int idx) {
  switch (n->lit_type) {
    case LUA_TSTRING: return lua_type(L, idx) == LUA_TSTRING && same_string(L, idx, &n->lit_str);
    case LUA_TNUMBER: {
      clank_schema_num_t v;
      if (lua_type(L, idx) != LUA_TNUMBER) return 0;
      v.isint = lua_isinteger(L, idx);
      v.i = v.isint ? lua_tointeger(L, idx) : 0;
      v.n = v.isint ? 0 : lua_tonumber(L, idx);
      return clank_schema_numcmp(&v, &n->lit_num) == 0;
    }
    case LUA_TBOOLEAN:
      return lua_type(L, idx) == LUA_TBOOLEAN && lua_toboolean(L, idx) == n->lit_bool;
    default: return clank_is_null(L, idx);
  }
}

NOINLINE static int check_literal(vctx_t *c, const clank_schema_node_t *n, int idx) {
  if (literal_equal(c->L, n, idx)) return 1;
  return fail(c, &n->msg_other, &n->expected, idx);
}

NOINLINE static int check_enum(vctx_t *c, const clank_schema_node_t *n, int idx, int t) {
  lua_State *L = c->L;
  if (t == LUA_TSTRING) {
    size_t len;
    const char *v = lua_tolstring(L, idx, &len);
    for (size_t i = 0; i < n->n; i++)
      if (same_bytes(v, len, &n->values[i])) return 1;
  }
  return fail(c, &n->msg_other, &e_enum, idx);
}

/* ======================================================================
   Containers
   ====================================================================== */

/* clank_is_marked_array with the metatable already on the stack. */
static int marked(vctx_t *c, int idx) {
  lua_State *L = c->L;
  if (!lua_getmetatable(L, idx)) return 0;
  int yes = lua_topointer(L, -1) == c->amtp;
  lua_pop(L, 1);
  return yes;
}

/* A table marked as a JSON array, or a sequence 1..n without other keys
   (the empty table included): returns 0 when it is not, else 1, or 2 with
   its metatable left on the stack. Its length in *len. */
static int as_array(vctx_t *c, int idx, int t, lua_Integer *len) {
  lua_State *L = c->L;
  if (t != LUA_TTABLE) return 0;
  *len = (lua_Integer)lua_rawlen(L, idx);
  int mt = lua_getmetatable(L, idx);
  if (mt && lua_topointer(L, -1) == c->amtp) return 2;
  lua_Integer count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_Integer k;
    if (!lua_isinteger(L, -2) || (k = lua_tointeger(L, -2)) < 1 || k > *len) {
      lua_pop(L, 2 + mt);
      return 0;
    }
    count++;
    lua_pop(L, 1);
  }
  if (count != *len) {
    lua_pop(L, mt);
    return 0;
  }
  return 1 + mt;
}

NOINLINE static int check_array(vctx_t *c, const clank_schema_node_t *n, int idx, int t,
                                int depth) {
  lua_State *L = c->L;
  lua_Integer len;
  int base = lua_gettop(L);
  int kind = as_array(c, idx, t, &len);
  if (!kind) return fail(c, &m_array, &e_array, idx);
  if (depth >= CLANK_SCHEMA_MAX_DEPTH || (n->has_min && len < n->min.i) ||
      (n->has_max && len > n->max.i)) {
    lua_settop(L, base);
    if (depth >= CLANK_SCHEMA_MAX_DEPTH) return fail(c, &m_deep, NULL, idx);
    if (n->has_min && len < n->min.i) return fail(c, &n->msg_min, NULL, idx);
    return fail(c, &n->msg_max, NULL, idx);
  }
  int ok = 1, first = base + kind; /* above the metatable, if left */
  for (lua_Integer i = 1; i <= len; i++) {
    int slot = first + (int)((i - 1) % ITEM_BATCH);
    int it = lua_rawgeti(L, idx, i);
    if (c->mode != M_CHECK) path_index(c, i);
    int good = validate(c, n->inner, slot, it, depth + 1);
    if (c->mode != M_CHECK) c->npath--;
    if (slot == first + ITEM_BATCH - 1) lua_settop(L, first - 1); /* items leave in batches */
    if (!good) {
      ok = 0;
      if (c->mode == M_CHECK || c->count >= CLANK_SCHEMA_MAX_ISSUES) break;
    }
  }
  lua_settop(L, base);
  return ok;
}

ptrdiff_t clank_schema_find_prop(const clank_schema_node_t *n, const char *key, size_t len) {
  size_t lo = 0, hi = n->n;
  while (lo < hi) { /* props are sorted by bytes */
    size_t mid = lo + (hi - lo) / 2;
    int r = clank_schema_keycmp(key, len, n->props[mid].key.s, n->props[mid].key.len);
    if (r == 0) return (ptrdiff_t)mid;
    if (r < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return -1;
}

/* Every key a string, no array mark; the keys n does not know counted in
   *unknown when it is strict. Below the depth limit, the values of the first
   64 properties are checked on the way: bit i of *seen says property i is
   there, bit i of *good that it is valid. A valid object thus costs about
   what a check does, and only what fails is looked at again, in order. */
static int object_pass(vctx_t *c, const clank_schema_node_t *n, int idx, int t, int depth,
                       size_t *unknown, uint64_t *seen, uint64_t *good) {
  lua_State *L = c->L;
  int mode = c->mode, value = lua_gettop(L) + 2, quick = depth < CLANK_SCHEMA_MAX_DEPTH;
  size_t nunknown = 0;
  uint64_t s = 0, g = 0;
  if (t != LUA_TTABLE || marked(c, idx)) return 0;
  c->mode = M_CHECK; /* the values, quietly */
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    size_t klen;
    if (lua_type(L, -2) != LUA_TSTRING) {
      lua_settop(L, value - 2);
      c->mode = mode;
      return 0;
    }
    const char *k = lua_tolstring(L, -2, &klen);
    ptrdiff_t p = clank_schema_find_lua_key(n, k, klen);
    if (p < 0) {
      nunknown++;
    } else if (quick && p < 64) {
      uint64_t bit = UINT64_C(1) << p;
      s |= bit;
      if (validate(c, n->props[p].node, value, lua_type(L, value), depth + 1)) g |= bit;
    }
    lua_settop(L, value - 1);
  }
  c->mode = mode;
  *unknown = n->strict ? nunknown : 0;
  *seen = s;
  *good = g;
  return 1;
}

/* Checking: one pass over the table in its own order. */
NOINLINE static int check_object_fast(vctx_t *c, const clank_schema_node_t *n, int idx, int t,
                                      int depth) {
  lua_State *L = c->L;
  size_t required = 0;
  if (t != LUA_TTABLE || marked(c, idx)) return 0;
  if (depth >= CLANK_SCHEMA_MAX_DEPTH) return 0;
  int value = lua_gettop(L) + 2; /* lua_next leaves key, value */
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    size_t klen;
    if (lua_type(L, -2) != LUA_TSTRING) {
      lua_pop(L, 2);
      return 0;
    }
    const char *key = lua_tolstring(L, -2, &klen);
    ptrdiff_t p = clank_schema_find_lua_key(n, key, klen);
    if (p < 0) {
      if (n->strict) {
        lua_pop(L, 2);
        return 0;
      }
    } else {
      const clank_schema_node_t *child = n->props[p].node;
      if (!validate(c, child, value, lua_type(L, value), depth + 1)) {
        lua_pop(L, 2);
        return 0;
      }
      if (!child->nil_ok) required++;
    }
    lua_pop(L, 1);
  }
  if (required == n->nrequired) return 1;
  return 0; /* a required property is missing */
}

/* The unknown keys of the table at idx into c->unknown, sorted: the
   smallest that can still be reported. Their bytes stay alive as keys of the
   table, which nothing changes during the walk. */
static size_t sort_unknown(vctx_t *c, const clank_schema_node_t *n, int idx) {
  lua_State *L = c->L;
  size_t cap = (size_t)(CLANK_SCHEMA_MAX_ISSUES - c->count), nu = 0;
  clank_schema_str_t *u = c->unknown;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    size_t klen;
    lua_pop(L, 1);
    const char *k = lua_tolstring(L, -1, &klen);
    if (clank_schema_find_lua_key(n, k, klen) >= 0) continue;
    if (nu == cap && clank_schema_keycmp(k, klen, u[nu - 1].s, u[nu - 1].len) > 0) continue;
    size_t i = nu < cap ? nu++ : nu - 1; /* full: the largest leaves */
    while (i > 0 && clank_schema_keycmp(k, klen, u[i - 1].s, u[i - 1].len) < 0) {
      u[i] = u[i - 1];
      i--;
    }
    u[i].s = k;
    u[i].len = klen;
  }
  return nu;
}

/* Collecting: properties in key order, then unknown keys in key order. */
NOINLINE static int collect_object(vctx_t *c, const clank_schema_node_t *n, int idx, int t,
                                   int depth) {
  lua_State *L = c->L;
  int before = c->count;
  size_t unknown = 0;
  uint64_t seen = 0, good = 0;
  if (!object_pass(c, n, idx, t, depth, &unknown, &seen, &good))
    return fail(c, &m_object, &e_object, idx);
  if (depth >= CLANK_SCHEMA_MAX_DEPTH) return fail(c, &m_deep, NULL, idx);
  if (unknown == 0 && good == seen && n->n <= 64 && (seen & n->required_mask) == n->required_mask)
    return 1; /* every property there is valid, none required is missing */
  for (size_t i = 0; i < n->n && c->count < CLANK_SCHEMA_MAX_ISSUES; i++) {
    const clank_schema_prop_t *p = &n->props[i];
    int vt = LUA_TNIL;
    if (i < 64 && (good >> i & 1)) continue;
    if (i < 64 && !(seen >> i & 1)) { /* absent */
      if (p->node->nil_ok) continue;
      lua_pushnil(L);
    } else {
      lua_pushlstring(L, p->key.s, p->key.len);
      vt = lua_rawget(L, idx);
    }
    path_key(c, p->key.s, p->key.len);
    validate(c, p->node, lua_gettop(L), vt, depth + 1);
    c->npath--;
    lua_pop(L, 1);
  }
  if (unknown > 0 && c->count < CLANK_SCHEMA_MAX_ISSUES) {
    size_t nu = sort_unknown(c, n, idx);
    for (size_t i = 0; i < nu; i++) {
      path_key(c, c->unknown[i].s, c->unknown[i].len);
      report(c, &m_unknown, NULL, 0);
      c->npath--;
    }
  }
  return c->count == before;
}

/* ======================================================================
   The walker
   ====================================================================== */

static const char union_open[] = "Did not match any union member (";

/* Every member's messages, in member order, each member's list capped like
   any list of issues. */
static void union_messages(vctx_t *c, const clank_schema_node_t *n, int idx, int t, int depth,
                           int mode) {
  int saved_mode = c->mode, count = c->count, nmsgs = c->nmsgs;
  c->mode = mode;
  c->nmsgs = 0;
  for (size_t i = 0; i < n->n; i++) {
    c->count = 0;
    validate(c, n->members[i], idx, t, depth);
  }
  c->mode = saved_mode;
  c->count = count;
  c->nmsgs = nmsgs;
}

COLD static int report_union(vctx_t *c, const clank_schema_node_t *n, int idx, int t, int depth) {
  lua_State *L = c->L;
  if (c->count >= CLANK_SCHEMA_MAX_ISSUES || c->failed) return 0;
  if (c->mode == M_JSON || c->mode == M_JSON_MSGS) {
    if (c->mode == M_JSON) {
      json_open(c, &e_union);
    } else {
      c->count++;
      json_sep(c);
    }
    PUT(c, union_open);
    union_messages(c, n, idx, t, depth, M_JSON_MSGS);
    PUT(c, ").");
    if (c->mode == M_JSON) json_close(c);
    return 0;
  }
  luaL_checkstack(L, n->slots + 10, "clank.schema: union");
  int issues = c->issues;
  lua_newtable(L);
  c->issues = lua_gettop(L);
  union_messages(c, n, idx, t, depth, M_MSGS);
  int msgs = c->issues, nmsgs = (int)lua_rawlen(L, msgs);
  c->issues = issues;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addlstring(&b, union_open, sizeof union_open - 1);
  for (int j = 1; j <= nmsgs; j++) {
    if (j > 1) luaL_addstring(&b, "; ");
    lua_rawgeti(L, msgs, j);
    luaL_addvalue(&b);
  }
  luaL_addstring(&b, ").");
  luaL_pushresult(&b);
  lua_remove(L, msgs);
  table_issue(c, &e_union, idx);
  return 0;
}

NOINLINE static int check_union(vctx_t *c, const clank_schema_node_t *n, int idx, int t,
                                int depth) {
  int mode = c->mode;
  c->mode = M_CHECK; /* first, quietly: the first member that parses wins */
  for (size_t i = 0; i < n->n; i++) {
    if (validate(c, n->members[i], idx, t, depth)) {
      c->mode = mode;
      return 1;
    }
  }
  c->mode = mode;
  if (mode == M_CHECK) return 0;
  return report_union(c, n, idx, t, depth);
}

/* clank.null, or the inner schema. */
NOINLINE static int check_nullable(vctx_t *c, const clank_schema_node_t *n, int idx, int t,
                                   int depth) {
  if (t == LUA_TLIGHTUSERDATA && clank_is_null(c->L, idx)) return 1;
  return validate(c, n->inner, idx, t, depth);
}

/* A dispatcher without a frame of its own: every case is a tail call, so a
   node costs one call, made by the function that checks it. */
static int validate(vctx_t *c, const clank_schema_node_t *n, int idx, int t, int depth) {
  switch (n->kind) {
    case CLANK_SK_STRING: return check_string(c, n, idx, t);
    case CLANK_SK_NUMBER: return check_number(c, n, idx, t);
    case CLANK_SK_BOOLEAN:
      if (t == LUA_TBOOLEAN) return 1;
      return fail(c, &m_boolean, &e_boolean, idx);
    case CLANK_SK_LITERAL: return check_literal(c, n, idx);
    case CLANK_SK_ENUM: return check_enum(c, n, idx, t);
    case CLANK_SK_UNKNOWN: return 1;
    case CLANK_SK_ARRAY: return check_array(c, n, idx, t, depth);
    case CLANK_SK_OBJECT:
      if (c->mode == M_CHECK) return check_object_fast(c, n, idx, t, depth);
      return collect_object(c, n, idx, t, depth);
    case CLANK_SK_OPTIONAL:
      if (t == LUA_TNIL) return 1;
      return validate(c, n->inner, idx, t, depth);
    case CLANK_SK_NULLABLE: return check_nullable(c, n, idx, t, depth);
    default: return check_union(c, n, idx, t, depth);
  }
}

/* Room for the whole walk, once, when the 16 free slots the caller leaves
   are not enough: the schema's own, and 2 for a message at the deepest point
   (issue tables and unions reserve what they use beyond). */
static void reserve(lua_State *L, const clank_schema_node_t *n) {
  if (n->slots + 2 > 16) luaL_checkstack(L, n->slots + 2, "clank.schema: nesting");
}

/* Positive and pseudo-indices as they are, without an API call. */
static int absidx(lua_State *L, int idx) {
  return idx > 0 || idx <= LUA_REGISTRYINDEX ? idx : lua_absindex(L, idx);
}

int clank_schema_check(lua_State *L, const clank_schema_node_t *n, int idx, int amt) {
  vctx_t c;
  c.L = L;
  c.amt = absidx(L, amt);
  c.amtp = lua_topointer(L, c.amt);
  c.mode = M_CHECK;
  c.count = 0;
  c.npath = 0;
  idx = absidx(L, idx);
  reserve(L, n);
  int t = lua_type(L, idx);
  return validate(&c, n, idx, t == LUA_TNONE ? LUA_TNIL : t, 0);
}

int clank_schema_collect(lua_State *L, const clank_schema_node_t *n, int idx, int amt, int k) {
  vctx_t c;
  c.L = L;
  c.amt = absidx(L, amt);
  c.amtp = lua_topointer(L, c.amt);
  c.k = absidx(L, k);
  c.mode = M_TABLES;
  c.count = 0;
  c.nmsgs = 0;
  c.failed = 0;
  c.npath = 0;
  idx = absidx(L, idx);
  lua_pushnil(L); /* the slot of the list */
  c.issues = lua_gettop(L);
  reserve(L, n);
  int t = lua_type(L, idx);
  validate(&c, n, idx, t == LUA_TNONE ? LUA_TNIL : t, 0);
  return c.count == 0;
}

/* Appends the bytes [off, off + n) of out to out. */
static void copy_back(vctx_t *c, size_t off, size_t n) {
  if (clank_buf_reserve(c->out, n) != 0) {
    c->failed = 1;
    return;
  }
  memcpy(c->out->data + c->out->len, c->out->data + off, n);
  c->out->len += n;
}

/* The error's message, "<path>: <message>" joined by "; ", made from what
   the details hold already: the path's strings are escaped as the message
   needs them, so joining them with "." is all there is to do. */
static void json_message(vctx_t *c) {
  for (int i = 0; i < c->count && !c->failed; i++) {
    const jissue_t *ji = &c->jissues[i];
    if (i > 0) PUT(c, "; ");
    if (ji->path0 == ji->path1) PUT(c, "value");
    size_t p = ji->path0;
    while (p < ji->path1) {
      char ch = c->out->data[p];
      size_t from = p;
      if (ch == ',') {
        PUT(c, ".");
        p++;
        continue;
      }
      if (ch == '"') { /* a key: up to its closing quote, escapes skipped */
        from = ++p;
        while (c->out->data[p] != '"') p += c->out->data[p] == '\\' ? 2 : 1;
        copy_back(c, from, p - from);
        p++;
        continue;
      }
      while (p < ji->path1 && c->out->data[p] != ',') p++; /* an index */
      copy_back(c, from, p - from);
    }
    PUT(c, ": ");
    copy_back(c, ji->msg0, ji->msg1 - ji->msg0);
  }
}

int clank_schema_collect_json(lua_State *L, const clank_schema_node_t *n, int idx, int amt,
                              clank_buf_t *out) {
  vctx_t c;
  jissue_t jissues[CLANK_SCHEMA_MAX_ISSUES];
  size_t start = out->len;
  c.L = L;
  c.amt = absidx(L, amt);
  c.amtp = lua_topointer(L, c.amt);
  c.k = 0;
  c.mode = M_JSON;
  c.issues = 0;
  c.count = 0;
  c.nmsgs = 0;
  c.failed = 0;
  c.out = out;
  c.jissues = jissues;
  c.npath = 0;
  idx = absidx(L, idx);
  reserve(L, n);
  int t = lua_type(L, idx);
  validate(&c, n, idx, t == LUA_TNONE ? LUA_TNIL : t, 0);
  if (c.count == 0) return 1;
  PUT(&c, "],\"message\":\"");
  json_message(&c);
  PUT(&c, "\"}");
  if (!c.failed) return 0;
  out->len = start;
  return -1;
}
