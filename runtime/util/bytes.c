/* Byte helpers (bytes.h). */
#include "util/bytes.h"

#include <stdint.h>

const char clank_hex_digits[17] = "0123456789abcdef";
const char clank_hex_upper[17] = "0123456789ABCDEF";

/* A UTF-8 lead byte c (past ASCII): the continuation bytes it needs, the bits it gives and
   the least code point its length may encode; 0 when no sequence starts with it. */
static int utf8_lead(int c, int *need, unsigned long *cp, unsigned long *min) {
  if (c >= 0xC2 && c <= 0xDF)
    *need = 1, *cp = (unsigned long)c & 0x1F, *min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF)
    *need = 2, *cp = (unsigned long)c & 0x0F, *min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4)
    *need = 3, *cp = (unsigned long)c & 0x07, *min = 0x10000;
  else
    return 0;
  return 1;
}

size_t clank_uri_decode(const char *s, size_t n, char *out) {
  size_t k = 0;
  int need = 0;
  unsigned long cp = 0, min = 0;
  for (size_t i = 0; i < n; i++) {
    int c = (unsigned char)s[i];
    if (c == '%') {
      c = clank_percent_byte(s, n, i);
      if (c < 0) return CLANK_URI_BAD;
      i += 2;
    }
    if (need == 0) {
      if (c >= 0x80 && !utf8_lead(c, &need, &cp, &min)) return CLANK_URI_BAD;
    } else {
      if ((c & 0xC0) != 0x80) return CLANK_URI_BAD;
      cp = cp << 6 | ((unsigned long)c & 0x3F);
      if (--need == 0 && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)))
        return CLANK_URI_BAD;
    }
    if (out) out[k] = (char)c;
    k++;
  }
  return need == 0 ? k : CLANK_URI_BAD;
}

size_t clank_utf16_units(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s, *end = p + n;
  size_t units = 0;
  while (p < end) {
    /* ASCII 32, then eight bytes at a time: the bulk of HTML */
    while (end - p >= 32) {
      uint64_t w[4];
      memcpy(w, p, 32);
      if ((w[0] | w[1] | w[2] | w[3]) & 0x8080808080808080u) break;
      p += 32;
      units += 32;
    }
    while (end - p >= 8) {
      uint64_t w;
      memcpy(&w, p, 8);
      if (w & 0x8080808080808080u) break;
      p += 8;
      units += 8;
    }
    if (p == end) break;
    int c = *p;
    if (c < 0x80) {
      p++;
      units++;
      continue;
    }
    int need;
    unsigned long cp, min;
    if (!utf8_lead(c, &need, &cp, &min)) return CLANK_UTF8_BAD;
    if (end - p <= need) return CLANK_UTF8_BAD;
    for (int k = 1; k <= need; k++) {
      if ((p[k] & 0xC0) != 0x80) return CLANK_UTF8_BAD;
      cp = cp << 6 | ((unsigned long)p[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return CLANK_UTF8_BAD;
    p += need + 1;
    units += need == 3 ? 2 : 1;
  }
  return units;
}
