/* Byte helpers (bytes.h). */
#include "util/bytes.h"

const char clank_hex_digits[17] = "0123456789abcdef";
const char clank_hex_upper[17] = "0123456789ABCDEF";

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
      if (c >= 0xC2 && c <= 0xDF)
        need = 1, cp = (unsigned long)c & 0x1F, min = 0x80;
      else if (c >= 0xE0 && c <= 0xEF)
        need = 2, cp = (unsigned long)c & 0x0F, min = 0x800;
      else if (c >= 0xF0 && c <= 0xF4)
        need = 3, cp = (unsigned long)c & 0x07, min = 0x10000;
      else if (c >= 0x80)
        return CLANK_URI_BAD;
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
