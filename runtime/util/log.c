/* The logger (log.h): formats text or JSON lines, escapes them, counts
   repeats, and owns the buffer flushed once per loop iteration. */
#include "util/log.h"
#include "util/bytes.h"

#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

void clank_log_init(clank_log_t *log, clank_log_format_t format, int fd) {
  log->format = format;
  log->fd = fd;
  log->buf = (clank_buf_t){0};
  log->stamp_len = 0;
  log->stamp[0] = '\0';
  log->stamp_sec = 0;
  log->stamp_sec_len = 0;
  const char *no_color = getenv("NO_COLOR");
  log->colour = format == CLANK_LOG_TEXT && isatty(fd) && !(no_color && *no_color);
}

static void put2(char *p, int v) {
  p[0] = (char)('0' + v / 10);
  p[1] = (char)('0' + v % 10);
}

/* Every line of one loop iteration carries the same time, made once; the
   date and the second are formatted once per second, so a line only pays for
   its three digits of milliseconds. clank_log_flush forgets it. */
static void append_time(clank_log_t *log) {
  if (log->stamp_len == 0) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    if (tv.tv_sec != log->stamp_sec || log->stamp[0] == '\0') {
      struct tm tm;
      gmtime_r(&tv.tv_sec, &tm);
      strftime(log->stamp, sizeof log->stamp, "%Y-%m-%dT%H:%M:%S", &tm);
      log->stamp_sec = tv.tv_sec;
      log->stamp_sec_len = strlen(log->stamp);
    }
    int ms = (int)(tv.tv_usec / 1000);
    char *p = log->stamp + log->stamp_sec_len;
    p[0] = '.';
    p[1] = (char)('0' + ms / 100);
    put2(p + 2, ms % 100);
    p[4] = 'Z';
    log->stamp_len = log->stamp_sec_len + 5;
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
#define ESCAPE_TEXT 1                   /* escaped in text and in JSON: control characters */
#define ESCAPE_JSON 2                   /* escaped in JSON strings only: '"' and '\\' */
#define ESCAPE_8 3, 3, 3, 3, 3, 3, 3, 3 /* eight control characters */
static const unsigned char escape_class[256] = {
    ESCAPE_8,
    ESCAPE_8,
    ESCAPE_8,
    ESCAPE_8, /* 0x00 to 0x1f */
    [0x7f] = ESCAPE_TEXT | ESCAPE_JSON,
    ['"'] = ESCAPE_JSON,
    ['\\'] = ESCAPE_JSON,
};

/* Bytes before the first that needs an escape: 8 at a time while none of
   them is a control character (or, in JSON, '"' or '\\'), then one table
   read a byte. A byte of 0x80 or more may stop a block it need not stop
   (the block is then read byte by byte): never the other way round. */
static size_t plain_run(const char *s, size_t n, int json) {
  const uint64_t ones = 0x0101010101010101ULL, high = ones * 0x80;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    memcpy(&x, s + i, 8);
    uint64_t del = x ^ (ones * 0x7f), quote = x ^ (ones * '"'), back = x ^ (ones * '\\');
    uint64_t stop = (x - ones * 0x20) | (del - ones);
    if (json) stop |= (quote - ones) | (back - ones);
    if (stop & high) break;
  }
  unsigned mask = json ? ESCAPE_TEXT | ESCAPE_JSON : ESCAPE_TEXT;
  while (i < n && !(escape_class[(unsigned char)s[i]] & mask)) i++;
  return i;
}

static void append_escaped(clank_buf_t *b, const char *s, size_t n, int json) {
  size_t plain = plain_run(s, n, json); /* most lines have nothing to escape */
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
      char e[6] = {'\\', 'u', '0', '0', clank_hex_digits[c >> 4], clank_hex_digits[c & 15]};
      clank_buf_append(b, e, 6);
    } else if (json && (c == '"' || c == '\\')) {
      char e[2] = {'\\', (char)c};
      clank_buf_append(b, e, 2);
    } else {
      clank_buf_appendc(b, (char)c);
    }
  }
}

/* ---- repeats ---- */

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t line_hash(const char *level, const char *msg, size_t n) {
  uint64_t h = 14695981039346656037ull; /* FNV-1a */
  for (const char *p = level; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)msg[i]) * 1099511628211ull;
  return h | 1; /* 0 marks a free slot */
}

/* 1 when the line is written (setting *repeated to the lines counted since
   its last one), 0 when it only counts. Only warnings and errors repeat. */
static int admit_line(clank_log_t *log, const char *level, const char *msg, size_t n,
                      unsigned *repeated) {
  *repeated = 0;
  if (strcmp(level, "error") != 0 && strcmp(level, "warn") != 0) return 1;
  uint64_t h = line_hash(level, msg, n), now = monotonic_ns();
  clank_log_repeat_t *r = &log->repeats[h % CLANK_LOG_REPEATS];
  if (r->hash != h) { /* new, or it takes the slot of another (whose count is lost) */
    if (r->count) log->counting--;
    r->hash = h;
    r->logged_at = now;
    r->count = 0;
    snprintf(r->level, sizeof r->level, "%s", level);
    size_t keep = n < sizeof r->msg - 1 ? n : sizeof r->msg - 1;
    memcpy(r->msg, msg, keep);
    r->msg[keep] = '\0';
    return 1;
  }
  if (now - r->logged_at >= CLANK_LOG_REPEAT_NS) {
    *repeated = r->count;
    if (r->count) log->counting--;
    r->count = 0;
    r->logged_at = now;
    return 1;
  }
  if (r->count++ == 0) log->counting++;
  return 0;
}

/* ---- lines ---- */

#define TRACEBACK "\nstack traceback:\n"

/* Where the traceback Lua's message handler appended begins, or NULL. */
static const char *find_traceback(const char *msg, size_t n) {
  const size_t k = sizeof TRACEBACK - 1;
  for (const char *p = msg; n >= k && (p = memchr(p, '\n', n - k + 1 - (size_t)(p - msg))); p++)
    if (memcmp(p, TRACEBACK, k) == 0) return p;
  return NULL;
}

/* Lines of a traceback that say nothing about where an error came from: the
   C function every protected call starts from, and the standard functions
   that raise or catch (the message already says what was raised). */
static const char *const noise[] = {
    "\t[C]: in ?",
    "\t[C]: in function 'error'",
    "\t[C]: in function 'assert'",
    "\t[C]: in function 'pcall'",
    "\t[C]: in function 'xpcall'",
};

static int is_noise(const char *line, size_t n) {
  for (size_t i = 0; i < sizeof noise / sizeof noise[0]; i++)
    if (strlen(noise[i]) == n && memcmp(line, noise[i], n) == 0) return 1;
  return 0;
}

/* Drops those lines from the traceback at tb, in msg (the caller's own
   buffer), and its heading when none is left → msg's new length. */
static size_t tidy_traceback(char *msg, size_t n, char *tb) {
  char *first = tb + sizeof TRACEBACK - 1, *out = first, *in = first, *end = msg + n;
  while (in < end) {
    char *nl = memchr(in, '\n', (size_t)(end - in));
    size_t len = (size_t)((nl ? nl : end) - in);
    if (!is_noise(in, len)) {
      if (out != first) *out++ = '\n';
      memmove(out, in, len);
      out += len;
    }
    in = nl ? nl + 1 : end;
  }
  return (size_t)((out == first ? tb : out) - msg);
}

static void append_line(clank_log_t *log, const char *level, const char *colour, const char *msg,
                        size_t n, unsigned repeated) {
  clank_buf_t *b = &log->buf;
  const char *rid = log->request_id && *log->request_id ? log->request_id : NULL;
  if (log->format == CLANK_LOG_JSON) {
    /* the traceback is a field of its own */
    const char *tb = find_traceback(msg, n);
    size_t head = tb ? (size_t)(tb - msg) : n;
    clank_buf_appends(b, "{\"time\":\"");
    append_time(log);
    clank_buf_appendf(b, "\",\"level\":\"%s\",", level);
    if (log->worker) clank_buf_appendf(b, "\"worker\":%d,", log->worker - 1);
    if (rid) {
      clank_buf_appends(b, "\"requestId\":\"");
      append_escaped(b, rid, strlen(rid), 1);
      clank_buf_appends(b, "\",");
    }
    clank_buf_appends(b, "\"msg\":\"");
    append_escaped(b, msg, head, 1);
    clank_buf_appendc(b, '"');
    if (tb) {
      size_t skip = head + sizeof TRACEBACK - 1;
      clank_buf_appends(b, ",\"traceback\":\"");
      append_escaped(b, msg + skip, n - skip, 1);
      clank_buf_appendc(b, '"');
    }
    if (repeated) {
      clank_buf_appends(b, ",\"repeated\":");
      clank_buf_append_uint(b, repeated);
    }
    clank_buf_appends(b, "}\n");
  } else {
    int paint = colour && log->colour;
    if (paint) clank_buf_appends(b, colour);
    append_time(log);
    clank_buf_appendf(b, " %s ", level);
    if (rid) {
      clank_buf_appendc(b, '[');
      append_escaped(b, rid, strlen(rid), 0);
      clank_buf_appends(b, "] ");
    }
    append_escaped(b, msg, n, 0);
    if (repeated) clank_buf_appendf(b, " (repeated %u times)", repeated);
    if (paint) clank_buf_appends(b, "\x1b[0m");
    clank_buf_appendc(b, '\n');
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
  char *msg = small;
  if ((size_t)n >= sizeof small && clank_buf_reserve(&big, (size_t)n + 1) == 0) {
    va_copy(ap, args);
    vsnprintf(big.data, (size_t)n + 1, fmt, ap);
    va_end(ap);
    msg = big.data;
  } else if ((size_t)n >= sizeof small) {
    n = sizeof small - 1;
  }
  char *tb = (char *)find_traceback(msg, (size_t)n);
  size_t len = tb ? tidy_traceback(msg, (size_t)n, tb) : (size_t)n;
  size_t head = tb ? (size_t)(tb - msg) : len;
  unsigned repeated;
  if (admit_line(log, level, msg, head, &repeated))
    append_line(log, level, colour, msg, len, repeated);
  clank_buf_free(&big);
}

void clank_log_repeats(clank_log_t *log) {
  if (log->counting == 0) return;
  uint64_t now = monotonic_ns();
  for (int i = 0; i < CLANK_LOG_REPEATS; i++) {
    clank_log_repeat_t *r = &log->repeats[i];
    if (r->count == 0 || now - r->logged_at < CLANK_LOG_REPEAT_NS) continue;
    const char *saved = log->request_id;
    log->request_id = NULL; /* the count is of lines about many requests */
    append_line(log, r->level, NULL, r->msg, strlen(r->msg), r->count);
    log->request_id = saved;
    log->counting--;
    r->count = 0;
    r->logged_at = now;
  }
}

void clank_log_msg(clank_log_t *log, const char *level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_line(log, level, NULL, fmt, ap);
  va_end(ap);
}

void clank_log_request(clank_log_t *log, const char *request_id, const char *level, const char *fmt,
                       ...) {
  va_list ap;
  va_start(ap, fmt);
  const char *outer = log->request_id;
  log->request_id = request_id;
  log_line(log, level, NULL, fmt, ap);
  log->request_id = outer;
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
                      int status, size_t bytes, uint64_t ns, const char *request_id,
                      size_t request_id_len) {
  if (log->quiet) return;
  clank_buf_t *b = &log->buf;
  int json = log->format == CLANK_LOG_JSON;
  if (json) clank_buf_appends(b, "{\"time\":\"");
  append_time(log);
  clank_buf_appends(b, json ? "\",\"level\":\"info\",\"msg\":\"request\",\"method\":\"" : " info ");
  clank_buf_appends(b, method);
  clank_buf_appends(b, json ? "\",\"target\":\"" : " ");
  size_t secret = log->credential_prefix ? strlen(log->credential_prefix) : 0;
  if (secret && target_len > secret && memcmp(target, log->credential_prefix, secret) == 0) {
    const char *slash = memchr(target + secret, '/', target_len - secret);
    clank_buf_append(b, target, secret);
    clank_buf_appends(b, "<redacted>");
    if (slash) append_escaped(b, slash, target_len - (size_t)(slash - target), json);
  } else {
    append_escaped(b, target, target_len, json);
  }
  clank_buf_appends(b, json ? "\",\"status\":" : " ");
  if (status >= 100 && status <= 999) { /* three digits, as the status line has them */
    char d[3] = {(char)('0' + status / 100), (char)('0' + status / 10 % 10),
                 (char)('0' + status % 10)};
    clank_buf_append(b, d, 3);
  } else {
    clank_buf_append_uint(b, (uint64_t)status);
  }
  clank_buf_appends(b, json ? ",\"bytes\":" : " ");
  clank_buf_append_uint(b, bytes);
  clank_buf_appends(b, json ? ",\"ms\":" : "B ");
  append_ms(b, ns);
  if (request_id_len) { /* made of A-Za-z0-9._- only: nothing to escape */
    clank_buf_appends(b, json ? ",\"requestId\":\"" : "ms ");
    clank_buf_append(b, request_id, request_id_len);
    clank_buf_appends(b, json ? "\"" : "\n");
  } else {
    clank_buf_appends(b, json ? "" : "ms\n");
  }
  if (json && log->worker) clank_buf_appendf(b, ",\"worker\":%d", log->worker - 1);
  if (json) clank_buf_appends(b, "}\n");
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
