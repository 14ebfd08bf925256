/* The router (SPEC §15): an app's routes, patterns among them ("GET
   /tasks/:id", and "GET /files/" + "*rest" for the rest of a path), and the answers to what
   dispatch asks of them: which route a request takes (a static segment beats a parameter, a
   parameter beats a wildcard), its params decoded, the methods a path has for a 405's allow, and
   which paths are the runtime's own.

   clank.app (lua/clank/app.lua) is where a route's syntax, its method and
   its bodyLimit are checked, with the messages an app author reads; the
   router reads what it accepted and checks none of it again. */
#ifndef CLANK_ROUTER_H
#define CLANK_ROUTER_H

#include <lua.h>
#include <stddef.h>

#include "util/bytes.h"

/* A segment of a route pattern: text points into the route's path. */
enum { CLANK_SEG_LITERAL, CLANK_SEG_PARAM, CLANK_SEG_REST };
typedef struct clank_seg_s {
  int kind;
  const char *text; /* the literal, or the parameter's name */
  size_t len;
} clank_seg_t;

typedef struct clank_route_s {
  int method; /* llhttp_method_t */
  const char *path;
  size_t path_len;
  int handler_ref;
  clank_seg_t *segs; /* a pattern's segments; NULL for an exact path */
  int nsegs;
  size_t body_limit; /* bodyLimit (SPEC §15); 0: the 1 MiB of §13 */
  int cross_site;    /* crossSite = true: no CSRF check on an unsafe method */
  int takes_request; /* its handler has a parameter, or takes any number */
} clank_route_t;

/* An app's routes; all zero is a router without any. Owns its routes'
   paths and segments (clank_router_free), not their handlers' refs. */
typedef struct clank_router_s {
  clank_route_t *routes; /* exact paths */
  int nroutes, cap_routes;
  clank_route_t *patterns; /* with :name or *name segments */
  int npatterns, cap_patterns;
} clank_router_t;

/* Adds the route "METHOD /path" (as clank.app accepted it); returns it with
   its method, path and segments set, the rest zero, or NULL when key is no
   "METHOD /path" llhttp knows or memory ran out. */
clank_route_t *clank_router_add(clank_router_t *rt, const char *key, size_t key_len);
/* [app] at the top of L: app.routes read into rt (each handler by a
   registry ref). Raises on a key clank.app cannot have accepted. */
void clank_router_read(lua_State *L, clank_router_t *rt);
void clank_router_free(clank_router_t *rt);

/* The route for method and path: the exact one, else the pattern that
   matches most specifically, else NULL. */
const clank_route_t *clank_router_find(const clank_router_t *rt, int method, const char *path,
                                       size_t path_len);
/* The methods some route has for path, sorted by name, HEAD wherever GET
   is, for a 405's allow header ("GET, HEAD, POST"): its length, 0 when no
   route has the path. */
size_t clank_router_allow(const clank_router_t *rt, const char *path, size_t path_len, char *out,
                          size_t outlen);
/* Whether the parameters path gives route decode (decodeURIComponent's
   rules: well-formed escapes, UTF-8). */
int clank_route_params_valid(const clank_route_t *r, const char *path, size_t path_len);
/* Sets params (a table, empty for an exact route) on the request table at the
   top of L's stack: route's parameters in path, decoded; *rest without its
   leading slash. names: the index of the field names' table (clank_names_push). */
void clank_route_set_params(lua_State *L, int names, const clank_route_t *r, const char *path,
                            size_t path_len);

/* The bridge's paths (SPEC §2): /manifest, /.well-known/clank, /actions/... */
static inline int clank_router_bridge_path(const char *p, size_t n) {
  return clank_span_is(p, n, "/manifest") || clank_span_is(p, n, "/.well-known/clank") ||
         clank_span_starts(p, n, "/actions/");
}
/* The paths the runtime answers itself, before any route (SPEC §2): the
   bridge's, /__clank/..., /views/..., and / when the app has views. The
   rule is the bridge's (clank_bridge_reserved_path), which clank.app asks
   too (bridge.isReservedPath). */
int clank_router_reserved(const char *p, size_t n, int has_views);

#endif
