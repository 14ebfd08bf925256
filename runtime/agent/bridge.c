/* clank.bridge: createAgentBridge, its manifest, invoke and handle (SPEC §5),
   and the rules of §5 as plain functions, so clank.mcp and clank.app use
   these very rules instead of copies (isJsonMediaType, checkOrigin,
   errorEnvelope, context, isReservedPath, actionsByName,
   DEFAULT_ACTION_TIMEOUT). */
#include "agent/bridge.h"

#include <lauxlib.h>
#include <limits.h>
#include <stdint.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/abort.h"
#include "agent/action.h"
#include "data/json.h"
#include "core/protect.h"
#include "core/scheduler.h"
#include "data/schema.h"
#include "data/schema_decode.h"
#include "core/values.h"
#include "util/bytes.h"

typedef struct bridge_s {
  const void *tag; /* &bridge_tag: tells a bridge from other userdata without a registry lookup */
  long long max_bytes;
  int require_origin, expose_errors;
  double timeout_ms;
  clank_buf_t scratch;         /* JSON bodies; encoding never waits, so one suffices */
  const void *valid_input;     /* the input table check_body last decoded, known valid */
  const struct entry_s *index; /* the actions sorted by name (the UV_INDEX userdata's bytes) */
  size_t nindex;
} bridge_t;

/* One action of the bridge, found by its name's bytes without making a Lua
   string: the name (its action keeps it alive) and the action's slot in the
   UV_LIST table. */
typedef struct entry_s {
  const char *name;
  size_t len;
  clank_action_t *action;
  int slot;
} entry_t;

/* Only its address matters: only createAgentBridge writes it in a userdata. */
static const char bridge_tag = 0;

/* uservalues, each in a slot of its own (no lookup by name per request);
   createAgentBridge builds them in a table under these names first */
enum { UV_ACTIONS = 1, UV_MANIFEST, UV_ETAG, UV_ORIGINS, UV_INDEX, UV_LIST, UV_COUNT = UV_LIST };
#define K_ACTIONS "actions"   /* name → action */
#define K_MANIFEST "manifest" /* canonical JSON */
#define K_ETAG "etag"
#define K_ORIGINS "origins" /* origin → true */
#define K_INDEX "index"     /* the entry_t of every action, sorted */
#define K_LIST "list"       /* the actions, as the entries' slots say */

static bridge_t *test_bridge(lua_State *L, int idx) {
  return clank_tagged(L, idx, sizeof(bridge_t), &bridge_tag);
}

static bridge_t *check_bridge(lua_State *L, int idx) {
  bridge_t *b = test_bridge(L, idx);
  if (b == NULL) luaL_typeerror(L, idx, CLANK_BRIDGE_MT);
  return b;
}

static void push_uv_field(lua_State *L, int idx, int slot) { lua_getiuservalue(L, idx, slot); }

/* ---- paths ---- */

static int compare_entries(const void *x, const void *y) {
  const entry_t *a = x, *b = y;
  int c = memcmp(a->name, b->name, a->len < b->len ? a->len : b->len);
  return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* The entry of the action named by the n bytes at name, or NULL. */
static const entry_t *find_action(const bridge_t *b, const char *name, size_t n) {
  entry_t key = {name, n, NULL, 0};
  return b->nindex ? bsearch(&key, b->index, b->nindex, sizeof key, compare_entries) : NULL;
}

static int ends_with(const char *p, size_t n, const char *s) {
  size_t k = strlen(s);
  return n >= k && memcmp(p + n - k, s, k) == 0;
}

static int starts_with(const char *p, size_t n, const char *s) {
  size_t k = strlen(s);
  return n >= k && memcmp(p, s, k) == 0;
}

static const char *last_actions(const char *p, size_t n) {
  const char *found = NULL, *end = p + n;
  for (const char *s = p; end - s >= 9 && (s = memchr(s, '/', (size_t)(end - s - 8))); s++)
    if (memcmp(s, "/actions/", 9) == 0) found = s;
  return found;
}

static int manifest_path(const char *p, size_t n) {
  return ends_with(p, n, "/.well-known/clank") || ends_with(p, n, "/manifest");
}

/* decodeURIComponent (util/bytes.h). Pushes the name, or returns 0 for a bad
   escape or bytes that are not UTF-8. */
static int push_decoded_name(lua_State *L, const char *s, size_t n) {
  luaL_Buffer b;
  char *out = luaL_buffinitsize(L, &b, n + 1);
  size_t k = clank_uri_decode(s, n, out);
  luaL_pushresultsize(&b, k == CLANK_URI_BAD ? 0 : k);
  if (k == CLANK_URI_BAD) lua_pop(L, 1);
  return k != CLANK_URI_BAD;
}

/* ---- answers ---- */

/* What every answer to one request shares: CORS for an allowed foreign origin. */
typedef struct answer_s {
  const char *cors_origin; /* NULL unless the origin is an allowed foreign one */
  size_t cors_len;
  clank_bridge_answer_t *out; /* the answer goes here, not in a response table */
} answer_t;

/* Pushes { status, headers = { ... }, body }; or, for an answer given as C
   values, fills them and pushes nil. */
static void push_response(lua_State *L, const answer_t *a, int status, const char *cache,
                          const char *body, size_t len) {
  if (a->out) {
    *a->out = (clank_bridge_answer_t){status, cache, a->cors_origin, a->cors_len,
                                      body,   len,   a->out->done,   a->out->push_request};
    lua_pushnil(L);
    return;
  }
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, status);
  lua_setfield(L, -2, "status");
  lua_createtable(L, 0, 4);
  if (len > 0) {
    lua_pushliteral(L, "application/json");
    lua_setfield(L, -2, "content-type");
  }
  if (cache) {
    lua_pushstring(L, cache);
    lua_setfield(L, -2, "cache-control");
  }
  if (a->cors_origin) {
    lua_pushlstring(L, a->cors_origin, a->cors_len);
    lua_setfield(L, -2, "access-control-allow-origin");
    lua_pushliteral(L, "Origin");
    lua_setfield(L, -2, "vary");
  }
  lua_setfield(L, -2, "headers");
  lua_pushlstring(L, body, len);
  lua_setfield(L, -2, "body");
}

/* {"ok":false,"error":<the error object on top, popped>} with no-store. */
static int send_failure(lua_State *L, bridge_t *b, const answer_t *a, int status) {
  lua_createtable(L, 0, 2);
  lua_insert(L, -2);
  lua_setfield(L, -2, "error");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "ok");
  clank_buf_reset(&b->scratch);
  clank_json_encode(L, lua_gettop(L), 0, &b->scratch);
  lua_pop(L, 1);
  push_response(L, a, status, "no-store", b->scratch.data, b->scratch.len);
  return 1;
}

/* {"ok":false,"error":{"code","details"?,"message"}} with no-store. */
static int push_failure(lua_State *L, bridge_t *b, const answer_t *a, int status, const char *code,
                        const char *message, int details_idx) {
  if (details_idx) details_idx = lua_absindex(L, details_idx);
  lua_createtable(L, 0, 3);
  lua_pushstring(L, code);
  lua_setfield(L, -2, "code");
  lua_pushstring(L, message);
  lua_setfield(L, -2, "message");
  if (details_idx) {
    lua_pushvalue(L, details_idx);
    lua_setfield(L, -2, "details");
  }
  return send_failure(L, b, a, status);
}

/* ---- reading the request table ---- */

typedef clank_bridge_span_t span_t;

/* The strings kept stay alive: the request table holds them. */
static span_t string_at(lua_State *L, int t, const char *name) {
  span_t s = {NULL, 0};
  if (lua_getfield(L, t, name) == LUA_TSTRING) s.p = lua_tolstring(L, -1, &s.n);
  lua_pop(L, 1);
  return s;
}

/* What the checks read of the request table at req: its method (GET when
   none), path (request.path, else the url up to '?'), scheme, body and headers. */
static void view_from_table(lua_State *L, int req, clank_bridge_view_t *v) {
  req = lua_absindex(L, req);
  v->passed = NULL;
  span_t method = string_at(L, req, "method");
  v->method = method.p ? method.p : "GET";
  v->path = string_at(L, req, "path");
  if (v->path.p == NULL) {
    v->path = string_at(L, req, "url");
    const char *q = v->path.p ? memchr(v->path.p, '?', v->path.n) : NULL;
    if (q) v->path.n = (size_t)(q - v->path.p);
    if (v->path.p == NULL) v->path.p = "";
  }
  v->scheme = string_at(L, req, "scheme");
  v->body = string_at(L, req, "body");
  if (lua_getfield(L, req, "headers") == LUA_TTABLE) {
    int h = lua_gettop(L);
    v->origin = string_at(L, h, "origin");
    v->host = string_at(L, h, "host");
    v->sec_fetch_site = string_at(L, h, "sec-fetch-site");
    v->confirmation = string_at(L, h, "x-clank-confirmation");
    v->content_type = string_at(L, h, "content-type");
    v->content_length = string_at(L, h, "content-length");
    v->if_none_match = string_at(L, h, "if-none-match");
  } else {
    v->origin = v->host = v->sec_fetch_site = v->confirmation = v->content_type =
        v->content_length = v->if_none_match = (span_t){NULL, 0};
  }
  lua_pop(L, 1);
}

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

/* Step 7: `application/json` or any `type/subtype+json`, parameters and case ignored. */
static int json_media_type(const char *v, size_t n) {
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

static int valid_utf8(const char *s, size_t n) {
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

/* ---- origins (step 3) ---- */

typedef struct origin_s {
  const char *value; /* the origin header, or NULL; the request holds the string */
  size_t len;
  int own;     /* the request's own scheme://host */
  int allowed; /* in allowedOrigins (exactly) */
} origin_t;

/* 1 when origin is in the table at idx: a set (origin → true) or a list. */
static int origin_listed(lua_State *L, int idx, const char *origin, size_t n) {
  lua_pushlstring(L, origin, n);
  int yes = lua_rawget(L, idx) == LUA_TBOOLEAN && lua_toboolean(L, -1);
  lua_pop(L, 1);
  for (lua_Integer i = 1; !yes; i++) {
    size_t len;
    int type = lua_rawgeti(L, idx, i);
    const char *v = type == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
    yes = v && len == n && memcmp(v, origin, n) == 0;
    lua_pop(L, 1);
    if (type == LUA_TNIL) break;
  }
  return yes;
}

/* 1 when the n bytes at origin are scheme "://" host. */
static int origin_is(const char *origin, size_t n, span_t scheme, span_t host) {
  return host.p && n == scheme.n + 3 + host.n && memcmp(origin, scheme.p, scheme.n) == 0 &&
         memcmp(origin + scheme.n, "://", 3) == 0 &&
         memcmp(origin + scheme.n + 3, host.p, host.n) == 0;
}

/* Whether o->value is the server's own origin for the request v: its
   scheme://Host. Behind a TLS proxy (--public-origin, SPEC §13; clank-run's
   scheduler holds it) the public origin is, whatever Host the proxy passes
   on; http://Host stays the server's own for any other Host (a loopback
   tunnel to the inspector), never for the public origin's host, whose
   plain-http pages anyone on the way could have written. */
static int own_origin(lua_State *L, const clank_bridge_view_t *v, const origin_t *o) {
  const clank_sched_t *s = clank_sched_held(L);
  if (s == NULL || s->origin == NULL)
    return origin_is(o->value, o->len, v->scheme.p ? v->scheme : (span_t){"http", 4}, v->host);
  if (o->len == s->origin_len && memcmp(o->value, s->origin, o->len) == 0) return 1;
  size_t at = s->origin_host_at, hlen = s->origin_len - at;
  if (v->host.n == hlen && strncasecmp(v->host.p, s->origin + at, hlen) == 0) return 0;
  return origin_is(o->value, o->len, (span_t){"http", 4}, v->host);
}

/* Reads the origin of the request v against the allowed origins at
   allowed (a set or a list; 0 for none). */
static void read_origin(lua_State *L, const clank_bridge_view_t *v, int allowed, origin_t *o) {
  o->value = v->origin.p;
  o->len = v->origin.n;
  o->own = o->allowed = 0;
  if (o->value == NULL) return;
  o->own = own_origin(L, v, o);
  o->allowed = allowed && origin_listed(L, allowed, o->value, o->len);
}

/* 1 when step 3 refuses the request: `sec-fetch-site: cross-site`, a
   foreign origin not allowed, or no origin when one is required. */
static int origin_refused(const clank_bridge_view_t *v, const origin_t *o, int require_origin) {
  return clank_span_is(v->sec_fetch_site.p, v->sec_fetch_site.n, "cross-site") ||
         (o->value && !o->own && !o->allowed) || (!o->value && require_origin);
}

/* The origin answers name in access-control-allow-origin: an allowed foreign one. */
static const char *cors_origin(const origin_t *o) {
  return o->allowed && !o->own ? o->value : NULL;
}

/* The bridge's (at 1) reading of the origin of v; sets CORS for every answer. */
static void bridge_origin(lua_State *L, answer_t *a, origin_t *o, const clank_bridge_view_t *v) {
  if (v->origin.p == NULL) { /* nothing to look up */
    o->value = NULL;
    o->len = 0;
    o->own = o->allowed = 0;
  } else {
    push_uv_field(L, 1, UV_ORIGINS);
    read_origin(L, v, lua_gettop(L), o);
    lua_pop(L, 1);
  }
  a->cors_origin = cors_origin(o);
  a->cors_len = o->len;
}

/* If-None-Match: a list of tags, `*`, weak comparison. */
static int etag_matches(const char *inm, size_t n, const char *etag) {
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

static int answer_manifest(lua_State *L, const answer_t *given, const clank_bridge_view_t *v) {
  answer_t table = *given, *a = &table;
  table.out = NULL; /* it has an etag: a response table */
  push_uv_field(L, 1, UV_ETAG);
  int etag = lua_gettop(L);
  if (v->if_none_match.p &&
      etag_matches(v->if_none_match.p, v->if_none_match.n, lua_tostring(L, etag))) {
    push_response(L, a, 304, "no-cache", "", 0);
  } else {
    push_uv_field(L, 1, UV_MANIFEST);
    size_t mlen;
    const char *m = lua_tolstring(L, -1, &mlen);
    push_response(L, a, 200, "no-cache", m, mlen);
    lua_remove(L, -2);
  }
  lua_getfield(L, -1, "headers");
  lua_pushvalue(L, etag);
  lua_setfield(L, -2, "etag");
  lua_pop(L, 1);
  lua_remove(L, etag);
  return 1;
}

static int too_large(lua_State *L, bridge_t *b, const answer_t *a) {
  char message[64];
  snprintf(message, sizeof message, "Request body exceeds %lld bytes.", b->max_bytes);
  return push_failure(L, b, a, 413, "PAYLOAD_TOO_LARGE", message, 0);
}

/* ---- steps 1–7 ---- */

static int bad_path(lua_State *L, bridge_t *b, const answer_t *a) {
  return push_failure(L, b, a, 400, "INVALID_PATH", "The action path is not valid URL encoding.",
                      0);
}

enum { PHASE_HEAD, PHASE_FULL };

static int check_body(lua_State *L, bridge_t *b, answer_t *a, const clank_bridge_view_t *v);

/* What steps 1–7 of SPEC §5 say of the request v before its body, decided in
   C: the one place those checks are written, for the bridge's answer and for
   the header block's pass. */
typedef enum {
  HEAD_PASS,        /* on to the body, with *found */
  HEAD_MANIFEST,    /* 1. GET the manifest */
  HEAD_PREFLIGHT,   /* 2. OPTIONS from an allowed origin */
  HEAD_NO_ENDPOINT, /* 2. anything else that is not POST on an action path */
  HEAD_ORIGIN,      /* 3. refused */
  HEAD_DECODE,      /* 4. the name is percent-encoded: decode it and ask again */
  HEAD_BAD_PATH,    /* 4. not UTF-8 */
  HEAD_NO_ACTION,   /* 5. */
  HEAD_CONFIRM,     /* 6. */
  HEAD_MEDIA,       /* 7. not JSON */
  HEAD_TOO_LARGE    /* 7. by content-length */
} head_t;

/* name: the decoded action name, or NULL to read it from the path. */
static head_t head_checks(const bridge_t *b, const clank_bridge_view_t *v, const origin_t *o,
                          const char *name, size_t name_len, const entry_t **found) {
  const char *method = v->method, *path = v->path.p;
  size_t plen = v->path.n;
  if (manifest_path(path, plen) && strcmp(method, "GET") == 0) return HEAD_MANIFEST;
  const char *at = last_actions(path, plen);
  if (at && strcmp(method, "OPTIONS") == 0 && o->value && o->allowed) return HEAD_PREFLIGHT;
  if (!at || strcmp(method, "POST") != 0) return HEAD_NO_ENDPOINT;
  if (origin_refused(v, o, b->require_origin)) return HEAD_ORIGIN;
  if (name == NULL) {
    name = at + 9;
    name_len = (size_t)(path + plen - name);
    if (memchr(name, '%', name_len) != NULL) return HEAD_DECODE;
    if (!valid_utf8(name, name_len)) return HEAD_BAD_PATH;
  }
  *found = find_action(b, name, name_len);
  if (*found == NULL) return HEAD_NO_ACTION;
  if (clank_action_requires_confirmation((*found)->action) &&
      !clank_span_is(v->confirmation.p, v->confirmation.n, "confirmed"))
    return HEAD_CONFIRM;
  if (v->content_type.p == NULL || !json_media_type(v->content_type.p, v->content_type.n))
    return HEAD_MEDIA;
  if (v->content_length.p && span_integer(v->content_length) > b->max_bytes) return HEAD_TOO_LARGE;
  return HEAD_PASS;
}

/* Runs the checks of SPEC §5 in order on the request v for the bridge at 1.
   Returns 1 with a response pushed, or 0 with the action pushed (and, in the
   full phase, the decoded input after it). */
static int check_request(lua_State *L, int phase, answer_t *a, const clank_bridge_view_t *v) {
  bridge_t *b = lua_touserdata(L, 1);
  const entry_t *found = v->passed;
  if (phase == PHASE_FULL && found && found >= b->index && found < b->index + b->nindex) {
    /* steps 1–7 up to the body passed at the header block (no origin but
       its own: no CORS), on the same headers */
    a->cors_origin = NULL;
    a->cors_len = 0;
  } else {
    origin_t o;
    bridge_origin(L, a, &o, v);
    head_t head = head_checks(b, v, &o, NULL, 0, &found);
    if (head == HEAD_DECODE) {
      const char *at = last_actions(v->path.p, v->path.n);
      if (!push_decoded_name(L, at + 9, (size_t)(v->path.p + v->path.n - (at + 9)))) {
        head = HEAD_BAD_PATH;
      } else {
        size_t n;
        const char *name = lua_tolstring(L, -1, &n);
        head = head_checks(b, v, &o, name, n, &found);
        lua_pop(L, 1);
      }
    }
    switch (head) {
      case HEAD_PASS: break;
      case HEAD_MANIFEST: return answer_manifest(L, a, v);
      case HEAD_PREFLIGHT: {
        answer_t cors = {o.value, o.len, NULL};
        push_response(L, &cors, 204, NULL, "", 0);
        lua_getfield(L, -1, "headers");
        lua_pushliteral(L, "POST");
        lua_setfield(L, -2, "access-control-allow-methods");
        lua_pushliteral(L, "content-type, x-clank-confirmation");
        lua_setfield(L, -2, "access-control-allow-headers");
        lua_pop(L, 1);
        return 1;
      }
      case HEAD_NO_ENDPOINT:
        return push_failure(L, b, a, 404, "NOT_FOUND", "Agent endpoint not found.", 0);
      case HEAD_ORIGIN:
        return push_failure(L, b, a, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.",
                            0);
      case HEAD_DECODE: /* decoded above */
      case HEAD_BAD_PATH: return bad_path(L, b, a);
      case HEAD_NO_ACTION: return push_failure(L, b, a, 404, "NOT_FOUND", "Action not found.", 0);
      case HEAD_CONFIRM:
        return push_failure(L, b, a, 428, "CONFIRMATION_REQUIRED",
                            "This action requires explicit confirmation.", 0);
      case HEAD_MEDIA:
        return push_failure(L, b, a, 415, "UNSUPPORTED_MEDIA_TYPE",
                            "Expected an application/json request body.", 0);
      case HEAD_TOO_LARGE: return too_large(L, b, a);
    }
  }
  push_uv_field(L, 1, UV_LIST);
  lua_rawgeti(L, -1, found->slot);
  lua_replace(L, -2); /* the action in its list's place: no rotation */
  if (phase == PHASE_HEAD) return 0;
  return check_body(L, b, a, v);
}

/* Step 7 on the body, with the action pushed: as check_request. */
static int check_body(lua_State *L, bridge_t *b, answer_t *a, const clank_bridge_view_t *v) {
  size_t body_len = v->body.n;
  const char *body = v->body.p;
  /* Every body resets the mark check_input trusts, so a table it names is
     alive, hence the one decoded last (a context function may wait between
     the two, and other requests run meanwhile). */
  b->valid_input = NULL;
  if (body == NULL || body_len == 0) {
    lua_pop(L, 1);
    return push_failure(L, b, a, 400, "INVALID_JSON", "A JSON request body is required.", 0);
  }
  if ((long long)body_len > b->max_bytes) {
    lua_pop(L, 1);
    return too_large(L, b, a);
  }
  /* Decoded guided by the action's input schema: when that finds the input
     valid, check_input need not look again. */
  int r = clank_schema_decode(L, clank_action_input(lua_touserdata(L, -1)), body, body_len);
  if (r == CLANK_SCHEMA_DECODE_VALID && lua_type(L, -1) == LUA_TTABLE)
    b->valid_input = lua_topointer(L, -1);
  if (r != CLANK_SCHEMA_DECODE_MALFORMED) return 0;
  /* JSON the decoder takes is valid UTF-8 (it checks every string, and the
     rest is ASCII): the encoding is looked at only to tell why it failed */
  if (clank_json_decode(L, body, body_len) != 1) {
    lua_pop(L, 3);
    if (!valid_utf8(body, body_len))
      return push_failure(L, b, a, 400, "INVALID_ENCODING", "Request body must be valid UTF-8.", 0);
    return push_failure(L, b, a, 400, "INVALID_JSON", "Request body is not valid JSON.", 0);
  }
  return 0;
}

const void *clank_bridge_head_passes(lua_State *L, int idx, const clank_bridge_view_t *v) {
  const bridge_t *b = test_bridge(L, idx);
  if (b == NULL) return NULL;
  origin_t o;
  read_origin(L, v, 0, &o);           /* no allowed origins: those are looked up in Lua */
  if (o.value && !o.own) return NULL; /* a foreign origin: allowed or not, Lua says */
  const entry_t *found = NULL;
  return head_checks(b, v, &o, NULL, 0, &found) == HEAD_PASS ? found : NULL;
}

int clank_bridge_head(lua_State *L) {
  lua_settop(L, 2);
  check_bridge(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  clank_bridge_view_t v;
  view_from_table(L, 2, &v);
  answer_t a = {0};
  if (check_request(L, PHASE_HEAD, &a, &v)) return 1;
  lua_pushnil(L);
  return 1;
}

int clank_bridge_head_view(lua_State *L) {
  check_bridge(L, 1);
  const clank_bridge_view_t *v = lua_touserdata(L, 2);
  answer_t a = {0};
  if (check_request(L, PHASE_HEAD, &a, v)) return 1;
  lua_pushnil(L);
  return 1;
}

void clank_bridge_push_manifest(lua_State *L, int idx) {
  check_bridge(L, idx);
  push_uv_field(L, idx, UV_MANIFEST);
}

void clank_bridge_push_actions(lua_State *L, int idx) {
  check_bridge(L, idx);
  push_uv_field(L, idx, UV_ACTIONS);
}

void clank_bridge_push_contract_hash(lua_State *L, int idx) {
  check_bridge(L, idx);
  push_uv_field(L, idx, UV_ETAG);
  size_t n;
  const char *etag = lua_tolstring(L, -1, &n);
  lua_pushlstring(L, etag + 1, n - 2);
  lua_remove(L, -2);
}

long long clank_bridge_max_bytes(lua_State *L, int idx) { return check_bridge(L, idx)->max_bytes; }

/* ---- steps 8 and 9: running the action and answering ---- */

/* The input's issues as {path (0-based), message, expected?}, for details. */
static void push_issue_details(lua_State *L, int issues) {
  lua_Integer n = luaL_len(L, issues);
  lua_createtable(L, (int)n, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, issues, i);
    int issue = lua_gettop(L);
    lua_createtable(L, 0, 3);
    lua_getfield(L, issue, "path");
    lua_Integer pn = lua_istable(L, -1) ? luaL_len(L, -1) : 0;
    lua_createtable(L, (int)pn, 0);
    for (lua_Integer k = 1; k <= pn; k++) {
      lua_rawgeti(L, -2, k);
      if (lua_isinteger(L, -1)) {
        lua_Integer v = lua_tointeger(L, -1);
        lua_pop(L, 1);
        lua_pushinteger(L, v - 1);
      }
      lua_rawseti(L, -2, k);
    }
    clank_mark_array(L, -1);
    lua_setfield(L, -3, "path");
    lua_pop(L, 1);
    lua_getfield(L, issue, "message");
    lua_setfield(L, -2, "message");
    lua_getfield(L, issue, "expected");
    lua_setfield(L, -2, "expected");
    lua_rawseti(L, -3, i);
    lua_pop(L, 1);
  }
  clank_mark_array(L, -1);
}

/* Pushes the issues at idx with the key at prefix put before every path
   (MCP's wrapped inputs keep their `value` key). */
static void push_prefixed_issues(lua_State *L, int issues, int prefix) {
  lua_Integer n = luaL_len(L, issues);
  lua_createtable(L, (int)n, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, issues, i);
    lua_createtable(L, 0, 3);
    lua_getfield(L, -2, "message");
    lua_setfield(L, -2, "message");
    lua_getfield(L, -2, "expected");
    lua_setfield(L, -2, "expected");
    lua_getfield(L, -2, "path");
    lua_Integer pn = lua_istable(L, -1) ? luaL_len(L, -1) : 0;
    lua_createtable(L, (int)pn + 1, 0);
    lua_pushvalue(L, prefix);
    lua_rawseti(L, -2, 1);
    for (lua_Integer k = 1; k <= pn; k++) {
      lua_rawgeti(L, -2, k);
      lua_rawseti(L, -2, k + 1);
    }
    lua_setfield(L, -3, "path");
    lua_pop(L, 1);
    lua_rawseti(L, -3, i);
    lua_pop(L, 1);
  }
}

/* Step 9. Pushes the error object {code, message, details?} for the error at
   idx and returns its status: the input's ValidationError → 422
   INVALID_INPUT (0-based paths, after the key at prefix unless prefix is 0);
   an ActionError → its own; anything else → 500 ACTION_FAILED, its message
   only when expose. Then pushes the text to log for an unexpected error
   (with the traceback the protected call kept), nil for the others. */
static int push_error_object(lua_State *L, int idx, int expose, int prefix) {
  idx = lua_absindex(L, idx);
  lua_createtable(L, 0, 3);
  int obj = lua_gettop(L);
  if (clank_has_metatable(L, idx, "clank.ValidationError")) {
    lua_getfield(L, idx, "issues");
    if (prefix) {
      push_prefixed_issues(L, lua_gettop(L), prefix);
      lua_remove(L, -2);
    }
    int issues = lua_gettop(L);
    lua_pushliteral(L, "INVALID_INPUT");
    lua_setfield(L, obj, "code");
    clank_schema_push_message(L, issues, 1);
    lua_setfield(L, obj, "message");
    push_issue_details(L, issues);
    lua_setfield(L, obj, "details");
    lua_pop(L, 1);
    lua_pushnil(L);
    return 422;
  }
  if (clank_action_error_is(L, idx)) {
    lua_getfield(L, idx, "status");
    int status = (int)lua_tointeger(L, -1);
    if (status < 400 || status > 599) status = 500;
    lua_pop(L, 1);
    lua_getfield(L, idx, "code");
    if (!lua_isstring(L, -1)) {
      lua_pop(L, 1);
      lua_pushliteral(L, "ACTION_FAILED");
    }
    lua_setfield(L, obj, "code");
    lua_getfield(L, idx, "message");
    if (!lua_isstring(L, -1)) {
      lua_pop(L, 1);
      lua_pushliteral(L, "");
    }
    lua_setfield(L, obj, "message");
    lua_getfield(L, idx, "details");
    lua_setfield(L, obj, "details");
    lua_pushnil(L);
    return status;
  }
  lua_pushliteral(L, "ACTION_FAILED");
  lua_setfield(L, obj, "code");
  if (expose)
    clank_error_message(L, idx);
  else
    lua_pushliteral(L, "The action failed.");
  lua_setfield(L, obj, "message");
  clank_error_text(L, idx);
  return 500;
}

/* Step 9: the error at idx becomes an answer; an unexpected one is logged. */
static int answer_error(lua_State *L, bridge_t *b, const answer_t *a, int idx) {
  int status = push_error_object(L, idx, b->expose_errors, 0);
  if (!lua_isnil(L, -1)) clank_log(L, "error", "action failed: %s", lua_tostring(L, -1));
  lua_pop(L, 1);
  return send_failure(L, b, a, status);
}

/* Only their addresses matter. In a ctx the bridge made: the key of its
   request's maker (a request not built yet), of its request id as the
   integer of a made-up one (16 hex digits, as the server makes them), and
   the mark that ctx.signal was given once (cleared by the action afterwards,
   it stays cleared). In the metatable of such ctxs (one per action, held by
   the action), the key of the action, whose log and progress ctx serves. */
static const char maker_key = 0;
static const char id_key = 0;
static const char given_key = 0;
static const char action_key = 0;

/* The integer of a request id of 16 lowercase hex digits, in *n. */
static int id_number(const char *id, lua_Integer *n) {
  /* a digit's value + 1, 0 for any other byte */
  static const unsigned char digit[256] = {
      ['0'] = 1, ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,  ['7'] = 8,
      ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
  };
  uint64_t v = 0;
  for (int i = 0; i < 16; i++) {
    unsigned d = digit[(unsigned char)id[i]];
    if (d == 0) return 0;
    v = v << 4 | (d - 1);
  }
  if (id[16] != '\0') return 0;
  *n = (lua_Integer)v;
  return 1;
}

/* ctx.requestId from the integer at id_key, kept in ctx; the integer goes
   (a requestId cleared afterwards stays cleared). */
static int give_request_id(lua_State *L) {
  if (lua_rawgetp(L, 1, &id_key) != LUA_TNUMBER) return 1;
  uint64_t n = (uint64_t)lua_tointeger(L, -1);
  lua_pushnil(L);
  lua_rawsetp(L, 1, &id_key);
  char id[16];
  for (int i = 15; i >= 0; i--, n >>= 4) id[i] = clank_hex_digits[n & 15];
  lua_pushlstring(L, id, sizeof id);
  lua_pushvalue(L, -1);
  lua_setfield(L, 1, "requestId");
  return 1;
}

/* __index of such a ctx: ctx.request builds the request (calling the maker
   ctx holds: no closure per request) and ctx.signal makes the request's
   signal, ctx being its holder (abort.h), so that a driver which aborted it
   before gives one born aborted; each is kept in ctx. ctx.requestId is
   written out when first read; ctx.log and ctx.progress are the action's. */
static int ctx_index(lua_State *L) {
  size_t n = 0;
  const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &n) : NULL;
  if (key == NULL) return 0;
  if (n == 7 && memcmp(key, "request", 7) == 0) {
    if (lua_rawgetp(L, 1, &maker_key) == LUA_TNIL) return 1;
    lua_call(L, 0, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, 1, "request");
    return 1;
  }
  if (n == 9 && memcmp(key, "requestId", 9) == 0) return give_request_id(L);
  if (n == 6 && memcmp(key, "signal", 6) == 0) {
    if (lua_rawgetp(L, 1, &given_key) != LUA_TNIL) return 0;
    lua_pushboolean(L, 1);
    lua_rawsetp(L, 1, &given_key);
    lua_pushvalue(L, 1);
    clank_abort_resolve(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, 1, "signal");
    return 1;
  }
  if (!lua_getmetatable(L, 1) || lua_rawgetp(L, -1, &action_key) != LUA_TUSERDATA) return 0;
  return clank_action_give_log_field(L, lua_gettop(L), key, n);
}

/* next for a lazy ctx: the keys only the runtime uses (light userdata) are
   skipped. */
static int ctx_next(lua_State *L) {
  lua_settop(L, 2);
  while (lua_next(L, 1)) {
    if (lua_type(L, -2) != LUA_TLIGHTUSERDATA) return 2;
    lua_pop(L, 1);
  }
  lua_pushnil(L);
  return 1;
}

/* __pairs of a lazy ctx: what is served when read is read first and kept,
   so pairs lists what a ctx made at once listed (its request aside, as
   before), and nothing of the runtime's own keys. */
static int ctx_pairs(lua_State *L) {
  static const char *const served[] = {"requestId", "log", "progress", "signal"};
  luaL_checktype(L, 1, LUA_TTABLE);
  for (size_t i = 0; i < sizeof served / sizeof *served; i++) {
    lua_pushstring(L, served[i]);
    if (lua_rawget(L, 1) == LUA_TNIL && lua_getfield(L, 1, served[i]) != LUA_TNIL)
      lua_setfield(L, 1, served[i]);
    lua_settop(L, 1);
  }
  lua_pushcfunction(L, ctx_next);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

/* The request at idx as a table: a maker (clank-run's, a callable that
   builds the table when asked) is called, and the table put in its place. */
static void need_request(lua_State *L, int idx) {
  if (lua_istable(L, idx) || lua_type(L, idx) != LUA_TUSERDATA) return;
  idx = lua_absindex(L, idx);
  lua_pushvalue(L, idx);
  lua_call(L, 0, 1);
  lua_replace(L, idx);
}

/* The request argument at 2 as its maker at least, when its caller gives
   it only on demand (nil there, and out->push_request). */
static void need_maker(lua_State *L, clank_bridge_answer_t *out) {
  if (out && out->push_request && lua_isnil(L, 2)) {
    out->push_request(L, out);
    lua_replace(L, 2);
  }
}

/* Pushes a new metatable for ctxs: their lazy fields served by ctx_index,
   listed by ctx_pairs. */
static void new_ctx_meta(lua_State *L) {
  lua_createtable(L, 0, 3);
  lua_pushcfunction(L, ctx_index);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, ctx_pairs);
  lua_setfield(L, -2, "__pairs");
}

/* Pushes the metatable of the ctxs made for the action at action (0: for
   none), made once per state and action: held by the action itself (its
   slot for the bridge, no lookup), the one for none by the scheduler. */
static void push_ctx_meta(lua_State *L, clank_sched_t *s, int action) {
  if (action) {
    if (clank_action_push_held(L, action) == LUA_TTABLE) return;
    lua_pop(L, 1);
    new_ctx_meta(L);
    lua_pushvalue(L, action);
    lua_rawsetp(L, -2, &action_key);
    lua_pushvalue(L, -1);
    clank_action_set_held(L, action);
    return;
  }
  int *meta = &s->held[CLANK_HELD_CTX_META];
  if (*meta != 0) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, *meta);
    return;
  }
  new_ctx_meta(L);
  lua_pushvalue(L, -1);
  *meta = luaL_ref(L, LUA_REGISTRYINDEX);
}

/* Pushes ctx = { <the fields of the context value at src, when a table>...,
   request = <the value at req> }: what an action gets before its signal. A
   request not built yet (a maker) is built when ctx.request is first read.
   action: 0, or the index of the action ctx is for: then ctx is lazy, its
   log, progress, signal (hold_signal) and request id served when read, and
   the context's own `signal` gives way. t: the running task
   (clank_task_of), whose request id ctx carries; s: the scheduler, or NULL.
   src, req and action are positive indices. */
static void push_ctx(lua_State *L, int src, int req, clank_task_t *t, int action,
                     clank_sched_t *s) {
  int copied = lua_istable(L, src);
  /* room for what is set now and for some of what is served when read
     (the request or its maker, the request id): no rehash on the way (a
     context's fields may take more) */
  lua_createtable(L, 0, copied ? 8 : 4);
  lua_Integer id;
  int maker = lua_type(L, req) == LUA_TUSERDATA;
  if (t && t->request_id[0]) { /* x-request-id (SPEC §13); the context may still override it */
    if (action && id_number(t->request_id, &id)) {
      lua_pushinteger(L, id);
      lua_rawsetp(L, -2, &id_key);
    } else {
      lua_pushstring(L, t->request_id);
      lua_setfield(L, -2, "requestId");
    }
  }
  if (copied) {
    for (lua_pushnil(L); lua_next(L, src); lua_pop(L, 1)) {
      lua_pushvalue(L, -2);
      lua_pushvalue(L, -2);
      lua_rawset(L, -5);
    }
    if (action) {
      lua_pushnil(L);
      lua_setfield(L, -2, "signal");
      if (lua_getfield(L, -1, "requestId") != LUA_TNIL) { /* the context's, overriding */
        lua_pushnil(L);
        lua_rawsetp(L, -3, &id_key);
      }
      lua_pop(L, 1);
    }
  }
  int lazy = action != 0;
  if (!maker) {
    lua_pushvalue(L, req);
    lua_setfield(L, -2, "request");
  } else {
    if (copied) { /* the context's own `request` gives way, as it would to the table */
      lua_pushnil(L);
      lua_setfield(L, -2, "request");
    }
    lua_pushvalue(L, req);
    lua_rawsetp(L, -2, &maker_key);
    lazy = 1;
  }
  if (lazy) {
    push_ctx_meta(L, s ? s : clank_sched_get(L), action);
    lua_setmetatable(L, -2);
  }
}

/* Gives ctx (at idx) a fresh abort signal, which the driver of task (the
   running one) aborts when the client goes away; pushes the signal. */
static void give_signal(lua_State *L, int ctx, clank_task_t *task) {
  clank_abort_push(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, ctx, "signal");
  if (task && task->wants_signal && task->signal_ref == 0) {
    lua_pushvalue(L, -1);
    task->signal_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
}

/* The same for a lazy ctx (at idx), the holder of its signal (abort.h):
   the signal is made when ctx.signal or the task's (a wait's) is first
   read, and aborting it before marks ctx. Pushes ctx again, the holder.
   The task's signal_ref names ctx, in its driver's slot when it has one. */
static void hold_signal(lua_State *L, int ctx, clank_task_t *task) {
  lua_pushvalue(L, ctx);
  if (task && task->wants_signal && task->signal_ref == 0) {
    lua_pushvalue(L, -1);
    if (task->hold_slot) { /* the driver's slot for it (scheduler.h) */
      lua_rawseti(L, LUA_REGISTRYINDEX, task->hold_slot);
      task->signal_ref = task->hold_slot;
    } else {
      task->signal_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
  }
}

/* Stack during a run: 1 bridge, 2 request (its maker, or nil until Lua may
   read it: need_maker), 3 context source, 4 action, 5 input, 6 context value,
   7 ctx, 8 the signal's holder (7 again); for a handler without ctx
   (CLANK_DIRECT_INPUT), both nil while its holder is deferred, else the
   holder alone; 9 the task, in a run inline (inline_out_k). */
enum { STEP_CHECK, STEP_CONTEXT, STEP_RAN };
/* In the continuation of an inline run, beside the answer's address: the
   action's handler was called directly, not its pipeline. */
#define INLINE_DIRECT 1

static int handle_k(lua_State *L, int status, lua_KContext step);
static int context_out_k(lua_State *L, int status, lua_KContext out);
static int ran_out_k(lua_State *L, int status, lua_KContext out);
static int inline_out_k(lua_State *L, int status, lua_KContext out);

/* A run that answers in out ends: its caller's done, if any, has the last
   word (clank_bridge_handle_view_task); n: the results of the run. */
static int view_done(lua_State *L, clank_bridge_answer_t *out, int n) {
  return out && out->done ? out->done(L, out) : n;
}

/* Steps 1–7 on v, then the context: the first part of a run. The answer
   goes to out when it is not NULL (the continuations carry it). */
static int handle_checked(lua_State *L, const clank_bridge_view_t *v, clank_bridge_answer_t *out) {
  answer_t a = {.out = out};
  if (check_request(L, PHASE_FULL, &a, v)) return view_done(L, out, 1);
  if (out) { /* the request's origin lives as long as the run: the answer's CORS */
    out->cors_origin = a.cors_origin;
    out->cors_len = a.cors_len;
  }
  if (lua_isfunction(L, 3)) {
    need_maker(L, out);
    need_request(L, 2);
    lua_pushvalue(L, 3);
    lua_pushvalue(L, 2);
    if (out)
      lua_callk(L, 1, 1, (lua_KContext)out, context_out_k);
    else
      lua_callk(L, 1, 1, STEP_CONTEXT, handle_k);
  } else {
    lua_pushvalue(L, 3);
  }
  return out ? context_out_k(L, LUA_OK, (lua_KContext)out) : handle_k(L, LUA_OK, STEP_CONTEXT);
}

/* The origin of the request table at req, for CORS: headers.origin, and the
   rest only when there is one. */
static void origin_view(lua_State *L, int req, clank_bridge_view_t *v) {
  v->origin = (span_t){NULL, 0};
  if (lua_getfield(L, req, "headers") == LUA_TTABLE) v->origin = string_at(L, -1, "origin");
  lua_pop(L, 1);
  if (v->origin.p) view_from_table(L, req, v);
}

/* The CORS of an answer after the checks: kept in out, else read again from
   the request table at 2. */
static void answer_origin(lua_State *L, answer_t *a, const clank_bridge_answer_t *out) {
  if (out) {
    a->cors_origin = out->cors_origin;
    a->cors_len = out->cors_len;
    return;
  }
  clank_bridge_view_t v;
  origin_t o;
  origin_view(L, 2, &v);
  bridge_origin(L, a, &o, &v);
}

/* [schema node, input, buffer] → clank_schema_validate_json's result. */
static int validate_json(lua_State *L) {
  lua_pushinteger(L, clank_schema_validate_json(L, lua_touserdata(L, 1), 2, lua_touserdata(L, 3)));
  return 1;
}

/* Step 9 for the input (at 5) of the action (at 4), before the action runs:
   returns 1 when it is valid, 0 with the 422 answer's body in the scratch
   buffer, or -1 when the pipeline is to find out (and answer) as it did
   before: the check raised, or could not write its JSON. */
static int check_input(lua_State *L, bridge_t *b) {
  const clank_action_t *action = lua_touserdata(L, 4);
  if (b->valid_input != NULL && lua_topointer(L, 5) == b->valid_input) {
    b->valid_input = NULL; /* checked while it was decoded */
    return 1;
  }
  clank_buf_reset(&b->scratch);
  clank_buf_appends(&b->scratch, "{\"error\":");
  lua_pushcfunction(L, validate_json);
  lua_pushlightuserdata(L, (void *)clank_action_input(action));
  lua_pushvalue(L, 5);
  lua_pushlightuserdata(L, &b->scratch);
  int valid = lua_pcall(L, 3, 1, 0) == LUA_OK ? (int)lua_tointeger(L, -1) : -1;
  lua_pop(L, 1);
  if (valid == 0) clank_buf_appends(&b->scratch, ",\"ok\":false}");
  return valid;
}

/* With the context value at 6: the input checked, then ctx, the signal, and
   the action run in a task of its own. */
static int handle_context(lua_State *L, clank_bridge_answer_t *out) {
  bridge_t *b = lua_touserdata(L, 1);
  lua_settop(L, 6);
  int valid = check_input(L, b);
  if (valid == 0) {
    answer_t a = {.out = out};
    answer_origin(L, &a, out);
    push_response(L, &a, 422, "no-store", b->scratch.data, b->scratch.len);
    return view_done(L, out, 1);
  }
  clank_sched_t *s = clank_sched_get(L);
  clank_task_t *task = clank_task_on(s, L);
  int inline_run = out && task && task->on_deadline && !task->deadline_on_wait;
  /* a valid input, no authorize: the pipeline's one step left, its handler,
     is called right here */
  int direct = inline_run && valid == 1 ? clank_action_direct(L, 4) : 0;
  if (direct == CLANK_DIRECT_INPUT && task->wants_signal && task->signal_ref == 0 &&
      task->hold_slot) {
    /* 7, 8: a handler that can never see a ctx gets none (nor the request,
       nor its id), and its signal's holder is made only if something may
       take the signal (clank_task_hold_signal) */
    task->holder_deferred = 1;
    lua_pushnil(L);
    lua_pushnil(L);
  } else if (direct == CLANK_DIRECT_INPUT) {
    lua_createtable(L, 0, 0); /* 7: the holder alone */
    hold_signal(L, 7, task);  /* 8 */
  } else {
    /* 7: ctx = { <context fields>..., request, log, progress, signal }, the
       last three (and a made-up requestId) served when read */
    need_maker(L, out);
    push_ctx(L, 6, 2, task, 4, s);
    hold_signal(L, 7, task); /* 8 */
  }
  if (inline_run) {
    lua_pushlightuserdata(L, task); /* 9, for the continuation */
    /* in this task: its driver arms the timeout if it waits, and answers
       504 itself at the deadline (clank_bridge_timeout_answer) */
    task->deadline_ms = b->timeout_ms;
    task->deadline_passed = 0;
    task->deadline_on_wait = 1;
    if (direct) {
      clank_action_push_handler(L, 4); /* 10 its message handler, 11 the handler */
      lua_pushvalue(L, 5);
      if (direct == CLANK_DIRECT_CTX) lua_pushvalue(L, 7);
      lua_KContext k = (lua_KContext)out | INLINE_DIRECT;
      int st = lua_pcallk(L, direct == CLANK_DIRECT_CTX ? 2 : 1, 1, 10, k, inline_out_k);
      return inline_out_k(L, st, k);
    }
  }
  lua_pushcfunction(L, valid == 1 ? clank_action_pipeline_validated : clank_action_pipeline);
  lua_pushvalue(L, 4);
  lua_pushvalue(L, 5);
  lua_pushvalue(L, 7);
  if (inline_run) {
    int st = lua_pcallk(L, 3, 1, 0, (lua_KContext)out, inline_out_k);
    return inline_out_k(L, st, (lua_KContext)out);
  }
  if (out) return clank_sched_join_in(L, task, 3, b->timeout_ms, ran_out_k, (lua_KContext)out);
  return clank_sched_join_in(L, task, 3, b->timeout_ms, handle_k, STEP_RAN);
}

/* The answer at the action timeout (SPEC §5 step 8), encoded as send_failure would. */
static const char timeout_body[] =
    "{\"error\":{\"code\":\"TIMEOUT\",\"message\":\"The action timed out.\"},\"ok\":false}";

/* The run ended: [..., true, output] or [..., false, error] or [..., nil, "timeout"]. */

static int handle_ran(lua_State *L, clank_bridge_answer_t *out) {
  bridge_t *b = lua_touserdata(L, 1);
  answer_t a = {.out = out};
  answer_origin(L, &a, out);
  if (lua_isnil(L, -2)) {
    clank_abort_fire(L, 8, "timeout");
    push_response(L, &a, 504, "no-store", timeout_body, sizeof timeout_body - 1);
    return 1;
  }
  if (!lua_toboolean(L, -2)) return answer_error(L, b, &a, -1);
  /* {"ok":true,"output":...}, the output encoded as its schema says */
  int output = lua_gettop(L);
  const clank_schema_node_t *schema = clank_action_output(lua_touserdata(L, 4));
  clank_buf_reset(&b->scratch);
  if (lua_isnil(L, output) && schema == NULL) {
    /* a handler that returns nothing, with no output schema (SPEC §13) */
    clank_buf_appends(&b->scratch, "{\"ok\":true}");
  } else {
    clank_buf_appends(&b->scratch, "{\"ok\":true,\"output\":");
    /* the pipeline left the output to us: validated as it is written; where
       that walk stops, checked as the pipeline checks it, then encoded */
    if (schema == NULL || !clank_schema_encode(L, schema, output, &b->scratch)) {
      if (schema != NULL) {
        lua_pushcfunction(L, clank_action_check_output);
        lua_pushvalue(L, 4);
        lua_pushvalue(L, output);
        if (lua_pcall(L, 2, 0, 0) != LUA_OK) return answer_error(L, b, &a, -1);
      }
      clank_json_encode_node(L, output, schema, &b->scratch);
    }
    clank_buf_appendc(&b->scratch, '}');
  }
  push_response(L, &a, 200, NULL, b->scratch.data, b->scratch.len);
  return 1;
}

static int context_out_k(lua_State *L, int status, lua_KContext out) {
  (void)status;
  return handle_context(L, (clank_bridge_answer_t *)out);
}

static int ran_out_k(lua_State *L, int status, lua_KContext out) {
  (void)status;
  clank_bridge_answer_t *o = (clank_bridge_answer_t *)out;
  return view_done(L, o, handle_ran(L, o));
}

/* The handler called directly (INLINE_DIRECT) ended, with [..., 10 its
   message handler, output or error]: what the pipeline would have ended
   with is left on top. Returns the pipeline's ok. */
static int direct_end(lua_State *L, int ok, clank_task_t *task) {
  if (!ok) {
    clank_action_handler_failed(L, 4);
    return 0;
  }
  if (!task->deadline_passed || clank_action_output(lua_touserdata(L, 4)) == NULL) return 1;
  /* no one waits for it: the pipeline checked it, its failure logged */
  lua_pushcfunction(L, clank_action_check_output);
  lua_pushvalue(L, 4);
  lua_pushvalue(L, -3);
  if (lua_pcall(L, 2, 0, 0) == LUA_OK) return 1;
  lua_replace(L, -2);
  return 0;
}

/* The inline run (handle_context) ended: [..., task, output] or [..., task, error],
   given to handle_ran as a join gives it; dropped when the driver answered
   504 meanwhile (a failure logged as a joined child's is). */
static int inline_out_k(lua_State *L, int status, lua_KContext k) {
  clank_task_t *task = lua_touserdata(L, 9);
  lua_KContext out = k & ~(lua_KContext)INLINE_DIRECT;
  int ok = status == LUA_OK || status == LUA_YIELD;
  if (k & INLINE_DIRECT) { /* as the pipeline would have raised it: a plain error */
    ok = direct_end(L, ok, task);
    if (status == LUA_ERRMEM) status = LUA_ERRRUN;
  }
  if (task->deadline_timer) clank_sched_timer_cancel(task->deadline_timer);
  task->deadline_timer = NULL;
  task->deadline_on_wait = 0;
  if (!ok) /* an error, or one made of a good end (direct_end): the budget's when over it */
    clank_task_budget_error(L, task, status == LUA_OK || status == LUA_YIELD ? LUA_ERRRUN : status);
  if (task->deadline_passed) {
    task->deadline_passed = 0;
    if (!ok)
      clank_log(L, "error", "an action that timed out failed later: %s", clank_error_text(L, -1));
    lua_settop(L, 0);
    return 0;
  }
  lua_pushboolean(L, ok);
  if (k & INLINE_DIRECT) /* in the message handler's place */
    lua_replace(L, 10);
  else
    lua_insert(L, -2);
  clank_bridge_answer_t *o = (clank_bridge_answer_t *)out;
  return view_done(L, o, handle_ran(L, o));
}

void clank_bridge_timeout_answer(clank_bridge_answer_t *out) {
  out->status = 504;
  out->cache = "no-store";
  out->body = timeout_body;
  out->len = sizeof timeout_body - 1;
}

int clank_bridge_failed(lua_State *L) {
  bridge_t *b = lua_touserdata(L, 1);
  clank_bridge_answer_t *out = lua_touserdata(L, 3);
  answer_t a = {.out = out};
  answer_origin(L, &a, out);
  lua_settop(L, 2);
  int status = push_error_object(L, 2, b->expose_errors, 0); /* 3 object, 4 text */
  lua_insert(L, 3);
  send_failure(L, b, &a, status);
  lua_settop(L, 3);
  return 1;
}

static int handle_k(lua_State *L, int status, lua_KContext step) {
  (void)status;
  clank_bridge_view_t v;
  switch (step) {
    case STEP_CHECK:
      check_bridge(L, 1);
      luaL_checktype(L, 2, LUA_TTABLE);
      view_from_table(L, 2, &v);
      return handle_checked(L, &v, NULL);
    case STEP_CONTEXT: return handle_context(L, NULL);
    default: return handle_ran(L, NULL);
  }
}

static int run_done(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  if (lua_isnil(L, -2)) clank_abort_fire(L, 4, "timeout");
  return 2;
}

/* run(action, input, ctx) (upvalue: the bridge), in a task: the action as
   the bridge runs it — ctx.signal set, the action timeout applied — giving
   true, output; false, error; or nil, "timeout". For clank.mcp. */
static int l_run(lua_State *L) {
  bridge_t *b = check_bridge(L, lua_upvalueindex(1));
  if (clank_action_test(L, 1) == NULL) return luaL_argerror(L, 1, "expected an action");
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);
  give_signal(L, 3, clank_task_of(L)); /* 4 */
  lua_pushcfunction(L, clank_action_pipeline);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  return clank_sched_join(L, 3, b->timeout_ms, run_done, 0);
}

void clank_bridge_push_runner(lua_State *L, int idx) {
  check_bridge(L, idx);
  lua_pushvalue(L, idx);
  lua_pushcclosure(L, l_run, 1);
}

int clank_bridge_handle_task(lua_State *L) {
  lua_settop(L, 3);
  return handle_k(L, LUA_OK, STEP_CHECK);
}

int clank_bridge_handle_view_task(lua_State *L) {
  const clank_bridge_view_t *v = lua_touserdata(L, 4);
  clank_bridge_answer_t *out = lua_touserdata(L, 5);
  out->status = 0;
  lua_settop(L, 3); /* 1: the bridge, as its caller (the host) holds it */
  return handle_checked(L, v, out);
}

/* ---- createAgentBridge ---- */

static int compare_names(const void *x, const void *y) {
  return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Pushes list (at idx) sorted by the string at field `key` of each item,
   as a marked array, each item replaced by item[take] when take != NULL. */
static void push_sorted(lua_State *L, int list, const char *key, const char *take) {
  lua_Integer n = luaL_len(L, list);
  lua_createtable(L, 0, (int)n); /* name → item */
  int byname = lua_gettop(L);
  const char **names = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n + 1), 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, list, i);
    if (take) {
      lua_getfield(L, -1, take);
      lua_remove(L, -2);
    }
    lua_getfield(L, -1, key);
    names[i - 1] = lua_tostring(L, -1);
    if (names[i - 1] == NULL) luaL_error(L, "clank.createAgentBridge: an item has no %s", key);
    lua_insert(L, -2);
    lua_rawset(L, byname); /* byname keeps the name strings alive */
  }
  qsort(names, (size_t)n, sizeof *names, compare_names);
  lua_createtable(L, (int)n, 0);
  for (lua_Integer i = 0; i < n; i++) {
    lua_getfield(L, byname, names[i]);
    lua_rawseti(L, -2, i + 1);
  }
  clank_mark_array(L, -1);
  lua_replace(L, byname);
  lua_pop(L, 1);
}

/* Pushes name → action for the list at idx and returns 1; or, when an item
   is not an action or a name repeats, pushes the problem instead and
   returns 0. */
static int push_actions_by_name(lua_State *L, int list) {
  list = lua_absindex(L, list);
  lua_newtable(L);
  int byname = lua_gettop(L);
  lua_Integer n = luaL_len(L, list);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, list, i);
    if (clank_action_test(L, -1) == NULL) {
      lua_pushfstring(L, "actions[%I] is not an action (clank.defineAction)", (LUAI_UACINT)i);
      lua_replace(L, byname);
      lua_settop(L, byname);
      return 0;
    }
    clank_action_push_name(L, -1);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, byname) != LUA_TNIL) {
      lua_pushfstring(L, "duplicate action name '%s'", lua_tostring(L, -2));
      lua_replace(L, byname);
      lua_settop(L, byname);
      return 0;
    }
    lua_pop(L, 1);
    lua_insert(L, -2);
    lua_rawset(L, byname);
  }
  return 1;
}

/* The actions of the list at list (all checked) in uv: K_LIST, a copy of
   the list, and K_INDEX, their entries sorted by name, which b points to. */
static void index_actions(lua_State *L, bridge_t *b, int list, int uv) {
  size_t n = (size_t)luaL_len(L, list);
  lua_createtable(L, (int)n, 0);
  entry_t *index = lua_newuserdatauv(L, n ? n * sizeof *index : 1, 0);
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, list, (lua_Integer)i + 1);
    index[i].action = clank_action_test(L, -1);
    if (index[i].action == NULL) /* only a list whose length moves gets here */
      luaL_error(L, "clank.createAgentBridge: actions[%d] is not an action", (int)i + 1);
    index[i].slot = (int)i + 1;
    clank_action_push_name(L, -1);
    index[i].name = lua_tolstring(L, -1, &index[i].len); /* the action holds the string */
    lua_pop(L, 1);
    lua_rawseti(L, -3, (lua_Integer)i + 1);
  }
  qsort(index, n, sizeof *index, compare_entries);
  b->index = index;
  b->nindex = n;
  lua_setfield(L, uv, K_INDEX);
  lua_setfield(L, uv, K_LIST);
}

static const char *const bridge_options[] = {"name",           "description",   "views",
                                             "allowedOrigins", "requireOrigin", "maxRequestBytes",
                                             "exposeErrors",   "actionTimeout", NULL};

static void read_options(lua_State *L, bridge_t *b, int opts, int uv) {
  b->max_bytes = 65536;
  b->timeout_ms = CLANK_BRIDGE_DEFAULT_ACTION_TIMEOUT;
  lua_newtable(L);
  lua_setfield(L, uv, K_ORIGINS);
  if (lua_isnoneornil(L, opts)) return;
  luaL_checktype(L, opts, LUA_TTABLE);
  for (lua_pushnil(L); lua_next(L, opts); lua_pop(L, 1)) {
    int known = 0;
    for (int i = 0; bridge_options[i]; i++)
      if (lua_type(L, -2) == LUA_TSTRING && strcmp(lua_tostring(L, -2), bridge_options[i]) == 0)
        known = 1;
    if (!known)
      luaL_error(L, "clank.createAgentBridge: unknown option '%s'", luaL_tolstring(L, -2, NULL));
  }
  if (lua_getfield(L, opts, "maxRequestBytes") != LUA_TNIL) {
    int isint;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint || v < 1)
      luaL_error(L, "clank.createAgentBridge: 'maxRequestBytes' must be a positive integer");
    b->max_bytes = v;
  }
  if (lua_getfield(L, opts, "actionTimeout") != LUA_TNIL) {
    lua_Number v = lua_tonumber(L, -1);
    if (!(v > 0))
      luaL_error(L, "clank.createAgentBridge: 'actionTimeout' must be a positive number of ms");
    b->timeout_ms = v;
  }
  lua_getfield(L, opts, "requireOrigin");
  b->require_origin = lua_toboolean(L, -1);
  lua_getfield(L, opts, "exposeErrors");
  b->expose_errors = lua_toboolean(L, -1);
  lua_pop(L, 4);
  if (lua_getfield(L, opts, "allowedOrigins") == LUA_TTABLE) {
    lua_getfield(L, uv, K_ORIGINS);
    lua_Integer n = luaL_len(L, -2);
    for (lua_Integer i = 1; i <= n; i++) {
      if (lua_rawgeti(L, -2, i) != LUA_TSTRING)
        luaL_error(L, "clank.createAgentBridge: allowedOrigins[%d] must be a string", (int)i);
      lua_pushboolean(L, 1);
      lua_rawset(L, -3);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

static int l_create(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  bridge_t *b = lua_newuserdatauv(L, sizeof *b, UV_COUNT); /* 3 */
  memset(b, 0, sizeof *b);
  b->tag = &bridge_tag;
  luaL_setmetatable(L, CLANK_BRIDGE_MT);
  lua_newtable(L); /* 4: uservalue */
  read_options(L, b, 2, 4);

  if (!push_actions_by_name(L, 1)) /* 5: name → action */
    return luaL_error(L, "clank.createAgentBridge: %s", lua_tostring(L, -1));
  lua_pushvalue(L, 5);
  lua_setfield(L, 4, K_ACTIONS);
  index_actions(L, b, 1, 4);

  /* the manifest: { protocol, actions (sorted by name), name?, description?, views? } */
  lua_createtable(L, 0, 5); /* 6 */
  lua_pushliteral(L, "clank-agent/1");
  lua_setfield(L, 6, "protocol");
  push_sorted(L, 1, "name", "manifest");
  lua_setfield(L, 6, "actions");
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "name");
    lua_setfield(L, 6, "name");
    lua_getfield(L, 2, "description");
    lua_setfield(L, 6, "description");
    if (lua_getfield(L, 2, "views") == LUA_TTABLE && luaL_len(L, -1) > 0) {
      push_sorted(L, lua_gettop(L), "name", "viewManifest");
      lua_setfield(L, 6, "views");
    }
    lua_pop(L, 1);
  }
  clank_buf_reset(&b->scratch);
  clank_json_encode(L, 6, 0, &b->scratch);
  lua_pushlstring(L, b->scratch.data, b->scratch.len);
  lua_setfield(L, 4, K_MANIFEST);

  /* etag: '"' + 16 hex digits of the SHA-256 of the body + '"' */
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  if (!EVP_Digest(b->scratch.data, b->scratch.len, md, &mdlen, EVP_sha256(), NULL))
    return luaL_error(L, "clank.createAgentBridge: SHA-256 failed");
  char etag[19];
  etag[0] = '"';
  for (int i = 0; i < 8; i++) {
    etag[1 + 2 * i] = clank_hex_digits[md[i] >> 4];
    etag[2 + 2 * i] = clank_hex_digits[md[i] & 15];
  }
  etag[17] = '"';
  etag[18] = '\0';
  lua_pushstring(L, etag);
  lua_setfield(L, 4, K_ETAG);

  static const char *const slots[UV_COUNT] = {K_ACTIONS, K_MANIFEST, K_ETAG,
                                              K_ORIGINS, K_INDEX,    K_LIST};
  for (int i = 0; i < UV_COUNT; i++) {
    lua_getfield(L, 4, slots[i]);
    lua_setiuservalue(L, 3, i + 1);
  }
  lua_settop(L, 3);
  return 1;
}

/* ---- methods ---- */

static int return_one(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  (void)L;
  return 1;
}

/* Runs the function below 3 arguments here when in a task, else in a task
   of its own with the loop run until it ends. */
static int run3(lua_State *L) {
  if (clank_in_task(L)) {
    lua_callk(L, 3, 1, 0, return_one);
    return 1;
  }
  return clank_sched_call(L, 3);
}

static int l_manifest(lua_State *L) {
  check_bridge(L, 1);
  push_uv_field(L, 1, UV_MANIFEST);
  size_t n;
  const char *m = lua_tolstring(L, -1, &n);
  clank_json_decode(L, m, n);
  return 1;
}

static int l_invoke(lua_State *L) {
  check_bridge(L, 1);
  const char *name = luaL_checkstring(L, 2);
  lua_settop(L, 4);
  push_uv_field(L, 1, UV_ACTIONS);
  lua_getfield(L, -1, name);
  if (lua_isnil(L, -1)) {
    lua_pushfstring(L, "Unknown action: %s", name);
    clank_action_error_push(L, "NOT_FOUND", lua_tostring(L, -1), 404);
    return lua_error(L);
  }
  clank_action_t *a = clank_action_test(L, -1);
  if (a && clank_action_requires_confirmation(a) && clank_bound_request_unconfirmed(L)) {
    clank_action_error_push(L, "CONFIRMATION_REQUIRED",
                            "This action requires explicit confirmation.", 428);
    return lua_error(L);
  }
  lua_pushcfunction(L, clank_action_pipeline);
  lua_insert(L, -2);
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 4);
  return run3(L);
}

static int l_handle(lua_State *L) {
  check_bridge(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 3);
  lua_pushcfunction(L, clank_bridge_handle_task);
  lua_insert(L, 1);
  return run3(L);
}

/* ---- the rules, for clank.mcp and clank.app ----

   The same C as handle() runs, so the rules of SPEC §5 are written once. */

/* bridge.isJsonMediaType(value) → whether a content-type is JSON (step 7). */
static int l_is_json_media_type(lua_State *L) {
  size_t n;
  const char *v = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &n) : NULL;
  lua_pushboolean(L, v && json_media_type(v, n));
  return 1;
}

/* bridge.checkOrigin(request, allowedOrigins?, requireOrigin?) → false when
   step 3 refuses the request; else true and, for an allowed foreign origin,
   that origin (for access-control-allow-origin). */
static int l_check_origin(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 3);
  clank_bridge_view_t v;
  view_from_table(L, 1, &v);
  origin_t o;
  read_origin(L, &v, lua_istable(L, 2) ? 2 : 0, &o);
  if (origin_refused(&v, &o, lua_toboolean(L, 3))) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lua_pushboolean(L, 1);
  const char *cors = cors_origin(&o);
  if (cors == NULL) return 1;
  lua_pushlstring(L, cors, o.len);
  return 2;
}

/* bridge.errorEnvelope(err, { exposeErrors, pathPrefix }) → { status, code,
   message, details? }, and the text to log (with its traceback) when err is
   unexpected (step 9). pathPrefix is put before every issue path. */
static int l_error_envelope(lua_State *L) {
  lua_settop(L, 2);
  int expose = 0, prefix = 0;
  if (!lua_isnil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_getfield(L, 2, "exposeErrors"); /* 3 */
    expose = lua_toboolean(L, 3);
    if (lua_getfield(L, 2, "pathPrefix") != LUA_TNIL) prefix = 4; /* 4 */
  }
  int status = push_error_object(L, 1, expose, prefix);
  lua_pushinteger(L, status);
  lua_setfield(L, -3, "status");
  return 2;
}

static int context_k(lua_State *L, int status, lua_KContext k) {
  (void)status;
  (void)k;
  push_ctx(L, 3, 2, clank_task_of(L), 0, NULL);
  return 1;
}

/* bridge.context(source, request) → ctx as handle() builds it: the fields
   of source (a table, or a function(request) returning one; it may wait),
   then request. The run adds the signal. */
static int l_context(lua_State *L) {
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  if (lua_isfunction(L, 1)) {
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_callk(L, 1, 1, 0, context_k);
  } else {
    lua_pushvalue(L, 1);
  }
  return context_k(L, LUA_OK, 0);
}

int clank_bridge_reserved_path(const char *p, size_t n, int has_views) {
  return (n == 9 && memcmp(p, "/manifest", 9) == 0) ||
         (n == 18 && memcmp(p, "/.well-known/clank", 18) == 0) || starts_with(p, n, "/actions/") ||
         starts_with(p, n, "/__clank/") || starts_with(p, n, "/views/") ||
         (has_views && n == 1 && p[0] == '/');
}

/* bridge.isReservedPath(path, hasViews) → whether the runtime answers path
   itself (the bridge, /__clank/, views), so no app route can live there. */
static int l_is_reserved_path(lua_State *L) {
  size_t n;
  const char *p = luaL_checklstring(L, 1, &n);
  lua_pushboolean(L, clank_bridge_reserved_path(p, n, lua_toboolean(L, 2)));
  return 1;
}

/* bridge.actionsByName(list) → name → action, or nil and the problem (an
   item that is not an action, a duplicate name). */
static int l_actions_by_name(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (push_actions_by_name(L, 1)) return 1;
  lua_pushnil(L);
  lua_insert(L, -2);
  return 2;
}

static int l_gc(lua_State *L) {
  bridge_t *b = check_bridge(L, 1);
  clank_buf_free(&b->scratch);
  return 0;
}

static const luaL_Reg bridge_methods[] = {
    {"manifest", l_manifest}, {"invoke", l_invoke}, {"handle", l_handle}, {NULL, NULL}};

static const luaL_Reg bridge_funcs[] = {{"createAgentBridge", l_create},
                                        {"isJsonMediaType", l_is_json_media_type},
                                        {"checkOrigin", l_check_origin},
                                        {"errorEnvelope", l_error_envelope},
                                        {"context", l_context},
                                        {"isReservedPath", l_is_reserved_path},
                                        {"actionsByName", l_actions_by_name},
                                        {NULL, NULL}};

int luaopen_clank_bridge(lua_State *L) {
  luaL_newmetatable(L, CLANK_BRIDGE_MT);
  luaL_newlib(L, bridge_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_newlib(L, bridge_funcs);
  lua_pushinteger(L, CLANK_BRIDGE_DEFAULT_ACTION_TIMEOUT);
  lua_setfield(L, -2, "DEFAULT_ACTION_TIMEOUT");
  return 1;
}
