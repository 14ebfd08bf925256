/* SPEC §5's checks, steps 1–7, in plain C over a request's view
   (bridge_checks.h): the path rules, the origin policy, the name's
   decoding, confirmation and the body's type, size and encoding. The one
   place those rules are written: the bridge's answers, the header block's
   pass in clank-run and clank.mcp's rules all come here. Owns nothing: it
   reads the view and the rules it is given, and never allocates. */
#include "agent/bridge_checks.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "data/json.h"
#include "util/bytes.h"

typedef clank_bridge_span_t span_t;

/* ---- paths (steps 1, 2 and 4) ---- */

/* static, so that glibc's inline bsearch calls it inline */
static int compare_entries(const void *x, const void *y) {
  const clank_bridge_entry_t *a = x, *b = y;
  int c = memcmp(a->name, b->name, a->len < b->len ? a->len : b->len);
  return c ? c : (a->len > b->len) - (a->len < b->len);
}

int clank_bridge_compare_entries(const void *x, const void *y) { return compare_entries(x, y); }

/* The entry of the action named by the n bytes at name, or NULL. */
static const clank_bridge_entry_t *find(const clank_bridge_rules_t *r, const char *name, size_t n) {
  clank_bridge_entry_t key = {name, n, NULL, 0, 0, 0};
  return r->nindex ? bsearch(&key, r->index, r->nindex, sizeof key, compare_entries) : NULL;
}

static int ends_with(const char *p, size_t n, const char *s) {
  size_t k = strlen(s);
  return n >= k && memcmp(p + n - k, s, k) == 0;
}

/* The last "/actions/" in the path, or NULL. */
static const char *last_actions(const char *p, size_t n) {
  const char *found = NULL, *end = p + n;
  for (const char *s = p; end - s >= 9 && (s = memchr(s, '/', (size_t)(end - s - 8))); s++)
    if (memcmp(s, "/actions/", 9) == 0) found = s;
  return found;
}

/* Step 1: a manifest path (ends with /.well-known/clank or /manifest). */
static int manifest_path(const char *p, size_t n) {
  return ends_with(p, n, "/.well-known/clank") || ends_with(p, n, "/manifest");
}

int clank_bridge_reserved_path(const char *p, size_t n, int has_views) {
  return (n == 9 && memcmp(p, "/manifest", 9) == 0) ||
         (n == 18 && memcmp(p, "/.well-known/clank", 18) == 0) ||
         clank_span_starts(p, n, "/actions/") || clank_span_starts(p, n, "/__clank/") ||
         clank_span_starts(p, n, "/views/") || (has_views && n == 1 && p[0] == '/');
}

int clank_bridge_etag_matches(const char *inm, size_t n, const char *etag) {
  size_t elen = strlen(etag);
  for (size_t i = 0; i < n;) {
    while (i < n && (inm[i] == ' ' || inm[i] == ',' || inm[i] == '\t')) i++;
    size_t j = i;
    while (j < n && inm[j] != ',') j++;
    size_t e = j;
    while (e > i && (inm[e - 1] == ' ' || inm[e - 1] == '\t')) e--;
    const char *tag = inm + i;
    size_t tlen = e - i;
    if (tlen >= 2 && tag[0] == 'W' && tag[1] == '/') {
      tag += 2;
      tlen -= 2;
    }
    if ((tlen == 1 && tag[0] == '*') || (tlen == elen && memcmp(tag, etag, tlen) == 0)) return 1;
    i = j;
  }
  return 0;
}

/* ---- the body (step 7) ---- */

/* strtoll(s, NULL, 10) on a span, which need not end with a NUL. */
static long long span_integer(span_t s) {
  size_t i = 0;
  while (i < s.n && (s.p[i] == ' ' || (s.p[i] >= '\t' && s.p[i] <= '\r'))) i++;
  int neg = i < s.n && s.p[i] == '-';
  if (i < s.n && (s.p[i] == '-' || s.p[i] == '+')) i++;
  unsigned long long v = 0, limit = neg ? (unsigned long long)LLONG_MAX + 1u : LLONG_MAX;
  for (; i < s.n && s.p[i] >= '0' && s.p[i] <= '9'; i++) {
    unsigned d = (unsigned)(s.p[i] - '0');
    v = v > (limit - d) / 10 ? limit : v * 10 + d;
  }
  if (neg) return v > (unsigned long long)LLONG_MAX ? LLONG_MIN : -(long long)v;
  return (long long)v;
}

int clank_bridge_json_media_type(const char *v, size_t n) {
  if (n == 16 && memcmp(v, "application/json", 16) == 0) return 1; /* what nearly all send */
  size_t end = 0;
  while (end < n && v[end] != ';') end++;
  while (end > 0 && (v[end - 1] == ' ' || v[end - 1] == '\t')) end--;
  size_t start = 0;
  while (start < end && (v[start] == ' ' || v[start] == '\t')) start++;
  const char *t = v + start;
  size_t tn = end - start;
  if (tn == 16 && strncasecmp(t, "application/json", 16) == 0) return 1;
  const char *slash = memchr(t, '/', tn);
  return slash && slash > t && (size_t)(t + tn - slash) > 5 &&
         strncasecmp(t + tn - 5, "+json", 5) == 0;
}

int clank_bridge_valid_utf8(const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint64_t x;
    if (n - i >= 8 && (memcpy(&x, s + i, 8), (x & 0x8080808080808080ULL) == 0)) {
      i += 8; /* 8 ASCII bytes at once */
      continue;
    }
    if ((unsigned char)s[i] < 0x80) {
      i++;
      continue;
    }
    size_t len = clank_json_utf8_char((const unsigned char *)s + i, n - i);
    if (len == 0) return 0;
    i += len;
  }
  return 1;
}

clank_bridge_step_t clank_bridge_check_body(const clank_bridge_rules_t *r,
                                            const clank_bridge_view_t *v) {
  if (v->body.p == NULL || v->body.n == 0) return CLANK_BRIDGE_NO_BODY;
  if ((long long)v->body.n > r->max_bytes) return CLANK_BRIDGE_TOO_LARGE;
  return CLANK_BRIDGE_PASS;
}

/* JSON the decoder takes is valid UTF-8 (it checks every string, and the
   rest is ASCII): the encoding is looked at only to tell why it failed. */
clank_bridge_step_t clank_bridge_malformed_body(const clank_bridge_view_t *v) {
  return clank_bridge_valid_utf8(v->body.p, v->body.n) ? CLANK_BRIDGE_NOT_JSON
                                                       : CLANK_BRIDGE_ENCODING;
}

/* ---- origins (step 3) ---- */

/* 1 when the n bytes at origin are scheme "://" host. */
static int origin_is(const char *origin, size_t n, span_t scheme, span_t host) {
  return host.p && n == scheme.n + 3 + host.n && memcmp(origin, scheme.p, scheme.n) == 0 &&
         memcmp(origin + scheme.n, "://", 3) == 0 &&
         memcmp(origin + scheme.n + 3, host.p, host.n) == 0;
}

/* Behind a TLS proxy (pub) the public origin is the server's own, whatever
   Host the proxy passes on; http://Host stays the server's own for any
   other Host (a loopback tunnel to the inspector), never for the public
   origin's host, whose plain-http pages anyone on the way could have
   written. */
int clank_bridge_own_origin(const clank_bridge_view_t *v, const clank_bridge_public_t *pub,
                            const clank_bridge_origin_t *o) {
  if (pub == NULL || pub->origin == NULL)
    return origin_is(o->value, o->len, v->scheme.p ? v->scheme : (span_t){"http", 4}, v->host);
  if (o->len == pub->len && memcmp(o->value, pub->origin, o->len) == 0) return 1;
  size_t at = pub->host_at, hlen = pub->len - at;
  if (v->host.n == hlen && strncasecmp(v->host.p, pub->origin + at, hlen) == 0) return 0;
  return origin_is(o->value, o->len, (span_t){"http", 4}, v->host);
}

int clank_bridge_origin_refused(const clank_bridge_view_t *v, const clank_bridge_origin_t *o,
                                int require_origin) {
  return clank_span_is(v->sec_fetch_site.p, v->sec_fetch_site.n, "cross-site") ||
         (o->value && !o->own && !o->allowed) || (!o->value && require_origin);
}

/* ---- steps 1–7 ---- */

clank_bridge_step_t clank_bridge_check_head(const clank_bridge_rules_t *r,
                                            const clank_bridge_view_t *v,
                                            const clank_bridge_origin_t *o, const char *name,
                                            size_t name_len, const clank_bridge_entry_t **found) {
  const char *method = v->method, *path = v->path.p;
  size_t plen = v->path.n;
  if (manifest_path(path, plen) && strcmp(method, "GET") == 0) return CLANK_BRIDGE_MANIFEST;
  const char *at = last_actions(path, plen);
  if (at && strcmp(method, "OPTIONS") == 0 && o->value && o->allowed) return CLANK_BRIDGE_PREFLIGHT;
  if (!at || strcmp(method, "POST") != 0) return CLANK_BRIDGE_NO_ENDPOINT;
  if (clank_bridge_origin_refused(v, o, r->require_origin)) return CLANK_BRIDGE_ORIGIN;
  if (name == NULL) {
    name = at + 9;
    name_len = (size_t)(path + plen - name);
    if (memchr(name, '%', name_len) != NULL) return CLANK_BRIDGE_DECODE;
    if (!clank_bridge_valid_utf8(name, name_len)) return CLANK_BRIDGE_BAD_PATH;
  }
  *found = find(r, name, name_len);
  if (*found == NULL) return CLANK_BRIDGE_NO_ACTION;
  if ((*found)->confirm && !(*found)->needs_user &&
      !clank_span_is(v->confirmation.p, v->confirmation.n, "confirmed"))
    return CLANK_BRIDGE_CONFIRM;
  if (v->content_type.p == NULL ||
      !clank_bridge_json_media_type(v->content_type.p, v->content_type.n))
    return CLANK_BRIDGE_MEDIA;
  if (v->content_length.p && span_integer(v->content_length) > r->max_bytes)
    return CLANK_BRIDGE_TOO_LARGE;
  return CLANK_BRIDGE_PASS;
}

clank_bridge_step_t clank_bridge_check_decoded(const clank_bridge_rules_t *r,
                                               const clank_bridge_view_t *v,
                                               const clank_bridge_origin_t *o, char *out,
                                               const clank_bridge_entry_t **found) {
  const char *name = last_actions(v->path.p, v->path.n) + 9;
  /* decodeURIComponent (util/bytes.h): a bad escape, or bytes that are not UTF-8 */
  size_t n = clank_uri_decode(name, (size_t)(v->path.p + v->path.n - name), out);
  if (n == CLANK_URI_BAD) return CLANK_BRIDGE_BAD_PATH;
  return clank_bridge_check_head(r, v, o, out, n, found);
}

const clank_bridge_refusal_t *clank_bridge_refusal(clank_bridge_step_t step) {
  static const clank_bridge_refusal_t refusals[] = {
      [CLANK_BRIDGE_NO_ENDPOINT] = {404, "NOT_FOUND", "Agent endpoint not found."},
      [CLANK_BRIDGE_ORIGIN] = {403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected."},
      [CLANK_BRIDGE_BAD_PATH] = {400, "INVALID_PATH", "The action path is not valid URL encoding."},
      [CLANK_BRIDGE_NO_ACTION] = {404, "NOT_FOUND", "Action not found."},
      [CLANK_BRIDGE_CONFIRM] = {428, "CONFIRMATION_REQUIRED",
                                "This action requires explicit confirmation."},
      [CLANK_BRIDGE_MEDIA] = {415, "UNSUPPORTED_MEDIA_TYPE",
                              "Expected an application/json request body."},
      [CLANK_BRIDGE_TOO_LARGE] = {413, "PAYLOAD_TOO_LARGE", "Request body exceeds %lld bytes."},
      [CLANK_BRIDGE_NO_BODY] = {400, "INVALID_JSON", "A JSON request body is required."},
      [CLANK_BRIDGE_ENCODING] = {400, "INVALID_ENCODING", "Request body must be valid UTF-8."},
      [CLANK_BRIDGE_NOT_JSON] = {400, "INVALID_JSON", "Request body is not valid JSON."},
      [CLANK_BRIDGE_UNAUTHORIZED] = {401, "UNAUTHORIZED", "Sign in to call this action."},
      [CLANK_BRIDGE_FORBIDDEN] = {403, "FORBIDDEN", "Action is not authorized."},
      [CLANK_BRIDGE_READ_ONLY] = {403, "FORBIDDEN",
                                  "This token may call only actions that do not write."},
  };
  if ((size_t)step >= sizeof refusals / sizeof *refusals || refusals[step].status == 0) return NULL;
  return &refusals[step];
}
