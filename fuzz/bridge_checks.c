/* libFuzzer: a request and a bridge's rules → SPEC §5's checks, steps 1–7
   (runtime/agent/bridge_checks.c), run as the bridge runs them, against
   references written here from SPEC §5 and RFC 3629.

   The input reads like a request, so that seeds stay readable:

     POST /actions/tasks.create          the method, a space, the path
     origin: http://localhost:5173       headers, one a line, name: value
     x-rules-allowed-origin: http://localhost:5173
                                         and the rules as x-rules-* lines
     <empty line>
     {"title":"a"}                       the body: the rest (none without the empty line)

   Lines end at \n (a \r before it is dropped); a header repeated is one
   value joined by ", " (as clank-run joins them); header names are read in
   any case. The request's headers: origin, host, x-scheme (the view's
   scheme), sec-fetch-site, x-clank-confirmation, content-type,
   content-length, if-none-match. The rules: x-rules-require-origin (any
   value), x-rules-max-bytes (a number; 65536 without), x-rules-allowed-origin
   (repeatable, allowedOrigins), x-rules-public-origin (--public-origin),
   x-rules-confirm (an action's name, repeatable: it requires confirmation),
   x-rules-user (an action's name, repeatable: it needs a signed-in user,
   so its confirmation is left to the run), x-rules-views (has_views for
   the reserved paths).

   The bridge's actions are fixed: tasks.create, tasks.delete (requires
   confirmation), A, a+b, "a b", é and %41 (a name with a % in it).

   Every span is a heap copy of exactly its bytes, so that ASan reports a
   read past one. A broken invariant prints the input and aborts.
   CLANK_FUZZ_SHOW=1 prints the steps each input took. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/bridge_checks.h"
#include "util/bytes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef clank_bridge_span_t span_t;

static const char *const step_names[] = {
    "PASS",     "MANIFEST",  "PREFLIGHT",    "NO_ENDPOINT", "ORIGIN",    "DECODE",
    "BAD_PATH", "NO_ACTION", "CONFIRM",      "MEDIA",       "TOO_LARGE", "NO_BODY",
    "ENCODING", "NOT_JSON",  "UNAUTHORIZED", "FORBIDDEN",   "READ_ONLY"};
#define NSTEPS (sizeof step_names / sizeof *step_names)

static const clank_bridge_entry_t fixed_entries[] = {
    {"tasks.create", 12, NULL, 1, 0, 0},
    {"tasks.delete", 12, NULL, 2, 1, 0},
    {"A", 1, NULL, 3, 0, 0},
    {"a+b", 3, NULL, 4, 0, 0},
    {"a b", 3, NULL, 5, 0, 0},
    {"\xc3\xa9", 2, NULL, 6, 0, 0},
    {"%41", 3, NULL, 7, 0, 0},
};
#define NENTRIES (sizeof fixed_entries / sizeof *fixed_entries)

static const char etag[] = "\"0123456789abcdef\"";

/* ---- the input, for a report ---- */

static const uint8_t *input;
static size_t input_size;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fuzz/bridge_checks: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\ninput (%zu bytes): ", input_size);
  for (size_t i = 0; i < input_size && i < 2000; i++) {
    unsigned c = input[i];
    if (c == '\n')
      fputs("\\n", stderr);
    else if (c >= 0x20 && c < 0x7f && c != '\\')
      fputc((int)c, stderr);
    else
      fprintf(stderr, "\\x%02x", c);
  }
  fputc('\n', stderr);
  abort();
}

/* ---- references, written from the SPEC rather than from the code ---- */

/* RFC 3629: a lead byte says the length, continuation bytes are 10xxxxxx,
   and the code point is the shortest form, not a surrogate, ≤ U+10FFFF. */
static int ref_utf8(const char *p, size_t n) {
  const unsigned char *s = (const unsigned char *)p;
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) {
      i++;
      continue;
    }
    if ((c & 0xE0) == 0xC0)
      len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
      len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
      len = 4, cp = c & 0x07, min = 0x10000;
    else
      return 0;
    if (n - i < len) return 0;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return 0;
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += len;
  }
  return 1;
}

static int span_equals(span_t s, const char *lit) {
  return s.p && s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

static int ends_with(span_t s, const char *lit) {
  size_t k = strlen(lit);
  return s.n >= k && memcmp(s.p + s.n - k, lit, k) == 0;
}

/* Step 4: the offset just past the last "/actions/" in the path, or -1. */
static long after_last_actions(span_t path) {
  for (size_t i = path.n; i >= 9; i--)
    if (memcmp(path.p + i - 9, "/actions/", 9) == 0) return (long)i;
  return -1;
}

/* Step 7: the media type before any parameter, its blanks trimmed, in any
   case: application/json, or a type, a slash, and a subtype ending +json. */
static int ref_json_media_type(const char *v, size_t n) {
  const char *semi = memchr(v, ';', n);
  const char *t = v, *end = semi ? semi : v + n;
  while (t < end && (*t == ' ' || *t == '\t')) t++;
  while (end > t && (end[-1] == ' ' || end[-1] == '\t')) end--;
  size_t tn = (size_t)(end - t);
  if (tn == 16 && strncasecmp(t, "application/json", 16) == 0) return 1;
  const char *slash = memchr(t, '/', tn);
  if (slash == NULL || slash == t) return 0;                /* no type */
  size_t sub = (size_t)(end - slash - 1);                   /* the subtype's length */
  return sub >= 5 && strncasecmp(end - 5, "+json", 5) == 0; /* a subtype ending +json */
}

/* Step 1: If-None-Match is a comma list; each tag, blanks trimmed and a W/
   dropped (weak comparison), is * or the etag. */
static int ref_etag_matches(const char *inm, size_t n) {
  size_t i = 0;
  while (i <= n) {
    size_t j = i;
    while (j < n && inm[j] != ',') j++;
    size_t a = i, b = j;
    while (a < b && (inm[a] == ' ' || inm[a] == '\t')) a++;
    while (b > a && (inm[b - 1] == ' ' || inm[b - 1] == '\t')) b--;
    if (b - a >= 2 && inm[a] == 'W' && inm[a + 1] == '/') a += 2;
    if (b - a == 1 && inm[a] == '*') return 1;
    if (b - a == strlen(etag) && memcmp(inm + a, etag, b - a) == 0) return 1;
    i = j + 1;
  }
  return 0;
}

/* SPEC §2: the paths the runtime answers itself. */
static int ref_reserved(span_t p, int has_views) {
  static const char *const prefixes[] = {"/actions/", "/__clank/", "/views/"};
  if (span_equals(p, "/manifest") || span_equals(p, "/.well-known/clank")) return 1;
  for (size_t i = 0; i < 3; i++)
    if (p.n >= strlen(prefixes[i]) && memcmp(p.p, prefixes[i], strlen(prefixes[i])) == 0) return 1;
  return has_views && span_equals(p, "/");
}

/* Step 3 (and SPEC §13's --public-origin): the server's own origin is
   scheme://Host; behind a proxy it is the public origin, and http://Host
   too unless Host is the public origin's host. */
static int ref_own_origin(const clank_bridge_view_t *v, const clank_bridge_public_t *pub,
                          span_t origin) {
  char want[4096];
  if (pub && pub->origin) {
    if (origin.n == pub->len && memcmp(origin.p, pub->origin, pub->len) == 0) return 1;
    const char *ph = pub->origin + pub->host_at;
    size_t phn = pub->len - pub->host_at;
    if (v->host.p && v->host.n == phn && strncasecmp(v->host.p, ph, phn) == 0) return 0;
  }
  if (v->host.p == NULL) return 0;
  span_t scheme = pub && pub->origin ? (span_t){"http", 4}
                  : v->scheme.p      ? v->scheme
                                     : (span_t){"http", 4};
  if (scheme.n + 3 + v->host.n > sizeof want) return 0;
  memcpy(want, scheme.p, scheme.n);
  memcpy(want + scheme.n, "://", 3);
  memcpy(want + scheme.n + 3, v->host.p, v->host.n);
  return origin.n == scheme.n + 3 + v->host.n && memcmp(origin.p, want, origin.n) == 0;
}

/* Step 3: sec-fetch-site: cross-site, a foreign origin not allowed, no
   origin under requireOrigin. */
static int ref_refused(const clank_bridge_view_t *v, const clank_bridge_origin_t *o, int require) {
  if (span_equals(v->sec_fetch_site, "cross-site")) return 1;
  if (o->value) return !o->own && !o->allowed;
  return require;
}

/* Step 7: content-length read as strtoll reads it (saturating). */
static long long ref_length(span_t s) {
  char *z = malloc(s.n + 1);
  memcpy(z, s.p, s.n);
  z[s.n] = 0;
  long long r = strtoll(z, NULL, 10);
  free(z);
  return r;
}

/* Steps 1–7 before the body, in SPEC §5's order, with the action's entry
   found by a plain search. */
static clank_bridge_step_t ref_head(const clank_bridge_rules_t *r, const clank_bridge_view_t *v,
                                    const clank_bridge_origin_t *o,
                                    const clank_bridge_entry_t **found) {
  *found = NULL;
  /* 1. GET on a path ending with /.well-known/clank or /manifest */
  if (strcmp(v->method, "GET") == 0 &&
      (ends_with(v->path, "/.well-known/clank") || ends_with(v->path, "/manifest")))
    return CLANK_BRIDGE_MANIFEST;
  /* 2. OPTIONS from an allowed origin; anything but POST on an action path */
  long at = after_last_actions(v->path);
  if (at >= 0 && strcmp(v->method, "OPTIONS") == 0 && o->value && o->allowed)
    return CLANK_BRIDGE_PREFLIGHT;
  if (at < 0 || strcmp(v->method, "POST") != 0) return CLANK_BRIDGE_NO_ENDPOINT;
  /* 3. */
  if (ref_refused(v, o, r->require_origin)) return CLANK_BRIDGE_ORIGIN;
  /* 4. decodeURIComponent of the rest */
  const char *raw = v->path.p + at;
  size_t rawn = v->path.n - (size_t)at;
  char *name = malloc(rawn + 1);
  size_t n = clank_uri_decode(raw, rawn, name);
  if (n == CLANK_URI_BAD) {
    free(name);
    return CLANK_BRIDGE_BAD_PATH;
  }
  /* 5. */
  for (size_t i = 0; i < r->nindex; i++)
    if (r->index[i].len == n && memcmp(r->index[i].name, name, n) == 0) *found = &r->index[i];
  free(name);
  if (*found == NULL) return CLANK_BRIDGE_NO_ACTION;
  /* 6. */
  if ((*found)->confirm && !(*found)->needs_user && !span_equals(v->confirmation, "confirmed"))
    return CLANK_BRIDGE_CONFIRM;
  /* 7. before the body */
  if (v->content_type.p == NULL || !ref_json_media_type(v->content_type.p, v->content_type.n))
    return CLANK_BRIDGE_MEDIA;
  if (v->content_length.p && ref_length(v->content_length) > r->max_bytes)
    return CLANK_BRIDGE_TOO_LARGE;
  return CLANK_BRIDGE_PASS;
}

/* ---- carving the input ---- */

enum {
  H_ORIGIN,
  H_HOST,
  H_SCHEME,
  H_SEC_FETCH_SITE,
  H_CONFIRMATION,
  H_CONTENT_TYPE,
  H_CONTENT_LENGTH,
  H_IF_NONE_MATCH,
  H_REQUIRE_ORIGIN,
  H_MAX_BYTES,
  H_PUBLIC_ORIGIN,
  H_VIEWS,
  NFIELDS
};
static const char *const field_names[NFIELDS] = {"origin",
                                                 "host",
                                                 "x-scheme",
                                                 "sec-fetch-site",
                                                 "x-clank-confirmation",
                                                 "content-type",
                                                 "content-length",
                                                 "if-none-match",
                                                 "x-rules-require-origin",
                                                 "x-rules-max-bytes",
                                                 "x-rules-public-origin",
                                                 "x-rules-views"};

#define MAX_LIST 8

typedef struct {
  char *method;
  span_t path, field[NFIELDS], body;
  span_t allowed[MAX_LIST], confirm[MAX_LIST], user[MAX_LIST];
  size_t nallowed, nconfirm, nuser;
} request_t;

/* A heap copy of exactly n bytes (one byte allocated for none). */
static span_t copy(const char *p, size_t n) {
  char *c = malloc(n ? n : 1);
  if (n) memcpy(c, p, n);
  return (span_t){c, n};
}

/* Appends to a header's value, joined with ", ". */
static void join(span_t *s, const char *p, size_t n) {
  if (s->p == NULL) {
    *s = copy(p, n);
    return;
  }
  char *c = malloc(s->n + 2 + n);
  memcpy(c, s->p, s->n);
  memcpy(c + s->n, ", ", 2);
  if (n) memcpy(c + s->n + 2, p, n);
  free((void *)s->p);
  *s = (span_t){c, s->n + 2 + n};
}

static void carve(const char *d, size_t size, request_t *q) {
  memset(q, 0, sizeof *q);
  const char *end = d + size, *p = d;
  int first = 1;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    size_t n = (size_t)(le - p);
    if (n && p[n - 1] == '\r') n--;
    if (first) {
      const char *sp = memchr(p, ' ', n);
      size_t mn = sp ? (size_t)(sp - p) : n;
      q->method = malloc(mn + 1);
      memcpy(q->method, p, mn);
      q->method[mn] = 0;
      q->path = sp ? copy(sp + 1, (size_t)(p + n - sp - 1)) : copy("", 0);
      first = 0;
    } else if (n == 0) {
      if (nl) q->body = copy(nl + 1, (size_t)(end - nl - 1));
      return;
    } else {
      const char *colon = memchr(p, ':', n);
      if (colon) {
        size_t kn = (size_t)(colon - p);
        const char *val = colon + 1;
        while (val < p + n && (*val == ' ' || *val == '\t')) val++;
        size_t vn = (size_t)(p + n - val);
        for (size_t f = 0; f < NFIELDS; f++)
          if (kn == strlen(field_names[f]) && strncasecmp(p, field_names[f], kn) == 0)
            join(&q->field[f], val, vn);
        if (kn == 22 && strncasecmp(p, "x-rules-allowed-origin", 22) == 0 && q->nallowed < MAX_LIST)
          q->allowed[q->nallowed++] = copy(val, vn);
        if (kn == 15 && strncasecmp(p, "x-rules-confirm", 15) == 0 && q->nconfirm < MAX_LIST)
          q->confirm[q->nconfirm++] = copy(val, vn);
        if (kn == 12 && strncasecmp(p, "x-rules-user", 12) == 0 && q->nuser < MAX_LIST)
          q->user[q->nuser++] = copy(val, vn);
      }
    }
    if (!nl) break;
    p = nl + 1;
  }
  if (q->method == NULL) {
    q->method = malloc(1);
    q->method[0] = 0;
    q->path = copy("", 0);
  }
}

static void release(request_t *q) {
  free(q->method);
  free((void *)q->path.p);
  free((void *)q->body.p);
  for (size_t f = 0; f < NFIELDS; f++) free((void *)q->field[f].p);
  for (size_t i = 0; i < q->nallowed; i++) free((void *)q->allowed[i].p);
  for (size_t i = 0; i < q->nconfirm; i++) free((void *)q->confirm[i].p);
  for (size_t i = 0; i < q->nuser; i++) free((void *)q->user[i].p);
}

/* ---- the invariants ---- */

/* The refusal of a step: a failure has a status 400–599, a code and a
   message; pass, manifest, preflight and decode are no failures (SPEC §5:
   "Every failure is {ok:false,error:{code,message}}"). */
static void check_refusal(clank_bridge_step_t step) {
  if ((unsigned)step >= NSTEPS) fail("step %d is no clank_bridge_step_t", (int)step);
  const clank_bridge_refusal_t *r = clank_bridge_refusal(step);
  int none = step == CLANK_BRIDGE_PASS || step == CLANK_BRIDGE_MANIFEST ||
             step == CLANK_BRIDGE_PREFLIGHT || step == CLANK_BRIDGE_DECODE;
  if (none) {
    if (r) fail("%s has a refusal (%d %s)", step_names[step], r->status, r->code);
    return;
  }
  if (r == NULL) fail("%s has no refusal", step_names[step]);
  if (r->status < 400 || r->status > 599) fail("%s refuses with %d", step_names[step], r->status);
  if (!r->code || !*r->code || !r->message || !*r->message)
    fail("%s refuses without a code or a message", step_names[step]);
}

/* SPEC §5 step 4: the entry found is the action named by the (decoded) name. */
static int is_entry(const clank_bridge_rules_t *r, const clank_bridge_entry_t *e) {
  return e >= r->index && e < r->index + r->nindex;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input = data;
  input_size = size;
  int show = getenv("CLANK_FUZZ_SHOW") != NULL;
  request_t q;
  carve((const char *)data, size, &q);

  /* the rules */
  clank_bridge_entry_t entries[NENTRIES];
  memcpy(entries, fixed_entries, sizeof entries);
  for (size_t i = 0; i < NENTRIES; i++)
    for (size_t k = 0; k < q.nconfirm; k++)
      if (q.confirm[k].n == entries[i].len &&
          memcmp(q.confirm[k].p, entries[i].name, entries[i].len) == 0)
        entries[i].confirm = 1;
  for (size_t i = 0; i < NENTRIES; i++)
    for (size_t k = 0; k < q.nuser; k++)
      if (q.user[k].n == entries[i].len &&
          memcmp(q.user[k].p, entries[i].name, entries[i].len) == 0)
        entries[i].needs_user = 1;
  qsort(entries, NENTRIES, sizeof *entries, clank_bridge_compare_entries);
  long long max_bytes = 65536;
  if (q.field[H_MAX_BYTES].p) max_bytes = ref_length(q.field[H_MAX_BYTES]);
  clank_bridge_rules_t rules = {entries, NENTRIES, max_bytes, q.field[H_REQUIRE_ORIGIN].p != NULL,
                                q.nuser > 0};
  clank_bridge_public_t pub = {NULL, 0, 0};
  span_t po = q.field[H_PUBLIC_ORIGIN];
  /* --public-origin as options.c takes it: scheme://host[:port], the host
     not empty */
  for (size_t i = 0; po.p && i + 3 < po.n; i++)
    if (memcmp(po.p + i, "://", 3) == 0) {
      pub = (clank_bridge_public_t){po.p, po.n, i + 3};
      break;
    }

  /* the view */
  clank_bridge_view_t v = {.method = q.method,
                           .path = q.path,
                           .origin = q.field[H_ORIGIN],
                           .host = q.field[H_HOST],
                           .scheme = q.field[H_SCHEME],
                           .sec_fetch_site = q.field[H_SEC_FETCH_SITE],
                           .confirmation = q.field[H_CONFIRMATION],
                           .content_type = q.field[H_CONTENT_TYPE],
                           .content_length = q.field[H_CONTENT_LENGTH],
                           .if_none_match = q.field[H_IF_NONE_MATCH],
                           .body = q.body};

  /* step 3's reading, then allowedOrigins looked up exactly (as
     bridge_request.c does) */
  clank_bridge_origin_t o;
  clank_bridge_read_origin(&v, &pub, &o);
  for (size_t i = 0; o.value && i < q.nallowed; i++)
    if (q.allowed[i].n == o.len && memcmp(q.allowed[i].p, o.value, o.len) == 0) o.allowed = 1;
  if (o.value && o.own != ref_own_origin(&v, &pub, v.origin))
    fail("own origin: %d, SPEC §5 step 3 says %d", o.own, !o.own);
  int refused = clank_bridge_origin_refused(&v, &o, rules.require_origin);
  if (refused != ref_refused(&v, &o, rules.require_origin))
    fail("origin refused: %d, SPEC §5 step 3 says %d", refused, !refused);
  const char *cors = clank_bridge_cors_origin(&o);
  if ((cors != NULL) != (o.value && o.allowed && !o.own))
    fail("access-control-allow-origin only for an allowed foreign origin");

  /* steps 1–7 before the body, as the bridge runs them */
  const clank_bridge_entry_t *found = NULL;
  clank_bridge_step_t head = clank_bridge_check_head(&rules, &v, &o, NULL, 0, &found);
  check_refusal(head);
  clank_bridge_step_t step = head;
  long at = after_last_actions(v.path);
  const char *raw = at >= 0 ? v.path.p + at : NULL;
  size_t rawn = at >= 0 ? v.path.n - (size_t)at : 0;
  char *out = malloc(v.path.n ? v.path.n : 1);
  char *mine = malloc(v.path.n ? v.path.n : 1);
  size_t mine_n = raw ? clank_uri_decode(raw, rawn, mine) : CLANK_URI_BAD;
  if (head == CLANK_BRIDGE_DECODE) {
    /* step 4: only a name with a % in it is decoded */
    if (raw == NULL || memchr(raw, '%', rawn) == NULL)
      fail("DECODE for a name without %%: %.*s", (int)rawn, raw ? raw : "");
    if (found) fail("DECODE with an entry found");
    step = clank_bridge_check_decoded(&rules, &v, &o, out, &found);
    check_refusal(step);
    if (step == CLANK_BRIDGE_DECODE) fail("DECODE twice");
    /* decodeURIComponent as clank_uri_decode does it: a bad escape or bytes
       that are not UTF-8 are BAD_PATH, and nothing else is */
    if ((mine_n == CLANK_URI_BAD) != (step == CLANK_BRIDGE_BAD_PATH))
      fail("decoded: %s, while clank_uri_decode %s", step_names[step],
           mine_n == CLANK_URI_BAD ? "refuses the name" : "decodes it");
    if (mine_n != CLANK_URI_BAD) {
      if (memcmp(out, mine, mine_n) != 0) fail("decoded name differs from clank_uri_decode's");
      /* the checks again on the decoded name give what the name itself gives */
      const clank_bridge_entry_t *again = NULL;
      clank_bridge_step_t s2 = clank_bridge_check_head(&rules, &v, &o, mine, mine_n, &again);
      if (s2 != step || again != found)
        fail("decoded: %s, the checks on the decoded name: %s", step_names[step], step_names[s2]);
    }
  } else if (raw && head != CLANK_BRIDGE_MANIFEST && head != CLANK_BRIDGE_PREFLIGHT &&
             head != CLANK_BRIDGE_NO_ENDPOINT && head != CLANK_BRIDGE_ORIGIN) {
    /* step 4 reached without a %: decoding is the identity on UTF-8, so the
       name given decoded answers the same; bytes that are not UTF-8 are
       what clank_uri_decode refuses */
    if ((mine_n == CLANK_URI_BAD) != (head == CLANK_BRIDGE_BAD_PATH))
      fail("%s, while clank_uri_decode %s the name", step_names[head],
           mine_n == CLANK_URI_BAD ? "refuses" : "takes");
    if (mine_n != CLANK_URI_BAD) {
      if (mine_n != rawn || memcmp(mine, raw, rawn) != 0)
        fail("clank_uri_decode changed a name without %%");
      const clank_bridge_entry_t *again = NULL;
      clank_bridge_step_t s2 = clank_bridge_check_head(&rules, &v, &o, raw, rawn, &again);
      if (s2 != head || again != found)
        fail("%s, and %s with the name given", step_names[head], step_names[s2]);
    }
  }

  /* the whole of steps 1–7 before the body, against SPEC §5's order */
  const clank_bridge_entry_t *want_found;
  clank_bridge_step_t want = ref_head(&rules, &v, &o, &want_found);
  if (step != want) fail("steps 1-7: %s, SPEC §5 says %s", step_names[step], step_names[want]);
  /* an entry is found exactly on PASS, CONFIRM and the body steps (MEDIA,
     TOO_LARGE) — and it is the action the name names */
  int with_entry = step == CLANK_BRIDGE_PASS || step == CLANK_BRIDGE_CONFIRM ||
                   step == CLANK_BRIDGE_MEDIA || step == CLANK_BRIDGE_TOO_LARGE;
  if (with_entry != (found != NULL))
    fail("%s %s an entry", step_names[step], found ? "with" : "without");
  if (found && (!is_entry(&rules, found) || found != want_found))
    fail("%s: the entry found is not the action named", step_names[step]);
  /* step 2: anything that is not POST on an action path never gets past it */
  if ((strcmp(v.method, "POST") != 0 || at < 0) && step != CLANK_BRIDGE_MANIFEST &&
      step != CLANK_BRIDGE_PREFLIGHT && step != CLANK_BRIDGE_NO_ENDPOINT)
    fail("%s %.*s got to %s", v.method, (int)v.path.n, v.path.p, step_names[step]);
  /* step 3 comes before the name: a refused origin never passes */
  if (refused && (step == CLANK_BRIDGE_PASS || step == CLANK_BRIDGE_CONFIRM))
    fail("a refused origin got to %s", step_names[step]);
  /* step 6: a confirmed action passes only with exactly "confirmed", unless it needs a user:
     then the run checks who is calling first, and confirmation after (bridge_auth.c) */
  if (step == CLANK_BRIDGE_PASS && found->confirm && !found->needs_user &&
      !span_equals(v.confirmation, "confirmed"))
    fail("an action needing confirmation passed without it");
  if (step == CLANK_BRIDGE_CONFIRM && found->needs_user)
    fail("an action needing a user was refused for confirmation before the run knew the user");

  /* step 7 on the body: none, too large, then (when the decoder refused
     it) not UTF-8 or not JSON */
  clank_bridge_step_t body = clank_bridge_check_body(&rules, &v);
  check_refusal(body);
  clank_bridge_step_t want_body = v.body.p == NULL || v.body.n == 0       ? CLANK_BRIDGE_NO_BODY
                                  : (long long)v.body.n > rules.max_bytes ? CLANK_BRIDGE_TOO_LARGE
                                                                          : CLANK_BRIDGE_PASS;
  if (body != want_body)
    fail("body of %zu bytes (max %lld): %s, SPEC §5 step 7 says %s", v.body.n, rules.max_bytes,
         step_names[body], step_names[want_body]);
  clank_bridge_step_t malformed = clank_bridge_malformed_body(&v);
  check_refusal(malformed);
  if (malformed != (ref_utf8(v.body.p, v.body.n) ? CLANK_BRIDGE_NOT_JSON : CLANK_BRIDGE_ENCODING))
    fail("a malformed body: %s, yet it is%s UTF-8", step_names[malformed],
         ref_utf8(v.body.p, v.body.n) ? "" : " not");

  /* clank_bridge_valid_utf8 is RFC 3629, on every span and at every
     alignment of the body (it reads 8 ASCII bytes at once) */
  for (size_t k = 0; v.body.p && k < 8 && k <= v.body.n; k++)
    if (clank_bridge_valid_utf8(v.body.p + k, v.body.n - k) != ref_utf8(v.body.p + k, v.body.n - k))
      fail("valid_utf8 of the body from byte %zu: %d", k,
           clank_bridge_valid_utf8(v.body.p + k, v.body.n - k));
  if (clank_bridge_valid_utf8(v.path.p, v.path.n) != ref_utf8(v.path.p, v.path.n))
    fail("valid_utf8 of the path");
  for (size_t f = 0; f < NFIELDS; f++)
    if (q.field[f].p &&
        clank_bridge_valid_utf8(q.field[f].p, q.field[f].n) != ref_utf8(q.field[f].p, q.field[f].n))
      fail("valid_utf8 of %s", field_names[f]);

  /* step 7's media type: parameters and case ignored */
  span_t ct = v.content_type;
  if (ct.p) {
    int json = clank_bridge_json_media_type(ct.p, ct.n);
    if (json != ref_json_media_type(ct.p, ct.n))
      fail("content-type %.*s: json %d", (int)ct.n, ct.p, json);
    span_t upper = copy(ct.p, ct.n), lower = copy(ct.p, ct.n);
    for (size_t i = 0; i < ct.n; i++) {
      char c = ct.p[i];
      ((char *)upper.p)[i] = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
      ((char *)lower.p)[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    if (clank_bridge_json_media_type(upper.p, upper.n) != json ||
        clank_bridge_json_media_type(lower.p, lower.n) != json)
      fail("content-type %.*s: json %d, but not in upper or lower case", (int)ct.n, ct.p, json);
    free((void *)upper.p);
    free((void *)lower.p);
    if (memchr(ct.p, ';', ct.n) == NULL) {
      static const char param[] = "; charset=utf-8";
      char *with = malloc(ct.n + sizeof param - 1);
      memcpy(with, ct.p, ct.n);
      memcpy(with + ct.n, param, sizeof param - 1);
      if (clank_bridge_json_media_type(with, ct.n + sizeof param - 1) != json)
        fail("content-type %.*s: json %d, not so with a parameter", (int)ct.n, ct.p, json);
      free(with);
    }
  }

  /* step 1's If-None-Match: a list, *, weak comparison */
  span_t inm = v.if_none_match;
  if (inm.p) {
    int m = clank_bridge_etag_matches(inm.p, inm.n, etag);
    if (m != ref_etag_matches(inm.p, inm.n)) fail("If-None-Match %.*s: %d", (int)inm.n, inm.p, m);
    /* the etag added to the list always matches */
    size_t en = strlen(etag);
    char *more = malloc(inm.n + 2 + en);
    memcpy(more, inm.p, inm.n);
    memcpy(more + inm.n, ", ", 2);
    memcpy(more + inm.n + 2, etag, en);
    if (!clank_bridge_etag_matches(more, inm.n + 2 + en, etag))
      fail("If-None-Match %.*s, %s: no match", (int)inm.n, inm.p, etag);
    free(more);
  }

  /* SPEC §2's reserved paths */
  int views = q.field[H_VIEWS].p != NULL;
  if (clank_bridge_reserved_path(v.path.p, v.path.n, views) != ref_reserved(v.path, views))
    fail("reserved path %.*s (views %d)", (int)v.path.n, v.path.p, views);

  if (show)
    fprintf(stderr, "%s %.*s: %s%s%s, body %s\n", v.method, (int)v.path.n, v.path.p,
            head == CLANK_BRIDGE_DECODE ? "DECODE, " : "", step_names[step],
            found ? (found->confirm ? " (confirm)" : "") : "", step_names[body]);

  free(out);
  free(mine);
  release(&q);
  return 0;
}
