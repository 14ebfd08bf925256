/* /__clank/docs (issue 34): the reference manual, rendered from doc/ (Markdown). */
#ifndef CLANK_HOST_DOCS_H
#define CLANK_HOST_DOCS_H

#include <stddef.h>

#include "http/server.h"

/* /__clank/docs, or a path below it. */
int clank_docs_path(const char *p, size_t n);
/* Answers GET/HEAD for a docs path: the page (rendered off the loop), or 404
   for a path that names no page. Returns 1 while the answer is still coming
   (on_message returns it), 0 when it was written. */
int clank_docs_serve(clank_conn_t *c, const char *p, size_t n);

#endif
