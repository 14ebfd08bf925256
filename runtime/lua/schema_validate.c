/* Validation: walks the compiled nodes against a Lua value.

   One walker serves two modes. Checking (ctx.issues == 0) stops at the first
   problem and allocates nothing: object keys are matched while iterating the
   table (interned short strings by address, longer ones by bytes), and only
   values that already exist are pushed (table slots, metatables, patterns).
   Collecting runs only after a failed check and builds the issue tables in
   the contract's order. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lua/json.h"
#include "lua/schema_internal.h"
#include "lua/values.h"

typedef struct pathel_s {
  int key;           /* stack index of a string key, or 0 */
  lua_Integer index; /* 1-based index when key == 0 */
} pathel_t;

typedef struct vctx_s {
  lua_State *L;
  int find;   /* stack index of string.find */
  int amt;    /* index of the JSON array metatable */
  int issues; /* stack index of the issue list; 0 when only checking */
  int count;  /* issues in that list */
  int npath;
  pathel_t path[CLANK_SCHEMA_MAX_DEPTH + 8];
} vctx_t;

/* t is lua_type(L, idx), known to most callers already. */
static int validate(vctx_t *c, const clank_schema_node_t *n, int idx, int t, int depth);

#define ITEM_BATCH CLANK_SCHEMA_ITEM_BATCH

/* validate() stays small, with scalars inline; containers and the paths that
   report problems live in their own frames. */
#define NOINLINE __attribute__((noinline))
#define COLD __attribute__((noinline, cold))

/* ======================================================================
   UTF-8 and numbers
   ====================================================================== */

ptrdiff_t clank_schema_utf8_len(const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s, *e = p + len;
  ptrdiff_t n = 0;
  while (p < e) {
    unsigned c = *p;
    if (c < 0x80) { /* a run of ASCII: eight bytes at a time, then one by one */
      const unsigned char *q = p + 1;
      uint64_t w;
      while (e - q >= 8 && (memcpy(&w, q, 8), (w & UINT64_C(0x8080808080808080)) == 0)) q += 8;
      while (q < e && *q < 0x80) q++;
      n += q - p;
      p = q;
      continue;
    }
    if (c < 0xC2) {
      return -1; /* continuation byte or overlong lead */
    } else if (c < 0xE0) {
      if (e - p < 2 || (p[1] & 0xC0) != 0x80) return -1;
      p += 2;
    } else if (c < 0xF0) {
      if (e - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return -1;
      if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F)) return -1;
      p += 3;
    } else if (c < 0xF5) {
      if (e - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
        return -1;
      if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F)) return -1;
      p += 4;
    } else {
      return -1;
    }
    n++;
  }
  return n;
}

COLD static const char *fmtnum(const clank_schema_num_t *v, char *buf) {
  if (v->isint)
    snprintf(buf, 32, LUA_INTEGER_FMT, (LUAI_UACINT)v->i);
  else
    clank_json_format_number(v->n, buf);
  return buf;
}

/* ======================================================================
   Issues
   ====================================================================== */

/* Adds an issue at the current path from the message on top of the stack
   (popped); expected and received only when expected is not NULL. */
COLD static void add_issue(vctx_t *c, const char *expected, size_t elen, int recv) {
  lua_State *L = c->L;
  if (c->count >= CLANK_SCHEMA_MAX_ISSUES) {
    lua_pop(L, 1);
    return;
  }
  luaL_checkstack(L, 4, "clank.schema: issue");
  lua_createtable(L, 0, 4);
  lua_insert(L, -2);
  lua_setfield(L, -2, "message");
  lua_createtable(L, c->npath, 0);
  for (int i = 0; i < c->npath; i++) {
    if (c->path[i].key)
      lua_pushvalue(L, c->path[i].key);
    else
      lua_pushinteger(L, c->path[i].index);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushvalue(L, c->amt); /* marked as a JSON array */
  lua_setmetatable(L, -2);
  lua_setfield(L, -2, "path");
  if (expected) {
    lua_pushlstring(L, expected, elen);
    lua_setfield(L, -2, "expected");
    lua_pushvalue(L, recv);
    lua_setfield(L, -2, "received");
  }
  lua_rawseti(L, c->issues, ++c->count);
}

/* Reports a problem: returns 0 at once when only checking. */
static int report(vctx_t *c, const char *expected, int recv, const char *fmt, const char *arg);

static inline int fail(vctx_t *c, const char *expected, int recv, const char *fmt,
                       const char *arg) {
  if (!c->issues) return 0;
  return report(c, expected, recv, fmt, arg);
}

COLD static int report(vctx_t *c, const char *expected, int recv, const char *fmt,
                       const char *arg) {
  if (arg)
    lua_pushfstring(c->L, fmt, arg);
  else
    lua_pushstring(c->L, fmt);
  add_issue(c, expected, expected ? strlen(expected) : 0, recv);
  return 0;
}

/* Reports "<prefix><s>." (s may hold any byte). */
COLD static int fail_str(vctx_t *c, const char *expected, int recv, const char *prefix,
                         const clank_schema_str_t *s) {
  if (!c->issues) return 0;
  lua_pushstring(c->L, prefix);
  lua_pushlstring(c->L, s->s, s->len);
  lua_pushliteral(c->L, ".");
  lua_concat(c->L, 3);
  add_issue(c, expected, expected ? strlen(expected) : 0, recv);
  return 0;
}

static void path_key(vctx_t *c, int key) {
  c->path[c->npath].key = key;
  c->path[c->npath++].index = 0;
}

static void path_index(vctx_t *c, lua_Integer i) {
  c->path[c->npath].key = 0;
  c->path[c->npath++].index = i;
}

/* ======================================================================
   Scalars
   ====================================================================== */

static int check_string(vctx_t *c, const clank_schema_node_t *n, int idx, int t) {
  lua_State *L = c->L;
  char buf[32];
  size_t len;
  if (t != LUA_TSTRING) return fail(c, "string", idx, "Expected a string.", NULL);
  const char *s = lua_tolstring(L, idx, &len);
  ptrdiff_t cp = clank_schema_utf8_len(s, len);
  if (cp < 0) return fail(c, NULL, idx, "Must be valid UTF-8.", NULL);
  if (n->has_min && cp < n->min.i)
    return fail(c, NULL, idx, "Must contain at least %s characters.", fmtnum(&n->min, buf));
  if (n->has_max && cp > n->max.i)
    return fail(c, NULL, idx, "Must contain at most %s characters.", fmtnum(&n->max, buf));
  if (n->pattern.s) {
    lua_pushvalue(L, c->find);
    lua_pushvalue(L, idx);
    lua_rawgeti(L, LUA_REGISTRYINDEX, n->find_ref);
    lua_call(L, 2, 1);
    int found = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (!found) return fail_str(c, NULL, idx, "Must match ", &n->pattern);
  }
  return 1;
}

static int check_number(vctx_t *c, const clank_schema_node_t *n, int idx, int t) {
  lua_State *L = c->L;
  char buf[32];
  clank_schema_num_t v;
  if (t != LUA_TNUMBER) return fail(c, "number", idx, "Expected a finite number.", NULL);
  v.i = lua_tointegerx(L, idx, &v.isint); /* 2.0 too: integral either way */
  if (v.isint) {
    v.n = 0;
  } else {
    v.i = 0;
    v.n = lua_tonumber(L, idx);
    if (!isfinite(v.n)) return fail(c, "number", idx, "Expected a finite number.", NULL);
    if (n->integer && floor(v.n) != v.n)
      return fail(c, "integer", idx, "Expected an integer.", NULL);
  }
  if (n->has_min && clank_schema_numcmp(&v, &n->min) < 0)
    return fail(c, NULL, idx, "Must be at least %s.", fmtnum(&n->min, buf));
  if (n->has_max && clank_schema_numcmp(&v, &n->max) > 0)
    return fail(c, NULL, idx, "Must be at most %s.", fmtnum(&n->max, buf));
  return 1;
}

static int same_string(lua_State *L, int idx, const clank_schema_str_t *s) {
  size_t len;
  const char *v = lua_tolstring(L, idx, &len);
  return len == s->len && (v == s->s || (len > CLANK_SCHEMA_SHORTLEN && memcmp(v, s->s, len) == 0));
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

static int check_enum(vctx_t *c, const clank_schema_node_t *n, int idx, int t) {
  lua_State *L = c->L;
  if (t == LUA_TSTRING) {
    for (size_t i = 0; i < n->n; i++)
      if (same_string(L, idx, &n->values[i])) return 1;
  }
  return fail_str(c, "enum", idx, "Expected one of: ", &n->json);
}

/* ======================================================================
   Containers
   ====================================================================== */

/* clank_is_marked_array with the metatable already on the stack. */
static int marked(vctx_t *c, int idx) {
  lua_State *L = c->L;
  if (!lua_getmetatable(L, idx)) return 0;
  int yes = lua_rawequal(L, -1, c->amt);
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
  if (mt && lua_rawequal(L, -1, c->amt)) return 2;
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
  char buf[32];
  lua_Integer len;
  int base = lua_gettop(L);
  int kind = as_array(c, idx, t, &len);
  if (!kind) return fail(c, "array", idx, "Expected an array.", NULL);
  if (depth >= CLANK_SCHEMA_MAX_DEPTH || (n->has_min && len < n->min.i) ||
      (n->has_max && len > n->max.i)) {
    lua_settop(L, base);
    if (depth >= CLANK_SCHEMA_MAX_DEPTH) return fail(c, NULL, idx, "Nested too deeply.", NULL);
    if (n->has_min && len < n->min.i)
      return fail(c, NULL, idx, "Must contain at least %s items.", fmtnum(&n->min, buf));
    return fail(c, NULL, idx, "Must contain at most %s items.", fmtnum(&n->max, buf));
  }
  int ok = 1, first = base + kind; /* above the metatable, if left */
  for (lua_Integer i = 1; i <= len; i++) {
    int slot = first + (int)((i - 1) % ITEM_BATCH);
    int it = lua_rawgeti(L, idx, i);
    if (c->issues) path_index(c, i);
    int good = validate(c, n->inner, slot, it, depth + 1);
    if (c->issues) c->npath--;
    if (slot == first + ITEM_BATCH - 1) lua_settop(L, first - 1); /* items leave in batches */
    if (!good) {
      ok = 0;
      if (!c->issues || c->count >= CLANK_SCHEMA_MAX_ISSUES) break;
    }
  }
  lua_settop(L, base);
  return ok;
}

/* Property lookup for a key that is a Lua string: short strings are interned,
   so equal ones share an address. */
static ptrdiff_t find_lua_key(const clank_schema_node_t *n, const char *key, size_t len) {
  if (n->n <= 16) {
    for (size_t i = 0; i < n->n; i++)
      if (n->props[i].key.s == key) return (ptrdiff_t)i;
    if (len <= CLANK_SCHEMA_SHORTLEN) return -1;
  }
  return clank_schema_find_prop(n, key, len);
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

/* Every key a string, no array mark. */
static int is_object(vctx_t *c, int idx, int t) {
  lua_State *L = c->L;
  if (t != LUA_TTABLE || marked(c, idx)) return 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING) {
      lua_pop(L, 2);
      return 0;
    }
    lua_pop(L, 1);
  }
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
    ptrdiff_t p = find_lua_key(n, key, klen);
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

/* Collecting: properties in key order, then unknown keys in key order. */
COLD static int collect_object(vctx_t *c, const clank_schema_node_t *n, int idx, int t, int depth) {
  lua_State *L = c->L;
  int before = c->count;
  if (!is_object(c, idx, t)) return fail(c, "object", idx, "Expected an object.", NULL);
  if (depth >= CLANK_SCHEMA_MAX_DEPTH) return fail(c, NULL, idx, "Nested too deeply.", NULL);
  for (size_t i = 0; i < n->n && c->count < CLANK_SCHEMA_MAX_ISSUES; i++) {
    lua_pushlstring(L, n->props[i].key.s, n->props[i].key.len);
    int key = lua_gettop(L);
    lua_pushvalue(L, key);
    int vt = lua_rawget(L, idx);
    path_key(c, key);
    validate(c, n->props[i].node, key + 1, vt, depth + 1);
    c->npath--;
    lua_pop(L, 2);
  }
  if (n->strict) { /* unknown keys, smallest first: one pass per key reported */
    const char *last = NULL;
    size_t lastlen = 0;
    while (c->count < CLANK_SCHEMA_MAX_ISSUES) {
      const char *best = NULL;
      size_t bestlen = 0;
      lua_pushnil(L); /* slot for the best key */
      int slot = lua_gettop(L);
      lua_pushnil(L);
      while (lua_next(L, idx)) {
        size_t klen;
        const char *k = lua_tolstring(L, -2, &klen);
        if (find_lua_key(n, k, klen) < 0 &&
            (!last || clank_schema_keycmp(k, klen, last, lastlen) > 0) &&
            (!best || clank_schema_keycmp(k, klen, best, bestlen) < 0)) {
          best = k;
          bestlen = klen;
          lua_pushvalue(L, -2);
          lua_replace(L, slot);
        }
        lua_pop(L, 1);
      }
      if (!best) {
        lua_pop(L, 1);
        break;
      }
      path_key(c, slot);
      lua_pushliteral(L, "Unknown property.");
      add_issue(c, NULL, 0, 0);
      c->npath--;
      last = best; /* still alive: it is a key of the table */
      lastlen = bestlen;
      lua_pop(L, 1);
    }
  }
  return c->count == before;
}

/* ======================================================================
   The walker
   ====================================================================== */

NOINLINE static int check_union(vctx_t *c, const clank_schema_node_t *n, int idx, int t,
                                int depth) {
  lua_State *L = c->L;
  int issues = c->issues, count = c->count;
  c->issues = 0; /* first, quietly: the first member that parses wins */
  for (size_t i = 0; i < n->n; i++) {
    if (validate(c, n->members[i], idx, t, depth)) {
      c->issues = issues;
      return 1;
    }
  }
  c->issues = issues;
  if (!issues) return 0;
  luaL_checkstack(L, n->slots + 10, "clank.schema: union");
  lua_newtable(L); /* every member's messages, in member order */
  int msgs = lua_gettop(L), nmsgs = 0;
  for (size_t i = 0; i < n->n; i++) {
    lua_newtable(L);
    c->issues = lua_gettop(L);
    c->count = 0;
    validate(c, n->members[i], idx, t, depth);
    for (int j = 1; j <= c->count; j++) {
      lua_rawgeti(L, c->issues, j);
      lua_getfield(L, -1, "message");
      lua_rawseti(L, msgs, ++nmsgs);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  c->issues = issues;
  c->count = count;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "Did not match any union member (");
  for (int j = 1; j <= nmsgs; j++) {
    if (j > 1) luaL_addstring(&b, "; ");
    lua_rawgeti(L, msgs, j);
    luaL_addvalue(&b);
  }
  luaL_addstring(&b, ").");
  luaL_pushresult(&b);
  lua_remove(L, msgs);
  add_issue(c, "union", 5, idx);
  return 0;
}

static int validate(vctx_t *c, const clank_schema_node_t *n, int idx, int t, int depth) {
  lua_State *L = c->L;
  switch (n->kind) {
    case CLANK_SK_STRING: return check_string(c, n, idx, t);
    case CLANK_SK_NUMBER: return check_number(c, n, idx, t);
    case CLANK_SK_BOOLEAN:
      if (t == LUA_TBOOLEAN) return 1;
      return fail(c, "boolean", idx, "Expected a boolean.", NULL);
    case CLANK_SK_LITERAL:
      if (literal_equal(L, n, idx)) return 1;
      return fail_str(c, n->json.s, idx, "Expected ", &n->json); /* JSON holds no NUL */
    case CLANK_SK_ENUM: return check_enum(c, n, idx, t);
    case CLANK_SK_UNKNOWN: return 1;
    case CLANK_SK_ARRAY: return check_array(c, n, idx, t, depth);
    case CLANK_SK_OBJECT:
      if (!c->issues) return check_object_fast(c, n, idx, t, depth);
      return collect_object(c, n, idx, t, depth);
    case CLANK_SK_OPTIONAL: return t == LUA_TNIL || validate(c, n->inner, idx, t, depth);
    case CLANK_SK_NULLABLE:
      return (t == LUA_TLIGHTUSERDATA && clank_is_null(L, idx)) ||
             validate(c, n->inner, idx, t, depth);
    default: return check_union(c, n, idx, t, depth);
  }
}

/* Room for the whole walk, once, when the 16 free slots the caller leaves
   are not enough: the schema's own, and 2 for a message at the deepest point
   (add_issue and unions reserve what they use beyond). */
static void reserve(lua_State *L, const clank_schema_node_t *n) {
  if (n->slots + 2 > 16) luaL_checkstack(L, n->slots + 2, "clank.schema: nesting");
}

/* Positive and pseudo-indices as they are, without an API call. */
static int absidx(lua_State *L, int idx) {
  return idx > 0 || idx <= LUA_REGISTRYINDEX ? idx : lua_absindex(L, idx);
}

int clank_schema_check(lua_State *L, const clank_schema_node_t *n, int idx, int find, int amt) {
  vctx_t c;
  c.L = L;
  c.find = absidx(L, find);
  c.amt = absidx(L, amt);
  c.issues = 0;
  c.count = 0;
  c.npath = 0;
  idx = absidx(L, idx);
  reserve(L, n);
  int t = lua_type(L, idx);
  return validate(&c, n, idx, t == LUA_TNONE ? LUA_TNIL : t, 0);
}

void clank_schema_collect(lua_State *L, const clank_schema_node_t *n, int idx, int find, int amt) {
  vctx_t c;
  c.L = L;
  c.find = absidx(L, find);
  c.amt = absidx(L, amt);
  c.count = 0;
  c.npath = 0;
  idx = absidx(L, idx);
  lua_newtable(L);
  c.issues = lua_gettop(L);
  reserve(L, n);
  int t = lua_type(L, idx);
  validate(&c, n, idx, t == LUA_TNONE ? LUA_TNIL : t, 0);
  lua_pushvalue(L, c.amt); /* marked as a JSON array */
  lua_setmetatable(L, c.issues);
}
