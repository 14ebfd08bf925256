/* One parsed request head and body, reused for every request on a connection:
   its buffers keep their memory between requests. */
#ifndef CLANK_HTTP_REQUEST_H
#define CLANK_HTTP_REQUEST_H

#include <stdint.h>

#include "util/buf.h"

#define CLANK_MAX_HEADERS 100
#define CLANK_MAX_REQUEST_LINE 8192
#define CLANK_MAX_HEADER_BYTES 16384
#define CLANK_MAX_BODY (1024 * 1024)

typedef struct clank_header_s {
  uint32_t name_off, name_len; /* names lower-cased */
  uint32_t value_off, value_len;
} clank_header_t;

typedef struct clank_request_s {
  clank_buf_t head; /* the target, then header names and values, by offset */
  uint32_t url_len;
  clank_header_t headers[CLANK_MAX_HEADERS];
  int nheaders;
  size_t header_bytes;
  clank_buf_t body;
  int method; /* llhttp_method_t */
  int http_major, http_minor;
  uint64_t started_ns; /* uv_hrtime when its first byte was read (its read's) */
  char id[65];         /* x-request-id: the client's (1-64 of A-Za-z0-9._-) or one made up */
  uint8_t id_len;      /* 0 until the answer's head is written */
} clank_request_t;

void clank_request_reset(clank_request_t *r);
/* Once the request is answered: frees a body buffer grown past what is worth keeping. */
void clank_request_trim(clank_request_t *r);
void clank_request_free(clank_request_t *r);

static inline const char *clank_request_url(const clank_request_t *r) { return r->head.data; }
/* The target's parts: the path (raw, not percent-decoded; "/" for an
   absolute-form target without one), the query after '?', and for an
   absolute-form target (RFC 9112 §3.2.2) its authority, which stands in for
   the Host header. */
typedef struct clank_target_s {
  const char *path, *query, *authority;
  size_t path_len, query_len, authority_len;
} clank_target_t;
void clank_request_target(const clank_request_t *r, clank_target_t *t);
/* The host the request names (the authority of an absolute-form target t,
   else the Host header): *host and *len the whole value, *name_len its name
   without the port. Returns 1; 0 when there is none (HTTP/1.0); -1 when it is
   malformed (a port that is not 1-5 digits, an unclosed IPv6 literal). */
int clank_request_host(const clank_request_t *r, const clank_target_t *t, const char **host,
                       size_t *len, size_t *name_len);
/* Whether a host name (no port) is a loopback one: localhost, 127.0.0.0/8 or [::1]. */
int clank_http_is_loopback(const char *name, size_t n);
/* Whether a host name (no port) is an IP literal for addr (16 bytes, an IPv4
   address mapped as ::ffff:a.b.c.d): "192.0.2.1", "[::ffff:c000:201]" and
   "[::FFFF:192.0.2.1]" all name the same one. */
int clank_host_names_address(const char *name, size_t n, const unsigned char addr[16]);
/* The first header named `name` (lower-case), or NULL; *count gets how many there are. */
const clank_header_t *clank_request_header(const clank_request_t *r, const char *name,
                                           size_t name_len, int *count);
static inline const char *clank_header_value(const clank_request_t *r, const clank_header_t *h) {
  return r->head.data + h->value_off;
}

#endif
