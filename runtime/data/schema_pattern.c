/* Lua patterns in clank.schema: their syntax is checked at build time and
   they are translated to ECMA-262 regexes for the JSON Schema `pattern`.
   Lua matches bytes and ECMA-262 code points, so only ASCII classes are
   carried over; `%b`, `%f` and back-references have no regex equivalent. */
#include <string.h>

#include "data/schema_internal.h"
#include "util/bytes.h"

/* The ASCII class of %c, as the inside of an ECMA-262 character class. */
static const char *class_body(int c) {
  switch (c) {
    case 'a': return "A-Za-z";
    case 'c': return "\\x00-\\x1F\\x7F";
    case 'd': return "0-9";
    case 'g': return "!-~";
    case 'l': return "a-z";
    case 'p': return "!-\\/:-@\\[-`{-~";
    case 's': return "\\t-\\r ";
    case 'u': return "A-Z";
    case 'w': return "0-9A-Za-z";
    case 'x': return "0-9A-Fa-f";
    case 'z': return "\\x00"; /* deprecated in Lua 5.4, still NUL */
    default: return NULL;
  }
}

static int is_lower(int c) { return c >= 'a' && c <= 'z'; }
static int is_upper(int c) { return c >= 'A' && c <= 'Z'; }
static int to_lower(int c) { return is_upper(c) ? c + ('a' - 'A') : c; }

static void add_hex(luaL_Buffer *b, unsigned char c) {
  luaL_addstring(b, "\\x");
  luaL_addchar(b, clank_hex_upper[c >> 4]);
  luaL_addchar(b, clank_hex_upper[c & 15]);
}

/* One literal byte outside a class. */
static void add_literal(luaL_Buffer *b, unsigned char c) {
  if (c < 0x20 || c == 0x7F)
    add_hex(b, c);
  else {
    if (strchr("^$\\.*+?()[]{}|/", c)) luaL_addchar(b, '\\');
    luaL_addchar(b, (char)c);
  }
}

/* One literal byte inside a class. */
static void add_class_literal(luaL_Buffer *b, unsigned char c) {
  if (c < 0x20 || c == 0x7F)
    add_hex(b, c);
  else {
    if (strchr("\\]^-[/", c)) luaL_addchar(b, '\\');
    luaL_addchar(b, (char)c);
  }
}

/* The end of the set starting at p[i] == '[' (index of its ']'), or 0. */
static size_t set_end(const char *p, size_t len, size_t i) {
  i++;
  if (i < len && p[i] == '^') i++;
  do { /* the first character is always part of the set, even ']' */
    if (i >= len) return 0;
    if (p[i++] == '%') {
      if (i >= len) return 0;
      i++;
    }
  } while (i >= len || p[i] != ']');
  return i;
}

/* Translates the set p[i..e] (p[i] == '[', p[e] == ']'). Classes whose
   negation sits inside the set become alternatives or lookaheads. */
static void add_set(luaL_Buffer *b, const char *p, size_t i, size_t e) {
  int negated = 0;
  char neg[16]; /* negated classes (%A ...) met in the set, lower-cased */
  size_t nneg = 0;
  luaL_Buffer *out = b;
  lua_State *L = b->L;
  luaL_Buffer s;
  size_t k = i + 1;
  if (p[k] == '^') {
    negated = 1;
    k++;
  }
  luaL_buffinit(L, &s);
  while (k < e) {
    unsigned char c = (unsigned char)p[k];
    if (c == '%') {
      int d = (unsigned char)p[k + 1];
      const char *body = class_body(to_lower(d));
      if (body && is_upper(d)) {
        if (nneg < sizeof neg && !memchr(neg, to_lower(d), nneg)) neg[nneg++] = (char)to_lower(d);
      } else if (body)
        luaL_addstring(&s, body);
      else
        add_class_literal(&s, (unsigned char)d);
      k += 2;
    } else if (k + 2 < e && p[k + 1] == '-') {
      if (c <= (unsigned char)p[k + 2]) { /* Lua allows empty ranges, ECMA-262 refuses them */
        add_class_literal(&s, c);
        luaL_addchar(&s, '-');
        add_class_literal(&s, (unsigned char)p[k + 2]);
      }
      k += 3;
    } else {
      add_class_literal(&s, c);
      k++;
    }
  }
  luaL_pushresult(&s); /* the plain part, on top of b's stack level */
  size_t slen;
  const char *plain = lua_tolstring(L, -1, &slen);
  /* leave exactly one string above b's level: luaL_addvalue takes it */
  if (nneg == 0) {
    lua_pushstring(L, negated ? "[^" : "[");
    lua_insert(L, -2);
    lua_pushliteral(L, "]");
    lua_concat(L, 3);
  } else if (!negated) { /* (?:[plain]|[^X1]|[^X2]) */
    luaL_Buffer t;
    luaL_buffinit(L, &t);
    luaL_addstring(&t, "(?:");
    if (slen) {
      luaL_addchar(&t, '[');
      luaL_addlstring(&t, plain, slen);
      luaL_addstring(&t, "]|");
    }
    for (size_t j = 0; j < nneg; j++) {
      if (j) luaL_addchar(&t, '|');
      luaL_addstring(&t, "[^");
      luaL_addstring(&t, class_body(neg[j]));
      luaL_addchar(&t, ']');
    }
    luaL_addchar(&t, ')');
    luaL_pushresult(&t);
    lua_remove(L, -2);
  } else { /* not plain and not any of the negations: (?:(?![plain])(?=[X1])[X2]) */
    luaL_Buffer t;
    luaL_buffinit(L, &t);
    luaL_addstring(&t, "(?:");
    if (slen) {
      luaL_addstring(&t, "(?![");
      luaL_addlstring(&t, plain, slen);
      luaL_addstring(&t, "])");
    }
    for (size_t j = 0; j < nneg; j++) {
      luaL_addstring(&t, j + 1 < nneg ? "(?=[" : "[");
      luaL_addstring(&t, class_body(neg[j]));
      luaL_addstring(&t, j + 1 < nneg ? "])" : "]");
    }
    luaL_addchar(&t, ')');
    luaL_pushresult(&t);
    lua_remove(L, -2);
  }
  luaL_addvalue(out);
}

const char *clank_schema_translate_pattern(const char *p, size_t len, luaL_Buffer *b) {
  size_t i = 0;
  int open = 0;
  if (clank_schema_utf8_len(p, len) < 0) return "it is not valid UTF-8";
  if (len > 0 && p[0] == '^') {
    luaL_addchar(b, '^');
    i = 1;
  }
  while (i < len) {
    unsigned char c = (unsigned char)p[i];
    size_t ep; /* end of the single-character item */
    if (c == '(') {
      if (i + 1 < len && p[i + 1] == ')') { /* position capture: matches empty */
        luaL_addstring(b, "()");
        i += 2;
      } else {
        luaL_addchar(b, '(');
        open++;
        i++;
      }
      continue;
    }
    if (c == ')') {
      if (open == 0) return "invalid pattern capture";
      open--;
      luaL_addchar(b, ')');
      i++;
      continue;
    }
    if (c == '$' && i + 1 == len) {
      luaL_addchar(b, '$');
      i++;
      continue;
    }
    if (c == '%') {
      if (i + 1 >= len) return "malformed pattern (ends with '%')";
      int d = (unsigned char)p[i + 1];
      if (d == 'b') return "%b has no ECMA-262 equivalent";
      if (d == 'f') return "%f has no ECMA-262 equivalent";
      if (d >= '0' && d <= '9') return "back-references have no ECMA-262 equivalent";
      const char *body = class_body(to_lower(d));
      if (body) {
        luaL_addstring(b, is_lower(d) ? "[" : "[^");
        luaL_addstring(b, body);
        luaL_addchar(b, ']');
      } else
        add_literal(b, (unsigned char)d);
      ep = i + 2;
    } else if (c == '[') {
      size_t e = set_end(p, len, i);
      if (e == 0) return "malformed pattern (missing ']')";
      add_set(b, p, i, e);
      ep = e + 1;
    } else if (c == '.') {
      luaL_addstring(b, "[\\s\\S]");
      ep = i + 1;
    } else {
      add_literal(b, c);
      ep = i + 1;
    }
    if (ep < len && p[ep] != '\0' && strchr("*+?-", p[ep])) {
      switch (p[ep]) {
        case '*': luaL_addchar(b, '*'); break;
        case '+': luaL_addchar(b, '+'); break;
        case '?': luaL_addchar(b, '?'); break;
        default: luaL_addstring(b, "*?"); break;
      }
      ep++;
    }
    i = ep;
  }
  if (open) return "unfinished capture";
  return NULL;
}
