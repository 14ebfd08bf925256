/* The builders: s.string{...} ... s.union{...}. Each checks its arguments,
   copies them into a compiled node and returns it as a clank.Schema userdata.
   Misuse raises at the caller, naming the builder and the option. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/json.h"
#include "data/schema_internal.h"
#include "core/values.h"

/* Raises "<where>: <message>" at the builder's caller. */
static int berror(lua_State *L, const char *fmt, ...) {
  va_list ap;
  luaL_where(L, 1);
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_concat(L, 2);
  return lua_error(L);
}

/* ======================================================================
   Arguments
   ====================================================================== */

/* Starts a build: checks that opts holds only allowed names and pushes the
   list that will keep the node's strings and children alive. */
static int begin(lua_State *L, const char *b, int opts, const char *const allowed[]) {
  if (opts && !lua_isnoneornil(L, opts)) {
    if (!lua_istable(L, opts)) berror(L, "%s: options must be a table", b);
    lua_pushnil(L);
    while (lua_next(L, opts)) {
      int known = 0;
      if (lua_type(L, -2) == LUA_TSTRING) {
        size_t len;
        const char *k = lua_tolstring(L, -2, &len);
        for (int i = 0; allowed[i]; i++)
          if (strlen(allowed[i]) == len && memcmp(k, allowed[i], len) == 0) known = 1;
      }
      if (!known) berror(L, "%s: unknown option '%s'", b, luaL_tolstring(L, -2, NULL));
      lua_pop(L, 1);
    }
  }
  lua_newtable(L);
  return lua_gettop(L);
}

/* Keeps the value at idx alive in the list uv. */
static void keep(lua_State *L, int uv, int idx) {
  idx = lua_absindex(L, idx);
  lua_pushvalue(L, idx);
  lua_rawseti(L, uv, (lua_Integer)lua_rawlen(L, uv) + 1);
}

/* Keeps the string on top (popped) and points s at it. */
static void keep_string(lua_State *L, int uv, clank_schema_str_t *s) {
  keep(L, uv, -1);
  s->s = lua_tolstring(L, -1, &s->len);
  lua_pop(L, 1);
}

/* Pushes option k (nil when there are no options). */
static int getopt(lua_State *L, int opts, const char *k) {
  if (!opts || lua_isnoneornil(L, opts)) {
    lua_pushnil(L);
    return LUA_TNIL;
  }
  return lua_getfield(L, opts, k);
}

static void opt_string(lua_State *L, const char *b, int opts, const char *k, int uv,
                       clank_schema_str_t *s) {
  int t = getopt(L, opts, k);
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  if (t != LUA_TSTRING) berror(L, "%s: option '%s' must be a string", b, k);
  keep_string(L, uv, s);
}

static int opt_boolean(lua_State *L, const char *b, int opts, const char *k, int dflt) {
  int t = getopt(L, opts, k), v = dflt;
  if (t == LUA_TBOOLEAN)
    v = lua_toboolean(L, -1);
  else if (t != LUA_TNIL)
    berror(L, "%s: option '%s' must be a boolean", b, k);
  lua_pop(L, 1);
  return v;
}

/* A length bound: a non-negative integer (2.0 accepted). */
static void opt_count(lua_State *L, const char *b, int opts, const char *k, unsigned char *has,
                      clank_schema_num_t *v) {
  int t = getopt(L, opts, k), isnum = 0;
  if (t != LUA_TNIL) {
    lua_Integer i = t == LUA_TNUMBER ? lua_tointegerx(L, -1, &isnum) : 0;
    if (!isnum || i < 0) berror(L, "%s: option '%s' must be a non-negative integer", b, k);
    *has = 1;
    v->isint = 1;
    v->i = i;
  }
  lua_pop(L, 1);
}

/* A number bound: any finite number, kept as given (integer or float). */
static void opt_bound(lua_State *L, const char *b, int opts, const char *k, unsigned char *has,
                      clank_schema_num_t *v) {
  int t = getopt(L, opts, k);
  if (t != LUA_TNIL) {
    if (t != LUA_TNUMBER || (!lua_isinteger(L, -1) && !isfinite(lua_tonumber(L, -1))))
      berror(L, "%s: option '%s' must be a finite number", b, k);
    *has = 1;
    v->isint = lua_isinteger(L, -1);
    v->i = v->isint ? lua_tointeger(L, -1) : 0;
    v->n = v->isint ? 0 : lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
}

static void check_range(lua_State *L, const char *b, const clank_schema_node_t *t) {
  if (t->has_min && t->has_max && clank_schema_numcmp(&t->min, &t->max) > 0)
    berror(L, "%s: option 'min' must not be greater than option 'max'", b);
}

static const clank_schema_node_t *to_schema(lua_State *L, int idx) {
  return luaL_testudata(L, idx, CLANK_SCHEMA_MT);
}

/* ======================================================================
   Nodes
   ====================================================================== */

static void init(clank_schema_node_t *t, int kind) {
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->height = 1;
  t->strict = 1;
}

static void set_height(lua_State *L, const char *b, clank_schema_node_t *t,
                       const clank_schema_node_t *child) {
  if (child->height + 1 > t->height) t->height = child->height + 1;
  if (child->slots > t->slots) t->slots = child->slots; /* own slots added later */
  if (t->height > CLANK_SCHEMA_MAX_HEIGHT)
    berror(L, "%s: schemas nested deeper than %d", b, CLANK_SCHEMA_MAX_HEIGHT);
}

/* Pushes a clank.Schema holding a copy of t plus extra bytes for its
   arrays; uv becomes its uservalue. */
static clank_schema_node_t *new_node(lua_State *L, const clank_schema_node_t *t, int uv,
                                     size_t extra) {
  clank_schema_node_t *n = lua_newuserdatauv(L, sizeof *n + extra, 1);
  *n = *t;
  /* refs are set only once __gc can release them */
  n->msg_min.ref = n->msg_max.ref = n->msg_other.ref = n->expected.ref = LUA_NOREF;
  n->strs_ref = LUA_NOREF;
  luaL_setmetatable(L, CLANK_SCHEMA_MT);
  lua_pushvalue(L, uv);
  lua_setiuservalue(L, -2, 1);
  return n;
}

static void *node_extra(clank_schema_node_t *n) { return n + 1; }

/* n->strs_ref: the list of the n strings at strs (Lua strings already, so
   short ones are the very same objects). */
static void hold_strings(lua_State *L, clank_schema_node_t *n, const clank_schema_str_t *strs,
                         size_t count, size_t stride) {
  lua_createtable(L, (int)count, 0);
  for (size_t i = 0; i < count; i++) {
    const clank_schema_str_t *s = (const void *)((const char *)strs + i * stride);
    lua_pushlstring(L, s->s, s->len);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  n->strs_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

static const char *fmtnum(const clank_schema_num_t *v, char *buf) {
  if (v->isint)
    snprintf(buf, 32, LUA_INTEGER_FMT, (LUAI_UACINT)v->i);
  else
    clank_json_format_number(v->n, buf);
  return buf;
}

/* The string on top (popped) becomes m, held by a registry ref: validation
   pushes it as it is instead of formatting a message per issue. */
static void hold_msg(lua_State *L, clank_schema_msg_t *m) {
  m->s = lua_tolstring(L, -1, &m->len);
  m->ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

/* The messages of the bounds: fmt has one %s, for the bound. */
static void bound_msgs(lua_State *L, clank_schema_node_t *n, const char *fmin, const char *fmax) {
  char buf[32];
  if (n->has_min) {
    lua_pushfstring(L, fmin, fmtnum(&n->min, buf));
    hold_msg(L, &n->msg_min);
  }
  if (n->has_max) {
    lua_pushfstring(L, fmax, fmtnum(&n->max, buf));
    hold_msg(L, &n->msg_max);
  }
}

/* The messages of count bounds (integers, from opt_count): "Must contain at
   least N <noun>s.", the noun singular when N is 1. */
static void count_msgs(lua_State *L, clank_schema_node_t *n, const char *noun) {
  if (n->has_min) {
    lua_pushfstring(L, "Must contain at least %I %s%s.", (LUAI_UACINT)n->min.i, noun,
                    n->min.i == 1 ? "" : "s");
    hold_msg(L, &n->msg_min);
  }
  if (n->has_max) {
    lua_pushfstring(L, "Must contain at most %I %s%s.", (LUAI_UACINT)n->max.i, noun,
                    n->max.i == 1 ? "" : "s");
    hold_msg(L, &n->msg_max);
  }
}

/* "<prefix><s>." as n->msg_other (s may hold any byte). */
static void other_msg(lua_State *L, clank_schema_node_t *n, const char *prefix,
                      const clank_schema_str_t *s) {
  lua_pushstring(L, prefix);
  lua_pushlstring(L, s->s, s->len);
  lua_pushliteral(L, ".");
  lua_concat(L, 3);
  hold_msg(L, &n->msg_other);
}

/* Appends v as JSON (a string, a finite number, a boolean or null). */
static void add_json(lua_State *L, luaL_Buffer *b, int idx) {
  char num[32];
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
      size_t len;
      const unsigned char *s = (const unsigned char *)lua_tolstring(L, idx, &len);
      luaL_addchar(b, '"');
      for (size_t i = 0; i < len; i++) {
        unsigned char c = s[i];
        switch (c) {
          case '"': luaL_addstring(b, "\\\""); break;
          case '\\': luaL_addstring(b, "\\\\"); break;
          case '\b': luaL_addstring(b, "\\b"); break;
          case '\f': luaL_addstring(b, "\\f"); break;
          case '\n': luaL_addstring(b, "\\n"); break;
          case '\r': luaL_addstring(b, "\\r"); break;
          case '\t': luaL_addstring(b, "\\t"); break;
          default:
            if (c < 0x20) {
              snprintf(num, sizeof num, "\\u%04x", c);
              luaL_addstring(b, num);
            } else
              luaL_addchar(b, (char)c);
        }
      }
      luaL_addchar(b, '"');
      break;
    }
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx))
        snprintf(num, sizeof num, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, idx));
      else
        clank_json_format_number(lua_tonumber(L, idx), num);
      luaL_addstring(b, num);
      break;
    case LUA_TBOOLEAN: luaL_addstring(b, lua_toboolean(L, idx) ? "true" : "false"); break;
    default: luaL_addstring(b, "null"); break;
  }
}

/* ======================================================================
   Builders
   ====================================================================== */

static int b_string(lua_State *L) {
  static const char *const allowed[] = {"min", "max", "pattern", "format", "description", NULL};
  const char *b = "s.string";
  clank_schema_node_t t;
  init(&t, CLANK_SK_STRING);
  int uv = begin(L, b, 1, allowed);
  opt_count(L, b, 1, "min", &t.has_min, &t.min);
  opt_count(L, b, 1, "max", &t.has_max, &t.max);
  check_range(L, b, &t);
  opt_string(L, b, 1, "format", uv, &t.format);
  opt_string(L, b, 1, "description", uv, &t.description);
  opt_string(L, b, 1, "pattern", uv, &t.pattern);
  size_t match_size = 0;
  if (t.pattern.s) {
    luaL_Buffer rb;
    luaL_buffinit(L, &rb);
    const char *why = clank_schema_translate_pattern(t.pattern.s, t.pattern.len, &rb);
    if (why) berror(L, "%s: option 'pattern' cannot be expressed in JSON Schema: %s", b, why);
    luaL_pushresult(&rb);
    keep_string(L, uv, &t.regex);
    why = clank_match_size(t.pattern.s, t.pattern.len, &match_size);
    if (why) berror(L, "%s: option 'pattern' is too complex: %s", b, why);
  }
  clank_schema_node_t *n = new_node(L, &t, uv, match_size);
  count_msgs(L, n, "character");
  if (t.pattern.s) { /* matched in linear time, by the node itself */
    n->match = clank_match_compile(t.pattern.s, t.pattern.len, node_extra(n));
    other_msg(L, n, "Must match ", &n->pattern);
  }
  return 1;
}

static int b_number(lua_State *L) {
  static const char *const allowed[] = {"min", "max", "integer", "description", NULL};
  const char *b = "s.number";
  clank_schema_node_t t;
  init(&t, CLANK_SK_NUMBER);
  int uv = begin(L, b, 1, allowed);
  opt_bound(L, b, 1, "min", &t.has_min, &t.min);
  opt_bound(L, b, 1, "max", &t.has_max, &t.max);
  check_range(L, b, &t);
  t.integer = (unsigned char)opt_boolean(L, b, 1, "integer", 0);
  opt_string(L, b, 1, "description", uv, &t.description);
  bound_msgs(L, new_node(L, &t, uv, 0), "Must be at least %s.", "Must be at most %s.");
  return 1;
}

/* boolean and unknown: a description only. */
static int simple(lua_State *L, const char *b, int kind) {
  static const char *const allowed[] = {"description", NULL};
  clank_schema_node_t t;
  init(&t, kind);
  int uv = begin(L, b, 1, allowed);
  opt_string(L, b, 1, "description", uv, &t.description);
  t.nil_ok = kind == CLANK_SK_UNKNOWN;
  new_node(L, &t, uv, 0);
  return 1;
}

static int b_boolean(lua_State *L) { return simple(L, "s.boolean", CLANK_SK_BOOLEAN); }
static int b_unknown(lua_State *L) { return simple(L, "s.unknown", CLANK_SK_UNKNOWN); }

static int b_literal(lua_State *L) {
  static const char *const allowed[] = {"description", NULL};
  const char *b = "s.literal";
  clank_schema_node_t t;
  init(&t, CLANK_SK_LITERAL);
  int uv = begin(L, b, 2, allowed);
  switch (lua_type(L, 1)) {
    case LUA_TSTRING:
      t.lit_type = LUA_TSTRING;
      if (clank_schema_utf8_len(lua_tostring(L, 1), lua_rawlen(L, 1)) < 0)
        berror(L, "%s: value must be valid UTF-8", b);
      lua_pushvalue(L, 1);
      keep_string(L, uv, &t.lit_str);
      break;
    case LUA_TNUMBER:
      t.lit_type = LUA_TNUMBER;
      t.lit_num.isint = lua_isinteger(L, 1);
      t.lit_num.i = t.lit_num.isint ? lua_tointeger(L, 1) : 0;
      t.lit_num.n = t.lit_num.isint ? 0 : lua_tonumber(L, 1);
      if (!t.lit_num.isint && !isfinite(t.lit_num.n)) berror(L, "%s: value must be finite", b);
      break;
    case LUA_TBOOLEAN:
      t.lit_type = LUA_TBOOLEAN;
      t.lit_bool = lua_toboolean(L, 1);
      break;
    default:
      if (!clank_is_null(L, 1))
        berror(L, "%s: value must be a string, a number, a boolean or clank.null", b);
      t.lit_type = CLANK_SK_LITNULL;
      break;
  }
  opt_string(L, b, 2, "description", uv, &t.description);
  luaL_Buffer jb;
  luaL_buffinit(L, &jb);
  add_json(L, &jb, 1);
  luaL_pushresult(&jb);
  keep_string(L, uv, &t.json);
  clank_schema_node_t *n = new_node(L, &t, uv, 0);
  other_msg(L, n, "Expected ", &n->json);
  lua_pushlstring(L, n->json.s, n->json.len);
  hold_msg(L, &n->expected);
  return 1;
}

static int b_enum(lua_State *L) {
  static const char *const allowed[] = {"description", NULL};
  const char *b = "s.enum";
  clank_schema_node_t t;
  init(&t, CLANK_SK_ENUM);
  if (!lua_istable(L, 1)) berror(L, "%s: values must be a non-empty list of strings", b);
  int uv = begin(L, b, 2, allowed);
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1), count = 0;
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    count++;
    lua_pop(L, 1);
  }
  if (n == 0 || count != n) berror(L, "%s: values must be a non-empty list of strings", b);
  lua_newtable(L); /* the values seen, to refuse duplicates */
  int seen = lua_gettop(L);
  luaL_Buffer jb;
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_rawgeti(L, 1, i) != LUA_TSTRING) berror(L, "%s: value %d must be a string", b, (int)i);
    if (clank_schema_utf8_len(lua_tostring(L, -1), lua_rawlen(L, -1)) < 0)
      berror(L, "%s: value %d must be valid UTF-8", b, (int)i);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, seen) != LUA_TNIL)
      berror(L, "%s: duplicate value '%s'", b, lua_tostring(L, -2));
    lua_pop(L, 1);
    keep(L, uv, -1); /* uv[i]: options below may run code that changes the list */
    lua_pushboolean(L, 1);
    lua_rawset(L, seen);
  }
  opt_string(L, b, 2, "description", uv, &t.description);
  luaL_buffinit(L, &jb); /* "a, b, c" for the message */
  for (lua_Integer i = 1; i <= n; i++) {
    if (i > 1) luaL_addstring(&jb, ", ");
    lua_rawgeti(L, uv, i);
    luaL_addvalue(&jb);
  }
  luaL_pushresult(&jb);
  keep_string(L, uv, &t.json);
  t.n = (size_t)n;
  clank_schema_node_t *node = new_node(L, &t, uv, (size_t)n * sizeof(clank_schema_str_t));
  node->values = node_extra(node);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, uv, i);
    node->values[i - 1].s = lua_tolstring(L, -1, &node->values[i - 1].len);
    lua_pop(L, 1);
  }
  other_msg(L, node, "Expected one of: ", &node->json);
  hold_strings(L, node, node->values, node->n, sizeof *node->values);
  return 1;
}

static int b_array(lua_State *L) {
  static const char *const allowed[] = {"min", "max", "description", NULL};
  const char *b = "s.array";
  clank_schema_node_t t;
  init(&t, CLANK_SK_ARRAY);
  const clank_schema_node_t *item = to_schema(L, 1);
  if (!item) berror(L, "%s: item is not a schema", b);
  int uv = begin(L, b, 2, allowed);
  keep(L, uv, 1);
  t.inner = item;
  set_height(L, b, &t, item);
  t.slots += 1 + CLANK_SCHEMA_ITEM_BATCH; /* the array mark, a batch of items */
  opt_count(L, b, 2, "min", &t.has_min, &t.min);
  opt_count(L, b, 2, "max", &t.has_max, &t.max);
  check_range(L, b, &t);
  opt_string(L, b, 2, "description", uv, &t.description);
  count_msgs(L, new_node(L, &t, uv, 0), "item");
  return 1;
}

/* Whether the encoder writes key as it is between its quotes: printable
   ASCII and DEL, but '"' and '\\' (clank_json_escape's plain bytes). */
static int plain_key(const char *key, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)key[i];
    if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') return 0;
  }
  return 1;
}

/* Bits of the keyslot table of n keys: at least twice as many slots. */
static unsigned key_bits(size_t n) {
  unsigned bits = 3;
  while (((size_t)1 << bits) < 2 * n) bits++;
  return bits;
}

/* The encoder's help for each prop of n (sorted): the key as JSON, and the
   table of short keys by address. */
static void index_keys(lua_State *L, clank_schema_node_t *n, int uv) {
  for (size_t i = 0; i < n->n; i++) {
    clank_schema_prop_t *p = &n->props[i];
    if (!plain_key(p->key.s, p->key.len)) continue;
    lua_pushfstring(L, ",\"%s\":", p->key.s); /* no NUL in a plain key */
    keep_string(L, uv, &p->json);
  }
  if (n->n > 64) return; /* never walked by the encoder; validation reads bytes */
  unsigned char *slot = (unsigned char *)(n->props + n->n);
  size_t mask = ((size_t)1 << n->keybits) - 1;
  memset(slot, 0, mask + 1);
  for (size_t i = 0; i < n->n; i++) {
    if (n->props[i].key.len > CLANK_SCHEMA_SHORTLEN) continue; /* found by its bytes */
    size_t h = clank_schema_keyhash(n->props[i].key.s, n->keybits);
    while (slot[h]) h = (h + 1) & mask;
    slot[h] = (unsigned char)(i + 1);
  }
  n->keyslot = slot;
}

static int prop_cmp(const void *a, const void *b) {
  const clank_schema_prop_t *x = a, *y = b;
  return clank_schema_keycmp(x->key.s, x->key.len, y->key.s, y->key.len);
}

static int b_object(lua_State *L) {
  static const char *const allowed[] = {"strict", "description", NULL};
  const char *b = "s.object";
  clank_schema_node_t t;
  init(&t, CLANK_SK_OBJECT);
  if (!lua_istable(L, 1)) berror(L, "%s: shape must be a table", b);
  int uv = begin(L, b, 2, allowed);
  /* keys and schemas go to uv[2i-1], uv[2i] */
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      berror(L, "%s: property keys must be strings (got %s)", b, luaL_tolstring(L, -2, NULL));
    const clank_schema_node_t *child = to_schema(L, -1);
    if (!child) berror(L, "%s: property '%s' is not a schema", b, lua_tostring(L, -2));
    set_height(L, b, &t, child);
    keep(L, uv, -2);
    keep(L, uv, -1);
    t.n++;
    if (!child->nil_ok) t.nrequired++;
    lua_pop(L, 1);
  }
  t.slots += 3; /* a key and a value; a value looked up again */
  t.strict = (unsigned char)opt_boolean(L, b, 2, "strict", 1);
  opt_string(L, b, 2, "description", uv, &t.description);
  if (t.n <= 64) t.keybits = key_bits(t.n);
  size_t slots = t.n <= 64 ? (size_t)1 << t.keybits : 0;
  clank_schema_node_t *n = new_node(L, &t, uv, t.n * sizeof(clank_schema_prop_t) + slots);
  n->props = node_extra(n);
  for (size_t i = 0; i < t.n; i++) {
    lua_rawgeti(L, uv, (lua_Integer)(2 * i + 1));
    n->props[i].key.s = lua_tolstring(L, -1, &n->props[i].key.len);
    n->props[i].json.s = NULL;
    n->props[i].json.len = 0;
    lua_rawgeti(L, uv, (lua_Integer)(2 * i + 2));
    n->props[i].node = lua_touserdata(L, -1);
    lua_pop(L, 2);
  }
  if (t.n > 1) qsort(n->props, t.n, sizeof *n->props, prop_cmp);
  for (size_t i = 0; i < t.n && i < 64; i++)
    if (!n->props[i].node->nil_ok) n->required_mask |= UINT64_C(1) << i;
  index_keys(L, n, uv);
  hold_strings(L, n, &n->props[0].key, n->n, sizeof *n->props);
  return 1;
}

/* optional and nullable. */
static int wrapper(lua_State *L, const char *b, int kind) {
  clank_schema_node_t t;
  init(&t, kind);
  const clank_schema_node_t *inner = to_schema(L, 1);
  if (!inner) berror(L, "%s: inner is not a schema", b);
  int uv = begin(L, b, 0, NULL);
  keep(L, uv, 1);
  t.inner = inner;
  set_height(L, b, &t, inner);
  t.nil_ok = kind == CLANK_SK_OPTIONAL || inner->nil_ok;
  t.optional_key = kind == CLANK_SK_OPTIONAL || inner->optional_key;
  new_node(L, &t, uv, 0);
  return 1;
}

static int b_optional(lua_State *L) { return wrapper(L, "s.optional", CLANK_SK_OPTIONAL); }
static int b_nullable(lua_State *L) { return wrapper(L, "s.nullable", CLANK_SK_NULLABLE); }

static int b_union(lua_State *L) {
  static const char *const allowed[] = {"description", NULL};
  const char *b = "s.union";
  clank_schema_node_t t;
  init(&t, CLANK_SK_UNION);
  if (!lua_istable(L, 1)) berror(L, "%s: members must be a non-empty list of schemas", b);
  int uv = begin(L, b, 2, allowed);
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1), count = 0;
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    count++;
    lua_pop(L, 1);
  }
  if (n == 0 || count != n) berror(L, "%s: members must be a non-empty list of schemas", b);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    const clank_schema_node_t *m = to_schema(L, -1);
    if (!m) berror(L, "%s: member %d is not a schema", b, (int)i);
    set_height(L, b, &t, m);
    if (m->nil_ok) t.nil_ok = 1;
    if (m->optional_key) t.optional_key = 1;
    keep(L, uv, -1);
    lua_pop(L, 1);
  }
  opt_string(L, b, 2, "description", uv, &t.description);
  t.n = (size_t)n;
  clank_schema_node_t *node = new_node(L, &t, uv, (size_t)n * sizeof(clank_schema_node_t *));
  node->members = node_extra(node);
  for (lua_Integer i = 1; i <= n; i++) { /* uv[i], as kept above */
    lua_rawgeti(L, uv, i);
    node->members[i - 1] = lua_touserdata(L, -1);
    lua_pop(L, 1);
  }
  return 1;
}

static const luaL_Reg builders[] = {
    {"string", b_string},     {"number", b_number}, {"boolean", b_boolean},
    {"literal", b_literal},   {"enum", b_enum},     {"unknown", b_unknown},
    {"array", b_array},       {"object", b_object}, {"optional", b_optional},
    {"nullable", b_nullable}, {"union", b_union},   {NULL, NULL}};

void clank_schema_open_builders(lua_State *L) { luaL_setfuncs(L, builders, 0); }
