/* Growable byte buffers (buf.h); each owns its memory. */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int clank_buf_reserve(clank_buf_t *b, size_t n) {
  if (b->cap - b->len >= n) return 0;
  size_t want = b->len + n;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < want) cap *= 2;
  char *p = realloc(b->data, cap);
  if (p == NULL) return -1;
  b->data = p;
  b->cap = cap;
  return 0;
}

int clank_buf_append_slow(clank_buf_t *b, const void *p, size_t n) {
  if (n == 0) return 0;
  if (clank_buf_reserve(b, n) != 0) return -1;
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

int clank_buf_appendf(clank_buf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return -1;
  if ((size_t)n < sizeof small) return clank_buf_append(b, small, (size_t)n);
  if (clank_buf_reserve(b, (size_t)n + 1) != 0) return -1;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return 0;
}

void clank_buf_consume(clank_buf_t *b, size_t n) {
  if (n >= b->len) {
    b->len = 0;
    return;
  }
  memmove(b->data, b->data + n, b->len - n);
  b->len -= n;
}

void clank_buf_free(clank_buf_t *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

int clank_buf_append_uint(clank_buf_t *b, uint64_t v) {
  static const char pairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233"
      "34353637383940414243444546474849505152535455565758596061626364656667"
      "6869707172737475767778798081828384858687888990919293949596979899";
  /* written backwards into digits, two a step, then copied: counting them first took a
     division per digit */
  char digits[20], *end = digits + sizeof digits, *p = end;
  while (v >= 100) {
    const char *d = pairs + 2 * (v % 100);
    v /= 100;
    *--p = d[1];
    *--p = d[0];
  }
  if (v >= 10) {
    *--p = pairs[2 * v + 1];
    *--p = pairs[2 * v];
  } else {
    *--p = (char)('0' + v);
  }
  size_t n = (size_t)(end - p);
  if (b->cap - b->len < n && clank_buf_reserve(b, n) != 0) return -1;
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}
