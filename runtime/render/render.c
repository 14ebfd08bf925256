/* clank.render_core: the walk of clank.render (SPEC §8, §11), an element tree to HTML.

   lua/clank/ui/render.lua keeps the Lua API and makes one renderer, once:
   renderer{ element, raw, actionName, confirm, valueError } — the element and raw
   metatables, and Lua helpers for the rare cases (an action object's name,
   data-clank-confirm, the name of a value no attribute can take). They become the renderer's
   upvalues. The output and every error message are those of the Lua renderer this replaced
   (spec/helpers/render_reference.lua; spec/unit/render/render_c_spec.lua compares the two), and
   each check runs where it ran there, so a tree with several faults raises the same one. */
#include <lauxlib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/json.h"
#include "render/render_internal.h"
#include "core/values.h"

#define STATE_MT "clank.render.State"

/* ---------------------------------------------------------------- shared helpers */

void clank_render_fail(lua_State *L, int n) {
  lua_concat(L, n);
  lua_error(L);
}

void clank_render_fail_lit(lua_State *L, const char *msg) {
  lua_pushstring(L, msg);
  lua_error(L);
}

void clank_render_fail_with(lua_State *L, const char *a, const char *s, size_t n, const char *b) {
  lua_pushstring(L, a);
  lua_pushlstring(L, s, n);
  lua_pushstring(L, b);
  clank_render_fail(L, 3);
}

void clank_render_no_memory(lua_State *L) {
  clank_render_fail_lit(L, "clank.render: not enough memory");
}

size_t clank_render_format_number(lua_State *L, int idx, char *s) {
  if (!lua_isinteger(L, idx)) return clank_json_format_number(lua_tonumber(L, idx), s);
  lua_Integer i = lua_tointeger(L, idx);
  unsigned long long u = i < 0 ? 0ull - (unsigned long long)i : (unsigned long long)i;
  char d[24];
  size_t k = sizeof d, n = 0;
  do {
    d[--k] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (i < 0) s[n++] = '-';
  memcpy(s + n, d + k, sizeof d - k);
  n += sizeof d - k;
  s[n] = '\0';
  return n;
}

int clank_render_has_mt(lua_State *L, int idx, int uv) {
  if (!lua_getmetatable(L, idx)) return 0;
  int yes = lua_rawequal(L, -1, RUV(uv));
  lua_pop(L, 1);
  return yes;
}

int clank_render_props_plain(lua_State *L, int props) {
  if (!lua_getmetatable(L, props)) return 1;
  lua_pop(L, 1);
  return 0;
}

static const char escapes[256][8] = {
    ['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;"};

void clank_render_escaped(clank_render_t *r, const char *s, size_t n) {
  clank_buf_t *out = &r->out;
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    const char *e = escapes[(unsigned char)s[i]];
    if (e[0] == '\0') continue;
    size_t m = strlen(e);
    if (clank_buf_reserve(out, i - run + m) != 0) clank_render_no_memory(r->L);
    memcpy(out->data + out->len, s + run, i - run);
    out->len += i - run;
    memcpy(out->data + out->len, e, m);
    out->len += m;
    run = i + 1;
  }
  clank_render_append(r, out, s + run, n - run);
}

/* ---------------------------------------------------------------- the walk */

static void put(clank_render_t *r, const char *p, size_t n) {
  clank_render_append(r, &r->out, p, n);
}
#define PUT_LIT(r, s) put(r, s, sizeof(s) - 1)

static int eq(const char *s, size_t n, const char *lit, size_t m) {
  return n == m && memcmp(s, lit, n) == 0;
}
#define EQ(s, n, lit) eq(s, n, lit, sizeof(lit) - 1)

static unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c | 0x20 : c; }

/* s lower-cased equals lit. */
static int eq_lower(const char *s, size_t n, const char *lit, size_t m) {
  if (n != m) return 0;
  for (size_t i = 0; i < n; i++)
    if (lower((unsigned char)s[i]) != (unsigned char)lit[i]) return 0;
  return 1;
}
#define EQ_LOWER(s, n, lit) eq_lower(s, n, lit, sizeof(lit) - 1)

/* Tag names: a letter, then letters, digits and dashes (custom elements). */
static int valid_tag(const char *s, size_t n) {
  if (n == 0 || (unsigned char)((s[0] | 0x20) - 'a') >= 26) return 0;
  for (size_t i = 1; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if ((unsigned char)((c | 0x20) - 'a') >= 26 && (unsigned char)(c - '0') >= 10 && c != '-')
      return 0;
  }
  return 1;
}

/* Elements without a closing tag (compared lower-cased). */
static int is_void(const char *t, size_t n) {
  static const char *const tags[] = {"area",  "base", "br",   "col",    "embed", "hr",  "img",
                                     "input", "link", "meta", "source", "track", "wbr", NULL};
  if (n < 2 || n > 6) return 0;
  for (const char *const *v = tags; *v; v++)
    if (lower((unsigned char)t[0]) == (unsigned char)(*v)[0] && eq_lower(t, n, *v, strlen(*v)))
      return 1;
  return 0;
}

static void emit(clank_render_t *r, int idx, int depth, int sel, int live);
static void emit_element_node(clank_render_t *r, int idx, int top, int depth, int sel, int live);
static void emit_element(clank_render_t *r, int tag, int props, int children, int depth, int sel,
                         int live);

static void nested_too_deeply(lua_State *L) {
  clank_render_fail_lit(L, "clank.render: elements nested too deeply");
}

static void room(lua_State *L, int n) {
  if (!lua_checkstack(L, n)) clank_render_fail_lit(L, "clank.render: stack overflow");
}

/* The length (#) of children, a table most often; meta: index it through metamethods. */
static lua_Integer children_len(lua_State *L, int children, int *meta) {
  switch (lua_type(L, children)) {
    case LUA_TTABLE:
      *meta = lua_getmetatable(L, children);
      if (!*meta) return (lua_Integer)lua_rawlen(L, children);
      lua_pop(L, 1);
      lua_len(L, children);
      lua_Integer n = lua_tointeger(L, -1);
      lua_pop(L, 1);
      return n;
    case LUA_TSTRING: *meta = 1; return (lua_Integer)lua_rawlen(L, children);
    default:
      lua_pushfstring(L, "attempt to get length of a %s value (field 'children')",
                      luaL_typename(L, children));
      lua_error(L);
      return 0;
  }
}

/* The selected values of a select's value prop: a set of strings (and of whatever else its
   list holds), pushed. */
static void selected_set(clank_render_t *r, int v) {
  lua_State *L = r->L;
  char s[32];
  lua_createtable(L, 0, 0);
  int set = lua_gettop(L);
  if (lua_type(L, v) == LUA_TTABLE) {
    for (lua_Integer i = 1; lua_geti(L, v, i) != LUA_TNIL; i++) {
      if (lua_type(L, -1) == LUA_TNUMBER) {
        size_t n = clank_render_format_number(L, -1, s);
        lua_pop(L, 1);
        lua_pushlstring(L, s, n);
      }
      lua_pushboolean(L, 1);
      lua_rawset(L, set);
    }
    lua_pop(L, 1);
  } else if (lua_type(L, v) == LUA_TSTRING) {
    lua_pushvalue(L, v);
    lua_pushboolean(L, 1);
    lua_rawset(L, set);
  } else if (lua_type(L, v) == LUA_TNUMBER) {
    size_t n = clank_render_format_number(L, v, s);
    lua_pushlstring(L, s, n);
    lua_pushboolean(L, 1);
    lua_rawset(L, set);
  }
}

/* An option under a select with a value: a copy of its props, made the way the Lua renderer
   made it (so that it iterates in the same order), selected exactly when its value (or
   without one, its text) is chosen. Pushes the copy. */
static void option_props(clank_render_t *r, int props, int children, int sel) {
  lua_State *L = r->L;
  room(L, 8);
  if (lua_type(L, props) != LUA_TTABLE) {
    lua_pushfstring(L, "bad argument #1 to 'for iterator' (table expected, got %s)",
                    luaL_typename(L, props));
    lua_error(L);
  }
  lua_createtable(L, 0, 0);
  int copy = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, props)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, copy);
  }
  lua_pushvalue(L, RUV(RUV_VALUE));
  lua_rawget(L, copy);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    if (lua_type(L, children) == LUA_TTABLE) {
      for (lua_Integer i = 1; lua_geti(L, children, i) != LUA_TNIL; i++) {
        if (lua_type(L, -1) == LUA_TSTRING) {
          luaL_addvalue(&b);
        } else if (lua_type(L, -1) == LUA_TNUMBER) {
          char s[32];
          size_t n = clank_render_format_number(L, -1, s);
          lua_pop(L, 1);
          luaL_addlstring(&b, s, n);
        } else {
          lua_pop(L, 1);
        }
      }
      lua_pop(L, 1);
    }
    luaL_pushresult(&b);
  } else if (lua_type(L, -1) == LUA_TNUMBER) {
    char s[32];
    size_t n = clank_render_format_number(L, -1, s);
    lua_pop(L, 1);
    lua_pushlstring(L, s, n);
  }
  int selected = lua_rawget(L, sel) == LUA_TBOOLEAN && lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_pushvalue(L, RUV(RUV_SELECTED));
  lua_pushboolean(L, selected);
  lua_rawset(L, copy);
}

/* The set of one list's keys: r->seen[base .. base + size), made at its first key. */
typedef struct {
  size_t base, size, bytes;
} key_set_t;

static uint32_t key_hash(const char *k, size_t n) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 16777619u;
  return h;
}

/* More children than any page holds: a length a metamethod made up (the set is sized by it). */
#define MAX_KEYED_CHILDREN ((lua_Integer)1 << 24)

/* Adds k to set (of a list of len children) → 0, or 1 when it is there already. */
static int key_seen(clank_render_t *r, key_set_t *set, lua_Integer len, const char *k, size_t n) {
  if (set->size == 0) {
    if (len > MAX_KEYED_CHILDREN) clank_render_fail_lit(r->L, "clank.render: too many children");
    size_t size = 8;
    while (size < 2 * (size_t)len) size *= 2;
    if (r->seen_cap - r->seen_top < size) {
      size_t cap = r->seen_cap ? r->seen_cap : 64;
      while (cap - r->seen_top < size) cap *= 2;
      clank_render_seen_t *grown = realloc(r->seen, cap * sizeof *grown);
      if (!grown) clank_render_no_memory(r->L);
      r->seen = grown;
      r->seen_cap = cap;
    }
    set->base = r->seen_top;
    set->size = size;
    set->bytes = r->keybytes.len;
    memset(r->seen + set->base, 0, size * sizeof *r->seen);
    r->seen_top += size;
  }
  clank_render_seen_t *t = r->seen + set->base;
  size_t mask = set->size - 1, i = key_hash(k, n) & mask;
  while (t[i].used) {
    if (t[i].len == n && memcmp(r->keybytes.data + t[i].off, k, n) == 0) return 1;
    i = (i + 1) & mask;
  }
  t[i].used = 1;
  t[i].off = r->keybytes.len;
  t[i].len = n;
  clank_render_append(r, &r->keybytes, k, n);
  return 0;
}

/* The key of the element at c (top: the stack top), when it has a string or an integer one
   (any other raises when the element's attributes are read): pushed as a string at top + 1 →
   1; else the stack is left at top → 0. */
static int push_key(clank_render_t *r, int c, int top) {
  lua_State *L = r->L;
  lua_pushvalue(L, RUV(RUV_PROPS));
  if (lua_rawget(L, c) != LUA_TTABLE) {
    lua_settop(L, top);
    return 0;
  }
  lua_pushvalue(L, RUV(RUV_KEY));
  int type = lua_rawget(L, top + 1);
  if (type == LUA_TNUMBER && lua_isinteger(L, -1)) {
    lua_pushfstring(L, "%I", (LUAI_UACINT)lua_tointeger(L, -1));
  } else if (type != LUA_TSTRING) {
    lua_settop(L, top);
    return 0;
  }
  lua_replace(L, top + 1); /* the key, as a string, in place of the props */
  lua_settop(L, top + 1);
  return 1;
}

/* The key of the element child at c (top: the stack top), pushed (push_key), which stays
   until the child is written; unique among the children of parent (the set seen, of a list of len;
   ptag names the parent, or NULL for a list); in live renders, the child's
   segment of the path. Returns the stack top. */
static int child_key(clank_render_t *r, int c, int top, key_set_t *seen, lua_Integer len, int level,
                     int live, const char *ptag, size_t ptlen) {
  lua_State *L = r->L;
  if (!push_key(r, c, top)) return top;
  size_t kn;
  const char *k = lua_tolstring(L, top + 1, &kn);
  if (key_seen(r, seen, len, k, kn)) {
    lua_pushliteral(L, "clank.render: duplicate key \"");
    lua_pushvalue(L, top + 1);
    if (ptag) {
      lua_pushliteral(L, "\" among the children of <");
      lua_pushlstring(L, ptag, ptlen);
      lua_pushliteral(L, ">");
    } else {
      lua_pushliteral(L, "\" among the elements of a list");
      lua_pushliteral(L, "");
      lua_pushliteral(L, "");
    }
    clank_render_fail(L, 5);
  }
  if (live) {
    r->keys[level] = k;
    r->keylens[level] = kn;
    clank_render_path_changed(r, level);
  }
  return top + 1;
}

/* The children of an element or the items of a list (at depth + 1), of the element ptag (NULL:
   a list). A tr directly under a table is written inside the tbody an HTML parser would imply;
   keys still count the server's children. Live: path[level] is the index of the element child
   being written, keys[level] its key when it is keyed. */
static void emit_children(clank_render_t *r, int children, int sel, int depth, int live,
                          int in_table, const char *ptag, size_t ptlen) {
  lua_State *L = r->L;
  int meta;
  lua_Integer len = children_len(L, children, &meta);
  int level = 0, tbody = 0, n = 0;
  if (live) {
    level = r->level + 1;
    if (level > CLANK_RENDER_MAXLEVEL) nested_too_deeply(L);
    r->level = level;
  }
  key_set_t seen = {0, 0, 0}; /* the keys of the element children, when one has a key */
  int c = lua_gettop(L) + 1;
  for (lua_Integer i = 1; i <= len; i++) {
    int type = meta ? lua_geti(L, children, i) : lua_rawgeti(L, children, i);
    if (type == LUA_TSTRING && depth < CLANK_RENDER_MAXDEPTH) { /* text, most often */
      size_t tn;
      const char *text = lua_tolstring(L, c, &tn);
      clank_render_escaped(r, text, tn);
      lua_settop(L, c - 1);
      continue;
    }
    int top = c, el = 0; /* the stack top, kept by hand */
    if (type == LUA_TTABLE && lua_getmetatable(L, c)) el = lua_rawequal(L, ++top, RUV(RUV_ELEMENT));
    const char *tag = NULL;
    size_t tlen = 0;
    int tag_at = 0;
    if (el) {
      if (live) {
        r->path[level] = n;
        clank_render_path_changed(r, level);
      }
      n++;
      top = child_key(r, c, top, &seen, len, level, live, ptag, ptlen);
      if (in_table || sel) {
        lua_pushvalue(L, RUV(RUV_TAG));
        if (lua_rawget(L, c) == LUA_TSTRING) tag = lua_tolstring(L, -1, &tlen);
        tag_at = ++top;
      }
      if (in_table) {
        if (tag == NULL) {
          lua_pushstring(L, "clank.render: invalid tag name: ");
          luaL_tolstring(L, tag_at, NULL);
          clank_render_fail(L, 2);
        }
        int tr = EQ_LOWER(tag, tlen, "tr");
        if (tr && !tbody) {
          PUT_LIT(r, "<tbody>");
          tbody = 1;
        } else if (!tr && tbody) {
          PUT_LIT(r, "</tbody>");
          tbody = 0;
        }
      }
    }
    if (sel && el && tag && EQ(tag, tlen, "option")) {
      lua_pushvalue(L, RUV(RUV_PROPS));
      lua_rawget(L, c);
      lua_pushvalue(L, RUV(RUV_CHILDREN));
      lua_rawget(L, c);
      option_props(r, top + 1, top + 2, sel);
      if (depth + 1 > CLANK_RENDER_MAXDEPTH) nested_too_deeply(L);
      emit_element(r, tag_at, top + 3, top + 2, depth + 1, 0, live);
    } else if (el) {
      emit_element_node(r, c, top, depth + 1, sel && tag && EQ(tag, tlen, "optgroup") ? sel : 0,
                        live);
    } else {
      emit(r, c, depth + 1, 0, live);
    }
    if (live) {
      r->level = level;
      r->keys[level] = NULL; /* its key string goes with it */
      clank_render_path_changed(r, level);
    }
    lua_settop(L, c - 1); /* the child and whatever writing it left */
  }
  if (live) r->level = level - 1;
  if (tbody) PUT_LIT(r, "</tbody>");
  lua_settop(L, c - 1);
  if (seen.size) { /* this list's set goes (those of lists inside it went before) */
    r->seen_top = seen.base;
    r->keybytes.len = seen.bytes;
  }
}

/* An element: its tag, props and children at those stack indexes. Like every emit function,
   it may leave values above the stack top it found: the loop over children drops them. */
static void emit_element(clank_render_t *r, int tag, int props, int children, int depth, int sel,
                         int live) {
  lua_State *L = r->L;
  room(L, 40); /* for this element's attributes and the loop over its children */
  size_t tlen = 0;
  const char *t = lua_type(L, tag) == LUA_TSTRING ? lua_tolstring(L, tag, &tlen) : NULL;
  if (t == NULL || !valid_tag(t, tlen)) {
    lua_pushstring(L, "clank.render: invalid tag name: ");
    luaL_tolstring(L, tag, NULL);
    clank_render_fail(L, 2);
  }
  clank_render_attributes(r, props, t, tlen, live);
  if (clank_buf_reserve(&r->out, tlen + 1) != 0) clank_render_no_memory(L);
  r->out.data[r->out.len++] = '<';
  put(r, t, tlen);
  clank_render_write_attributes(r);
  put(r, ">", 1);
  if (is_void(t, tlen)) {
    int meta;
    if (children_len(L, children, &meta) > 0)
      clank_render_fail_with(L, "clank.render: <", t, tlen, "> cannot have children");
    return;
  }
  int textarea = EQ(t, tlen, "textarea"), select = EQ(t, tlen, "select");
  int value = 0;
  if (textarea || select) { /* props.value */
    lua_pushvalue(L, RUV(RUV_VALUE));
    if (clank_render_props_plain(L, props))
      lua_rawget(L, props);
    else
      lua_gettable(L, props);
    value = lua_gettop(L);
  }
  if (textarea && !lua_isnil(L, value) && !clank_is_null(L, value)) {
    emit(r, value, depth + 1, 0, 0);
  } else if (select && !lua_isnil(L, value)) {
    selected_set(r, value);
    emit_children(r, children, value + 1, depth, live, 0, t, tlen);
  } else {
    emit_children(r, children, sel, depth, live, EQ_LOWER(t, tlen, "table"), t, tlen);
  }
  if (clank_buf_reserve(&r->out, tlen + 3) != 0) clank_render_no_memory(L);
  memcpy(r->out.data + r->out.len, "</", 2);
  memcpy(r->out.data + r->out.len + 2, t, tlen);
  r->out.data[r->out.len + 2 + tlen] = '>';
  r->out.len += tlen + 3;
}

/* A table that is neither a raw node nor an element: a mounted view (node:tree()), or it
   cannot be rendered. */
static void emit_view(clank_render_t *r, int idx, int depth, int live) {
  lua_State *L = r->L;
  lua_pushvalue(L, RUV(RUV_TREE));
  if (lua_gettable(L, idx) != LUA_TFUNCTION)
    clank_render_fail_lit(L, "clank.render: cannot render a table");
  lua_pushvalue(L, idx);
  lua_call(L, 1, 1);
  emit(r, lua_gettop(L), depth + 1, 0, live);
  lua_pop(L, 1);
}

/* Whether the element at idx is one whose HTML is kept: a component's tree in a live render
   given fragments, outside a select (whose value changes its options). Then r->where holds
   where it is written, "path depth", and the HTML kept for it last time, if any, is pushed
   (*fragment: 1, else 0). An element with kept HTML was a component's tree: the set of those
   (memo.outputs, every session's: a lookup is a cache miss) is asked only for the others. */
static int kept(clank_render_t *r, int idx, int depth, int sel, int live, int *fragment) {
  lua_State *L = r->L;
  *fragment = 0;
  if (!live || !r->fragments || sel) return 0;
  lua_pushvalue(L, idx);
  if (lua_rawget(L, r->fragments) == LUA_TSTRING) {
    *fragment = 1;
  } else {
    lua_pop(L, 1);
    lua_pushvalue(L, idx);
    int yes = lua_rawget(L, r->outputs) != LUA_TNIL;
    lua_pop(L, 1);
    if (!yes) return 0;
  }
  clank_render_path(r, &r->where);
  clank_render_append(r, &r->where, " ", 1);
  if (clank_buf_append_uint(&r->where, (uint64_t)depth) != 0) clank_render_no_memory(L);
  return 1;
}

/* The HTML kept for an element (at the stack top), if it was kept where r->where says: written
   again → 1; else 0. No allocation: this is every unchanged row of a list. */
static int write_kept(clank_render_t *r) {
  lua_State *L = r->L;
  size_t wn = r->where.len, fn;
  const char *w = r->where.data;
  const char *f = lua_tolstring(L, -1, &fn);
  if (fn > wn && f[wn] == '\n' && memcmp(f, w, wn) == 0) {
    put(r, f + wn + 1, fn - wn - 1);
    return 1;
  }
  return 0;
}

/* Keeps the HTML written for the element at idx since start, with its "path depth" at where. */
static void keep(clank_render_t *r, int idx, int where, size_t start) {
  lua_State *L = r->L;
  luaL_Buffer b;
  size_t wn;
  const char *w = lua_tolstring(L, where, &wn);
  lua_pushvalue(L, idx);
  luaL_buffinit(L, &b);
  luaL_addlstring(&b, w, wn);
  luaL_addchar(&b, '\n');
  luaL_addlstring(&b, r->out.data + start, r->out.len - start);
  luaL_pushresult(&b);
  lua_rawset(L, r->fragments);
}

/* An element node (its metatable is the element one); top is the stack top. */
static void emit_element_node(clank_render_t *r, int idx, int top, int depth, int sel, int live) {
  lua_State *L = r->L;
  if (depth > CLANK_RENDER_MAXDEPTH) nested_too_deeply(L);
  lua_pushvalue(L, RUV(RUV_TAG));
  int type = lua_rawget(L, idx);
  if (type == LUA_TNIL || (type == LUA_TBOOLEAN && !lua_toboolean(L, -1))) {
    lua_settop(L, top);
    emit_view(r, idx, depth, live);
    return;
  }
  int fragment = 0, where = 0;
  int is_kept = type == LUA_TSTRING && kept(r, idx, depth, sel, live, &fragment);
  if (is_kept) {
    int hit = fragment && write_kept(r);
    if (fragment) lua_pop(L, 1);
    if (hit) return;
    /* kept while its children are written (theirs use r->where) */
    lua_pushlstring(L, r->where.data, r->where.len);
    where = lua_gettop(L);
  }
  size_t start = r->out.len;
  int at = lua_gettop(L);
  lua_pushvalue(L, RUV(RUV_PROPS));
  lua_rawget(L, idx);
  lua_pushvalue(L, RUV(RUV_CHILDREN));
  lua_rawget(L, idx);
  emit_element(r, top + 1, at + 1, at + 2, depth, sel, live);
  if (where) keep(r, idx, where, start);
}

/* A table node: a raw node, an element (any table with a tag), a list or a mounted view. */
static void emit_table(clank_render_t *r, int idx, int depth, int sel, int live) {
  lua_State *L = r->L;
  room(L, 40); /* for a list's loop, or an element's tag, props and children */
  int top = lua_gettop(L);
  int meta = lua_getmetatable(L, idx);
  if (meta && lua_rawequal(L, -1, RUV(RUV_ELEMENT))) {
    lua_settop(L, top);
    emit_element_node(r, idx, top, depth, sel, live);
    return;
  }
  if (meta && lua_rawequal(L, -1, RUV(RUV_RAW))) {
    lua_pushvalue(L, RUV(RUV_HTML));
    switch (lua_rawget(L, idx)) {
      case LUA_TSTRING:
      case LUA_TNUMBER: {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        put(r, s, n);
        break;
      }
      case LUA_TNIL: break; /* nothing, as table.concat saw it */
      default:
        lua_pushfstring(L, "invalid value (at index %d) in table for 'concat'", 1);
        lua_error(L);
    }
    lua_settop(L, top);
    return;
  }
  lua_settop(L, top);
  lua_pushvalue(L, RUV(RUV_TAG));
  if (meta ? lua_gettable(L, idx) : lua_rawget(L, idx)) {
    if (lua_toboolean(L, -1)) { /* a table with a tag is written as an element */
      lua_pushvalue(L, RUV(RUV_PROPS));
      meta ? lua_gettable(L, idx) : lua_rawget(L, idx);
      lua_pushvalue(L, RUV(RUV_CHILDREN));
      meta ? lua_gettable(L, idx) : lua_rawget(L, idx);
      emit_element(r, top + 1, top + 2, top + 3, depth, sel, live);
      lua_settop(L, top);
      return;
    }
  }
  lua_settop(L, top);
  if (!meta)
    emit_children(r, idx, 0, depth, live, 0, NULL, 0); /* a list */
  else
    emit_view(r, idx, depth, live);
}

static void emit(clank_render_t *r, int idx, int depth, int sel, int live) {
  lua_State *L = r->L;
  if (depth > CLANK_RENDER_MAXDEPTH) nested_too_deeply(L);
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, idx, &n);
      clank_render_escaped(r, s, n);
      return;
    }
    case LUA_TNUMBER: {
      char s[32];
      put(r, s, clank_render_format_number(L, idx, s));
      return;
    }
    case LUA_TTABLE: emit_table(r, idx, depth, sel, live); return;
    case LUA_TNIL:
    case LUA_TBOOLEAN: return;
    default:
      lua_pushfstring(L, "clank.render: cannot render a %s", luaL_typename(L, idx));
      lua_error(L);
  }
}

/* ---------------------------------------------------------------- the module */

static void free_state(clank_render_t *r) {
  clank_buf_free(&r->out);
  clank_buf_free(&r->action);
  clank_buf_free(&r->on);
  clank_buf_free(&r->key);
  clank_buf_free(&r->where);
  clank_buf_free(&r->pathtext);
  clank_buf_free(&r->keybytes);
  free(r->attrs);
  free(r->events);
  free(r->seen);
  r->attrs = NULL;
  r->events = NULL;
  r->seen = NULL;
  r->cap = r->evcap = r->nattrs = r->nevents = r->seen_top = r->seen_cap = 0;
}

/* A reused state is ready for the next render: what it holds stays allocated, unless a large
   page made it large. */
#define KEEP_OUT_BYTES (256 * 1024)
static void reset_state(clank_render_t *r) {
  if (r->out.cap > KEEP_OUT_BYTES) clank_buf_free(&r->out);
  if (r->seen_cap > 4096 || r->keybytes.cap > 65536) {
    free(r->seen);
    r->seen = NULL;
    r->seen_cap = 0;
    clank_buf_free(&r->keybytes);
  }
  clank_buf_reset(&r->out);
  clank_buf_reset(&r->action);
  clank_buf_reset(&r->on);
  clank_buf_reset(&r->key);
  clank_buf_reset(&r->where);
  clank_buf_reset(&r->pathtext);
  clank_buf_reset(&r->keybytes);
  r->pathvalid = 0;
  r->nattrs = r->nevents = r->seen_top = 0;
  r->fragments = r->outputs = r->level = 0;
  r->busy = 0;
}

static int state_gc(lua_State *L) {
  free_state(luaL_checkudata(L, 1, STATE_MT));
  return 0;
}

/* The element node at 1 (a component's tree) written where a fragment says the one it replaces
   was, a[0..an) "path depth": the text of the levels above is taken as it is, the element's
   own segment is its key, or the index there when it has none, as its parent would write it.
   → 1, its HTML in r->out, when the fragment it is kept with says it was written at exactly
   a; else 0 (another key or index, a hole in the path, not a component's tree). */
static int emit_at(clank_render_t *r, const char *a, size_t an) {
  lua_State *L = r->L;
  const char *space = memchr(a, ' ', an);
  if (!space || !r->fragments || !clank_render_has_mt(L, 1, RUV_ELEMENT)) return 0;
  size_t pn = (size_t)(space - a), prefix = 0;
  int level = 1, depth = 0;
  for (size_t i = 0; i < pn; i++) {
    if (a[i] == '?') return 0;
    if (a[i] == '.') {
      level++;
      prefix = i;
    }
  }
  for (const char *d = space + 1; d < a + an; d++) {
    if (*d < '0' || *d > '9' || depth > CLANK_RENDER_MAXDEPTH) return 0;
    depth = depth * 10 + (*d - '0');
  }
  if (level > CLANK_RENDER_MAXLEVEL || depth < 1 || depth > CLANK_RENDER_MAXDEPTH) return 0;
  clank_buf_reset(&r->pathtext);
  clank_render_append(r, &r->pathtext, a, prefix);
  r->pathlen[level - 1] = prefix;
  r->pathhole[level - 1] = 0;
  r->pathvalid = level - 1;
  /* the element's own segment: its key, as child_key reads it, else the index there */
  const char *own = level > 1 ? a + prefix + 1 : a;
  size_t on = (size_t)(space - own);
  int top = lua_gettop(L);
  if (push_key(r, 1, top)) {
    r->keys[level] = lua_tolstring(L, -1, &r->keylens[level]); /* stays on the stack */
    r->path[level] = 0;
  } else {
    int index = 0;
    for (size_t i = 0; i < on; i++) {
      if (own[i] < '0' || own[i] > '9' || index > 100000000) return 0;
      index = index * 10 + (own[i] - '0');
    }
    if (on == 0) return 0;
    r->keys[level] = NULL;
    r->path[level] = index;
  }
  r->level = level;
  int at = lua_gettop(L);
  emit_element_node(r, 1, at, depth, 0, 1);
  /* where it was written: its fragment's "path depth" */
  lua_pushvalue(L, 1);
  size_t fn;
  const char *f = lua_rawget(L, r->fragments) == LUA_TSTRING ? lua_tolstring(L, -1, &fn) : NULL;
  int same = f && fn > an && f[an] == '\n' && memcmp(f, a, an) == 0;
  lua_settop(L, top);
  return same;
}

/* The walk, protected (lua_pcall) so that a render that raises leaves the renderer's state
   ready for the next: walk(state, node, live, actions, fragments, outputs, at) -> html. It has
   the renderer's upvalues. at (live only): a fragment's "path depth", where node, an element,
   is written alone (emit_at) → its HTML, or nil when it cannot be. */
static int render_walk(lua_State *L) {
  clank_render_t *r = lua_touserdata(L, 1);
  lua_remove(L, 1);
  int live = lua_toboolean(L, 2);
  lua_settop(L, 6);
  r->L = L;
  r->actions = 3;
  if (live && lua_type(L, 4) == LUA_TTABLE && lua_type(L, 5) == LUA_TTABLE) {
    r->fragments = 4;
    r->outputs = 5;
  }
  for (int i = 0; i <= CLANK_RENDER_MAXLEVEL; i++) {
    r->path[i] = -1;
    r->keys[i] = NULL;
  }
  r->path[1] = 0;
  r->pathvalid = 0;
  if (clank_buf_reserve(&r->out, 4096) != 0) clank_render_no_memory(L);
  if (live && lua_type(L, 6) == LUA_TSTRING) {
    size_t an;
    const char *a = lua_tolstring(L, 6, &an);
    if (!emit_at(r, a, an)) return 0;
    lua_pushlstring(L, r->out.data ? r->out.data : "", r->out.len);
    return 1;
  }
  if (live && lua_type(L, 1) == LUA_TTABLE) {
    /* a single top element is "0"; a list's elements are "0", "1", ... */
    if (clank_render_has_mt(L, 1, RUV_ELEMENT) || lua_getfield(L, 1, "tree") == LUA_TFUNCTION)
      r->level = 1;
    lua_settop(L, 6);
  }
  emit(r, 1, 0, 0, live);
  if (r->into) return 0; /* the caller copies it into the buffer */
  lua_pushlstring(L, r->out.data ? r->out.data : "", r->out.len);
  return 1;
}

static clank_render_t *new_state(lua_State *L) {
  clank_render_t *r = lua_newuserdatauv(L, sizeof *r, 0);
  memset(r, 0, sizeof *r);
  luaL_setmetatable(L, STATE_MT);
  return r;
}

/* render(node, live, actions, fragments, outputs, into, at) -> html: a string, or into (an
   Html buffer, html.c) holding it; with at, node's HTML written there or nil (render_walk).
   Upvalues: the walk, and the state each call uses unless a render is already using it (one a
   render's Lua calls made). */
static int render_call(lua_State *L) {
  lua_settop(L, 7);
  int into = !lua_isnil(L, 6);
  if (into && !clank_render_is_html(L, 6)) luaL_typeerror(L, 6, "Html buffer");
  if (into && !lua_isnil(L, 7)) luaL_argerror(L, 7, "no 'at' with 'into'");
  clank_render_t *r = lua_touserdata(L, lua_upvalueindex(2));
  if (r->busy) r = new_state(L); /* at 8, until the end */
  r->busy = 1;
  r->into = into;
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushlightuserdata(L, r);
  for (int i = 1; i <= 5; i++) lua_pushvalue(L, i);
  lua_pushvalue(L, 7);
  int status = lua_pcall(L, 7, 1, 0);
  int copied =
      status != LUA_OK || !into || clank_render_html_set(L, 6, r->out.data, r->out.len) == 0;
  if (r == lua_touserdata(L, lua_upvalueindex(2)))
    reset_state(r);
  else
    free_state(r); /* now, not at the next collection */
  if (status != LUA_OK) return lua_error(L);
  if (!copied) clank_render_no_memory(L);
  if (into) lua_pushvalue(L, 6);
  return 1;
}

/* renderer{ element = ELEMENT, raw = RAW, actionName = f, confirm = f, valueError = f }
   -> render(node, live, actions) */
static int render_renderer(lua_State *L) {
  static const char *const given[] = {"element", "raw", "actionName", "confirm", "valueError"};
  static const char *const keys[] = {"tag",        "props",      "children",    "value",
                                     "agentLabel", "aria-label", "agentAction", "html",
                                     "tree",       "selected",   "key"};
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checkstack(L, RUV_COUNT, NULL);
  for (int i = 0; i < 5; i++) {
    int want = i < 2 ? LUA_TTABLE : LUA_TFUNCTION;
    if (lua_getfield(L, 1, given[i]) != want)
      return luaL_error(L, "clank.render_core.renderer: %s must be a %s", given[i],
                        lua_typename(L, want));
  }
  for (int i = 0; i < (int)(sizeof keys / sizeof *keys); i++) lua_pushstring(L, keys[i]);
  lua_pushcclosure(L, render_walk, RUV_COUNT);
  new_state(L);
  lua_pushcclosure(L, render_call, 2);
  return 1;
}

static const luaL_Reg render_funcs[] = {
    {"renderer", render_renderer},
    {"elementMaker", clank_render_element_maker},           /* element.c */
    {"slotsMatcher", clank_render_slots_matcher},           /* props_equal.c */
    {"callsPrefetcher", clank_render_calls_prefetcher},     /* prefetch.c */
    {"treeSwaps", clank_render_tree_swaps},                 /* tree_swaps.c */
    {"splices", clank_render_splices},                      /* diff.c */
    {"htmlBuffer", clank_render_html_buffer},               /* html.c */
    {"htmlPatch", clank_render_html_patch},                 /* html.c */
    {"htmlPatchInPlace", clank_render_html_patch_in_place}, /* html.c */
    {"keyFinder", clank_render_key_finder},                 /* keys.c */
    {"validKeyPath", clank_render_valid_key_path},          /* keys.c */
    {NULL, NULL},
};

int luaopen_clank_render_core(lua_State *L) {
  if (luaL_newmetatable(L, STATE_MT)) {
    lua_pushcfunction(L, state_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  luaL_newlib(L, render_funcs);
  return 1;
}
