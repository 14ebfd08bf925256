/* Growable byte buffers, reused across requests: reset keeps the memory. */
#ifndef CLANK_BUF_H
#define CLANK_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct clank_buf_s {
  char *data;
  size_t len;
  size_t cap;
} clank_buf_t;

/* Makes room for n more bytes; returns 0, or -1 when memory runs out. */
int clank_buf_reserve(clank_buf_t *b, size_t n);
int clank_buf_append_slow(clank_buf_t *b, const void *p, size_t n);
int clank_buf_appendf(clank_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops the first n bytes, keeping the rest at the front. */
void clank_buf_consume(clank_buf_t *b, size_t n);
/* Decimal digits, hand-rolled: printf is too slow for the request path. */
int clank_buf_append_uint(clank_buf_t *b, uint64_t v);
void clank_buf_free(clank_buf_t *b);

static inline void clank_buf_reset(clank_buf_t *b) { b->len = 0; }

/* Inline: the request path appends small pieces many times per request. */
static inline int clank_buf_append(clank_buf_t *b, const void *p, size_t n) {
  if (b->cap - b->len < n) return clank_buf_append_slow(b, p, n);
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

static inline int clank_buf_appendc(clank_buf_t *b, char c) {
  if (b->len == b->cap && clank_buf_reserve(b, 1) != 0) return -1;
  b->data[b->len++] = c;
  return 0;
}

static inline int clank_buf_appends(clank_buf_t *b, const char *s) {
  return clank_buf_append(b, s, strlen(s));
}

#endif
