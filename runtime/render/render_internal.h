/* clank.render_core internals shared by its two files: render.c (the walk over the tree and
   the module) and render_attrs.c (from an element's props to its attributes).

   One clank_render_t per clank.render call, inside a userdata whose __gc frees what it holds,
   so an error unwinding through the walk leaks nothing. Attribute names and values point into
   Lua strings the element holds (its props, or values left on the stack until the element is
   written) or into the state's own buffers; Lua never moves strings. (A metamethod that
   rewrites an element's props while that element is being written is not supported: the Lua
   renderer's pairs() did not support it either.) */
#ifndef CLANK_RENDER_INTERNAL_H
#define CLANK_RENDER_INTERNAL_H

#include <lua.h>
#include <stddef.h>

#include "util/buf.h"

#define CLANK_RENDER_MAXDEPTH 200
/* live levels: at most one per depth, plus the top */
#define CLANK_RENDER_MAXLEVEL (CLANK_RENDER_MAXDEPTH + 4)

/* The renderer's upvalues: what render.lua gave it, then the keys the walk reads, pushed once
   so that no lookup interns a C string per element. */
enum {
  RUV_ELEMENT = 1,
  RUV_RAW,
  RUV_ACTION_NAME,
  RUV_CONFIRM,
  RUV_VALUE_ERROR,
  RUV_TAG,
  RUV_PROPS,
  RUV_CHILDREN,
  RUV_VALUE,
  RUV_AGENT_LABEL,
  RUV_ARIA_LABEL,
  RUV_AGENT_ACTION,
  RUV_HTML,
  RUV_TREE,
  RUV_SELECTED,
  RUV_KEY,
  RUV_COUNT = RUV_KEY
};
#define RUV(i) lua_upvalueindex(i)

/* One attribute of the element being written; val NULL and isnum 0: bare. A number is
   formatted into num and read from there at write time (the array may move). */
typedef struct {
  const char *name;
  size_t nlen;
  const char *val;
  size_t vlen;
  int isnum;
  char num[32];
} clank_render_attr_t;

/* An event name of data-clank-on: a prop key after its "on", lower-cased when written. */
typedef struct {
  const char *s;
  size_t len;
} clank_render_event_t;

/* A key seen among a list's element children: its bytes at off in keybytes; used 0: empty. */
typedef struct {
  size_t off, len;
  int used;
} clank_render_seen_t;

typedef struct {
  lua_State *L;
  int busy; /* a render is using it (one made for the renderer is reused by the next call) */
  int into; /* the HTML goes into an Html buffer, not a new string */
  clank_buf_t out;
  clank_buf_t action; /* the element's agentAction name, when an action object gave it */
  clank_buf_t on;     /* the element's data-clank-on */
  clank_buf_t key;    /* the element's data-clank-key */
  clank_render_attr_t *attrs;
  size_t nattrs, cap;
  clank_render_event_t *events;
  size_t nevents, evcap;
  int actions; /* stack index of live.actions */
  /* live, when given: stack indexes of fragments (element → "path depth\nhtml", the HTML last
     written for it there) and outputs (the elements whose HTML is kept: components' trees) */
  int fragments, outputs;
  clank_buf_t where; /* a fragment's "path depth" */
  int level;         /* live: path[1..level] are the indexes down to the element being written */
  int path[CLANK_RENDER_MAXLEVEL + 1];
  /* live: the key of the element at each level when it is keyed (its segment of the path is
     then "k:" and the key percent-encoded), else NULL; a string on the Lua stack until that
     element is written */
  const char *keys[CLANK_RENDER_MAXLEVEL + 1];
  size_t keylens[CLANK_RENDER_MAXLEVEL + 1];
  /* live: the path's text as clank_render_path writes it, kept from one element to the next
     (the rows of a list share all but their last level): for i <= pathvalid, pathtext[0,
     pathlen[i]) is levels 1..i, and pathhole[i] whether one of them was never written */
  clank_buf_t pathtext;
  size_t pathlen[CLANK_RENDER_MAXLEVEL + 1];
  unsigned char pathhole[CLANK_RENDER_MAXLEVEL + 1];
  int pathvalid;
  /* the keys met in each list being written (duplicates raise): open-addressing sets stacked
     in seen[0..seen_top), one per list, their bytes in keybytes */
  clank_render_seen_t *seen;
  size_t seen_top, seen_cap;
  clank_buf_t keybytes;
} clank_render_t;

/* Raise the concatenation of the n strings on top of the stack, "msg", or "a" s "b" (s of
   any bytes); no position is added (the Lua renderer raised with level 0). */
void clank_render_fail(lua_State *L, int n);
void clank_render_fail_lit(lua_State *L, const char *msg);
void clank_render_fail_with(lua_State *L, const char *a, const char *s, size_t n, const char *b);
void clank_render_no_memory(lua_State *L);

/* clank.json.formatNumber of the number at idx into s (>= 32 bytes); returns the length. */
size_t clank_render_format_number(lua_State *L, int idx, char *s);

/* Whether the metatable of the value at idx is the upvalue uv (RUV_ELEMENT, RUV_RAW). */
int clank_render_has_mt(lua_State *L, int idx, int uv);

/* Whether props (a table) has a metatable: then props.x goes through it. */
int clank_render_props_plain(lua_State *L, int props);

/* The attributes of an element (tag, and the props table at props): the element's own
   (semantic props, aliases, URL checks, duplicates: attributes.lua's rules), then with live
   data-clank-confirm, data-clank-key and data-clank-on. May leave values on the stack that
   attributes point into: the caller drops them once the attributes are written. */
void clank_render_attributes(clank_render_t *r, int props, const char *tag, size_t tlen, int live);
/* Raises for the key prop at idx of an element tag when it is neither a string nor an
   integer. */
void clank_render_check_key(lua_State *L, int idx, const char *tag, size_t tlen);
/* path[level] or keys[level] changed: the path's text below it is to be written again. */
static inline void clank_render_path_changed(clank_render_t *r, int level) {
  if (r->pathvalid >= level) r->pathvalid = level - 1;
}

/* The path of the element being written, as data-clank-key writes it ("?" for a level never
   written), into b. */
void clank_render_path(clank_render_t *r, clank_buf_t *b);
/* Writes them, sorted by name (byte order): ` name="value"`, or ` name` when bare. */
void clank_render_write_attributes(clank_render_t *r);

/* Whether byte c of a key is written as it is in a data-clank-key segment (A-Z a-z 0-9 _ -);
   every other byte is %XX. render_attrs.c writes segments, keys.c reads them back. */
static inline int clank_render_key_byte_plain(unsigned char c) {
  return (unsigned char)((c | 0x20) - 'a') < 26 || (unsigned char)(c - '0') < 10 || c == '_' ||
         c == '-';
}

/* Appends to an output buffer; raises when memory runs out. */
static inline void clank_render_append(clank_render_t *r, clank_buf_t *b, const void *p, size_t n) {
  if (clank_buf_append(b, p, n) != 0) clank_render_no_memory(r->L);
}

/* render_core.elementMaker(ELEMENT, RAW) → make(tag) → a builder (element.c). */
int clank_render_element_maker(lua_State *L);

/* render_core.splices(old, new) → { {at, del, ins}, ... } | nil (diff.c). */
int clank_render_splices(lua_State *L);
/* render_core.htmlBuffer() → an Html buffer (html.c); whether the value at idx is one; the text
   of a string or buffer at idx (raises for anything else); the buffer at idx set to s[0..n)
   (0, or -1 when memory runs out: it is empty then). */
int clank_render_html_buffer(lua_State *L);
/* render_core.htmlPatch(base, into, olds, news) (html.c). */
int clank_render_html_patch(lua_State *L);
/* render_core.htmlPatchInPlace(buf, old, new) (html.c). */
int clank_render_html_patch_in_place(lua_State *L);
int clank_render_is_html(lua_State *L, int idx);
const char *clank_render_html_text(lua_State *L, int idx, size_t *len);
int clank_render_html_set(lua_State *L, int idx, const char *s, size_t n);
/* render_core.keyFinder(ELEMENT) → find(tree, path); validKeyPath(path) → boolean (keys.c). */
int clank_render_key_finder(lua_State *L);
int clank_render_valid_key_path(lua_State *L);
/* render_core.slotsMatcher(deep, countSlot, propsSlot, firstSlot, maxPairs) → same(entry,
   props) → boolean: props against the fields memo keeps in an entry's slots (props_equal.c). */
int clank_render_slots_matcher(lua_State *L);
/* render_core.callsPrefetcher(slots) → prefetch(order, n), arrays: what a list's next component
   calls read, asked for ahead (prefetch.c). */
int clank_render_calls_prefetcher(lua_State *L);
/* Raw equality as a page renders it: a number's subtype too (1 and 1.0 render apart). */
int clank_render_same_raw(lua_State *L, int a, int b);
/* How clank_render_same_fields compares two fields' values that are not raw-equal: tables
   (and functions, unless any_function says every function is as good as another) by calling
   the function at index deep with them and depth. count >= 0: how many fields a has. */
typedef struct {
  int deep;
  lua_Integer depth;
  int any_function;
  lua_Integer count;
} clank_same_fields_t;
/* Whether the tables at absolute indexes a and b have the same fields, each the same value
   (clank_render_same_raw, or as how says); metatables are the caller's. Leaves the stack as
   it was. */
int clank_render_same_fields(lua_State *L, int a, int b, const clank_same_fields_t *how);
/* render_core.treeSwaps(old, new, outputs, deep) → olds, news | nil (tree_swaps.c). */
int clank_render_tree_swaps(lua_State *L);

/* Appends s with & < > " escaped. */
void clank_render_escaped(clank_render_t *r, const char *s, size_t n);

int luaopen_clank_render_core(lua_State *L);

#endif
