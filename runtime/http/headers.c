/* Header blocks piece by piece into a clank_request_t (headers.h); owns
   nothing beyond the request's buffers. */
#include "http/headers.h"

#include <stdint.h>
#include <string.h>

static int room(const clank_request_t *r, size_t more) {
  const clank_header_t *h = &r->headers[r->nheaders];
  return r->header_bytes + h->name_len + h->value_len + more + 4 <= CLANK_MAX_HEADER_BYTES;
}

/* The 8 bytes x with A-Z made lowercase, all others as they were. */
static uint64_t lower8(uint64_t x) {
  const uint64_t ones = 0x0101010101010101ULL, high = ones * 0x80;
  uint64_t low7 = x & ~high;
  /* per byte: high bit set where low7 >= 'A', and where low7 > 'Z' */
  uint64_t ge_a = low7 + ones * (0x80 - 'A'), gt_z = low7 + ones * (0x80 - 'Z' - 1);
  uint64_t upper = ge_a & ~gt_z & ~x & high; /* ASCII A-Z only */
  return x | upper >> 2;                     /* 0x80 >> 2 = 0x20 */
}

/* Names are lowered as they are copied: read again after the copy, they
   would wait on the stores that just wrote them. */
int clank_headers_name(clank_request_t *r, const char *at, size_t len) {
  if (r->nheaders >= CLANK_MAX_HEADERS || !room(r, len)) return -1;
  clank_header_t *h = &r->headers[r->nheaders];
  if (h->name_len == 0) h->name_off = (uint32_t)r->head.len;
  if (clank_buf_reserve(&r->head, len) != 0) return -1;
  char *to = r->head.data + r->head.len;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t x;
    memcpy(&x, at + i, 8);
    x = lower8(x);
    memcpy(to + i, &x, 8);
  }
  for (; i < len; i++) to[i] = at[i] >= 'A' && at[i] <= 'Z' ? (char)(at[i] + 32) : at[i];
  r->head.len += len;
  h->name_len += (uint32_t)len;
  return 0;
}

void clank_headers_name_done(clank_request_t *r) {
  r->headers[r->nheaders].value_off = (uint32_t)r->head.len;
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
