#include "http/headers.h"

#include <stdint.h>
#include <string.h>

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

/* The 8 bytes at p with A-Z made lowercase, all others as they were. */
static void lower8(char *p) {
  const uint64_t ones = 0x0101010101010101ULL, high = ones * 0x80;
  uint64_t x;
  memcpy(&x, p, 8);
  uint64_t low7 = x & ~high;
  /* per byte: high bit set where low7 >= 'A', and where low7 > 'Z' */
  uint64_t ge_a = low7 + ones * (0x80 - 'A'), gt_z = low7 + ones * (0x80 - 'Z' - 1);
  uint64_t upper = ge_a & ~gt_z & ~x & high; /* ASCII A-Z only */
  x |= upper >> 2;                           /* 0x80 >> 2 = 0x20 */
  memcpy(p, &x, 8);
}

void clank_headers_name_done(clank_request_t *r) {
  clank_header_t *h = &r->headers[r->nheaders];
  char *name = r->head.data + h->name_off;
  uint32_t n = h->name_len;
  if (n >= 8) { /* 8 at a time, the last 8 again: lowering twice changes nothing */
    for (uint32_t i = 0; i + 8 <= n; i += 8) lower8(name + i);
    lower8(name + n - 8);
  } else {
    for (uint32_t i = 0; i < n; i++)
      if (name[i] >= 'A' && name[i] <= 'Z') name[i] = (char)(name[i] + 32);
  }
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
