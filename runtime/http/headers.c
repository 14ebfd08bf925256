#include "http/headers.h"

static int room(const clank_request_t *r, size_t more) {
  const clank_header_t *h = &r->headers[r->nheaders];
  return r->header_bytes + h->name_len + h->value_len + more + 4 <= CLANK_MAX_HEADER_BYTES;
}

int clank_headers_name(clank_request_t *r, const char *at, size_t len) {
  if (r->nheaders >= CLANK_MAX_HEADERS || !room(r, len)) return -1;
  clank_header_t *h = &r->headers[r->nheaders];
  if (h->name_len == 0) h->name_off = (uint32_t)r->head.len;
  clank_buf_append(&r->head, at, len);
  h->name_len += (uint32_t)len;
  return 0;
}

void clank_headers_name_done(clank_request_t *r) {
  clank_header_t *h = &r->headers[r->nheaders];
  char *name = r->head.data + h->name_off;
  for (uint32_t i = 0; i < h->name_len; i++)
    if (name[i] >= 'A' && name[i] <= 'Z') name[i] = (char)(name[i] + 32);
  h->value_off = (uint32_t)r->head.len;
}

int clank_headers_value(clank_request_t *r, const char *at, size_t len) {
  if (!room(r, len)) return -1;
  clank_buf_append(&r->head, at, len);
  r->headers[r->nheaders].value_len += (uint32_t)len;
  return 0;
}

void clank_headers_value_done(clank_request_t *r) {
  clank_header_t *h = &r->headers[r->nheaders];
  r->header_bytes += h->name_len + h->value_len + 4;
  /* llhttp strips leading whitespace only; the field value has none (RFC 9112 §5.1). */
  const char *v = r->head.data + h->value_off;
  while (h->value_len > 0 && (v[h->value_len - 1] == ' ' || v[h->value_len - 1] == '\t'))
    h->value_len--;
  if (++r->nheaders < CLANK_MAX_HEADERS) r->headers[r->nheaders] = (clank_header_t){0};
}
