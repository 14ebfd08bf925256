/* libFuzzer: bytes → a random element tree (clank.h) → clank.render (SPEC §8).
   The input drives a small deterministic builder: tags, props (href, src,
   style, on*, agentLabel, ...), text with markup characters and invalid
   UTF-8, nesting. A rendering must be markup of exactly the tree built: the
   elements open in the order they were made and close balanced, the text read
   back (entities undone) is the text given, every attribute value is quoted
   and escaped, no on* attribute and no unsafe URL scheme is written. A raise is
   allowed only where the tree holds something render refuses. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "modules/modules.h"
#include "util/buf.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ELEMENTS 256
#define MAX_DEPTH 12

static lua_State *L;
static int h_ref, render_ref, kept_ref;

/* ---- the input as a stream of choices ---- */

typedef struct input_s {
  const uint8_t *p;
  size_t n;
} input_t;

static unsigned pick(input_t *in, unsigned n) {
  if (in->n == 0) return 0;
  in->n--;
  return *in->p++ % n;
}

/* ---- what was built, for the check ---- */

typedef struct built_s {
  const char *tags[MAX_ELEMENTS];
  int is_void[MAX_ELEMENTS];
  const char *title[MAX_ELEMENTS]; /* the title prop given, if a string */
  size_t title_len[MAX_ELEMENTS];
  int nelements;
  clank_buf_t text; /* every text child, in document order */
  int may_raise;    /* something in the tree render refuses */
} built_t;

static const char *const tags[] = {"div",   "span",  "p",      "a",       "ul",   "li",
                                   "b",     "img",   "br",     "input",   "form", "textarea",
                                   "title", "my-el", "button", "section", "hr",   "x-Y1"};
static const int voids[] = {0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0};
#define NTAGS (sizeof tags / sizeof tags[0])

/* Text fragments that matter to HTML and to URLs, glued together by the input. */
static const char *const pieces[] = {
    "<",         ">",          "&",        "\"",         "'",         "&amp;", "</div>",
    "<script>",  "javascript", ":",        "JaVaScRiPt", "vbscript:", "file:", "data:",
    "image/png", "image/svg",  ",",        " ",          "\t",        "\n",    "\x01",
    "\xff",      "\xc3\xa9",   "\xe2\x80", "a",          "b",         "=",     "/",
    "x",         "\x00",       "%3C",      "&#60;",      "-->",       "<!--",  "\r"};
#define NPIECES (sizeof pieces / sizeof pieces[0])

static void push_text(input_t *in) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  unsigned n = pick(in, 8);
  for (unsigned i = 0; i < n; i++) {
    if (pick(in, 4) == 0 && in->n > 0) { /* a raw byte of the input */
      luaL_addchar(&b, (char)*in->p);
      in->p++;
      in->n--;
    } else {
      const char *s = pieces[pick(in, NPIECES)];
      luaL_addlstring(&b, s, s[0] ? strlen(s) : 1);
    }
  }
  luaL_pushresult(&b);
}

static int nop(lua_State *l) {
  (void)l;
  return 0;
}

/* Pushes a props table (or nil) for element i. */
static void push_props(input_t *in, built_t *bt, int i) {
  unsigned n = pick(in, 5);
  if (n == 0) {
    lua_pushnil(L);
    return;
  }
  lua_createtable(L, 0, (int)n);
  for (unsigned k = 0; k < n; k++) {
    switch (pick(in, 13)) {
      case 0:
        push_text(in);
        bt->title[i] = lua_tolstring(L, -1, &bt->title_len[i]);
        lua_setfield(L, -2, "title"); /* the table keeps the string alive */
        break;
      case 1:
        push_text(in);
        lua_setfield(L, -2, "href");
        bt->may_raise = 1; /* an unsafe scheme */
        break;
      case 2:
        push_text(in);
        lua_setfield(L, -2, "src");
        bt->may_raise = 1;
        break;
      case 3:
        push_text(in);
        lua_setfield(L, -2, "style");
        break;
      case 4:
        lua_pushcfunction(L, nop);
        lua_setfield(L, -2, pick(in, 2) ? "onClick" : "onInput");
        break;
      case 5:
        push_text(in);
        lua_setfield(L, -2, pick(in, 2) ? "onclick" : "onMouseOver");
        bt->may_raise = 1; /* a string on* prop */
        break;
      case 6:
        push_text(in);
        lua_setfield(L, -2, "agentLabel");
        break;
      case 7:
        lua_pushboolean(L, (int)pick(in, 2));
        lua_setfield(L, -2, pick(in, 2) ? "hidden" : "aria-hidden");
        break;
      case 8:
        lua_pushinteger(L, (lua_Integer)pick(in, 256) - 128);
        lua_setfield(L, -2, "data-n");
        break;
      case 9: /* a name made of anything after an x (no prop with a meaning of its own) */
        lua_pushliteral(L, "x");
        push_text(in);
        lua_concat(L, 2);
        lua_pushvalue(L, -1);
        lua_settable(L, -3);
        bt->may_raise = 1;
        break;
      case 10:
        push_text(in);
        lua_setfield(L, -2, "class");
        break;
      case 11: /* a key: a string or an integer, maybe one a sibling has too */
        if (pick(in, 2))
          push_text(in);
        else
          lua_pushinteger(L, (lua_Integer)pick(in, 4) - 1);
        lua_setfield(L, -2, "key");
        bt->may_raise = 1; /* a duplicate key */
        break;
      default: /* a textarea's value is its text, which the check counts apart */
        push_text(in);
        lua_setfield(L, -2, strcmp(bt->tags[i], "textarea") ? "value" : "placeholder");
        break;
    }
  }
}

static void push_element(input_t *in, built_t *bt, int depth);

/* Pushes children onto the stack; returns how many. */
static int push_children(input_t *in, built_t *bt, int depth, int in_list) {
  unsigned n = pick(in, 5);
  int pushed = 0;
  for (unsigned k = 0; k < n; k++) {
    if (!lua_checkstack(L, 4)) break;
    switch (pick(in, 5)) {
      case 0:
      case 1: {
        push_text(in);
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        clank_buf_append(&bt->text, s, len);
        break;
      }
      case 2: {
        lua_Integer v = (lua_Integer)pick(in, 256) * (pick(in, 2) ? -1000003 : 1);
        lua_pushinteger(L, v);
        char s[32];
        int len = snprintf(s, sizeof s, "%lld", (long long)v);
        clank_buf_append(&bt->text, s, (size_t)len);
        break;
      }
      case 3:
        if (depth >= MAX_DEPTH || bt->nelements >= MAX_ELEMENTS) continue;
        push_element(in, bt, depth + 1);
        break;
      default: { /* a nested list, flattened by h */
        if (in_list > 2) continue;
        int top = lua_gettop(L);
        int m = push_children(in, bt, depth, in_list + 1);
        lua_createtable(L, m, 0);
        lua_insert(L, top + 1);
        for (int j = m; j >= 1; j--) lua_rawseti(L, top + 1, j);
        break;
      }
    }
    pushed++;
  }
  return pushed;
}

static void push_element(input_t *in, built_t *bt, int depth) {
  unsigned t = pick(in, NTAGS);
  int i = bt->nelements++;
  bt->tags[i] = tags[t];
  bt->is_void[i] = voids[t];
  bt->title[i] = NULL;
  int base = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, h_ref);
  lua_pushstring(L, tags[t]);
  push_props(in, bt, i);
  int nchildren = voids[t] ? 0 : push_children(in, bt, depth, 0);
  lua_call(L, 2 + nchildren, 1);
  (void)base;
}

/* ---- checking the output ---- */

static void fail(const char *what, const char *html, size_t n) {
  fprintf(stderr, "fuzz/render: %s in:\n", what);
  fwrite(html, 1, n, stderr);
  fputc('\n', stderr);
  abort();
}

/* Undoes the four entities render writes into out; -1 on any other & or a raw < > ". */
static int unescape(const char *s, size_t n, clank_buf_t *out, int in_attr) {
  static const struct {
    const char *e;
    char c;
  } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}};
  for (size_t i = 0; i < n;) {
    char c = s[i];
    if (c == '<' || c == '>' || (in_attr && c == '"')) return -1;
    if (c != '&') {
      clank_buf_append(out, &c, 1);
      i++;
      continue;
    }
    size_t k = 0;
    for (; k < 4; k++) {
      size_t m = strlen(ents[k].e);
      if (n - i >= m && memcmp(s + i, ents[k].e, m) == 0) {
        clank_buf_append(out, &ents[k].c, 1);
        i += m;
        break;
      }
    }
    if (k == 4) return -1;
  }
  return 0;
}

/* The browser's view (a URL parser, then fetch's data: URL processor): leading
   C0 controls and spaces go, and tabs and newlines go from the scheme. In a data:
   URL's (opaque) path the other C0 controls and DEL are percent-encoded, so "\f"
   is "%0c" to the data: URL processor, not whitespace; tabs and newlines there go
   too as WHATWG URL says (Node), or are percent-encoded as Chromium 156 does: both
   views are taken (tabs). javascript:, vbscript: and file: must never be rendered,
   nor a data: URL whose MIME type a browser reads as something other than a
   non-SVG image. A MIME type a browser cannot parse becomes text/plain, which runs
   nothing. */
static int is_token(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int unsafe_view(const char *v, size_t n, int tabs) {
  char s[64];
  size_t k = 0, i = 0;
  int path = 0; /* past the scheme's colon */
  while (i < n && (unsigned char)v[i] <= 32) i++;
  for (; i < n && k < sizeof s - 3; i++) {
    char c = v[i];
    int tab = c == '\t' || c == '\n' || c == '\r';
    if (tab && !(path && tabs)) continue;
    if ((unsigned char)c < ' ' || c == 127) { /* percent-encoded (only a path gets here) */
      k += (size_t)snprintf(s + k, 4, "%%%02x", (unsigned char)c);
      continue;
    }
    if (c == ':') path = 1;
    s[k++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
  }
  s[k] = '\0';
  if (!strncmp(s, "javascript:", 11) || !strncmp(s, "vbscript:", 9) || !strncmp(s, "file:", 5))
    return 1;
  if (strncmp(s, "data:", 5) != 0) return 0;
  const char *m = s + 5;
  while (*m == ' ') m++;
  size_t t = 0;
  while (is_token(m[t])) t++;
  if (t == 0 || m[t] != '/') return 0; /* no type: text/plain */
  size_t u = t + 1;
  while (is_token(m[u])) u++;
  if (u == t + 1) return 0;
  size_t e = u;
  while (m[e] == ' ') e++;
  if (m[e] != ';' && m[e] != ',' && m[e] != '\0') return 0; /* not a MIME type: text/plain */
  if (t != 5 || memcmp(m, "image", 5) != 0) return 1;
  return u - t - 1 >= 3 && memcmp(m + t + 1, "svg", 3) == 0;
}

static int unsafe_url(const char *v, size_t n) {
  return unsafe_view(v, n, 0) || unsafe_view(v, n, 1);
}

static int is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == ':' || c == '.';
}

static void check(const built_t *bt, const char *html, size_t n) {
  int stack[MAX_ELEMENTS], depth = 0, next = 0;
  clank_buf_t text = {0}, val = {0};
  size_t i = 0;
  while (i < n) {
    if (html[i] != '<') {
      size_t j = i;
      while (j < n && html[j] != '<') j++;
      if (unescape(html + i, j - i, &text, 0) != 0) fail("unescaped text", html, n);
      i = j;
      continue;
    }
    i++;
    if (i < n && html[i] == '/') {
      size_t j = ++i;
      while (j < n && is_name_char(html[j])) j++;
      if (depth == 0 || j >= n || html[j] != '>') fail("a stray closing tag", html, n);
      const char *want = bt->tags[stack[depth - 1]];
      if (strlen(want) != j - i || memcmp(want, html + i, j - i) != 0)
        fail("a closing tag that does not match", html, n);
      depth--;
      i = j + 1;
      continue;
    }
    size_t j = i;
    while (j < n && is_name_char(html[j])) j++;
    if (next >= bt->nelements) fail("more elements than were built", html, n);
    const char *want = bt->tags[next];
    if (strlen(want) != j - i || memcmp(want, html + i, j - i) != 0)
      fail("an element that was not built here", html, n);
    int el = next++;
    int saw_title = 0;
    i = j;
    for (;;) {
      if (i >= n) fail("an unterminated tag", html, n);
      if (html[i] == '>') break;
      if (html[i] != ' ') fail("no space before an attribute", html, n);
      size_t a = ++i;
      while (i < n && is_name_char(html[i])) i++;
      if (i == a) fail("an empty attribute name", html, n);
      const char *name = html + a;
      size_t nlen = i - a;
      if (nlen >= 2 && strncasecmp(name, "on", 2) == 0) fail("an event attribute", html, n);
      if (i < n && html[i] != '=') continue; /* a bare boolean attribute */
      if (i + 1 >= n || html[i + 1] != '"') fail("an unquoted attribute value", html, n);
      size_t v = i + 2, e = v;
      while (e < n && html[e] != '"') e++;
      if (e >= n) fail("an unterminated attribute value", html, n);
      clank_buf_reset(&val);
      if (unescape(html + v, e - v, &val, 1) != 0) fail("an unescaped attribute value", html, n);
      int url = (nlen == 4 && !strncasecmp(name, "href", 4)) ||
                (nlen == 3 && !strncasecmp(name, "src", 3));
      if (url && unsafe_url(val.data, val.len)) fail("an unsafe URL", html, n);
      if (nlen == 5 && !memcmp(name, "title", 5) && bt->title[el]) {
        saw_title = 1;
        if (val.len != bt->title_len[el] ||
            (val.len && memcmp(val.data, bt->title[el], val.len) != 0))
          fail("a title that is not the one given", html, n);
      }
      i = e + 1;
    }
    if (bt->title[el] && !saw_title) fail("a title left out", html, n);
    i++;
    if (!bt->is_void[el]) stack[depth++] = el;
  }
  if (depth != 0) fail("elements left open", html, n);
  if (next != bt->nelements) fail("fewer elements than were built", html, n);
  if (text.len != bt->text.len || (text.len && memcmp(text.data, bt->text.data, text.len) != 0))
    fail("text that is not the text given", html, n);
  clank_buf_free(&text);
  clank_buf_free(&val);
}

/* ---- set-up and one input ---- */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  L = luaL_newstate();
  luaL_openlibs(L);
  clank_preload_modules(L);
  const char *setup =
      "package.path = ... .. '/?.lua;' .. ... .. '/?/init.lua'\n"
      "local render = require('clank.ui.render').render\n"
      /* kept(tree, html): every element of tree an output, rendered twice with fragments
         (keeping them, then writing them), gives html both times */
      "local function mark(t, outs, depth)\n"
      "  if type(t) ~= 'table' or depth > 300 or outs[t] ~= nil then return end\n"
      "  if getmetatable(t) == getmetatable(require('clank.ui.element').h.p()) then\n"
      "    outs[t] = true\n"
      "    local c = rawget(t, 'children')\n"
      "    if type(c) == 'table' then for _, x in ipairs(c) do mark(x, outs, depth + 1) end end\n"
      "  elseif getmetatable(t) == nil then\n"
      "    for _, x in ipairs(t) do mark(x, outs, depth + 1) end\n"
      "  end\n"
      "end\n"
      "local function kept(tree, html)\n"
      "  local outs, fr = setmetatable({}, { __mode = 'k' }), setmetatable({}, { __mode = 'k' })\n"
      "  mark(tree, outs, 0)\n"
      "  local opts = { live = true, fragments = fr, outputs = outs }\n"
      "  if render(tree, opts) ~= html or render(tree, opts) ~= html then return false end\n"
      /* elsewhere (every path one level down), what was kept is not used */
      "  local h = require('clank.ui.element').h\n"
      "  local ok, moved = pcall(render, h.div(nil, tree), { live = true })\n"
      "  return not ok or render(h.div(nil, tree), opts) == moved\n"
      "end\n"
      "return require('clank.ui.element').h, render, kept";
  if (luaL_loadstring(L, setup) != LUA_OK) abort();
  lua_pushstring(L, CLANK_FUZZ_LUA_DIR);
  if (lua_pcall(L, 1, 3, 0) != LUA_OK) {
    fprintf(stderr, "fuzz/render: %s\n", lua_tostring(L, -1));
    exit(1);
  }
  kept_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  render_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  h_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

static int build_and_render(lua_State *l) {
  input_t *in = lua_touserdata(l, 1);
  built_t *bt = lua_touserdata(l, 2);
  lua_settop(l, 0);
  lua_rawgeti(l, LUA_REGISTRYINDEX, render_ref);
  int live = (int)pick(in, 2); /* live: data-clank-key and data-clank-on too */
  push_element(in, bt, 0);
  lua_pushvalue(l, -1);
  lua_insert(l, 1); /* the tree, kept for the second render */
  if (live) {
    lua_createtable(l, 0, 1);
    lua_pushboolean(l, 1);
    lua_setfield(l, -2, "live");
  }
  if (lua_pcall(l, 1 + live, 1, 0) != LUA_OK) {
    if (!bt->may_raise) {
      fprintf(stderr, "fuzz/render: raised on a tree it must render: %s\n", lua_tostring(l, -1));
      abort();
    }
    return 0;
  }
  size_t n;
  const char *html = lua_tolstring(l, -1, &n);
  if (getenv("CLANK_FUZZ_SHOW")) fprintf(stderr, "%.*s\n", (int)n, html); /* what was checked */
  check(bt, html, n);
  if (live) { /* the HTML kept of components' trees is what they render */
    lua_rawgeti(l, LUA_REGISTRYINDEX, kept_ref);
    lua_pushvalue(l, 1);
    lua_pushvalue(l, -3);
    if (lua_pcall(l, 2, 1, 0) != LUA_OK || !lua_toboolean(l, -1)) {
      fprintf(stderr, "fuzz/render: kept fragments differ: %s\n", lua_tostring(l, -1));
      abort();
    }
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input_t in = {data, size};
  built_t *bt = calloc(1, sizeof *bt);
  if (bt == NULL) abort();
  lua_pushcfunction(L, build_and_render);
  lua_pushlightuserdata(L, &in);
  lua_pushlightuserdata(L, bt);
  /* The builder itself must never raise: h accepts every tree it makes. */
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
    fprintf(stderr, "fuzz/render: building raised: %s\n", lua_tostring(L, -1));
    abort();
  }
  clank_buf_free(&bt->text);
  free(bt);
  lua_gc(L, LUA_GCSTEP, 0);
  return 0;
}
