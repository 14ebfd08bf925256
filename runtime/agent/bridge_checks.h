/* SPEC §5's checks, steps 1–7, as plain C over a request's view: no Lua
   state, no allocation, so they can be unit-tested and fuzzed
   (bridge_checks.c). The bridge's Lua side (bridge_request.c) reads a
   request into a view, looks the allowed origins up, and answers what these
   functions decide. */
#ifndef CLANK_BRIDGE_CHECKS_H
#define CLANK_BRIDGE_CHECKS_H

#include <stddef.h>

/* What steps 1–7 of SPEC §5 read of a request, taken from the parsed
   request by clank-run (no request table) or from a request table. Every
   span is NULL when absent; a header repeated is one value joined by ", ". */
typedef struct clank_bridge_span_s {
  const char *p;
  size_t n;
} clank_bridge_span_t;
typedef struct clank_bridge_view_s {
  const char *method; /* NUL-terminated */
  clank_bridge_span_t path, origin, host, scheme, sec_fetch_site, confirmation, content_type,
      content_length, if_none_match, body;
  /* What clank_bridge_head_passes gave for this very request and bridge at
     its header block, headers unchanged since; NULL: steps 1–7 run in full. */
  const void *passed;
} clank_bridge_view_t;

/* One action of a bridge, found by its name's bytes without making a Lua
   string: the name (its action keeps it alive), the action, its slot in the
   bridge's list, and whether it requires confirmation (step 6). */
struct clank_action_s;
typedef struct clank_bridge_entry_s {
  const char *name;
  size_t len;
  struct clank_action_s *action;
  int slot;
  int confirm;
  int needs_user; /* a signed-in user: its confirmation waits for the run (bridge_auth.c) */
} clank_bridge_entry_t;

/* What the checks know of a bridge: its actions sorted by name
   (clank_bridge_compare_entries), maxRequestBytes and requireOrigin. */
typedef struct clank_bridge_rules_s {
  const clank_bridge_entry_t *index;
  size_t nindex;
  long long max_bytes;
  int require_origin;
  int auth; /* the app has accounts: an action that says nothing needs a user */
} clank_bridge_rules_t;

/* Step 3's reading of a request's origin. */
typedef struct clank_bridge_origin_s {
  const char *value; /* the origin header, or NULL; the request holds the string */
  size_t len;
  int own;     /* the server's own origin (clank_bridge_read_origin) */
  int allowed; /* in allowedOrigins (exactly): the caller looks it up */
} clank_bridge_origin_t;

/* The server's public origin behind a TLS proxy (--public-origin, SPEC §13):
   origin NULL when there is none; host_at: where its host[:port] starts. */
typedef struct clank_bridge_public_s {
  const char *origin;
  size_t len, host_at;
} clank_bridge_public_t;

/* What steps 1–7 say of a request, in SPEC §5's order. */
typedef enum {
  CLANK_BRIDGE_PASS,         /* on to the body (or, after it, to the run), with the entry */
  CLANK_BRIDGE_MANIFEST,     /* 1. GET the manifest */
  CLANK_BRIDGE_PREFLIGHT,    /* 2. OPTIONS from an allowed origin */
  CLANK_BRIDGE_NO_ENDPOINT,  /* 2. anything else that is not POST on an action path */
  CLANK_BRIDGE_ORIGIN,       /* 3. refused */
  CLANK_BRIDGE_DECODE,       /* 4. the name is percent-encoded: clank_bridge_check_decoded */
  CLANK_BRIDGE_BAD_PATH,     /* 4. a bad escape, or not UTF-8 */
  CLANK_BRIDGE_NO_ACTION,    /* 5. */
  CLANK_BRIDGE_CONFIRM,      /* 6. */
  CLANK_BRIDGE_MEDIA,        /* 7. not a JSON content type */
  CLANK_BRIDGE_TOO_LARGE,    /* 7. by content-length, or the body itself */
  CLANK_BRIDGE_NO_BODY,      /* 7. */
  CLANK_BRIDGE_ENCODING,     /* 7. a body that is not UTF-8 */
  CLANK_BRIDGE_NOT_JSON,     /* 7. a body that is not JSON */
  CLANK_BRIDGE_UNAUTHORIZED, /* no user, for an action that needs one (issue 30) */
  CLANK_BRIDGE_FORBIDDEN,    /* a user without the role it needs */
  CLANK_BRIDGE_READ_ONLY     /* a read token, for an action that writes */
} clank_bridge_step_t;

/* The failure a step answers with: status, code and message (SPEC §5), or
   NULL for the steps that are not failures (pass, manifest, preflight,
   decode). CLANK_BRIDGE_TOO_LARGE's message is a format taking the limit
   (clank_bridge_envelope_too_large). */
typedef struct clank_bridge_refusal_s {
  int status;
  const char *code, *message;
} clank_bridge_refusal_t;
const clank_bridge_refusal_t *clank_bridge_refusal(clank_bridge_step_t step);

/* Steps 1–7 before the body, on the request v whose origin o was read (and
   looked up) already. name: the decoded action name, or NULL to read it
   from the path. The entry found (on CLANK_BRIDGE_PASS, CLANK_BRIDGE_CONFIRM
   and after) goes to *found. */
clank_bridge_step_t clank_bridge_check_head(const clank_bridge_rules_t *r,
                                            const clank_bridge_view_t *v,
                                            const clank_bridge_origin_t *o, const char *name,
                                            size_t name_len, const clank_bridge_entry_t **found);
/* After CLANK_BRIDGE_DECODE: the name decoded into out (room for v->path.n
   bytes), then the checks again; CLANK_BRIDGE_BAD_PATH for a bad escape. */
clank_bridge_step_t clank_bridge_check_decoded(const clank_bridge_rules_t *r,
                                               const clank_bridge_view_t *v,
                                               const clank_bridge_origin_t *o, char *out,
                                               const clank_bridge_entry_t **found);
/* Step 7 on the body before it is decoded: none, or past maxRequestBytes. */
clank_bridge_step_t clank_bridge_check_body(const clank_bridge_rules_t *r,
                                            const clank_bridge_view_t *v);
/* Step 7 for a body the JSON decoder refused: why (not UTF-8, or not JSON). */
clank_bridge_step_t clank_bridge_malformed_body(const clank_bridge_view_t *v);

/* Step 3: whether o->value (not NULL) is the server's own origin for the
   request v: its scheme://Host, or the public origin pub (NULL: none). */
int clank_bridge_own_origin(const clank_bridge_view_t *v, const clank_bridge_public_t *pub,
                            const clank_bridge_origin_t *o);
/* Step 3: reads the origin of v (o->allowed left 0 for the caller); pub:
   the public origin, or NULL. Inline: most requests carry no origin. */
static inline void clank_bridge_read_origin(const clank_bridge_view_t *v,
                                            const clank_bridge_public_t *pub,
                                            clank_bridge_origin_t *o) {
  o->value = v->origin.p;
  o->len = v->origin.n;
  o->own = o->allowed = 0;
  if (o->value != NULL) o->own = clank_bridge_own_origin(v, pub, o);
}
/* 1 when step 3 refuses the request: `sec-fetch-site: cross-site`, a
   foreign origin not allowed, or no origin when one is required. */
int clank_bridge_origin_refused(const clank_bridge_view_t *v, const clank_bridge_origin_t *o,
                                int require_origin);
/* The origin answers name in access-control-allow-origin: an allowed
   foreign one, else NULL. */
static inline const char *clank_bridge_cors_origin(const clank_bridge_origin_t *o) {
  return o->allowed && !o->own ? o->value : NULL;
}

/* qsort's order of entries: their names' bytes. */
int clank_bridge_compare_entries(const void *x, const void *y);
/* Step 1: If-None-Match (a list of tags, `*`, weak comparison) matches etag. */
int clank_bridge_etag_matches(const char *inm, size_t n, const char *etag);
/* Step 7: `application/json` or any `type/subtype+json`, parameters and case ignored. */
int clank_bridge_json_media_type(const char *v, size_t n);
/* Step 7: the n bytes at s are UTF-8. */
int clank_bridge_valid_utf8(const char *s, size_t n);

/* SPEC §2: the paths the runtime answers itself (the bridge, /__clank/,
   views), where no app route can live. bridge.isReservedPath in Lua. */
int clank_bridge_reserved_path(const char *p, size_t n, int has_views);

#endif
