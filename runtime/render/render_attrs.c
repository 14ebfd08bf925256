/* From an element's props to its HTML attributes (SPEC §8, §11), for clank.render_core: the
   semantic props, event handlers, aliases, URL checks, duplicates and the order, and the live
   attributes. Each check runs where lua/clank/ui/attributes.lua ran it, so that a tree with
   several faults raises the same error as the Lua renderer did. */
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "render/render_internal.h"
#include "core/values.h"

typedef struct {
  const char *s;
  size_t n;
} lit_t;

#define LIT(s) \
  { s, sizeof(s) - 1 }

static int is_alpha(unsigned char c) { return (unsigned char)((c | 0x20) - 'a') < 26; }
static int is_digit(unsigned char c) { return (unsigned char)(c - '0') < 10; }
static unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c | 0x20 : c; }

static int eq(const char *s, size_t n, const char *lit, size_t m) {
  return n == m && memcmp(s, lit, n) == 0;
}
#define EQ(s, n, lit) eq(s, n, lit, sizeof(lit) - 1)

/* s equals lit (lower case) ignoring the case of s. */
static int eq_lower(const char *s, size_t n, const char *lit, size_t m) {
  if (n != m) return 0;
  for (size_t i = 0; i < n; i++)
    if (lower((unsigned char)s[i]) != (unsigned char)lit[i]) return 0;
  return 1;
}

static int in_list(const char *s, size_t n, const lit_t *list, int fold) {
  for (; list->s; list++)
    if (list->n == n &&
        (unsigned char)list->s[0] == (fold ? lower((unsigned char)s[0]) : (unsigned char)s[0]) &&
        (fold ? eq_lower(s, n, list->s, list->n) : eq(s, n, list->s, list->n)))
      return 1;
  return 0;
}

/* Attributes holding a URL (compared lower-cased). */
static const lit_t url_attrs[] = {
    LIT("action"),   LIT("background"), LIT("cite"),       LIT("codebase"),
    LIT("data"),     LIT("formaction"), LIT("href"),       LIT("icon"),
    LIT("longdesc"), LIT("manifest"),   LIT("poster"),     LIT("profile"),
    LIT("src"),      LIT("usemap"),     LIT("xlink:href"), {NULL, 0}};

/* Elements on which agentLabel is mirrored to aria-label. */
static const lit_t interactive_tags[] = {LIT("a"),      LIT("button"),  LIT("input"),
                                         LIT("select"), LIT("summary"), LIT("textarea"),
                                         {NULL, 0}};

/* The names two props can both produce (the targets of the semantic props and aliases,
   agentHidden, format = password, the mirrored aria-label). Any other name comes from its own
   prop key only, and a table's keys are unique. */
static const lit_t shared_names[] = {LIT("class"),
                                     LIT("for"),
                                     LIT("aria-label"),
                                     LIT("data-clank-id"),
                                     LIT("data-clank-label"),
                                     LIT("data-clank-description"),
                                     LIT("data-clank-action"),
                                     LIT("data-clank-intent"),
                                     LIT("data-clank-hidden"),
                                     LIT("data-clank-secret"),
                                     {NULL, 0}};

/* Semantic props and the attribute each one becomes. */
static const lit_t semantic[] = {LIT("data-clank-id"), LIT("data-clank-label"),
                                 LIT("data-clank-description"), LIT("data-clank-action"),
                                 LIT("data-clank-intent")};

/* What a prop key is, by the rules of attributes(el). */
enum {
  K_PLAIN,
  K_ON,
  K_AGENT_ID,
  K_AGENT_LABEL,
  K_AGENT_DESCRIPTION,
  K_AGENT_ACTION,
  K_INTENT, /* the last semantic one */
  K_AGENT_HIDDEN,
  K_SRCDOC,
  K_FORMAT,
  K_VALUE,
  K_CLASS_NAME,
  K_HTML_FOR,
  K_ARIA_LABEL,
  K_KEY
};

static int classify(const char *k, size_t n) {
  switch (k[0]) {
    case 'o':
    case 'O': return n >= 2 && (k[1] | 0x20) == 'n' ? K_ON : K_PLAIN;
    case 'a':
      if (EQ(k, n, "agentId")) return K_AGENT_ID;
      if (EQ(k, n, "agentLabel")) return K_AGENT_LABEL;
      if (EQ(k, n, "agentDescription")) return K_AGENT_DESCRIPTION;
      if (EQ(k, n, "agentAction")) return K_AGENT_ACTION;
      if (EQ(k, n, "agentHidden")) return K_AGENT_HIDDEN;
      if (EQ(k, n, "aria-label")) return K_ARIA_LABEL;
      return K_PLAIN;
    case 'i': return EQ(k, n, "intent") ? K_INTENT : K_PLAIN;
    case 's':
    case 'S': return eq_lower(k, n, "srcdoc", 6) ? K_SRCDOC : K_PLAIN;
    case 'f': return EQ(k, n, "format") ? K_FORMAT : K_PLAIN;
    case 'v': return EQ(k, n, "value") ? K_VALUE : K_PLAIN;
    case 'c': return EQ(k, n, "className") ? K_CLASS_NAME : K_PLAIN;
    case 'h': return EQ(k, n, "htmlFor") ? K_HTML_FOR : K_PLAIN;
    case 'k': return EQ(k, n, "key") ? K_KEY : K_PLAIN;
    default: return K_PLAIN;
  }
}

/* HTML attribute names: [A-Za-z_:][A-Za-z0-9_:.-]*. */
static int valid_name(const char *s, size_t n) {
  if (n == 0) return 0;
  unsigned char c = (unsigned char)s[0];
  if (!is_alpha(c) && c != '_' && c != ':') return 0;
  for (size_t i = 1; i < n; i++) {
    c = (unsigned char)s[i];
    if (!is_alpha(c) && !is_digit(c) && c != '_' && c != ':' && c != '.' && c != '-') return 0;
  }
  return 1;
}

static clank_render_attr_t *find_attr(clank_render_t *r, const char *name, size_t n) {
  for (size_t i = 0; i < r->nattrs; i++)
    if (r->attrs[i].nlen == n && memcmp(r->attrs[i].name, name, n) == 0) return &r->attrs[i];
  return NULL;
}

static clank_render_attr_t *new_attr(clank_render_t *r, const char *name, size_t n) {
  if (r->nattrs == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 16;
    clank_render_attr_t *a = realloc(r->attrs, cap * sizeof *a);
    if (a == NULL) clank_render_no_memory(r->L);
    r->attrs = a;
    r->cap = cap;
  }
  clank_render_attr_t *a = &r->attrs[r->nattrs++];
  a->name = name;
  a->nlen = n;
  a->val = NULL;
  a->vlen = 0;
  a->isnum = 0;
  return a;
}

static void twice(clank_render_t *r, const char *name, size_t n) {
  clank_render_fail_with(r->L, "clank.render: attribute ", name, n, " given twice");
}

/* The scheme of a URL as a browser sees it (leading C0 controls and spaces stripped, tabs and
   newlines removed from it): javascript:, vbscript:, file: and a non-image data: raise. */
static void check_url(clank_render_t *r, const char *name, size_t nlen, const char *url, size_t n) {
  size_t i = 0, k = 0;
  while (i < n && (unsigned char)url[i] <= 32) i++;
  char sch[11]; /* the scheme lower-cased, as far as it can be one of the four */
  for (; i < n; i++) {
    unsigned char c = (unsigned char)url[i];
    if (c == '\t' || c == '\n' || c == '\r') continue;
    if (k == 0 ? !is_alpha(c) : !(is_alpha(c) || is_digit(c) || c == '+' || c == '.' || c == '-'))
      break;
    if (k < sizeof sch) sch[k] = (char)lower(c);
    k++;
  }
  if (k == 0 || i == n || url[i] != ':') return; /* a relative URL */
  const char *bad = NULL;
  if (EQ(sch, k, "javascript")) {
    bad = "javascript";
  } else if (EQ(sch, k, "vbscript")) {
    bad = "vbscript";
  } else if (EQ(sch, k, "file")) {
    bad = "file";
  } else if (EQ(sch, k, "data")) {
    /* images only, and not SVG (a document that can run script), as any browser reads the
       MIME type: the URL parser percent-encodes a C0 control or DEL in a data: URL's path
       ("data:\vimage/png" reaches fetch's data: URL processor as "%0Bimage/png",
       "data:\fimage/png" as "%0Cimage/png": no image types), and a tab or newline there it
       removes (WHATWG URL: "image/sv\tg+xml" is SVG) or percent-encodes (Chromium). So a
       control character anywhere in the type refuses it; only spaces go. */
    char mime[16];
    size_t m = 0;
    int control = 0;
    for (i++; i < n; i++) {
      unsigned char c = (unsigned char)url[i];
      if (c == ';' || c == ',') break;
      if (c < ' ' || c == 127) {
        control = 1;
        continue;
      }
      if (m == 0 && c == ' ') continue;
      /* "image/ svg" is not a MIME type, but it is refused as SVG all the same */
      if (m >= 6 && c == ' ') continue;
      if (m < sizeof mime) mime[m++] = (char)lower(c);
    }
    int image = m >= 6 && memcmp(mime, "image/", 6) == 0;
    int svg = image && m >= 9 && memcmp(mime + 6, "svg", 3) == 0;
    if (!image || svg || control) bad = "data";
  }
  if (bad == NULL) return;
  lua_pushfstring(r->L, "clank.render: unsafe URL scheme \"%s:\" in attribute ", bad);
  lua_pushlstring(r->L, name, nlen);
  clank_render_fail(r->L, 2);
}

/* Adds the attribute name with the value at idx, as attributes.lua's put and value_of:
   strings as they are, numbers formatted, booleans bare or left out (aria-* take the words),
   clank.null left out, anything else raises. check_name: the name is a prop key. */
static void put_attr(clank_render_t *r, const char *name, size_t n, int check_name, int idx) {
  lua_State *L = r->L;
  if (check_name && !valid_name(name, n))
    clank_render_fail_with(L, "clank.render: invalid attribute name: ", name, n, "");
  const char *val = NULL;
  size_t vlen = 0;
  char num[32];
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: val = lua_tolstring(L, idx, &vlen); break;
    case LUA_TNUMBER:
      vlen = clank_render_format_number(L, idx, num);
      val = num;
      break;
    case LUA_TBOOLEAN:
      if (n >= 5 && memcmp(name, "aria-", 5) == 0) {
        val = lua_toboolean(L, idx) ? "true" : "false";
        vlen = strlen(val);
      } else if (!lua_toboolean(L, idx)) {
        return;
      }
      break;
    default:
      if (clank_is_null(L, idx)) return;
      lua_pushvalue(L, RUV(RUV_VALUE_ERROR));
      lua_pushlstring(L, name, n);
      lua_pushvalue(L, idx);
      lua_call(L, 2, 0); /* raises */
      clank_render_fail_lit(L, "clank.render: bad attribute value");
      return;
  }
  if (val && n >= 3 && n <= 10 && in_list(name, n, url_attrs, 1)) check_url(r, name, n, val, vlen);
  if (in_list(name, n, shared_names, 0) && find_attr(r, name, n)) twice(r, name, n);
  clank_render_attr_t *a = new_attr(r, name, n);
  a->vlen = vlen;
  if (val == num) {
    memcpy(a->num, num, vlen + 1);
    a->isnum = 1;
  } else {
    a->val = val;
  }
}

/* Adds a constant "true" attribute. */
static void put_true(clank_render_t *r, const char *name, size_t n) {
  if (find_attr(r, name, n)) twice(r, name, n);
  clank_render_attr_t *a = new_attr(r, name, n);
  a->val = "true";
  a->vlen = 4;
}

static void add_event(clank_render_t *r, const char *s, size_t n) {
  if (r->nevents == r->evcap) {
    size_t cap = r->evcap ? r->evcap * 2 : 8;
    clank_render_event_t *e = realloc(r->events, cap * sizeof *e);
    if (e == NULL) clank_render_no_memory(r->L);
    r->events = e;
    r->evcap = cap;
  }
  r->events[r->nevents].s = s;
  r->events[r->nevents].len = n;
  r->nevents++;
}

/* agentAction given as an action (anything with a string .name): its name, through
   attributes.actionName, copied into r->action so that it outlives the call's result. */
static void put_action(clank_render_t *r, int v) {
  lua_State *L = r->L;
  lua_pushvalue(L, RUV(RUV_ACTION_NAME));
  lua_pushvalue(L, v);
  lua_call(L, 1, 1); /* a string, or raises */
  size_t before = r->nattrs;
  put_attr(r, "data-clank-action", 17, 0, lua_gettop(L));
  clank_render_attr_t *a = &r->attrs[before];
  if (r->nattrs > before && a->val) {
    clank_buf_reset(&r->action);
    clank_render_append(r, &r->action, a->val, a->vlen);
    a->val = r->action.data ? r->action.data : "";
  }
  lua_pop(L, 1);
}

/* props.name: raw for a plain props table (what the element builder makes). */
static int prop(lua_State *L, int props, int key_uv, int plain) {
  lua_pushvalue(L, RUV(key_uv));
  return plain ? lua_rawget(L, props) : lua_gettable(L, props);
}

static int cmp_attrs(const void *a, const void *b) {
  const clank_render_attr_t *x = a, *y = b;
  int c = memcmp(x->name, y->name, x->nlen < y->nlen ? x->nlen : y->nlen);
  return c ? c : (x->nlen > y->nlen) - (x->nlen < y->nlen);
}

static int cmp_events(const void *a, const void *b) {
  const clank_render_event_t *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  for (size_t i = 0; i < n; i++) {
    unsigned char p = lower((unsigned char)x->s[i]), q = lower((unsigned char)y->s[i]);
    if (p != q) return p < q ? -1 : 1;
  }
  return (x->len > y->len) - (x->len < y->len);
}

/* A level of the path never written: an element under lists in lists (h flattens lists, so
   only a list given to render itself holds them). The Lua renderer joined the path with
   table.concat, which raised: so does this, with table.concat's own message. */
static void hole_in_path(clank_render_t *r) {
  lua_State *L = r->L;
  lua_createtable(L, r->level, 0);
  for (int i = 1; i <= r->level; i++) {
    if (r->path[i] < 0) continue;
    lua_pushinteger(L, r->path[i]);
    lua_rawseti(L, -2, i);
  }
  if (lua_getglobal(L, "table") == LUA_TTABLE && lua_getfield(L, -1, "concat") == LUA_TFUNCTION) {
    lua_pushvalue(L, -3);
    lua_pushliteral(L, ".");
    lua_pushinteger(L, 1);
    lua_pushinteger(L, r->level);
    lua_call(L, 4, 0); /* raises */
  }
  clank_render_fail_lit(L, "clank.render: a hole in the path of keys");
}

void clank_render_check_key(lua_State *L, int idx, const char *tag, size_t tlen) {
  if (lua_type(L, idx) == LUA_TSTRING || lua_isinteger(L, idx)) return;
  lua_pushliteral(L, "clank.render: the key of <");
  lua_pushlstring(L, tag, tlen);
  lua_pushfstring(
      L, "> must be a string or an integer (got %s)",
      lua_type(L, idx) == LUA_TNUMBER ? "a number that is not an integer" : luaL_typename(L, idx));
  clank_render_fail(L, 3);
}

/* data-clank-on (the handled events, lower-cased and sorted) into r->on. */
static void events(clank_render_t *r) {
  if (r->nevents > 1) qsort(r->events, r->nevents, sizeof *r->events, cmp_events);
  clank_buf_reset(&r->on);
  for (size_t i = 0; i < r->nevents; i++) {
    const clank_render_event_t *e = &r->events[i];
    if (clank_buf_reserve(&r->on, e->len + 1) != 0) clank_render_no_memory(r->L);
    if (i > 0) r->on.data[r->on.len++] = ' ';
    for (size_t j = 0; j < e->len; j++)
      r->on.data[r->on.len++] = (char)lower((unsigned char)e->s[j]);
  }
}

/* A key as a segment of data-clank-key: "k:", then its bytes, each one but A-Z a-z 0-9 _ -
   written %XX (upper-case hex), so that no key holds a dot and each key has one form. */
static void key_segment(clank_render_t *r, clank_buf_t *b, const char *k, size_t n) {
  static const char hex[] = "0123456789ABCDEF";
  if (clank_buf_reserve(b, 2 + 3 * n) != 0) clank_render_no_memory(r->L);
  b->data[b->len++] = 'k';
  b->data[b->len++] = ':';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)k[i];
    if (clank_render_key_byte_plain(c)) {
      b->data[b->len++] = (char)c;
    } else {
      b->data[b->len++] = '%';
      b->data[b->len++] = hex[c >> 4];
      b->data[b->len++] = hex[c & 15];
    }
  }
}

/* The path down to the element into b, joined with dots: its index among its parent's element
   children, or for a keyed element "k:" and its key. A level never written (a hole) raises
   when strict, else is written "?". The text of the levels above that did not change since
   the last call is kept (r->pathtext): only the levels after them are written. */
static void path_into(clank_render_t *r, clank_buf_t *b, int strict) {
  clank_buf_t *t = &r->pathtext;
  int level = r->level;
  if (r->pathvalid < level) {
    int from = r->pathvalid < 0 ? 0 : r->pathvalid;
    t->len = from > 0 ? r->pathlen[from] : 0;
    for (int i = from + 1; i <= level; i++) {
      int hole = i > 1 && r->pathhole[i - 1];
      if (r->path[i] < 0) {
        clank_render_append(r, t, i > 1 ? ".?" : "?", i > 1 ? 2 : 1);
        hole = 1;
      } else if (r->keys[i]) {
        if (i > 1) clank_render_append(r, t, ".", 1);
        key_segment(r, t, r->keys[i], r->keylens[i]);
      } else {
        char d[16];
        size_t k = sizeof d;
        unsigned v = (unsigned)r->path[i];
        do {
          d[--k] = (char)('0' + v % 10);
          v /= 10;
        } while (v);
        if (i > 1) d[--k] = '.';
        clank_render_append(r, t, d + k, sizeof d - k);
      }
      r->pathlen[i] = t->len;
      r->pathhole[i] = (unsigned char)hole;
    }
    r->pathvalid = level;
  }
  if (strict && level > 0 && r->pathhole[level]) hole_in_path(r);
  clank_buf_reset(b);
  if (level > 0) clank_render_append(r, b, t->data, r->pathlen[level]);
}

/* data-clank-key into r->key. */
static void path_key(clank_render_t *r) { path_into(r, &r->key, 1); }

void clank_render_path(clank_render_t *r, clank_buf_t *b) { path_into(r, b, 0); }

/* The live attributes (SPEC §11), after the element's own: data-clank-confirm when its
   agentAction (action at idx, or 0 when the element has none) requires confirmation;
   data-clank-key and data-clank-on when it has handlers, data-clank-key when it is keyed
   (keyed: it has a key and its segment of the path is that key; the client patches keyed
   elements by their data-clank-key). The confirmation text stays on the stack. */
static void live_attributes(clank_render_t *r, int action, int keyed) {
  lua_State *L = r->L;
  const char *confirm = NULL;
  size_t clen = 0;
  int call = action && lua_toboolean(L, action);
  if (call && lua_type(L, action) == LUA_TSTRING) {
    /* a name looked up in live.actions (a plain table most often): no call when it is
       certainly not there */
    if (!lua_toboolean(L, r->actions)) {
      call = 0;
    } else if (lua_type(L, r->actions) == LUA_TTABLE) {
      if (lua_getmetatable(L, r->actions)) {
        lua_pop(L, 1);
      } else {
        lua_pushvalue(L, action);
        call = lua_rawget(L, r->actions) != LUA_TNIL;
        lua_pop(L, 1);
      }
    }
  }
  if (call) {
    lua_pushvalue(L, RUV(RUV_CONFIRM));
    lua_pushvalue(L, action);
    lua_pushvalue(L, r->actions);
    lua_call(L, 2, 1);
    if (lua_type(L, -1) == LUA_TSTRING)
      confirm = lua_tolstring(L, -1, &clen); /* stays on the stack */
    else
      lua_pop(L, 1);
  }
  int with_key = r->nevents || keyed;
  if (r->nevents) events(r);
  if (with_key) path_key(r);
  /* merged into the sorted list, raising as the Lua merge did for a name already there */
  if (confirm && find_attr(r, "data-clank-confirm", 18)) twice(r, "data-clank-confirm", 18);
  if (with_key && find_attr(r, "data-clank-key", 14)) twice(r, "data-clank-key", 14);
  if (r->nevents && find_attr(r, "data-clank-on", 13)) twice(r, "data-clank-on", 13);
  if (confirm) {
    clank_render_attr_t *a = new_attr(r, "data-clank-confirm", 18);
    a->val = confirm;
    a->vlen = clen;
  }
  if (with_key) {
    clank_render_attr_t *a = new_attr(r, "data-clank-key", 14);
    a->val = r->key.data ? r->key.data : "";
    a->vlen = r->key.len;
  }
  if (r->nevents) {
    clank_render_attr_t *a = new_attr(r, "data-clank-on", 13);
    a->val = r->on.data ? r->on.data : "";
    a->vlen = r->on.len;
  }
}

void clank_render_attributes(clank_render_t *r, int props, const char *tag, size_t tlen, int live) {
  lua_State *L = r->L;
  r->nattrs = 0;
  r->nevents = 0;
  if (lua_type(L, props) != LUA_TTABLE) {
    lua_pushfstring(L, "bad argument #1 to 'next' (table expected, got %s)",
                    luaL_typename(L, props));
    lua_error(L);
  }
  int value_kept = !EQ(tag, tlen, "select") && !EQ(tag, tlen, "textarea");
  int has_label = 0, has_aria_label = 0, has_action = 0, has_key = 0;
  lua_pushnil(L);
  while (lua_next(L, props)) {
    int v = lua_gettop(L);
    if (lua_type(L, v - 1) != LUA_TSTRING) {
      lua_pushfstring(L, "clank.render: prop names must be strings (got %s)",
                      luaL_typename(L, v - 1));
      lua_error(L);
    }
    size_t kl;
    const char *k = lua_tolstring(L, v - 1, &kl);
    int kind = classify(k, kl);
    switch (kind) {
      case K_ON:
        if (!(k[0] == 'o' && k[1] == 'n' && k[2] >= 'A' && k[2] <= 'Z' &&
              lua_type(L, v) == LUA_TFUNCTION))
          clank_render_fail_with(L, "clank.render: prop ", k, kl,
                                 " is not allowed (event handlers are functions named on<Event>)");
        if (live) add_event(r, k + 2, kl - 2);
        break;
      case K_AGENT_ACTION:
        has_action = 1;
        if (lua_toboolean(L, v) && lua_type(L, v) != LUA_TSTRING) {
          put_action(r, v);
          break;
        }
        /* fall through */
      case K_AGENT_ID:
      case K_AGENT_LABEL:
      case K_AGENT_DESCRIPTION:
      case K_INTENT:
        if (kind == K_AGENT_LABEL) has_label = 1;
        if (lua_toboolean(L, v))
          put_attr(r, semantic[kind - K_AGENT_ID].s, semantic[kind - K_AGENT_ID].n, 0, v);
        break;
      case K_AGENT_HIDDEN:
        if (lua_type(L, v) == LUA_TBOOLEAN && lua_toboolean(L, v))
          put_true(r, "data-clank-hidden", 17);
        break;
      case K_SRCDOC:
        /* a document in an attribute: markup, so only from clank.raw */
        if (!clank_render_has_mt(L, v, RUV_RAW))
          clank_render_fail_lit(L, "clank.render: srcdoc takes clank.raw(html) only");
        lua_pushvalue(L, RUV(RUV_HTML));
        lua_gettable(L, v); /* held by the raw node */
        put_attr(r, k, kl, 1, v + 1);
        lua_pop(L, 1);
        break;
      case K_FORMAT:
        if (lua_type(L, v) == LUA_TSTRING) {
          size_t n;
          const char *s = lua_tolstring(L, v, &n);
          if (EQ(s, n, "password")) {
            put_true(r, "data-clank-secret", 17);
            break;
          }
        }
        put_attr(r, k, kl, 1, v);
        break;
      case K_VALUE:
        /* a select's or textarea's value: options or text, written by the walk */
        if (value_kept) put_attr(r, k, kl, 1, v);
        break;
      case K_CLASS_NAME: put_attr(r, "class", 5, 0, v); break;
      case K_HTML_FOR: put_attr(r, "for", 3, 0, v); break;
      case K_KEY: /* not an attribute: the element's segment of data-clank-key */
        clank_render_check_key(L, v, tag, tlen);
        has_key = 1;
        break;
      case K_ARIA_LABEL: has_aria_label = 1; /* fall through */
      default: put_attr(r, k, kl, 1, v); break;
    }
    lua_settop(L, v - 1);
  }
  int plain = -1; /* props has no metatable: found out when it matters */
  if (in_list(tag, tlen, interactive_tags, 0) &&
      (has_label || !(plain = clank_render_props_plain(L, props)))) {
    if (plain < 0) plain = clank_render_props_plain(L, props);
    int label = lua_gettop(L) + 1;
    if (prop(L, props, RUV_AGENT_LABEL, plain) != LUA_TNIL &&
        (plain ? !has_aria_label : prop(L, props, RUV_ARIA_LABEL, 0) == LUA_TNIL))
      put_attr(r, "aria-label", 10, 0, label);
    lua_settop(L, label); /* the label stays: a mirrored number points into it */
  }
  if (live) {
    int action = 0;
    if (has_action || !(plain < 0 ? (plain = clank_render_props_plain(L, props)) : plain)) {
      prop(L, props, RUV_AGENT_ACTION, plain);
      action = lua_gettop(L);
    }
    live_attributes(r, action, has_key && r->keys[r->level] != NULL);
  }
}

void clank_render_write_attributes(clank_render_t *r) {
  clank_render_attr_t *a = r->attrs;
  size_t n = r->nattrs;
  if (n > 8) {
    qsort(a, n, sizeof *a, cmp_attrs);
  } else {
    for (size_t i = 1; i < n; i++) /* a few: insertion sort */
      for (size_t j = i; j > 0 && cmp_attrs(&a[j - 1], &a[j]) > 0; j--) {
        clank_render_attr_t t = a[j];
        a[j] = a[j - 1];
        a[j - 1] = t;
      }
  }
  clank_buf_t *out = &r->out;
  for (size_t i = 0; i < n; i++) {
    if (clank_buf_reserve(out, a[i].nlen + 3) != 0) clank_render_no_memory(r->L);
    out->data[out->len++] = ' ';
    memcpy(out->data + out->len, a[i].name, a[i].nlen);
    out->len += a[i].nlen;
    if (a[i].val == NULL && !a[i].isnum) continue; /* bare */
    out->data[out->len++] = '=';
    out->data[out->len++] = '"';
    clank_render_escaped(r, a[i].isnum ? a[i].num : a[i].val, a[i].vlen);
    clank_render_append(r, out, "\"", 1);
  }
}
