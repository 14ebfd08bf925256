/* Lua patterns matched in linear time (schema_match.h).

   string.find backtracks: `^%w+%s?%w+$` on 40,000 bytes takes seconds, all
   of them in one C call that no hook interrupts. What the schema builder
   accepts (no %b, %f or back-references) is a regular language: a sequence
   of single-byte items, each with an optional quantifier, after an optional
   `^` and before an optional `$`; captures decide what find returns, never
   whether it finds, and lazy `-` accepts what greedy `*` does. So each item
   is compiled to its 256-bit byte set, and each item to the set of states
   that may come after it matched a byte; a match reads the input once,
   carrying the set of states (items still to match, and one more for
   "matched") that the bytes so far can lead to (Thompson's simulation).

   Classes are those of Lua in the C locale (clank never calls setlocale):
   ASCII only, bytes >= 0x80 are in no class, only in negations. */
#include "data/schema_match.h"

#include <stdint.h>
#include <string.h>

#define WORDS 4 /* of a state set: CLANK_MATCH_MAX_ITEMS + 1 states */

enum { Q_ONE, Q_OPT, Q_STAR, Q_PLUS }; /* no quantifier, ?, * or -, + */

/* State i < nitems: item i is the next to match; state nitems: matched.
   data holds nitems + 1 byte sets (4 words each, the last one empty), then
   nitems + 1 follow sets (nwords each): the states after a byte that item
   i matched (the last one empty). */
struct clank_match_s {
  uint32_t nitems;
  uint32_t nwords;
  unsigned char anchored; /* `^`: only the first byte starts a match */
  unsigned char at_end;   /* `$`: only the last byte ends one */
  uint64_t start[WORDS];  /* the states before any byte is read */
  uint64_t data[];
};

/* ======================================================================
   Classes and sets
   ====================================================================== */

static int in_range(int c, int lo, int hi) { return c >= lo && c <= hi; }
static int is_alpha(int c) { return in_range(c, 'a', 'z') || in_range(c, 'A', 'Z'); }
static int is_digit(int c) { return in_range(c, '0', '9'); }
static int is_alnum(int c) { return is_alpha(c) || is_digit(c); }

/* Whether byte c is in the class of `%cl` (Lua's match_class, C locale):
   a class letter, its upper-case negation, or cl itself. */
static int in_class(int c, int cl) {
  int yes;
  switch (cl | 0x20) { /* lower case: only letters become letters */
    case 'a': yes = is_alpha(c); break;
    case 'c': yes = c < 0x20 || c == 0x7F; break;
    case 'd': yes = is_digit(c); break;
    case 'g': yes = in_range(c, 0x21, 0x7E); break;
    case 'l': yes = in_range(c, 'a', 'z'); break;
    case 'p': yes = in_range(c, 0x21, 0x7E) && !is_alnum(c); break;
    case 's': yes = c == ' ' || in_range(c, '\t', '\r'); break;
    case 'u': yes = in_range(c, 'A', 'Z'); break;
    case 'w': yes = is_alnum(c); break;
    case 'x': yes = is_digit(c) || in_range(c | 0x20, 'a', 'f'); break;
    case 'z': yes = c == 0; break; /* deprecated in Lua, still there */
    default: return c == cl;
  }
  return in_range(cl, 'a', 'z') ? yes : !yes;
}

/* The index of the `]` closing the set that opens at p[i] (Lua's classend:
   the first byte, or the one after `^`, is always in the set, even `]`;
   `%` escapes the next byte), or 0 when there is none. */
static size_t set_end(const unsigned char *p, size_t len, size_t i) {
  i++;
  if (i < len && p[i] == '^') i++;
  do {
    if (i >= len) return 0;
    if (p[i++] == '%' && i < len) i++;
  } while (i >= len || p[i] != ']');
  return i;
}

/* Whether byte c is in the set p[i..e] (p[i] == '[', p[e] == ']'), read as
   Lua's matchbracketclass reads it: `%x` a class, `a-z` a range when a byte
   follows the `-` before the end, anything else itself. */
static int in_set(int c, const unsigned char *p, size_t i, size_t e) {
  int yes = 1;
  size_t k = i + 1;
  if (p[k] == '^') {
    yes = 0;
    k++;
  }
  for (; k < e; k++) {
    if (p[k] == '%') {
      k++;
      if (in_class(c, p[k])) return yes;
    } else if (p[k + 1] == '-' && k + 2 < e) {
      if (p[k] <= c && c <= p[k + 2]) return yes;
      k += 2;
    } else if (p[k] == c) {
      return yes;
    }
  }
  return !yes;
}

/* ======================================================================
   Compiling
   ====================================================================== */

/* One item: what p[i] starts is a class `%x`, a set, `.` or a byte. */
typedef struct item_s {
  int kind;    /* '%', '[', '.' or 0 */
  size_t i, e; /* where it starts; a set's `]` */
} item_t;

static int item_has(const item_t *it, const unsigned char *p, int c) {
  switch (it->kind) {
    case '%': return in_class(c, p[it->i + 1]);
    case '[': return in_set(c, p, it->i, it->e);
    case '.': return 1;
    default: return c == p[it->i];
  }
}

static size_t mem_size(size_t nitems) {
  size_t nwords = nitems / 64 + 1;
  return offsetof(clank_match_t, data) + (nitems + 1) * (WORDS + nwords) * sizeof(uint64_t);
}

/* Reads the pattern as Lua's match does, from left to right; with m, writes
   each item's byte set into it and its quantifier into q. */
static const char *parse(const unsigned char *p, size_t len, clank_match_t *m, unsigned char *q,
                         size_t *nitems) {
  size_t i = 0, n = 0;
  int level = 0, open = 0; /* captures started; of those, not closed */
  if (len > 0 && p[0] == '^') {
    if (m) m->anchored = 1;
    i = 1;
  }
  while (i < len) {
    item_t it = {0, i, 0};
    size_t ep; /* after the item, where its quantifier may be */
    switch (p[i]) {
      case '(':
        if (++level > CLANK_MATCH_MAX_CAPTURES) return "more than 32 captures";
        if (i + 1 < len && p[i + 1] == ')') /* a position capture */
          i += 2;
        else {
          open++;
          i++;
        }
        continue;
      case ')':
        if (open == 0) return "invalid pattern capture";
        open--;
        i++;
        continue;
      case '$':
        if (i + 1 == len) { /* the last byte: an anchor, else itself */
          if (m) m->at_end = 1;
          i++;
          continue;
        }
        ep = i + 1;
        break;
      case '%':
        if (i + 1 >= len) return "malformed pattern (ends with '%')";
        if (p[i + 1] == 'b') return "%b is not supported";
        if (p[i + 1] == 'f') return "%f is not supported";
        if (is_digit(p[i + 1])) return "back-references are not supported";
        it.kind = '%';
        ep = i + 2;
        break;
      case '[':
        it.kind = '[';
        it.e = set_end(p, len, i);
        if (it.e == 0) return "malformed pattern (missing ']')";
        ep = it.e + 1;
        break;
      case '.':
        it.kind = '.';
        ep = i + 1;
        break;
      default: ep = i + 1; break;
    }
    int quant = Q_ONE;
    if (ep < len) {
      switch (p[ep]) {
        case '?': quant = Q_OPT; break;
        case '*':
        case '-': quant = Q_STAR; break;
        case '+': quant = Q_PLUS; break;
        default: break;
      }
    }
    if (n == CLANK_MATCH_MAX_ITEMS) return "more than 255 items (characters, classes or sets)";
    if (m) {
      uint64_t *set = m->data + n * WORDS;
      for (int c = 0; c < 256; c++)
        if (item_has(&it, p, c)) set[c >> 6] |= (uint64_t)1 << (c & 63);
      q[n] = (unsigned char)quant;
    }
    n++;
    i = ep + (quant != Q_ONE);
  }
  if (open) return "unfinished capture";
  *nitems = n;
  return NULL;
}

const char *clank_match_size(const char *p, size_t len, size_t *size) {
  size_t n;
  const char *why = parse((const unsigned char *)p, len, NULL, NULL, &n);
  if (why == NULL) *size = mem_size(n);
  return why;
}

static void add_state(uint64_t *set, size_t s) { set[s >> 6] |= (uint64_t)1 << (s & 63); }

/* State s, and those after it while the one before may match nothing. */
static void add_closure(uint64_t *set, const unsigned char *q, size_t n, size_t s) {
  add_state(set, s);
  while (s < n && (q[s] == Q_OPT || q[s] == Q_STAR)) add_state(set, ++s);
}

clank_match_t *clank_match_compile(const char *p, size_t len, void *mem) {
  unsigned char q[CLANK_MATCH_MAX_ITEMS];
  size_t n = 0;
  clank_match_t *m = mem;
  parse((const unsigned char *)p, len, NULL, NULL, &n); /* accepted: only its size */
  memset(m, 0, mem_size(n));
  m->nitems = (uint32_t)n;
  m->nwords = (uint32_t)(n / 64 + 1);
  parse((const unsigned char *)p, len, m, q, &n);
  add_closure(m->start, q, n, 0);
  uint64_t *follow = m->data + (n + 1) * WORDS;
  for (size_t i = 0; i < n; i++) {
    uint64_t *f = follow + i * m->nwords;
    if (q[i] == Q_STAR || q[i] == Q_PLUS) add_state(f, i); /* once more */
    add_closure(f, q, n, i + 1);
  }
  return m;
}

size_t clank_match_items(const clank_match_t *m) { return m->nitems; }

/* ======================================================================
   Matching
   ====================================================================== */

/* One byte: the states that item i in cur leads to when it matches c, or,
   with only one word of states, the same on one word. counted is a
   constant in each caller: the production path pays nothing for steps. */
static inline __attribute__((always_inline)) int run(const clank_match_t *m, const unsigned char *s,
                                                     size_t len, size_t *steps, int counted) {
  const size_t n = m->nitems, nw = m->nwords;
  const uint64_t *sets = m->data, *follow = m->data + (n + 1) * WORDS;
  const size_t aw = n >> 6;
  const uint64_t abit = (uint64_t)1 << (n & 63);
  uint64_t cur[WORDS], next[WORDS];
  size_t work = 0;
  memcpy(cur, m->start, sizeof cur);
  for (size_t pos = 0;; pos++) {
    if ((cur[aw] & abit) && (!m->at_end || pos == len)) {
      if (counted) *steps += work;
      return 1;
    }
    if (pos == len) break;
    const unsigned c = s[pos];
    const size_t cw = c >> 6;
    const uint64_t cb = (uint64_t)1 << (c & 63);
    uint64_t any = 0;
    if (nw == 1) {
      uint64_t nx = m->anchored ? 0 : m->start[0];
      for (uint64_t x = cur[0]; x; x &= x - 1) {
        size_t st = (size_t)__builtin_ctzll(x);
        if (counted) work++;
        if (sets[st * WORDS + cw] & cb) nx |= follow[st];
      }
      cur[0] = nx;
      any = nx;
    } else {
      for (size_t w = 0; w < nw; w++) next[w] = m->anchored ? 0 : m->start[w];
      for (size_t w = 0; w < nw; w++) {
        for (uint64_t x = cur[w]; x; x &= x - 1) {
          size_t st = w * 64 + (size_t)__builtin_ctzll(x);
          if (counted) work++;
          if (sets[st * WORDS + cw] & cb)
            for (size_t k = 0; k < nw; k++) next[k] |= follow[st * nw + k];
        }
      }
      for (size_t w = 0; w < nw; w++) any |= cur[w] = next[w];
    }
    if (any == 0) break; /* anchored, and nothing left to try */
  }
  if (counted) *steps += work;
  return 0;
}

int clank_match_find(const clank_match_t *m, const char *s, size_t len) {
  return run(m, (const unsigned char *)s, len, NULL, 0);
}

int clank_match_find_counted(const clank_match_t *m, const char *s, size_t len, size_t *steps) {
  return run(m, (const unsigned char *)s, len, steps, 1);
}
