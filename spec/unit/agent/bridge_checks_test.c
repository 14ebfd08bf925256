/* SPEC §5's checks (runtime/agent/bridge_checks.c) in plain C, table-driven:
   every expected result below is written by hand from SPEC §5, not taken
   from a run. Each case is checked on its own and named when it fails; the
   program exits 1 when any did. Built and registered by
   cmake/ClankTests.cmake (unit/agent/bridge_checks_test). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/bridge_checks.h"
#include "agent/bridge_envelope.h"

#include "../check.h"

static const char *const step_names[] = {
    "PASS",     "MANIFEST",  "PREFLIGHT",    "NO_ENDPOINT", "ORIGIN",    "DECODE",
    "BAD_PATH", "NO_ACTION", "CONFIRM",      "MEDIA",       "TOO_LARGE", "NO_BODY",
    "ENCODING", "NOT_JSON",  "UNAUTHORIZED", "FORBIDDEN",   "READ_ONLY"};

/* ---- the bridge the cases run against ---- */

static clank_bridge_entry_t entries[] = {
    {"tasks.create", 12, NULL, 1, 0, 0},
    {"tasks.delete", 12, NULL, 2, 1, 0}, /* confirmation required */
    {"A", 1, NULL, 3, 0, 0},
    {"a+b", 3, NULL, 4, 0, 0},
    {"a b", 3, NULL, 5, 0, 0},
    {"\xc3\xa9", 2, NULL, 6, 0, 0}, /* é */
    /* confirmation required of a signed-in user: who is calling is known
       only in the run, and a caller not signed in gets 401 there, not 428 */
    {"notes.delete", 12, NULL, 7, 1, 1},
};
#define NENTRIES (sizeof entries / sizeof *entries)
#define MAX_BYTES 100

/* allowedOrigins = { "http://localhost:5173" }: looked up by the Lua side
   (bridge_request.c), exactly; here the same exact comparison */
static const char allowed_origin[] = "http://localhost:5173";

/* ---- steps 1–7 before the body ---- */

typedef struct {
  const char *what;
  const char *method, *path;
  const char *origin, *sec_fetch_site, *confirmation, *content_type, *content_length;
  const char *host, *scheme; /* default: localhost:8080, http */
  int require_origin;
  const char *public_origin; /* --public-origin, or NULL */
  clank_bridge_step_t want;
  const char *want_action; /* on PASS and CONFIRM: the action found */
  const char *want_cors;   /* access-control-allow-origin, or NULL */
} head_case_t;

#define JSON "application/json"

static const head_case_t head_cases[] = {
    /* step 1 */
    {"GET /manifest", "GET", "/manifest", .want = CLANK_BRIDGE_MANIFEST},
    {"GET /.well-known/clank", "GET", "/.well-known/clank", .want = CLANK_BRIDGE_MANIFEST},
    {"a mounted manifest ends with /manifest", "GET", "/agent/manifest",
     .want = CLANK_BRIDGE_MANIFEST},
    {"POST /manifest is no endpoint", "POST", "/manifest", .content_type = JSON,
     .want = CLANK_BRIDGE_NO_ENDPOINT},
    /* step 2 */
    {"OPTIONS from an allowed origin", "OPTIONS", "/actions/tasks.create",
     .origin = "http://localhost:5173", .want = CLANK_BRIDGE_PREFLIGHT,
     .want_cors = "http://localhost:5173"},
    {"OPTIONS without an origin", "OPTIONS", "/actions/tasks.create",
     .want = CLANK_BRIDGE_NO_ENDPOINT},
    {"OPTIONS from a foreign origin not allowed", "OPTIONS", "/actions/tasks.create",
     .origin = "http://evil.example", .want = CLANK_BRIDGE_NO_ENDPOINT},
    {"GET on an action path", "GET", "/actions/tasks.create", .want = CLANK_BRIDGE_NO_ENDPOINT},
    {"PUT on an action path", "PUT", "/actions/tasks.create", .content_type = JSON,
     .want = CLANK_BRIDGE_NO_ENDPOINT},
    {"POST elsewhere", "POST", "/tasks.create", .content_type = JSON,
     .want = CLANK_BRIDGE_NO_ENDPOINT},
    /* step 3 */
    {"no origin passes", "POST", "/actions/tasks.create", .content_type = JSON,
     .want = CLANK_BRIDGE_PASS, .want_action = "tasks.create"},
    {"the same origin passes, no CORS", "POST", "/actions/tasks.create",
     .origin = "http://localhost:8080", .content_type = JSON, .want = CLANK_BRIDGE_PASS,
     .want_action = "tasks.create"},
    {"an allowed foreign origin passes, with CORS", "POST", "/actions/tasks.create",
     .origin = "http://localhost:5173", .content_type = JSON, .want = CLANK_BRIDGE_PASS,
     .want_action = "tasks.create", .want_cors = "http://localhost:5173"},
    {"a foreign origin not allowed", "POST", "/actions/tasks.create",
     .origin = "http://evil.example", .content_type = JSON, .want = CLANK_BRIDGE_ORIGIN},
    {"an origin equal only up to a slash", "POST", "/actions/tasks.create",
     .origin = "http://localhost:8080/", .content_type = JSON, .want = CLANK_BRIDGE_ORIGIN},
    {"an allowed origin in other case", "POST", "/actions/tasks.create",
     .origin = "HTTP://LOCALHOST:5173", .content_type = JSON, .want = CLANK_BRIDGE_ORIGIN},
    {"the own host under another scheme", "POST", "/actions/tasks.create",
     .origin = "https://localhost:8080", .content_type = JSON, .want = CLANK_BRIDGE_ORIGIN},
    {"a scheme of the same length", "POST", "/actions/tasks.create",
     .origin = "file://localhost:8080", .content_type = JSON, .want = CLANK_BRIDGE_ORIGIN},
    {"https: its own origin", "POST", "/actions/tasks.create", .origin = "https://localhost:8080",
     .content_type = JSON, .scheme = "https", .want = CLANK_BRIDGE_PASS,
     .want_action = "tasks.create"},
    {"sec-fetch-site: cross-site", "POST", "/actions/tasks.create", .sec_fetch_site = "cross-site",
     .content_type = JSON, .want = CLANK_BRIDGE_ORIGIN},
    {"sec-fetch-site: cross-site beats an allowed origin", "POST", "/actions/tasks.create",
     .origin = "http://localhost:5173", .sec_fetch_site = "cross-site", .content_type = JSON,
     .want = CLANK_BRIDGE_ORIGIN, .want_cors = "http://localhost:5173"},
    {"sec-fetch-site: same-origin", "POST", "/actions/tasks.create",
     .sec_fetch_site = "same-origin", .content_type = JSON, .want = CLANK_BRIDGE_PASS,
     .want_action = "tasks.create"},
    {"sec-fetch-site: same-site", "POST", "/actions/tasks.create", .sec_fetch_site = "same-site",
     .content_type = JSON, .want = CLANK_BRIDGE_PASS, .want_action = "tasks.create"},
    {"requireOrigin: no origin", "POST", "/actions/tasks.create", .content_type = JSON,
     .require_origin = 1, .want = CLANK_BRIDGE_ORIGIN},
    {"requireOrigin: the same origin", "POST", "/actions/tasks.create",
     .origin = "http://localhost:8080", .content_type = JSON, .require_origin = 1,
     .want = CLANK_BRIDGE_PASS, .want_action = "tasks.create"},
    {"requireOrigin: an allowed origin", "POST", "/actions/tasks.create",
     .origin = "http://localhost:5173", .content_type = JSON, .require_origin = 1,
     .want = CLANK_BRIDGE_PASS, .want_action = "tasks.create",
     .want_cors = "http://localhost:5173"},
    {"behind a proxy: the public origin, whatever the Host", "POST", "/actions/tasks.create",
     .origin = "https://app.example", .host = "127.0.0.1:8080", .content_type = JSON,
     .public_origin = "https://app.example", .want = CLANK_BRIDGE_PASS,
     .want_action = "tasks.create"},
    {"behind a proxy: never http:// the public host", "POST", "/actions/tasks.create",
     .origin = "http://app.example", .host = "app.example", .content_type = JSON,
     .public_origin = "https://app.example", .want = CLANK_BRIDGE_ORIGIN},
    {"behind a proxy: http://Host of another host (a tunnel)", "POST", "/actions/tasks.create",
     .origin = "http://127.0.0.1:8080", .host = "127.0.0.1:8080", .content_type = JSON,
     .public_origin = "https://app.example", .want = CLANK_BRIDGE_PASS,
     .want_action = "tasks.create"},
    {"the origin is checked before the name", "POST", "/actions/%zz",
     .origin = "http://evil.example", .content_type = JSON, .want = CLANK_BRIDGE_ORIGIN},
    /* step 4: decodeURIComponent */
    {"%41 is A", "POST", "/actions/%41", .content_type = JSON, .want = CLANK_BRIDGE_PASS,
     .want_action = "A"},
    {"%zz is a bad escape", "POST", "/actions/%zz", .content_type = JSON,
     .want = CLANK_BRIDGE_BAD_PATH},
    {"a truncated escape", "POST", "/actions/ab%4", .content_type = JSON,
     .want = CLANK_BRIDGE_BAD_PATH},
    {"+ stays literal", "POST", "/actions/a+b", .content_type = JSON, .want = CLANK_BRIDGE_PASS,
     .want_action = "a+b"},
    {"%2B is +", "POST", "/actions/a%2Bb", .content_type = JSON, .want = CLANK_BRIDGE_PASS,
     .want_action = "a+b"},
    {"%20 is a space", "POST", "/actions/a%20b", .content_type = JSON, .want = CLANK_BRIDGE_PASS,
     .want_action = "a b"},
    {"%C3%A9 is é", "POST", "/actions/%C3%A9", .content_type = JSON, .want = CLANK_BRIDGE_PASS,
     .want_action = "\xc3\xa9"},
    {"%c3%a9 in lower case", "POST", "/actions/%c3%a9", .content_type = JSON,
     .want = CLANK_BRIDGE_PASS, .want_action = "\xc3\xa9"},
    {"raw é", "POST", "/actions/\xc3\xa9", .content_type = JSON, .want = CLANK_BRIDGE_PASS,
     .want_action = "\xc3\xa9"},
    {"overlong UTF-8 escaped (%C0%AF)", "POST", "/actions/%C0%AF", .content_type = JSON,
     .want = CLANK_BRIDGE_BAD_PATH},
    {"overlong UTF-8 raw", "POST", "/actions/\xc0\xaf", .content_type = JSON,
     .want = CLANK_BRIDGE_BAD_PATH},
    {"a lone Latin-1 byte (%E9)", "POST", "/actions/%E9", .content_type = JSON,
     .want = CLANK_BRIDGE_BAD_PATH},
    {"an escaped surrogate (%ED%A0%80)", "POST", "/actions/%ED%A0%80", .content_type = JSON,
     .want = CLANK_BRIDGE_BAD_PATH},
    {"the name after the last /actions/", "POST", "/actions/x/actions/tasks.create",
     .content_type = JSON, .want = CLANK_BRIDGE_PASS, .want_action = "tasks.create"},
    /* step 5 */
    {"an unknown name", "POST", "/actions/tasks.nope", .content_type = JSON,
     .want = CLANK_BRIDGE_NO_ACTION},
    {"an empty name", "POST", "/actions/", .content_type = JSON, .want = CLANK_BRIDGE_NO_ACTION},
    {"a name's prefix", "POST", "/actions/tasks", .content_type = JSON,
     .want = CLANK_BRIDGE_NO_ACTION},
    {"a name in other case", "POST", "/actions/TASKS.CREATE", .content_type = JSON,
     .want = CLANK_BRIDGE_NO_ACTION},
    {"an unknown name before the content type", "POST", "/actions/tasks.nope",
     .content_type = "text/plain", .want = CLANK_BRIDGE_NO_ACTION},
    /* step 6 */
    {"confirmation required, no header", "POST", "/actions/tasks.delete", .content_type = JSON,
     .want = CLANK_BRIDGE_CONFIRM, .want_action = "tasks.delete"},
    {"confirmation of a signed-in user's action: left to the run", "POST", "/actions/notes.delete",
     .content_type = JSON, .want = CLANK_BRIDGE_PASS, .want_action = "notes.delete"},
    {"confirmation: exactly confirmed", "POST", "/actions/tasks.delete",
     .confirmation = "confirmed", .content_type = JSON, .want = CLANK_BRIDGE_PASS,
     .want_action = "tasks.delete"},
    {"confirmation: Confirmed", "POST", "/actions/tasks.delete", .confirmation = "Confirmed",
     .content_type = JSON, .want = CLANK_BRIDGE_CONFIRM, .want_action = "tasks.delete"},
    {"confirmation: confirmed with a space", "POST", "/actions/tasks.delete",
     .confirmation = "confirmed ", .content_type = JSON, .want = CLANK_BRIDGE_CONFIRM,
     .want_action = "tasks.delete"},
    {"confirmation: yes", "POST", "/actions/tasks.delete", .confirmation = "yes",
     .content_type = JSON, .want = CLANK_BRIDGE_CONFIRM, .want_action = "tasks.delete"},
    {"confirmation before the content type", "POST", "/actions/tasks.delete",
     .content_type = "text/plain", .want = CLANK_BRIDGE_CONFIRM, .want_action = "tasks.delete"},
    {"no confirmation needed", "POST", "/actions/tasks.create", .confirmation = "no",
     .content_type = JSON, .want = CLANK_BRIDGE_PASS, .want_action = "tasks.create"},
    /* step 7: the content type */
    {"application/json; charset=utf-8", "POST", "/actions/tasks.create",
     .content_type = "application/json; charset=utf-8", .want = CLANK_BRIDGE_PASS,
     .want_action = "tasks.create"},
    {"Application/JSON", "POST", "/actions/tasks.create", .content_type = "Application/JSON",
     .want = CLANK_BRIDGE_PASS, .want_action = "tasks.create"},
    {"application/merge-patch+json", "POST", "/actions/tasks.create",
     .content_type = "application/merge-patch+json", .want = CLANK_BRIDGE_PASS,
     .want_action = "tasks.create"},
    {"application/vnd.api+JSON; charset=utf-8", "POST", "/actions/tasks.create",
     .content_type = " application/vnd.api+JSON ; charset=utf-8", .want = CLANK_BRIDGE_PASS,
     .want_action = "tasks.create"},
    {"text/plain is 415", "POST", "/actions/tasks.create", .content_type = "text/plain",
     .want = CLANK_BRIDGE_MEDIA},
    {"no content type is 415", "POST", "/actions/tasks.create", .want = CLANK_BRIDGE_MEDIA},
    {"application/jsonp is 415", "POST", "/actions/tasks.create",
     .content_type = "application/jsonp", .want = CLANK_BRIDGE_MEDIA},
    {"text/json is 415", "POST", "/actions/tasks.create", .content_type = "text/json",
     .want = CLANK_BRIDGE_MEDIA},
    {"+json without a type is 415", "POST", "/actions/tasks.create", .content_type = "/+json",
     .want = CLANK_BRIDGE_MEDIA},
    {"a bare +json is 415", "POST", "/actions/tasks.create", .content_type = "+json",
     .want = CLANK_BRIDGE_MEDIA},
    /* step 7: content-length before the body */
    {"content-length at the limit", "POST", "/actions/tasks.create", .content_type = JSON,
     .content_length = "100", .want = CLANK_BRIDGE_PASS, .want_action = "tasks.create"},
    {"content-length over the limit", "POST", "/actions/tasks.create", .content_type = JSON,
     .content_length = "101", .want = CLANK_BRIDGE_TOO_LARGE},
    {"content-length past 64 bits", "POST", "/actions/tasks.create", .content_type = JSON,
     .content_length = "99999999999999999999999", .want = CLANK_BRIDGE_TOO_LARGE},
    {"content-length that would wrap to 50", "POST", "/actions/tasks.create", .content_type = JSON,
     .content_length = "18446744073709551666", .want = CLANK_BRIDGE_TOO_LARGE},
    {"the content type before the length", "POST", "/actions/tasks.create",
     .content_type = "text/plain", .content_length = "101", .want = CLANK_BRIDGE_MEDIA},
};

static clank_bridge_span_t span(const char *s) {
  return (clank_bridge_span_t){s, s ? strlen(s) : 0};
}

/* Runs a case as the bridge does (bridge_request.c): the origin read, looked
   up, the checks, and the name decoded when they ask. */
static void run_head_case(const clank_bridge_rules_t *rules, const head_case_t *c) {
  clank_bridge_rules_t r = *rules;
  r.require_origin = c->require_origin;
  clank_bridge_view_t v = {.method = c->method,
                           .path = span(c->path),
                           .origin = span(c->origin),
                           .host = span(c->host ? c->host : "localhost:8080"),
                           .scheme = span(c->scheme ? c->scheme : "http"),
                           .sec_fetch_site = span(c->sec_fetch_site),
                           .confirmation = span(c->confirmation),
                           .content_type = span(c->content_type),
                           .content_length = span(c->content_length)};
  clank_bridge_public_t pub = {NULL, 0, 0};
  if (c->public_origin)
    pub = (clank_bridge_public_t){c->public_origin, strlen(c->public_origin),
                                  strstr(c->public_origin, "://") + 3 - c->public_origin};
  clank_bridge_origin_t o;
  clank_bridge_read_origin(&v, &pub, &o);
  o.allowed =
      o.value && o.len == strlen(allowed_origin) && memcmp(o.value, allowed_origin, o.len) == 0;
  const clank_bridge_entry_t *found = NULL;
  clank_bridge_step_t step = clank_bridge_check_head(&r, &v, &o, NULL, 0, &found);
  if (step == CLANK_BRIDGE_DECODE) {
    char out[256];
    step = clank_bridge_check_decoded(&r, &v, &o, out, &found);
    CHECK(step != CLANK_BRIDGE_DECODE, "%s: asked to decode twice", c->what);
  }
  CHECK(step == c->want, "%s: step %s, want %s", c->what, step_names[step], step_names[c->want]);
  if (c->want_action) {
    CHECK(found && found->len == strlen(c->want_action) &&
              memcmp(found->name, c->want_action, found->len) == 0,
          "%s: found %.*s, want %s", c->what, found ? (int)found->len : 6,
          found ? found->name : "(none)", c->want_action);
  }
  const char *cors = clank_bridge_cors_origin(&o);
  CHECK(c->want_cors
            ? cors && o.len == strlen(c->want_cors) && memcmp(cors, c->want_cors, o.len) == 0
            : cors == NULL,
        "%s: CORS %.*s, want %s", c->what, cors ? (int)o.len : 4, cors ? cors : "none",
        c->want_cors ? c->want_cors : "none");
}

/* ---- step 7 on the body ---- */

typedef struct {
  const char *what;
  const char *body;
  size_t len;
  clank_bridge_step_t want;
} body_case_t;

/* MAX_BYTES + 1 bytes of JSON-ish text: the size is what step 7 looks at here */
static char big[MAX_BYTES + 1];

static const body_case_t body_cases[] = {
    {"no body", NULL, 0, CLANK_BRIDGE_NO_BODY},
    {"an empty body", "", 0, CLANK_BRIDGE_NO_BODY},
    {"one byte", "1", 1, CLANK_BRIDGE_PASS},
    {"a body at the limit", big, MAX_BYTES, CLANK_BRIDGE_PASS},
    {"a body over the limit", big, MAX_BYTES + 1, CLANK_BRIDGE_TOO_LARGE},
};

typedef struct {
  const char *what;
  const char *body; /* a body the JSON decoder refused */
  clank_bridge_step_t want;
} malformed_case_t;

static const malformed_case_t malformed_cases[] = {
    {"not JSON", "{", CLANK_BRIDGE_NOT_JSON},
    {"not JSON, UTF-8 in it", "{\"t\":\"\xc3\xa9\"", CLANK_BRIDGE_NOT_JSON},
    {"a byte that is never UTF-8", "{\"t\":\"\xff\"}", CLANK_BRIDGE_ENCODING},
    {"overlong UTF-8", "{\"t\":\"\xc0\xaf\"}", CLANK_BRIDGE_ENCODING},
    {"a truncated sequence", "{\"t\":\"\xc3\"}", CLANK_BRIDGE_ENCODING},
    {"an encoded surrogate", "{\"t\":\"\xed\xa0\x80\"}", CLANK_BRIDGE_ENCODING},
    {"invalid UTF-8 right after 8 ASCII bytes", "12345678\xff", CLANK_BRIDGE_ENCODING},
    {"invalid UTF-8 past 8 ASCII bytes", "{\"title\":\"abcdefgh\xfe\"}", CLANK_BRIDGE_ENCODING},
};

/* ---- the failures' status, code and message ---- */

static const struct {
  clank_bridge_step_t step;
  int status;
  const char *code, *message; /* NULL status 0: not a failure */
} refusal_cases[] = {
    {CLANK_BRIDGE_PASS, 0, NULL, NULL},
    {CLANK_BRIDGE_MANIFEST, 0, NULL, NULL},
    {CLANK_BRIDGE_PREFLIGHT, 0, NULL, NULL},
    {CLANK_BRIDGE_DECODE, 0, NULL, NULL},
    {CLANK_BRIDGE_NO_ENDPOINT, 404, "NOT_FOUND", "Agent endpoint not found."},
    {CLANK_BRIDGE_ORIGIN, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected."},
    {CLANK_BRIDGE_BAD_PATH, 400, "INVALID_PATH", "The action path is not valid URL encoding."},
    {CLANK_BRIDGE_NO_ACTION, 404, "NOT_FOUND", "Action not found."},
    {CLANK_BRIDGE_CONFIRM, 428, "CONFIRMATION_REQUIRED",
     "This action requires explicit confirmation."},
    {CLANK_BRIDGE_MEDIA, 415, "UNSUPPORTED_MEDIA_TYPE",
     "Expected an application/json request body."},
    {CLANK_BRIDGE_TOO_LARGE, 413, "PAYLOAD_TOO_LARGE", "Request body exceeds %lld bytes."},
    {CLANK_BRIDGE_NO_BODY, 400, "INVALID_JSON", "A JSON request body is required."},
    {CLANK_BRIDGE_ENCODING, 400, "INVALID_ENCODING", "Request body must be valid UTF-8."},
    {CLANK_BRIDGE_NOT_JSON, 400, "INVALID_JSON", "Request body is not valid JSON."},
};

/* ---- the envelope ---- */

static const struct {
  const char *what, *code, *message;
  int want_r;
  const char *want; /* the bytes, when want_r is 0 */
} envelope_cases[] = {
    {"a plain failure", "NOT_FOUND", "Action not found.", 0,
     "{\"error\":{\"code\":\"NOT_FOUND\",\"message\":\"Action not found.\"},\"ok\":false}"},
    {"quotes, backslashes and controls escaped", "X", "say \"hi\"\\\n\t\x01", 0,
     "{\"error\":{\"code\":\"X\",\"message\":\"say \\\"hi\\\"\\\\\\n\\t\\u0001\"},\"ok\":false}"},
    {"UTF-8 kept as it is", "X", "caf\xc3\xa9", 0,
     "{\"error\":{\"code\":\"X\",\"message\":\"caf\xc3\xa9\"},\"ok\":false}"},
    {"a message that is not UTF-8", "X", "caf\xe9", -2, NULL},
    {"a code that is not UTF-8", "\xff", "m", -2, NULL},
};

static const struct {
  const char *inm;
  int want;
} etag_cases[] = {
    {"\"0123456789abcdef\"", 1},
    {"W/\"0123456789abcdef\"", 1},
    {"*", 1},
    {"\"x\", \"0123456789abcdef\"", 1},
    {"\"x\",W/\"0123456789abcdef\" ", 1},
    {"\"0123456789abcdee\"", 0},
    {"0123456789abcdef", 0},
    {"", 0},
};

static const struct {
  const char *path;
  int has_views, want;
} reserved_cases[] = {
    {"/manifest", 0, 1},   {"/.well-known/clank", 0, 1},
    {"/actions/x", 0, 1},  {"/__clank/mcp", 0, 1},
    {"/views/list", 0, 1}, {"/", 1, 1},
    {"/", 0, 0},           {"/health", 1, 0},
    {"/manifests", 0, 0},
};

int main(void) {
  memset(big, '1', sizeof big);
  qsort(entries, NENTRIES, sizeof *entries, clank_bridge_compare_entries);
  clank_bridge_rules_t rules = {entries, NENTRIES, MAX_BYTES, 0, 0};

  for (size_t i = 0; i < sizeof head_cases / sizeof *head_cases; i++)
    run_head_case(&rules, &head_cases[i]);

  for (size_t i = 0; i < sizeof body_cases / sizeof *body_cases; i++) {
    const body_case_t *c = &body_cases[i];
    clank_bridge_view_t v = {.body = {c->body, c->len}};
    clank_bridge_step_t step = clank_bridge_check_body(&rules, &v);
    CHECK(step == c->want, "body, %s: step %s, want %s", c->what, step_names[step],
          step_names[c->want]);
  }
  for (size_t i = 0; i < sizeof malformed_cases / sizeof *malformed_cases; i++) {
    const malformed_case_t *c = &malformed_cases[i];
    clank_bridge_view_t v = {.body = span(c->body)};
    clank_bridge_step_t step = clank_bridge_malformed_body(&v);
    CHECK(step == c->want, "malformed body, %s: step %s, want %s", c->what, step_names[step],
          step_names[c->want]);
  }

  for (size_t i = 0; i < sizeof refusal_cases / sizeof *refusal_cases; i++) {
    const clank_bridge_refusal_t *r = clank_bridge_refusal(refusal_cases[i].step);
    const char *name = step_names[refusal_cases[i].step];
    if (refusal_cases[i].status == 0) {
      CHECK(r == NULL, "refusal of %s: not a failure", name);
      continue;
    }
    CHECK(r && r->status == refusal_cases[i].status &&
              strcmp(r->code, refusal_cases[i].code) == 0 &&
              strcmp(r->message, refusal_cases[i].message) == 0,
          "refusal of %s: %d %s %s", name, r ? r->status : 0, r ? r->code : "-",
          r ? r->message : "-");
  }

  clank_buf_t buf = {0};
  for (size_t i = 0; i < sizeof envelope_cases / sizeof *envelope_cases; i++) {
    clank_buf_reset(&buf);
    clank_buf_appends(&buf, "kept");
    int r = clank_bridge_envelope(&buf, envelope_cases[i].code, envelope_cases[i].message);
    const char *want = envelope_cases[i].want;
    CHECK(r == envelope_cases[i].want_r, "envelope, %s: returned %d", envelope_cases[i].what, r);
    if (want)
      CHECK(buf.len == 4 + strlen(want) && memcmp(buf.data + 4, want, buf.len - 4) == 0,
            "envelope, %s: %.*s", envelope_cases[i].what, (int)buf.len, buf.data);
    else
      CHECK(buf.len == 4, "envelope, %s: the buffer changed", envelope_cases[i].what);
  }
  clank_buf_reset(&buf);
  clank_bridge_envelope(&buf, "TIMEOUT", "The action timed out.");
  CHECK(buf.len == clank_bridge_timeout_len &&
            memcmp(buf.data, clank_bridge_timeout_body, buf.len) == 0,
        "the timeout's body is the envelope's: %s", clank_bridge_timeout_body);
  clank_buf_reset(&buf);
  clank_bridge_envelope_too_large(&buf, 65536);
  static const char too_large[] =
      "{\"error\":{\"code\":\"PAYLOAD_TOO_LARGE\",\"message\":\"Request body exceeds 65536 "
      "bytes.\"},\"ok\":false}";
  CHECK(buf.len == sizeof too_large - 1 && memcmp(buf.data, too_large, buf.len) == 0,
        "413's envelope: %.*s", (int)buf.len, buf.data);
  clank_buf_free(&buf);

  for (size_t i = 0; i < sizeof etag_cases / sizeof *etag_cases; i++)
    CHECK(clank_bridge_etag_matches(etag_cases[i].inm, strlen(etag_cases[i].inm),
                                    "\"0123456789abcdef\"") == etag_cases[i].want,
          "If-None-Match: %s", etag_cases[i].inm);
  for (size_t i = 0; i < sizeof reserved_cases / sizeof *reserved_cases; i++)
    CHECK(clank_bridge_reserved_path(reserved_cases[i].path, strlen(reserved_cases[i].path),
                                     reserved_cases[i].has_views) == reserved_cases[i].want,
          "reserved path %s (views: %d)", reserved_cases[i].path, reserved_cases[i].has_views);

  printf("bridge_checks: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
