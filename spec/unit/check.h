/* The C unit tests' check: CHECK(cond, format, ...) counts a check, and when
   cond is false counts a failure and prints FAIL, where, and the message to
   stderr. A test program exits non-zero when failures is not 0. */
#ifndef CLANK_SPEC_CHECK_H
#define CLANK_SPEC_CHECK_H

#include <stdio.h>

static int failures, checks;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    checks++;                                              \
    if (!(cond)) {                                         \
      failures++;                                          \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fputc('\n', stderr);                                 \
    }                                                      \
  } while (0)

#endif
