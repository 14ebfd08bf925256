/* clank_json_decode: a strict RFC 8259 reader in one pass, straight onto the
   Lua stack. Malformed input is an answer (nil, message), not an error: only
   running out of memory raises. */
#include <lauxlib.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "data/json.h"
#include "data/json_scan.h"
#include "core/values.h"

#define MAXDEPTH 64

typedef struct {
  lua_State *L;
  const char *s, *p, *end;
  int depth;
  int mt;          /* stack index of the array metatable */
  const char *err; /* what went wrong, and where */
  const char *at;
} dec_t;

static int fail(dec_t *d, const char *p, const char *err) {
  d->at = p;
  d->err = err;
  return -1;
}

/* At the end of input every complaint is the same one. */
static int unexpected(dec_t *d, const char *p) {
  return fail(d, p, p < d->end ? "unexpected character" : "unexpected end of input");
}

static void skip_ws(dec_t *d) { d->p = clank_json_skip_ws(d->p, d->end); }

size_t clank_json_utf8_char(const unsigned char *p, size_t n) {
  unsigned c = p[0];
  unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
  size_t len;
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0; /* continuation byte, or overlong 2-byte lead */
  if (c < 0xE0)
    len = 2;
  else if (c < 0xF0) {
    len = 3;
    if (c == 0xE0)
      lo = 0xA0; /* overlong */
    else if (c == 0xED)
      hi = 0x9F; /* UTF-16 surrogates (CESU-8) */
  } else if (c < 0xF5) {
    len = 4;
    if (c == 0xF0)
      lo = 0x90; /* overlong */
    else if (c == 0xF4)
      hi = 0x8F; /* above U+10FFFF */
  } else
    return 0;
  if (n < len || p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if ((p[i] & 0xC0) != 0x80) return 0;
  return len;
}

static int hex4(const char *p, const char *end, unsigned *u) {
  if (end - p < 4) return -1;
  *u = 0;
  for (int i = 0; i < 4; i++) {
    unsigned c = (unsigned char)p[i], v;
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
      v = (c | 0x20) - 'a' + 10;
    else
      return -1;
    *u = *u << 4 | v;
  }
  return 0;
}

static void add_utf8(luaL_Buffer *b, unsigned u) {
  char s[4];
  size_t n;
  if (u < 0x80) {
    s[0] = (char)u;
    n = 1;
  } else if (u < 0x800) {
    s[0] = (char)(0xC0 | u >> 6);
    s[1] = (char)(0x80 | (u & 0x3F));
    n = 2;
  } else if (u < 0x10000) {
    s[0] = (char)(0xE0 | u >> 12);
    s[1] = (char)(0x80 | (u >> 6 & 0x3F));
    s[2] = (char)(0x80 | (u & 0x3F));
    n = 3;
  } else {
    s[0] = (char)(0xF0 | u >> 18);
    s[1] = (char)(0x80 | (u >> 12 & 0x3F));
    s[2] = (char)(0x80 | (u >> 6 & 0x3F));
    s[3] = (char)(0x80 | (u & 0x3F));
    n = 4;
  }
  luaL_addlstring(b, s, n);
}

#define P8 1, 1, 1, 1, 1, 1, 1, 1
#define P16 P8, P8
const unsigned char clank_json_plain_byte[256] = {
    [0x20] = 1, 1, 0, P8, 1, 1, 1, 1, 1, /* 0x20-0x2f: not '"' */
    P16,                                 /* 0x30-0x3f */
    P16,                                 /* 0x40-0x4f */
    P8,         1, 1, 1,  1, 0, 1, 1, 1, /* 0x50-0x5f: not '\\' */
    P16,                                 /* 0x60-0x6f */
    P16,                                 /* 0x70-0x7f */
};

/* Checks the raw bytes at p; returns how many to take, or 0 when the string
   ends here (closing quote or backslash) — errors set d->err and return -1.
   Eight bytes at a time while eight remain. */
static long plain_run(dec_t *d, const char *p) {
  const char *q = p;
  while (q < d->end) {
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w, m = 0;
    while (d->end - q >= 8 && (memcpy(&w, q, 8), (m = clank_json_stop_bytes(w)) == 0)) q += 8;
    if (m != 0) q += __builtin_ctzll(m) >> 3;
    if (q == d->end) break;
#endif
    unsigned char c = (unsigned char)*q;
    if (clank_json_plain_byte[c]) {
      q++;
      continue;
    }
    if (c == '"' || c == '\\') break;
    if (c < 0x20) return fail(d, q, "control character in string");
    size_t n = clank_json_utf8_char((const unsigned char *)q, (size_t)(d->end - q));
    if (n == 0) return fail(d, q, "invalid UTF-8");
    q += n;
  }
  if (q == d->end) return fail(d, q, "unterminated string");
  return q - p;
}

/* One \-escape at p (the backslash) into b; returns the bytes consumed. */
static long escape(dec_t *d, const char *p, luaL_Buffer *b) {
  unsigned u, lo;
  if (p + 1 == d->end) return fail(d, p + 1, "unterminated string");
  switch (p[1]) {
    case '"': luaL_addchar(b, '"'); return 2;
    case '\\': luaL_addchar(b, '\\'); return 2;
    case '/': luaL_addchar(b, '/'); return 2;
    case 'b': luaL_addchar(b, '\b'); return 2;
    case 'f': luaL_addchar(b, '\f'); return 2;
    case 'n': luaL_addchar(b, '\n'); return 2;
    case 'r': luaL_addchar(b, '\r'); return 2;
    case 't': luaL_addchar(b, '\t'); return 2;
    case 'u': break;
    default: return fail(d, p, "invalid escape");
  }
  if (hex4(p + 2, d->end, &u) != 0) return fail(d, p, "invalid \\u escape");
  if (u >= 0xDC00 && u <= 0xDFFF) return fail(d, p, "lone surrogate escape");
  if (u >= 0xD800 && u <= 0xDBFF) { /* needs its low half right after */
    if (d->end - p < 12 || p[6] != '\\' || p[7] != 'u' || hex4(p + 8, d->end, &lo) != 0 ||
        lo < 0xDC00 || lo > 0xDFFF)
      return fail(d, p, "lone surrogate escape");
    add_utf8(b, 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00));
    return 12;
  }
  add_utf8(b, u);
  return 6;
}

/* d->p at the opening quote. Strings without escapes go straight from the
   input; the others through a luaL_Buffer on the stack. */
static int parse_string(dec_t *d) {
  const char *p = d->p + 1;
  long n = plain_run(d, p);
  if (n < 0) return -1;
  if (p[n] == '"') {
    lua_pushlstring(d->L, p, (size_t)n);
    d->p = p + n + 1;
    return 0;
  }
  luaL_Buffer b;
  luaL_buffinit(d->L, &b);
  for (;;) {
    luaL_addlstring(&b, p, (size_t)n);
    p += n;
    if (*p == '"') break;
    if ((n = escape(d, p, &b)) < 0) return -1;
    p += n;
    if ((n = plain_run(d, p)) < 0) return -1;
  }
  luaL_pushresult(&b);
  d->p = p + 1;
  return 0;
}

static int isdigit_(const char *p, const char *end) { return p < end && *p >= '0' && *p <= '9'; }

/* Most numbers in requests are short: an integer of up to 18 digits is
   exact in 64 bits, and a decimal of up to 15 digits without an exponent is
   m / 10^k with both exact as doubles, so one division rounds it correctly
   (Clinger's fast path) — the value strtod gives, without the copy and the
   call. Returns 1 when it pushed the number. */
static int fast_number(lua_State *L, const char *start, const char *int_end, const char *frac,
                       const char *frac_end, int has_exp) {
  if (has_exp) return 0;
  int neg = *start == '-';
  const char *q = start + neg;
  size_t digits = (size_t)(int_end - q) + (frac ? (size_t)(frac_end - frac) : 0);
  if (digits > (frac ? 15u : 18u)) return 0;
  uint64_t m = 0;
  for (; q < int_end; q++) m = m * 10 + (uint64_t)(*q - '0');
  if (!frac) {
    lua_pushinteger(L, neg ? -(lua_Integer)m : (lua_Integer)m);
    return 1;
  }
  for (q = frac; q < frac_end; q++) m = m * 10 + (uint64_t)(*q - '0');
  double v = (double)m / clank_json_exact_tens[frac_end - frac];
  lua_pushnumber(L, neg ? -v : v);
  return 1;
}

/* Checks the RFC 8259 grammar, then lets Lua convert: integers that fit in
   64 bits stay integers, the rest become floats (lua_stringtonumber also
   copes with a locale whose decimal point is not '.'). */
static int parse_number(dec_t *d) {
  const char *p = d->p, *start = p, *end = d->end;
  if (*p == '-') p++;
  if (!isdigit_(p, end)) return fail(d, p, p < end ? "invalid number" : "unexpected end of input");
  if (*p == '0') {
    if (isdigit_(++p, end)) return fail(d, p, "leading zero in number");
  } else
    while (isdigit_(p, end)) p++;
  const char *int_end = p, *frac = NULL;
  if (p < end && *p == '.') {
    if (!isdigit_(++p, end)) return fail(d, p, "digit expected after the decimal point");
    frac = p;
    while (isdigit_(p, end)) p++;
  }
  int has_exp = 0;
  if (p < end && (*p == 'e' || *p == 'E')) {
    has_exp = 1;
    p++;
    if (p < end && (*p == '+' || *p == '-')) p++;
    if (!isdigit_(p, end)) return fail(d, p, "digit expected in the exponent");
    while (isdigit_(p, end)) p++;
  }
  lua_State *L = d->L;
  if (fast_number(L, start, int_end, frac, frac ? p : NULL, has_exp)) {
    d->p = p;
    return 0;
  }
  size_t len = (size_t)(p - start);
  char small[64];
  const char *z = small;
  if (len < sizeof small) {
    memcpy(small, start, len);
    small[len] = '\0';
  } else
    z = lua_pushlstring(L, start, len); /* NUL-terminated by Lua */
  size_t ok = lua_stringtonumber(L, z);
  if (z != small) lua_remove(L, -2);
  if (ok == 0) /* only when a comma locale meets a number over 200 bytes */
    return fail(d, start, "invalid number");
  if (!lua_isinteger(L, -1) && !isfinite(lua_tonumber(L, -1)))
    return fail(d, start, "number out of range");
  d->p = p;
  return 0;
}

static int literal(dec_t *d, const char *word, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (d->p + i == d->end || d->p[i] != word[i]) return unexpected(d, d->p + i);
  d->p += n;
  return 0;
}

static int parse_value(dec_t *d);

static int enter(dec_t *d) {
  if (++d->depth > MAXDEPTH) return fail(d, d->p, "nested too deeply");
  luaL_checkstack(d->L, 4, "clank.json.decode");
  d->p++;
  skip_ws(d);
  return 0;
}

static int parse_array(dec_t *d) {
  lua_State *L = d->L;
  if (enter(d) != 0) return -1;
  /* Room for a few items up front: most arrays in request bodies are short,
     and growing from nothing reallocates at 1, 2 and 4. */
  lua_createtable(L, 4, 0);
  lua_pushvalue(L, d->mt);
  lua_setmetatable(L, -2);
  if (d->p < d->end && *d->p == ']') {
    d->p++;
    d->depth--;
    return 0;
  }
  for (lua_Integer i = 1;; i++) {
    if (parse_value(d) != 0) return -1;
    lua_rawseti(L, -2, i);
    skip_ws(d);
    if (d->p < d->end && *d->p == ',') {
      d->p++;
      continue;
    }
    if (d->p < d->end && *d->p == ']') break;
    return unexpected(d, d->p);
  }
  d->p++;
  d->depth--;
  return 0;
}

/* Duplicate keys: the last one wins, as with JSON.parse. */
static int parse_object(dec_t *d) {
  lua_State *L = d->L;
  if (enter(d) != 0) return -1;
  lua_createtable(L, 0, 4); /* as for arrays: small objects are the rule */
  if (d->p < d->end && *d->p == '}') {
    d->p++;
    d->depth--;
    return 0;
  }
  for (;;) {
    skip_ws(d);
    if (d->p == d->end || *d->p != '"') return unexpected(d, d->p);
    if (parse_string(d) != 0) return -1;
    skip_ws(d);
    if (d->p == d->end || *d->p != ':') return unexpected(d, d->p);
    d->p++;
    if (parse_value(d) != 0) return -1;
    lua_rawset(L, -3);
    skip_ws(d);
    if (d->p < d->end && *d->p == ',') {
      d->p++;
      continue;
    }
    if (d->p < d->end && *d->p == '}') break;
    return unexpected(d, d->p);
  }
  d->p++;
  d->depth--;
  return 0;
}

static int parse_value(dec_t *d) {
  skip_ws(d);
  if (d->p == d->end) return unexpected(d, d->p);
  switch (*d->p) {
    case '{': return parse_object(d);
    case '[': return parse_array(d);
    case '"': return parse_string(d);
    case 't': lua_pushboolean(d->L, 1); return literal(d, "true", 4);
    case 'f': lua_pushboolean(d->L, 0); return literal(d, "false", 5);
    case 'n': clank_push_null(d->L); return literal(d, "null", 4);
    default:
      if (*d->p == '-' || (*d->p >= '0' && *d->p <= '9')) return parse_number(d);
      return unexpected(d, d->p);
  }
}

int clank_json_decode_part(lua_State *L, const char **p, const char *end, int depth, int mt) {
  dec_t d = {L, *p, *p, end, depth, mt, NULL, NULL};
  if (parse_value(&d) != 0) return -1;
  *p = d.p;
  return 0;
}

int clank_json_decode(lua_State *L, const char *s, size_t len) {
  dec_t d = {L, s, s, s + len, 0, 0, NULL, NULL};
  int base = lua_gettop(L);
  clank_push_array_mt(L); /* fetched once for every array of the value */
  d.mt = base + 1;
  if (parse_value(&d) == 0) {
    skip_ws(&d);
    if (d.p == d.end) {
      lua_replace(L, base + 1);
      return 1;
    }
    fail(&d, d.p, "unexpected character after the value");
  }
  lua_settop(L, base);
  lua_pushnil(L);
  lua_pushfstring(L, "%s at byte %I", d.err, (lua_Integer)(d.at - s) + 1);
  return 2;
}
