/* Small byte helpers every layer shares: hex digits, percent escapes,
   decodeURIComponent, literal spans. Plain C, no Lua. */
#ifndef CLANK_BYTES_H
#define CLANK_BYTES_H

#include <stddef.h>
#include <string.h>

/* "0123456789abcdef" and "0123456789ABCDEF". */
extern const char clank_hex_digits[17];
extern const char clank_hex_upper[17];

/* The value of a hex digit, or -1. */
static inline int clank_hex_value(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The byte of the escape %XX at s[i] (s[i] == '%', two hex digits before
   n), or -1. */
static inline int clank_percent_byte(const char *s, size_t n, size_t i) {
  if (s[i] != '%' || i + 2 >= n) return -1;
  int hi = clank_hex_value((unsigned char)s[i + 1]), lo = clank_hex_value((unsigned char)s[i + 2]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* decodeURIComponent: every % starts a valid escape, the bytes decoded are
   UTF-8 (no overlongs, surrogates or code points past U+10FFFF); '+' stays.
   Writes into out (room for n bytes; NULL: only checks) and returns the
   length, or CLANK_URI_BAD where it throws. */
#define CLANK_URI_BAD ((size_t)-1)
size_t clank_uri_decode(const char *s, size_t n, char *out);

/* The UTF-16 code units of the UTF-8 text s[0..n) (one per character, two past U+FFFF: a
   browser's string length), or CLANK_UTF8_BAD when it is not valid UTF-8 (overlongs,
   surrogates, past U+10FFFF, a sequence cut at either end). */
#define CLANK_UTF8_BAD ((size_t)-1)
size_t clank_utf16_units(const char *s, size_t n);

/* Whether p[0..n) is the literal s, or starts with it. */
static inline int clank_span_is(const char *p, size_t n, const char *s) {
  return n == strlen(s) && memcmp(p, s, n) == 0;
}
static inline int clank_span_starts(const char *p, size_t n, const char *s) {
  size_t k = strlen(s);
  return n >= k && memcmp(p, s, k) == 0;
}

#endif
