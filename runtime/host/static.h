/* app.static (SPEC §15): URL prefixes served from folders next to app.lua. */
#ifndef CLANK_STATIC_H
#define CLANK_STATIC_H

#include <stddef.h>

#include "http/server.h"

struct clank_gen_s;

typedef struct clank_static_s {
  char *prefix; /* "/assets", no trailing slash */
  size_t prefix_len;
  char *root; /* the folder, resolved (realpath) */
} clank_static_t;

/* The folder whose prefix the path is below, or NULL. */
const clank_static_t *clank_static_match(const struct clank_gen_s *g, const char *path, size_t n);
/* Answers GET/HEAD for path from s's folder. Returns 1 while the answer is
   still coming (on_message returns it), 0 when it was written. */
int clank_static_serve(clank_conn_t *c, const clank_static_t *s, const char *path, size_t n);
/* Answers GET/HEAD /favicon.ico, which no route or folder prefix took: the favicon.ico of the
   first of g's folders that has one, else 204 with no body. Returns as clank_static_serve. */
int clank_static_favicon(clank_conn_t *c, const struct clank_gen_s *g);

/* Watches the current generation's static folders (replacing the watches
   of the one before): a stylesheet written there tells live pages to
   re-fetch their stylesheets. */
struct clank_host_s;
void clank_static_watch(struct clank_host_s *h, const struct clank_gen_s *g);
void clank_static_unwatch(struct clank_host_s *h);

#endif
