/* clank_json_encode: canonical JSON — what JSON.stringify prints for the same
   value, with object keys in byte order and no whitespace. Raises on values
   JSON cannot hold; everything it allocates lives on the Lua stack, so the
   error unwinds without leaking (the output buffer belongs to the caller). */
#include <lauxlib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/json.h"
#include "data/rows.h"
#include "data/schema.h"
#include "core/values.h"
#include "util/bytes.h"

#define MAXDEPTH 64

/* How the encoder got to a value: a key or an index in its parent table.
   Kept on the C stack; read only to name the place in an error message and
   to spot a table inside itself. */
typedef struct path_s {
  const struct path_s *up;
  const void *parent;
  const char *key; /* NULL for an array item */
  size_t klen;
  lua_Integer i;
} path_t;

typedef struct {
  lua_State *L;
  clank_buf_t *out;
  const void *mt; /* the array metatable, looked up at the first table with a metatable */
} enc_t;

typedef struct {
  const char *s;
  size_t len;
  lua_Integer
      slot; /* where the key sits in the anchoring list; for few keys, its value's stack index */
} key_t_;

static int is_ident(const char *s, size_t n) {
  if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!(c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))) return 0;
  }
  return 1;
}

/* Raises "clank.json.encode: <what> at a.b[2]" (no place for the top). */
static void encode_error(enc_t *e, const path_t *at, const char *what) {
  lua_State *L = e->L;
  const path_t *steps[MAXDEPTH + 2];
  int n = 0;
  for (const path_t *p = at; p && n < MAXDEPTH + 2; p = p->up) steps[n++] = p;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "clank.json.encode: ");
  luaL_addstring(&b, what);
  if (n > 0) luaL_addstring(&b, " at ");
  while (n-- > 0) {
    const path_t *p = steps[n];
    if (p->key && is_ident(p->key, p->klen)) {
      if (p->up) luaL_addchar(&b, '.');
      luaL_addlstring(&b, p->key, p->klen);
    } else if (p->key) {
      luaL_addstring(&b, "[\"");
      luaL_addlstring(&b, p->key, p->klen);
      luaL_addstring(&b, "\"]");
    } else {
      lua_pushfstring(L, "[%I]", p->i);
      luaL_addvalue(&b);
    }
  }
  luaL_pushresult(&b);
  lua_error(L);
}

static void put(enc_t *e, const void *p, size_t n) {
  if (clank_buf_append(e->out, p, n) != 0) luaL_error(e->L, "clank.json.encode: not enough memory");
}

static void putc_(enc_t *e, char c) {
  if (clank_buf_appendc(e->out, c) != 0) luaL_error(e->L, "clank.json.encode: not enough memory");
}

/* Escapes '"', '\\' and control characters only; checks UTF-8 on the way. */
int clank_json_escape(clank_buf_t *out, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s, *end = p + n, *run = p;
  while (p < end) {
    unsigned c = *p;
    if (c >= 0x80) {
      size_t k = clank_json_utf8_char(p, (size_t)(end - p));
      if (k == 0) return -2;
      p += k;
      continue;
    }
    if (c >= 0x20 && c != '"' && c != '\\') {
      p++;
      continue;
    }
    if (clank_buf_append(out, run, (size_t)(p - run)) != 0) return -1;
    char esc[6] = {'\\', 0, '0', '0', clank_hex_digits[c >> 4], clank_hex_digits[c & 15]};
    switch (c) {
      case '"': esc[1] = '"'; break;
      case '\\': esc[1] = '\\'; break;
      case '\b': esc[1] = 'b'; break;
      case '\f': esc[1] = 'f'; break;
      case '\n': esc[1] = 'n'; break;
      case '\r': esc[1] = 'r'; break;
      case '\t': esc[1] = 't'; break;
      default: esc[1] = 'u'; break;
    }
    if (clank_buf_append(out, esc, esc[1] == 'u' ? 6 : 2) != 0) return -1;
    run = ++p;
  }
  return clank_buf_append(out, run, (size_t)(p - run)) != 0 ? -1 : 0;
}

static void put_string(enc_t *e, const char *s, size_t n, const path_t *at, int iskey) {
  putc_(e, '"');
  int r = clank_json_escape(e->out, s, n);
  if (r == -1) luaL_error(e->L, "clank.json.encode: not enough memory");
  if (r == -2)
    encode_error(e, at,
                 iskey ? "cannot encode a key that is not valid UTF-8"
                       : "cannot encode a string that is not valid UTF-8");
  putc_(e, '"');
}

static void put_number(enc_t *e, int idx, const path_t *at) {
  char s[64];
  if (lua_isinteger(e->L, idx)) { /* the digits by hand: what LUA_INTEGER_FMT prints */
    lua_Integer i = lua_tointeger(e->L, idx);
    if (i < 0) putc_(e, '-');
    if (clank_buf_append_uint(e->out, i < 0 ? 0 - (uint64_t)i : (uint64_t)i) != 0)
      luaL_error(e->L, "clank.json.encode: not enough memory");
    return;
  }
  lua_Number d = lua_tonumber(e->L, idx);
  if (!isfinite(d)) {
    clank_json_format_number(d, s);
    lua_pushfstring(e->L, "cannot encode a non-finite number (%s)", s);
    encode_error(e, at, lua_tostring(e->L, -1));
  }
  put(e, s, clank_json_format_number(d, s));
}

/* Objects with up to FEW string keys are sorted without a Lua list. */
#define FEW 8

static int cmp_keys(const void *a, const void *b) {
  const key_t_ *x = a, *y = b;
  int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

static void encode_value(enc_t *e, int idx, const clank_schema_node_t *node, const path_t *at,
                         int depth);

/* The items 1..n of the table at idx. */
static void put_array(enc_t *e, int idx, lua_Integer n, const clank_schema_node_t *node,
                      const path_t *at, int depth) {
  const clank_schema_node_t *items = node ? clank_schema_node_items(node) : NULL;
  path_t step = {at, lua_topointer(e->L, idx), NULL, 0, 0};
  putc_(e, '[');
  for (lua_Integer i = 1; i <= n; i++) {
    if (i > 1) putc_(e, ',');
    step.i = i;
    lua_rawgeti(e->L, idx, i);
    encode_value(e, lua_gettop(e->L), items, &step, depth);
    lua_pop(e->L, 1);
  }
  putc_(e, ']');
}

/* The n string keys of the table at idx, sorted by bytes, each followed by
   its value. Up to FEW keys come in `few` (the table itself anchors them),
   each with its value on the stack; more are listed (anchored) in the table
   on top of the stack. */
static void put_object(enc_t *e, int idx, lua_Integer n, key_t_ *few,
                       const clank_schema_node_t *node, const path_t *at, int depth) {
  lua_State *L = e->L;
  int keys = lua_gettop(L);
  key_t_ *k = few;
  if (!few) {
    k = lua_newuserdatauv(L, (size_t)n * sizeof *k, 0);
    for (lua_Integer i = 0; i < n; i++) {
      lua_rawgeti(L, keys, i + 1);
      k[i].s = lua_tolstring(L, -1, &k[i].len);
      k[i].slot = i + 1;
      lua_pop(L, 1); /* still held by the list */
    }
  }
  if (n > FEW) {
    qsort(k, (size_t)n, sizeof *k, cmp_keys);
  } else { /* a few keys: insertion sort, no calls through a pointer */
    for (lua_Integer i = 1; i < n; i++) {
      key_t_ x = k[i];
      lua_Integer j = i;
      for (; j > 0 && cmp_keys(&k[j - 1], &x) > 0; j--) k[j] = k[j - 1];
      k[j] = x;
    }
  }
  path_t step = {at, lua_topointer(L, idx), NULL, 0, 0};
  putc_(e, '{');
  for (lua_Integer i = 0; i < n; i++) {
    if (i > 0) putc_(e, ',');
    step.key = k[i].s;
    step.klen = k[i].len;
    put_string(e, k[i].s, k[i].len, &step, 1);
    putc_(e, ':');
    if (few) {
      lua_pushvalue(L, (int)k[i].slot);
    } else {
      lua_rawgeti(L, keys, k[i].slot);
      lua_rawget(L, idx);
    }
    encode_value(e, lua_gettop(L), node ? clank_schema_node_property(node, k[i].s, k[i].len) : NULL,
                 &step, depth);
    lua_pop(L, 1);
  }
  putc_(e, '}');
  lua_settop(L, keys);
}

/* Sorts the table at idx into array or object by its keys (raw: metamethods
   other than the array mark play no part), then writes it. */
static void put_table(enc_t *e, int idx, const clank_schema_node_t *node, const path_t *at,
                      int depth) {
  lua_State *L = e->L;
  if (++depth > MAXDEPTH) encode_error(e, at, "cannot encode a value nested more than 64 deep");
  const void *self = lua_topointer(L, idx);
  for (const path_t *p = at; p; p = p->up)
    if (p->parent == self) encode_error(e, at, "cannot encode a table that contains itself");
  luaL_checkstack(L, FEW + 8, "clank.json.encode");
  int base = lua_gettop(L);
  int marked = 0;
  if (lua_getmetatable(L, idx)) {
    if (e->mt == NULL) { /* the registry keeps it alive while we hold its address */
      clank_push_array_mt(L);
      e->mt = lua_topointer(L, -1);
      lua_pop(L, 1);
    }
    marked = lua_topointer(L, -1) == e->mt;
    lua_pop(L, 1);
  }
  key_t_ few[FEW];
  lua_Integer nstr = 0, nint = 0, max = 0, nother = 0;
  int other_type = LUA_TNIL, list = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) == LUA_TSTRING) {
      if (!list && nstr < FEW) { /* a small object's keys need no list */
        lua_insert(L, -2);       /* its value stays, below the key */
        few[nstr].s = lua_tolstring(L, -1, &few[nstr].len);
        few[nstr++].slot = lua_gettop(L) - 1;
        continue;
      }
      lua_pop(L, 1);
      if (!list) { /* the string keys, anchored while they are sorted */
        lua_createtable(L, 2 * FEW, 0);
        lua_insert(L, -2);
        list = lua_gettop(L) - 1;
        for (lua_Integer i = 0; i < nstr; i++) {
          lua_pushlstring(L, few[i].s, few[i].len);
          lua_rawseti(L, list, i + 1);
        }
      }
      lua_pushvalue(L, -1);
      lua_rawseti(L, list, ++nstr);
      continue;
    }
    lua_pop(L, 1);
    if (lua_isinteger(L, -1) && lua_tointeger(L, -1) > 0) {
      nint++;
      if (lua_tointeger(L, -1) > max) max = lua_tointeger(L, -1);
    } else {
      nother++;
      other_type = lua_type(L, -1);
    }
  }
  if (marked) {
    if (nstr || nother) encode_error(e, at, "cannot encode an array with a key that is not 1..n");
    if (max != nint) encode_error(e, at, "cannot encode a sparse array (missing items)");
    put_array(e, idx, max, node, at, depth);
  } else if (nstr + nint + nother == 0) {
    put(e, node && clank_schema_node_is_array(node) ? "[]" : "{}", 2);
  } else if (nstr && (nint || nother)) {
    encode_error(e, at, "cannot encode a table with both string and non-string keys");
  } else if (nstr) {
    put_object(e, idx, nstr, list ? NULL : few, node, at, depth);
  } else if (nother) {
    lua_pushfstring(L, "cannot encode a table with a %s key", lua_typename(L, other_type));
    encode_error(e, at, lua_tostring(L, -1));
  } else if (max != nint) {
    encode_error(e, at, "cannot encode a table whose integer keys are not 1..n");
  } else {
    put_array(e, idx, max, node, at, depth);
  }
  lua_settop(L, base); /* the values a few keys kept, the list of many */
}

static void encode_value(enc_t *e, int idx, const clank_schema_node_t *node, const path_t *at,
                         int depth) {
  lua_State *L = e->L;
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, idx, &n);
      put_string(e, s, n, at, 0);
      return;
    }
    case LUA_TNUMBER: put_number(e, idx, at); return;
    case LUA_TBOOLEAN:
      if (lua_toboolean(L, idx))
        put(e, "true", 4);
      else
        put(e, "false", 5);
      return;
    case LUA_TTABLE: put_table(e, idx, node, at, depth); return;
    case LUA_TUSERDATA:
      if (clank_rows_at(L, idx)) { /* db:queryAs's rows: their list */
        luaL_checkstack(L, 2, "clank.json.encode");
        clank_rows_push_list(L, idx);
        put_table(e, lua_gettop(L), node, at, depth);
        lua_pop(L, 1);
        return;
      }
      break;
    case LUA_TLIGHTUSERDATA:
      if (clank_is_null(L, idx)) {
        put(e, "null", 4);
        return;
      }
      break;
    default: break;
  }
  if (lua_isnoneornil(L, idx))
    lua_pushliteral(L, "cannot encode nil");
  else
    lua_pushfstring(L, "cannot encode a %s", luaL_typename(L, idx));
  encode_error(e, at, lua_tostring(L, -1));
}

void clank_json_encode_node(lua_State *L, int idx, const clank_schema_node_t *node,
                            clank_buf_t *out) {
  idx = lua_absindex(L, idx);
  enc_t e = {L, out, NULL};
  encode_value(&e, idx, node, NULL, 0);
}

void clank_json_encode(lua_State *L, int idx, int schema_idx, clank_buf_t *out) {
  const clank_schema_node_t *node = schema_idx ? clank_schema_node(L, schema_idx) : NULL;
  clank_json_encode_node(L, idx, node, out);
}
