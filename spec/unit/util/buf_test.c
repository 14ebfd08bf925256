/* util/buf.c's clank_buf_append_uint: the decimal digits of any uint64_t, as
   printf's %llu writes them, appended after what the buffer holds, growing it
   when full. Exit status 0 when every case passes; each failure prints a line. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "util/buf.h"

#include "../check.h"

/* Appends v after prefix into a buffer of capacity cap (0: none yet) and
   checks the bytes against printf's. */
static void check_uint(uint64_t v, const char *prefix, size_t cap) {
  clank_buf_t b = {0};
  if (cap > 0) CHECK(clank_buf_reserve(&b, cap) == 0, "reserve %zu", cap);
  CHECK(clank_buf_append(&b, prefix, strlen(prefix)) == 0, "prefix");
  CHECK(clank_buf_append_uint(&b, v) == 0, "append %" PRIu64, v);
  char want[320];
  int n = snprintf(want, sizeof want, "%s%" PRIu64, prefix, v);
  CHECK(b.len == (size_t)n && memcmp(b.data, want, (size_t)n) == 0,
        "%" PRIu64 " after \"%s\": wrote \"%.*s\", want \"%s\"", v, prefix, (int)b.len,
        b.data ? b.data : "", want);
  clank_buf_free(&b);
}

int main(void) {
  /* every length from 1 to 20 digits, at both ends of it */
  uint64_t ten = 1;
  for (int digits = 1; digits <= 20; digits++) {
    check_uint(ten, "", 0);
    check_uint(ten - 1, "", 0);
    if (digits < 20) ten *= 10;
  }
  check_uint(0, "", 0);
  check_uint(UINT64_MAX, "", 0); /* 18446744073709551615 */
  check_uint(UINT64_C(1764806400), "\"createdAt\":", 0);
  check_uint(UINT64_C(12345678901234567), "id ", 0);
  /* a full buffer grows: 256 bytes taken but 2, then 20 digits */
  char fill[255];
  memset(fill, 'x', sizeof fill - 1);
  fill[sizeof fill - 1] = '\0';
  check_uint(UINT64_MAX, fill, 256);
  /* and the rest of the range, a sample spread over every magnitude */
  for (uint64_t v = 7; v < UINT64_MAX / 3; v = v * 3 + 1) check_uint(v, "", 0);
  if (failures) fprintf(stderr, "%d of %d checks failed\n", failures, checks);
  return failures != 0;
}
