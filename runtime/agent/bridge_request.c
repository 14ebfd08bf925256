/* The Lua side of SPEC §5's checks (bridge_checks.c): a request read into
   a view (from a request table, or clank-run's view of the parsed request),
   its origin looked up in the bridge's allowedOrigins, steps 1–7 run, and
   what they refuse answered (the manifest and its etag, the preflight, the
   failures); then the body decoded against the action's input schema. Also
   the rules clank.mcp and clank.app call from Lua (isJsonMediaType,
   checkOrigin, isReservedPath). Owns no state: the request holds the
   strings a view points to, the bridge its scratch buffer. */
#include <string.h>

#include "agent/action.h"
#include "agent/bridge_internal.h"
#include "data/json.h"
#include "data/schema_decode.h"

/* ---- reading the request table ---- */

/* The strings kept stay alive: the request table holds them. */
static span_t string_at(lua_State *L, int t, const char *name) {
  span_t s = {NULL, 0};
  if (lua_getfield(L, t, name) == LUA_TSTRING) s.p = lua_tolstring(L, -1, &s.n);
  lua_pop(L, 1);
  return s;
}

/* What the checks read of the request table at req: its method (GET when
   none), path (request.path, else the url up to '?'), scheme, body and headers. */
void clank_bridge_view_from_table(lua_State *L, int req, clank_bridge_view_t *v) {
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

/* ---- origins (step 3) ---- */

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

/* Only its address matters: the scheduler slot of the public origin. */
static const char public_slot = 0;

void clank_bridge_set_public(clank_sched_t *s, const clank_bridge_public_t *pub) {
  clank_sched_set_slot(s, &public_slot, (void *)pub, NULL);
}

const clank_bridge_public_t *clank_bridge_public_of(clank_sched_t *s) {
  return clank_sched_slot(s, &public_slot);
}

/* read_origin for a request with an origin header. The public origin
   behind a proxy (--public-origin, SPEC §13) is clank-run's scheduler's. */
static void read_given_origin(lua_State *L, const clank_bridge_view_t *v, int allowed,
                              origin_t *o) {
  clank_sched_t *s = clank_sched_held(L);
  clank_bridge_read_origin(v, s ? clank_bridge_public_of(s) : NULL, o);
  o->allowed = allowed && origin_listed(L, allowed, o->value, o->len);
}

/* Reads the origin of the request v against the allowed origins at
   allowed (a set or a list; 0 for none). Inline: most requests have none. */
static inline void read_origin(lua_State *L, const clank_bridge_view_t *v, int allowed,
                               origin_t *o) {
  if (v->origin.p == NULL)
    clank_bridge_read_origin(v, NULL, o);
  else
    read_given_origin(L, v, allowed, o);
}

/* The bridge's (at 1) reading of the origin of v; sets CORS for every answer. */
static void bridge_origin(lua_State *L, answer_t *a, origin_t *o, const clank_bridge_view_t *v) {
  if (v->origin.p == NULL) {
    clank_bridge_read_origin(v, NULL, o);
  } else {
    push_uv_field(L, 1, UV_ORIGINS);
    read_origin(L, v, lua_gettop(L), o);
    lua_pop(L, 1);
  }
  a->cors_origin = clank_bridge_cors_origin(o);
  a->cors_len = o->len;
}

/* The origin of the request table at req, for CORS: headers.origin, and the
   rest only when there is one. */
static void origin_view(lua_State *L, int req, clank_bridge_view_t *v) {
  v->origin = (span_t){NULL, 0};
  if (lua_getfield(L, req, "headers") == LUA_TTABLE) v->origin = string_at(L, -1, "origin");
  lua_pop(L, 1);
  if (v->origin.p) clank_bridge_view_from_table(L, req, v);
}

void clank_bridge_table_origin(lua_State *L, answer_t *a) {
  clank_bridge_view_t v;
  origin_t o;
  origin_view(L, 2, &v);
  bridge_origin(L, a, &o, &v);
}

/* ---- the answers of steps 1 and 2 ---- */

/* Step 1: the manifest, or 304 when If-None-Match names its etag. */
static int answer_manifest(lua_State *L, const answer_t *given, const clank_bridge_view_t *v) {
  answer_t table = *given, *a = &table;
  table.out = NULL; /* it has an etag: a response table */
  push_uv_field(L, 1, UV_ETAG);
  int etag = lua_gettop(L);
  if (v->if_none_match.p &&
      clank_bridge_etag_matches(v->if_none_match.p, v->if_none_match.n, lua_tostring(L, etag))) {
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

/* Step 2: OPTIONS from an allowed origin. */
static int answer_preflight(lua_State *L, const origin_t *o) {
  answer_t cors = {o->value, o->len, NULL};
  push_response(L, &cors, 204, NULL, "", 0);
  lua_getfield(L, -1, "headers");
  lua_pushliteral(L, "POST");
  lua_setfield(L, -2, "access-control-allow-methods");
  lua_pushliteral(L, "content-type, x-clank-confirmation");
  lua_setfield(L, -2, "access-control-allow-headers");
  lua_pop(L, 1);
  return 1;
}

/* ---- steps 1–7 ---- */

/* Step 7 on the body, with the action pushed: as clank_bridge_check_request. */
static int check_body(lua_State *L, bridge_t *b, answer_t *a, const clank_bridge_view_t *v) {
  size_t body_len = v->body.n;
  const char *body = v->body.p;
  /* Every body resets the mark check_input trusts, so a table it names is
     alive, hence the one decoded last (a context function may wait between
     the two, and other requests run meanwhile). */
  b->valid_input = NULL;
  clank_bridge_step_t step = clank_bridge_check_body(&b->rules, v);
  if (step != CLANK_BRIDGE_PASS) {
    lua_pop(L, 1);
    return clank_bridge_refuse(L, b, a, step);
  }
  /* Decoded guided by the action's input schema: when that finds the input
     valid, check_input need not look again. */
  int r = clank_schema_decode(L, clank_action_input(lua_touserdata(L, -1)), body, body_len);
  if (r == CLANK_SCHEMA_DECODE_VALID && lua_type(L, -1) == LUA_TTABLE)
    b->valid_input = lua_topointer(L, -1);
  if (r != CLANK_SCHEMA_DECODE_MALFORMED) return 0;
  if (clank_json_decode(L, body, body_len) != 1) {
    lua_pop(L, 3);
    return clank_bridge_refuse(L, b, a, clank_bridge_malformed_body(v));
  }
  return 0;
}

int clank_bridge_check_request(lua_State *L, int phase, answer_t *a, const clank_bridge_view_t *v) {
  bridge_t *b = lua_touserdata(L, 1);
  const entry_t *found = v->passed;
  if (phase == PHASE_FULL && found && found >= b->rules.index &&
      found < b->rules.index + b->rules.nindex) {
    /* steps 1–7 up to the body passed at the header block (no origin but
       its own: no CORS), on the same headers */
    a->cors_origin = NULL;
    a->cors_len = 0;
  } else {
    origin_t o;
    bridge_origin(L, a, &o, v);
    clank_bridge_step_t step = clank_bridge_check_head(&b->rules, v, &o, NULL, 0, &found);
    if (step == CLANK_BRIDGE_DECODE) {
      luaL_Buffer name;
      char *out = luaL_buffinitsize(L, &name, v->path.n + 1);
      step = clank_bridge_check_decoded(&b->rules, v, &o, out, &found);
      lua_pop(L, 1); /* the buffer's box, if any */
    }
    switch (step) {
      case CLANK_BRIDGE_PASS: break;
      case CLANK_BRIDGE_MANIFEST: return answer_manifest(L, a, v);
      case CLANK_BRIDGE_PREFLIGHT: return answer_preflight(L, &o);
      default: return clank_bridge_refuse(L, b, a, step);
    }
  }
  push_uv_field(L, 1, UV_LIST);
  lua_rawgeti(L, -1, found->slot);
  lua_replace(L, -2); /* the action in its list's place: no rotation */
  if (phase == PHASE_HEAD) return 0;
  return check_body(L, b, a, v);
}

const void *clank_bridge_head_passes(lua_State *L, int idx, const clank_bridge_view_t *v) {
  const bridge_t *b = test_bridge(L, idx);
  if (b == NULL) return NULL;
  origin_t o;
  read_origin(L, v, 0, &o);           /* no allowed origins: those are looked up in Lua */
  if (o.value && !o.own) return NULL; /* a foreign origin: allowed or not, Lua says */
  const entry_t *found = NULL;
  return clank_bridge_check_head(&b->rules, v, &o, NULL, 0, &found) == CLANK_BRIDGE_PASS ? found
                                                                                         : NULL;
}

int clank_bridge_head(lua_State *L) {
  lua_settop(L, 2);
  check_bridge(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  clank_bridge_view_t v;
  clank_bridge_view_from_table(L, 2, &v);
  answer_t a = {0};
  if (clank_bridge_check_request(L, PHASE_HEAD, &a, &v)) return 1;
  lua_pushnil(L);
  return 1;
}

int clank_bridge_head_view(lua_State *L) {
  check_bridge(L, 1);
  const clank_bridge_view_t *v = lua_touserdata(L, 2);
  answer_t a = {0};
  if (clank_bridge_check_request(L, PHASE_HEAD, &a, v)) return 1;
  lua_pushnil(L);
  return 1;
}

/* ---- the rules, for clank.mcp and clank.app ----

   The same C as handle() runs, so the rules of SPEC §5 are written once. */

/* bridge.isJsonMediaType(value) → whether a content-type is JSON (step 7). */
static int l_is_json_media_type(lua_State *L) {
  size_t n;
  const char *v = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &n) : NULL;
  lua_pushboolean(L, v && clank_bridge_json_media_type(v, n));
  return 1;
}

/* bridge.readJsonBody(request, maxBytes) → the body decoded, or nil,
   status, code, message: SPEC §5 step 7, for the other JSON endpoints that
   read a body as the bridge does (view sessions' surface, live/http.lua). */
static int l_read_json_body(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer max = luaL_checkinteger(L, 2);
  clank_bridge_view_t v;
  memset(&v, 0, sizeof v);
  clank_bridge_rules_t rules;
  memset(&rules, 0, sizeof rules);
  rules.max_bytes = max;
  clank_bridge_step_t step = CLANK_BRIDGE_PASS;
  const char *type = NULL;
  size_t type_len = 0;
  if (lua_getfield(L, 1, "headers") == LUA_TTABLE &&
      lua_getfield(L, -1, "content-type") == LUA_TSTRING)
    type = lua_tolstring(L, -1, &type_len);
  if (type == NULL || !clank_bridge_json_media_type(type, type_len)) step = CLANK_BRIDGE_MEDIA;
  lua_settop(L, 2);
  if (step == CLANK_BRIDGE_PASS) {
    if (lua_getfield(L, 1, "body") == LUA_TSTRING) v.body.p = lua_tolstring(L, -1, &v.body.n);
    step = clank_bridge_check_body(&rules, &v);
  }
  if (step == CLANK_BRIDGE_PASS) {
    int pushed = clank_json_decode(L, v.body.p, v.body.n);
    if (pushed == 1) return 1;
    lua_pop(L, pushed);
    step = clank_bridge_malformed_body(&v);
  }
  const clank_bridge_refusal_t *r = clank_bridge_refusal(step);
  lua_pushnil(L);
  lua_pushinteger(L, r->status);
  lua_pushstring(L, r->code);
  if (step == CLANK_BRIDGE_TOO_LARGE)
    lua_pushfstring(L, "Request body exceeds %I bytes.", (LUAI_UACINT)max);
  else
    lua_pushstring(L, r->message);
  return 4;
}

/* bridge.checkOrigin(request, allowedOrigins?, requireOrigin?) → false when
   step 3 refuses the request; else true and, for an allowed foreign origin,
   that origin (for access-control-allow-origin). */
static int l_check_origin(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 3);
  clank_bridge_view_t v;
  clank_bridge_view_from_table(L, 1, &v);
  origin_t o;
  read_origin(L, &v, lua_istable(L, 2) ? 2 : 0, &o);
  if (clank_bridge_origin_refused(&v, &o, lua_toboolean(L, 3))) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lua_pushboolean(L, 1);
  const char *cors = clank_bridge_cors_origin(&o);
  if (cors == NULL) return 1;
  lua_pushlstring(L, cors, o.len);
  return 2;
}

/* bridge.isReservedPath(path, hasViews) → whether the runtime answers path
   itself (the bridge, /__clank/, views), so no app route can live there. */
static int l_is_reserved_path(lua_State *L) {
  size_t n;
  const char *p = luaL_checklstring(L, 1, &n);
  lua_pushboolean(L, clank_bridge_reserved_path(p, n, lua_toboolean(L, 2)));
  return 1;
}

const luaL_Reg clank_bridge_rule_funcs[] = {{"isJsonMediaType", l_is_json_media_type},
                                            {"readJsonBody", l_read_json_body},
                                            {"checkOrigin", l_check_origin},
                                            {"isReservedPath", l_is_reserved_path},
                                            {NULL, NULL}};
