/* The parsed request (request.h): its head, headers and body in buffers it
   owns and reuses, and the target split into path, query and authority. */
#include "http/request.h"

#include <arpa/inet.h>
#include <llhttp.h>
#include <string.h>
#include <strings.h>

/* A keep-alive connection keeps its body buffer for the next request, but not
   one a large upload grew: idle, it would hold that memory (SPEC §13). */
#define KEPT_BODY_BYTES (64 * 1024)

void clank_request_trim(clank_request_t *r) {
  if (r->body.cap > KEPT_BODY_BYTES) clank_buf_free(&r->body);
}

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
  /* origin-form (a '/' first) is the rule: no case-blind compares for it */
  size_t scheme = n >= 7 && u[0] != '/' && strncasecmp(u, "http://", 7) == 0    ? 7
                  : n >= 8 && u[0] != '/' && strncasecmp(u, "https://", 8) == 0 ? 8
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

int clank_request_host(const clank_request_t *r, const clank_target_t *t, const char **host,
                       size_t *len, size_t *name_len) {
  const char *v = t->authority;
  size_t n = t->authority_len;
  if (v == NULL) {
    const clank_header_t *h = clank_request_header(r, "host", 4, NULL);
    if (h == NULL) return 0;
    v = clank_header_value(r, h);
    n = h->value_len;
  }
  *host = v;
  *len = n;
  size_t name = n;
  if (n > 0 && v[0] == '[') {
    const char *close = memchr(v, ']', n);
    if (close == NULL) return -1;
    name = (size_t)(close - v) + 1;
  } else {
    const char *colon = memchr(v, ':', n);
    if (colon) name = (size_t)(colon - v);
  }
  *name_len = name;
  if (name < n) {
    if (v[name] != ':' || n - name < 2 || n - name > 6) return -1;
    for (size_t i = name + 1; i < n; i++)
      if (v[i] < '0' || v[i] > '9') return -1;
  }
  return 1;
}

int clank_http_is_loopback(const char *name, size_t n) {
  if (n == 9 && strncasecmp(name, "localhost", 9) == 0) return 1;
  if (n == 5 && memcmp(name, "[::1]", 5) == 0) return 1;
  if (n == 9 && memcmp(name, "127.0.0.1", 9) == 0) return 1; /* the usual one, without inet_pton */
  char ip[16];
  if (n >= sizeof ip) return 0;
  memcpy(ip, name, n);
  ip[n] = '\0';
  struct in_addr a;
  return inet_pton(AF_INET, ip, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int clank_host_names_address(const char *name, size_t n, const unsigned char addr[16]) {
  char ip[INET6_ADDRSTRLEN + 2];
  unsigned char bytes[16] = {0};
  int v6 = n > 2 && name[0] == '[' && name[n - 1] == ']';
  if (v6) {
    name++;
    n -= 2;
  }
  if (n >= sizeof ip) return 0;
  memcpy(ip, name, n);
  ip[n] = '\0';
  if (v6) {
    if (inet_pton(AF_INET6, ip, bytes) != 1) return 0;
  } else {
    bytes[10] = bytes[11] = 0xff;
    if (inet_pton(AF_INET, ip, bytes + 12) != 1) return 0;
  }
  return memcmp(bytes, addr, 16) == 0;
}
