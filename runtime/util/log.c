#include "util/log.h"

#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

void clank_log_init(clank_log_t *log, clank_log_format_t format, int fd) {
  log->format = format;
  log->fd = fd;
  log->buf = (clank_buf_t){0};
  log->stamp_len = 0;
  const char *no_color = getenv("NO_COLOR");
  log->colour = format == CLANK_LOG_TEXT && isatty(fd) && !(no_color && *no_color);
}

/* Every line of one loop iteration carries the same time: formatting it once
   keeps strftime off the request path. clank_log_flush forgets it. */
static void append_time(clank_log_t *log) {
  if (log->stamp_len == 0) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(log->stamp, sizeof log->stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(log->stamp + n, sizeof log->stamp - n, ".%03dZ", (int)(tv.tv_usec / 1000));
    log->stamp_len = strlen(log->stamp);
  }
  clank_buf_append(&log->buf, log->stamp, log->stamp_len);
}

/* Milliseconds with three decimals, from nanoseconds. */
static void append_ms(clank_buf_t *b, uint64_t ns) {
  uint64_t us = ns / 1000;
  clank_buf_append_uint(b, us / 1000);
  char frac[4] = {'.', (char)('0' + us % 1000 / 100), (char)('0' + us % 100 / 10),
                  (char)('0' + us % 10)};
  clank_buf_append(b, frac, 4);
}

/* Text lines stay one line: control characters become escapes. JSON strings
   need the same escapes plus quotes and backslashes. */
static void append_escaped(clank_buf_t *b, const char *s, size_t n, int json) {
  static const char hex[] = "0123456789abcdef";
  size_t plain = 0;
  while (plain < n && (unsigned char)s[plain] >= 0x20 && s[plain] != 0x7f && s[plain] != '"' &&
         s[plain] != '\\')
    plain++;
  clank_buf_append(b, s, plain);
  for (size_t i = plain; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\n') {
      clank_buf_append(b, "\\n", 2);
    } else if (c == '\r') {
      clank_buf_append(b, "\\r", 2);
    } else if (c == '\t') {
      clank_buf_append(b, "\\t", 2);
    } else if (c < 0x20 || c == 0x7f) {
      char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      clank_buf_append(b, e, 6);
    } else if (json && (c == '"' || c == '\\')) {
      char e[2] = {'\\', (char)c};
      clank_buf_append(b, e, 2);
    } else {
      clank_buf_appendc(b, (char)c);
    }
  }
}

static void log_line(clank_log_t *log, const char *level, const char *colour, const char *fmt,
                     va_list args) {
  char small[1024];
  va_list ap;
  va_copy(ap, args);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  clank_buf_t big = {0};
  const char *msg = small;
  if ((size_t)n >= sizeof small && clank_buf_reserve(&big, (size_t)n + 1) == 0) {
    va_copy(ap, args);
    vsnprintf(big.data, (size_t)n + 1, fmt, ap);
    va_end(ap);
    msg = big.data;
  } else if ((size_t)n >= sizeof small) {
    n = sizeof small - 1;
  }
  clank_buf_t *b = &log->buf;
  if (log->format == CLANK_LOG_JSON) {
    clank_buf_appends(b, "{\"time\":\"");
    append_time(log);
    clank_buf_appendf(b, "\",\"level\":\"%s\",\"msg\":\"", level);
    append_escaped(b, msg, (size_t)n, 1);
    clank_buf_appends(b, "\"}\n");
  } else {
    int paint = colour && log->colour;
    if (paint) clank_buf_appends(b, colour);
    append_time(log);
    clank_buf_appendf(b, " %s ", level);
    append_escaped(b, msg, (size_t)n, 0);
    if (paint) clank_buf_appends(b, "\x1b[0m");
    clank_buf_appendc(b, '\n');
  }
  clank_buf_free(&big);
}

void clank_log_msg(clank_log_t *log, const char *level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_line(log, level, NULL, fmt, ap);
  va_end(ap);
}

void clank_log_msg_colour(clank_log_t *log, const char *level, const char *colour, const char *fmt,
                          ...) {
  va_list ap;
  va_start(ap, fmt);
  log_line(log, level, colour, fmt, ap);
  va_end(ap);
}

void clank_log_access(clank_log_t *log, const char *method, const char *target, size_t target_len,
                      int status, size_t bytes, uint64_t ns) {
  if (log->quiet) return;
  clank_buf_t *b = &log->buf;
  int json = log->format == CLANK_LOG_JSON;
  if (json) clank_buf_appends(b, "{\"time\":\"");
  append_time(log);
  clank_buf_appends(b, json ? "\",\"level\":\"info\",\"msg\":\"request\",\"method\":\"" : " info ");
  clank_buf_appends(b, method);
  clank_buf_appends(b, json ? "\",\"target\":\"" : " ");
  append_escaped(b, target, target_len, json);
  clank_buf_appends(b, json ? "\",\"status\":" : " ");
  clank_buf_append_uint(b, (uint64_t)status);
  clank_buf_appends(b, json ? ",\"bytes\":" : " ");
  clank_buf_append_uint(b, bytes);
  clank_buf_appends(b, json ? ",\"ms\":" : "B ");
  append_ms(b, ns);
  clank_buf_appends(b, json ? "}\n" : "ms\n");
}

void clank_log_flush(clank_log_t *log) {
  size_t off = 0;
  while (off < log->buf.len) {
    ssize_t w = write(log->fd, log->buf.data + off, log->buf.len - off);
    if (w <= 0) break; /* stderr gone: drop the log rather than block the loop */
    off += (size_t)w;
  }
  clank_buf_reset(&log->buf);
  log->stamp_len = 0;
}

void clank_log_free(clank_log_t *log) {
  clank_log_flush(log);
  clank_buf_free(&log->buf);
}
