/* The log: lines to stderr, buffered and flushed once per loop iteration
   (and at exit), as text or one JSON object per line. */
#ifndef CLANK_LOG_H
#define CLANK_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

typedef enum { CLANK_LOG_TEXT, CLANK_LOG_JSON } clank_log_format_t;

typedef struct clank_log_s {
  clank_log_format_t format;
  clank_buf_t buf;
  int fd;
  int colour;     /* text on a terminal, unless NO_COLOR */
  int quiet;      /* no access log (--quiet) */
  int debug;      /* debug lines too ($CLANK_DEBUG) */
  char stamp[32]; /* the time of this loop iteration's lines, made once */
  size_t stamp_len;
} clank_log_t;

void clank_log_init(clank_log_t *log, clank_log_format_t format, int fd);
/* level: "info", "warn", "error". The message is one line; newlines in it are escaped. */
void clank_log_msg(clank_log_t *log, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, coloured with the ANSI sequence `colour` when the log is a terminal. */
void clank_log_msg_colour(clank_log_t *log, const char *level, const char *colour, const char *fmt,
                          ...) __attribute__((format(printf, 4, 5)));
void clank_log_access(clank_log_t *log, const char *method, const char *target, size_t target_len,
                      int status, size_t bytes, uint64_t ns);
void clank_log_flush(clank_log_t *log);
void clank_log_free(clank_log_t *log);

#endif
