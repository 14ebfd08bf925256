/* render_core.splices(old, new [, same_start, same_end]) → { {at, del, ins}, ... } | nil: what
   changed between two renders of a view, as the splices of a "diff" frame (README, Live views),
   for every update of every session, over pages of tens of KiB; old and new are strings or Html
   buffers (html.c). same_start and same_end, when the caller knows them (htmlPatch's answer),
   are how many bytes the two have the same at their start and at their end: not compared again.

   Applied in order to old, each splice removes del units at `at` and puts ins there; `at` counts
   in the old string, so splices never shift each other. Positions and lengths are in UTF-16 code
   units, what a browser's string indexes. nil when the part of old they count is not valid
   UTF-8 (the caller sends the whole HTML).

   The strings are compared as tokens that start at each "<" (a tag and the text after it): the
   common prefix and suffix first, then the middle token by token; at a mismatch, the nearest
   pair of positions within WINDOW tokens where the two agree again (on AGREE tokens in a row)
   ends the splice. A change the window cannot bridge becomes one splice of the rest of the
   middle, which the caller finds too large and answers with the whole HTML. */
#include <lauxlib.h>
#include <string.h>

#include "render/render_internal.h"
#include "util/bytes.h"

#define WINDOW 48
#define AGREE 3

typedef struct {
  size_t at, len;
} token_t;

/* The scratch a diff takes on the stack (below, in a userdata): some 170 tokens. */
#define SMALL_DIFF_BYTES 8192

typedef struct {
  size_t at, del;         /* in UTF-16 units of old */
  size_t ins_at, ins_end; /* bytes of new */
} splice_t;

typedef struct {
  const char *old, *new;
  token_t *a, *b;
  size_t na, nb;
  splice_t *out; /* room for na + nb: each splice takes at least one token */
  size_t nout;
  size_t at, upos, pos; /* units of old before byte upos; the old byte where a[i] starts */
  size_t i, j;
  int bad; /* old is not valid UTF-8 where it was counted */
} diff_t;

/* Tokens of s[from, to): each starts at a "<" but the first. Returns how many (out: room for
   all, or NULL to count). */
static size_t tokens(const char *s, size_t from, size_t to, token_t *out) {
  size_t n = 0, i = from;
  while (i < to) {
    const char *lt = i + 1 < to ? memchr(s + i + 1, '<', to - i - 1) : NULL;
    size_t k = lt ? (size_t)(lt - s) : to;
    if (out) out[n] = (token_t){i, k - i};
    n++;
    i = k;
  }
  return n;
}

/* Token k of a list of n (past the end: none, which equals only none). */
static int same_token(const diff_t *d, size_t i, size_t j) {
  int ea = i >= d->na, eb = j >= d->nb;
  if (ea || eb) return ea && eb;
  return d->a[i].len == d->b[j].len &&
         memcmp(d->old + d->a[i].at, d->new + d->b[j].at, d->a[i].len) == 0;
}

static int agree(const diff_t *d, size_t i, size_t j) {
  for (size_t k = 0; k < AGREE; k++) {
    if (!same_token(d, i + k, j + k)) return 0;
    if (i + k >= d->na) return 1; /* both ran out together */
  }
  return 1;
}

static size_t units(diff_t *d, size_t from, size_t to) {
  size_t n = clank_utf16_units(d->old + from, to - from);
  if (n == CLANK_UTF8_BAD) {
    d->bad = 1;
    return 0;
  }
  return n;
}

/* Deletes a[i .. i+da) and inserts b[j .. jj); both go on from there. */
static void splice(diff_t *d, size_t da, size_t jj) {
  d->at += units(d, d->upos, d->pos);
  d->upos = d->pos;
  size_t dbytes = 0;
  for (size_t k = d->i; k < d->i + da; k++) dbytes += d->a[k].len;
  size_t ins_at = d->j < d->nb ? d->b[d->j].at : 0, ins_end = ins_at;
  if (jj > d->j) ins_end = d->b[jj - 1].at + d->b[jj - 1].len;
  size_t del = units(d, d->pos, d->pos + dbytes);
  splice_t *last = d->nout ? &d->out[d->nout - 1] : NULL;
  /* right after the previous one: one splice (no token was equal in between, so what it
     inserts follows what that one did in new) */
  if (last && last->at + last->del == d->at &&
      (ins_end == ins_at || last->ins_end == last->ins_at || last->ins_end == ins_at)) {
    last->del += del;
    if (ins_end > ins_at) {
      if (last->ins_end == last->ins_at) last->ins_at = ins_at;
      last->ins_end = ins_end;
    }
  } else {
    d->out[d->nout++] = (splice_t){d->at, del, ins_at, ins_end};
  }
  d->at += del;
  d->pos += dbytes;
  d->upos = d->pos;
  d->i += da;
  d->j = jj;
}

/* The middles, token by token. */
static void walk(diff_t *d) {
  while (d->i < d->na || d->j < d->nb) {
    if (d->i < d->na && same_token(d, d->i, d->j)) {
      d->pos += d->a[d->i].len;
      d->i++;
      d->j++;
      continue;
    }
    int found = 0;
    for (size_t w = 1; w <= WINDOW && !found; w++) {
      for (size_t da = 0; da <= w; da++) {
        size_t ii = d->i + da, jj = d->j + w - da;
        if (ii <= d->na && jj <= d->nb && same_token(d, ii, jj) && agree(d, ii, jj)) {
          splice(d, da, jj);
          found = 1;
          break;
        }
      }
    }
    if (!found) splice(d, d->na - d->i, d->nb); /* the rest of the middle */
    if (d->bad) return;
  }
}

int clank_render_splices(lua_State *L) {
  size_t lo, ln;
  const char *old = clank_render_html_text(L, 1, &lo);
  const char *new = clank_render_html_text(L, 2, &ln);
  /* the common prefix, then back to the start of its last token (a "<"), so that splices start
     and end on token boundaries, which are character boundaries; the common suffix (not into
     the prefix), its first byte a "<" unless it is empty */
  size_t limit = lo < ln ? lo : ln;
  size_t p = (size_t)luaL_optinteger(L, 3, 0), s = (size_t)luaL_optinteger(L, 4, 0);
  if (p > limit) p = limit;
  while (p + 8 <= limit && memcmp(old + p, new + p, 8) == 0) p += 8;
  while (p < limit && old[p] == new[p]) p++;
  size_t rest = limit - p;
  if (s > rest) s = rest;
  while (s + 8 <= rest && memcmp(old + lo - s - 8, new + ln - s - 8, 8) == 0) s += 8;
  while (s < rest && old[lo - s - 1] == new[ln - s - 1]) s++;
  if (p < limit || lo != ln)
    while (p > 0 && (p >= lo || old[p] != '<')) p--;
  if (p == lo && p == ln) {
    lua_createtable(L, 0, 0);
    return 1;
  }
  if (s > limit - p) s = limit - p;
  while (s > 0 && old[lo - s] != '<') s--;

  diff_t d = {.old = old, .new = new};
  d.na = tokens(old, p, lo - s, NULL);
  d.nb = tokens(new, p, ln - s, NULL);
  /* the tokens and the splices: on the C stack for the usual update (a row or two changed),
     else in a userdata (what a memory error leaves, the collector takes). A kilobyte or more of
     garbage per update was a large block for malloc, and work for the collector, each time. */
  size_t n = d.na + d.nb + 1, bytes = n * (sizeof(splice_t) + sizeof(token_t));
  splice_t small[SMALL_DIFF_BYTES / sizeof(splice_t)];
  d.out = bytes <= sizeof small ? small : lua_newuserdatauv(L, bytes, 0);
  d.a = (token_t *)(d.out + n);
  d.b = d.a + d.na;
  tokens(old, p, lo - s, d.a);
  tokens(new, p, ln - s, d.b);
  d.at = units(&d, 0, p);
  d.upos = d.pos = p;
  if (!d.bad) walk(&d);
  if (d.bad) {
    lua_pushnil(L);
    return 1;
  }
  luaL_checkstack(L, 4, "clank.live.diff");
  lua_createtable(L, (int)d.nout, 0);
  for (size_t k = 0; k < d.nout; k++) {
    const splice_t *sp = &d.out[k];
    lua_createtable(L, 3, 0);
    lua_pushinteger(L, (lua_Integer)sp->at);
    lua_rawseti(L, -2, 1);
    lua_pushinteger(L, (lua_Integer)sp->del);
    lua_rawseti(L, -2, 2);
    lua_pushlstring(L, new + sp->ins_at, sp->ins_end - sp->ins_at);
    lua_rawseti(L, -2, 3);
    lua_rawseti(L, -2, (lua_Integer)k + 1);
  }
  return 1;
}
