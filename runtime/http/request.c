#include "http/request.h"

#include <llhttp.h>
#include <string.h>
#include <strings.h>

void clank_request_reset(clank_request_t *r) {
  clank_buf_reset(&r->head);
  clank_buf_reset(&r->body);
  r->url_len = 0;
  r->nheaders = 0;
  r->headers[0] = (clank_header_t){0};
  r->header_bytes = 0;
  r->method = HTTP_GET;
  r->http_major = 1;
  r->http_minor = 1;
  r->id_len = 0;
}

void clank_request_free(clank_request_t *r) {
  clank_buf_free(&r->head);
  clank_buf_free(&r->body);
}

void clank_request_target(const clank_request_t *r, clank_target_t *t) {
  const char *u = r->head.data;
  size_t n = r->url_len;
  *t = (clank_target_t){.path = u};
  size_t scheme = n >= 7 && strncasecmp(u, "http://", 7) == 0    ? 7
                  : n >= 8 && strncasecmp(u, "https://", 8) == 0 ? 8
                                                                 : 0;
  if (scheme) {
    const char *auth = u + scheme;
    size_t rest = n - scheme, alen = 0;
    while (alen < rest && auth[alen] != '/' && auth[alen] != '?') alen++;
    t->authority = auth;
    t->authority_len = alen;
    u = auth + alen;
    n = rest - alen;
  }
  const char *q = memchr(u, '?', n);
  t->path = u;
  t->path_len = q ? (size_t)(q - u) : n;
  if (q) {
    t->query = q + 1;
    t->query_len = n - t->path_len - 1;
  }
  if (t->path_len == 0) {
    t->path = "/";
    t->path_len = 1;
  }
}

const clank_header_t *clank_request_header(const clank_request_t *r, const char *name,
                                           size_t name_len, int *count) {
  const clank_header_t *first = NULL;
  int n = 0;
  for (int i = 0; i < r->nheaders; i++) {
    const clank_header_t *h = &r->headers[i];
    if (h->name_len == name_len && memcmp(r->head.data + h->name_off, name, name_len) == 0) {
      if (!first) first = h;
      n++;
    }
  }
  if (count) *count = n;
  return first;
}
