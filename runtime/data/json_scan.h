/* The byte-level pieces the JSON code shares (the decoders json_decode.c and
   the schema-guided schema_decode.c, and the number writer json_number.c), so
   that the decoders read text the same way. */
#ifndef CLANK_JSON_SCAN_H
#define CLANK_JSON_SCAN_H

#include <stdint.h>

/* 1 for the bytes a string takes as they are: printable ASCII but '"' and '\\'. */
extern const unsigned char clank_json_plain_byte[256];

/* The powers of ten a double holds exactly: 10^0 to 10^22 (json_number.c). */
#define CLANK_JSON_EXACT_TENS 23
extern const double clank_json_exact_tens[CLANK_JSON_EXACT_TENS];

/* Bit 7 of each byte of w that may end a run of plain bytes: '"', '\\',
   a control character or a byte of 0x80 and above. Only the lowest is
   exact (a borrow can mark a byte above one that is marked rightly), and
   only the lowest is used. */
static inline uint64_t clank_json_stop_bytes(uint64_t w) {
  const uint64_t ones = UINT64_C(0x0101010101010101), high = ones * 0x80;
  return (w | (w - ones * 0x20) | ((w ^ (ones * '"')) - ones) | ((w ^ (ones * '\\')) - ones)) &
         high;
}

/* p moved past JSON whitespace, up to end. */
static inline const char *clank_json_skip_ws(const char *p, const char *end) {
  if (p < end && (unsigned char)*p > ' ') return p; /* mostly */
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

#endif
