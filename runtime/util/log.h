/* The log: lines to stderr, buffered and flushed once per loop iteration
   (and at exit), as text or one JSON object per line. */
#ifndef CLANK_LOG_H
#define CLANK_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

typedef enum { CLANK_LOG_TEXT, CLANK_LOG_JSON } clank_log_format_t;

/* An error line seen before (same level, message and place): logged once,
   then counted, its count logged at most every CLANK_LOG_REPEAT_NS. */
#define CLANK_LOG_REPEATS 64
#define CLANK_LOG_REPEAT_NS (10 * 1000000000ull)
typedef struct clank_log_repeat_s {
  uint64_t hash;
  uint64_t logged_at; /* monotonic ns of the last line written for it */
  unsigned count;     /* lines not written since */
  char level[8];
  char msg[200]; /* its beginning, for the count's line */
} clank_log_repeat_t;

typedef struct clank_log_s {
  clank_log_format_t format;
  clank_buf_t buf;
  int fd;
  int colour;     /* text on a terminal, unless NO_COLOR */
  int quiet;      /* no access log (--quiet) */
  int debug;      /* debug lines too ($CLANK_DEBUG) */
  int worker;     /* --workers: JSON lines say "worker": worker - 1; 0: a single process */
  char stamp[32]; /* the time of this loop iteration's lines, made once */
  size_t stamp_len;
  int64_t stamp_sec;    /* the second stamp's first stamp_sec_len bytes are of */
  size_t stamp_sec_len; /* "YYYY-MM-DDTHH:MM:SS" */
  /* The x-request-id of the request the next lines are about (SPEC §13), or
     NULL: its writer sets it around them. */
  const char *request_id;
  /* A target beginning with it has a bearer credential as its next segment
     (a view session's token): the access log writes "<redacted>" instead. */
  const char *credential_prefix;
  clank_log_repeat_t repeats[CLANK_LOG_REPEATS];
  unsigned counting; /* repeats with a count not yet logged */
} clank_log_t;

void clank_log_init(clank_log_t *log, clank_log_format_t format, int fd);
/* level: "info", "warn", "error". The message is one line; newlines in it are escaped. */
void clank_log_msg(clank_log_t *log, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, about one request: the line carries request_id (NULL: none). */
void clank_log_request(clank_log_t *log, const char *request_id, const char *level, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));
/* The same, coloured with the ANSI sequence `colour` when the log is a terminal. */
void clank_log_msg_colour(clank_log_t *log, const char *level, const char *colour, const char *fmt,
                          ...) __attribute__((format(printf, 4, 5)));
void clank_log_access(clank_log_t *log, const char *method, const char *target, size_t target_len,
                      int status, size_t bytes, uint64_t ns, const char *request_id,
                      size_t request_id_len);
/* Writes the counts of repeated lines whose 10 s passed (once per loop iteration). */
void clank_log_repeats(clank_log_t *log);
void clank_log_flush(clank_log_t *log);
void clank_log_free(clank_log_t *log);

#endif
