/* app.static (SPEC §15): files from folders next to app.lua, GET and HEAD,
   with validators and a single range. Every file system call runs off the
   loop (uv_fs_*), and the body is read in chunks by the HTTP layer, never
   through Lua. */
#define _XOPEN_SOURCE 700 /* strptime */
#include "host/static.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "host/host.h"
#include "host/live.h"
#include "util/bytes.h"

typedef struct static_req_s {
  uv_fs_t fs;
  clank_conn_t *conn;
  uv_file fd;
  size_t root_len;
  /* /favicon.ico: the folders still to try after this one ("root\0" each, then "\0"), else
     NULL; when none has the file, 204 instead of 404 */
  const char *more;
  char path[]; /* the root, then the file below it */
} static_req_t;

static void resolved(uv_fs_t *req);

static const struct {
  const char *ext, *type;
} types[] = {
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"json", "application/json"},
    {"map", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/x-icon"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
    {"wav", "audio/wav"},
    {"zip", "application/zip"},
};

static const char *content_type(const char *path) {
  const char *dot = strrchr(path, '.');
  const char *slash = strrchr(path, '/');
  if (dot && (!slash || dot > slash))
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
      if (strcasecmp(dot + 1, types[i].ext) == 0) return types[i].type;
  return "application/octet-stream";
}

/* The path below the prefix, percent-decoded into out; 0 when it names no
   file we serve: empty (no listings), a segment starting with '.' (dotfiles,
   "..") or a NUL or bad escape. */
static int decode_rest(const char *p, size_t n, char *out, size_t cap) {
  size_t k = 0;
  int segment_start = 1;
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++) {
    int ch = (unsigned char)p[i];
    if (ch == '%') {
      ch = clank_percent_byte(p, n, i);
      if (ch < 0) return 0;
      i += 2;
    }
    if (ch == 0 || k + 1 >= cap) return 0;
    if (segment_start && ch == '.') return 0;
    segment_start = ch == '/';
    out[k++] = (char)ch;
  }
  if (segment_start) return 0; /* ends with '/': a folder */
  out[k] = '\0';
  return 1;
}

const clank_static_t *clank_static_match(const clank_gen_t *g, const char *path, size_t n) {
  for (int i = 0; i < g->nstatics; i++) {
    const clank_static_t *s = &g->statics[i];
    if (n > s->prefix_len && memcmp(path, s->prefix, s->prefix_len) == 0 &&
        path[s->prefix_len] == '/')
      return s;
  }
  return NULL;
}

/* ---- answering ---- */

static void finish(static_req_t *q, int more) {
  clank_conn_t *c = q->conn;
  if (!more) clank_conn_resume(c);
  clank_conn_release(c);
  free(q);
}

static void close_fd(static_req_t *q) {
  if (q->fd < 0) return;
  uv_fs_t req;
  uv_fs_close(NULL, &req, q->fd, NULL); /* closing is quick: no thread for it */
  uv_fs_req_cleanup(&req);
  q->fd = -1;
}

/* q's path: root/rest, and the root's length. */
static void set_path(static_req_t *q, const char *root, const char *rest) {
  q->root_len = strlen(root);
  sprintf(q->path, "%s/%s", root, rest);
}

/* Resolves q->path: 1 while that goes on, 0 when it could not start. */
static int resolve(static_req_t *q) {
  return uv_fs_realpath(q->conn->server->loop, &q->fs, q->path, resolved) == 0;
}

/* /favicon.ico: resolving the file in the next folder that may hold one; 0 when none is left. */
static int next_favicon(static_req_t *q) {
  while (*q->more) {
    const char *root = q->more;
    q->more += strlen(root) + 1;
    set_path(q, root, "favicon.ico");
    if (resolve(q)) return 1;
  }
  return 0;
}

/* No favicon: an empty answer, which browsers take without an error (a 404 would be one in the
   console and the access log of every page load). */
static void no_favicon(clank_conn_t *c) {
  clank_conn_begin(c, 204);
  clank_conn_body(c, NULL, 0);
}

static void not_found(static_req_t *q) {
  close_fd(q);
  if (q->more && !q->conn->closing && next_favicon(q)) return;
  if (!q->conn->closing) {
    if (q->more)
      no_favicon(q->conn);
    else
      clank_conn_text(q->conn, 404, "Not found.");
  }
  finish(q, 0);
}

static void http_date(time_t t, char *out, size_t n) {
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, n, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static time_t parse_http_date(const char *v, size_t n) {
  char buf[64];
  if (n >= sizeof buf) return (time_t)-1;
  memcpy(buf, v, n);
  buf[n] = '\0';
  struct tm tm = {0};
  const char *end = strptime(buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == NULL || *end != '\0') return (time_t)-1;
  return timegm(&tm);
}

/* If-None-Match: "*" or a list holding the etag (weak comparison). */
static int etag_matches(const char *v, size_t n, const char *etag) {
  size_t elen = strlen(etag);
  for (size_t i = 0; i < n;) {
    while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
    if (i < n && v[i] == '*') return 1;
    if (i + 2 < n && v[i] == 'W' && v[i + 1] == '/') i += 2;
    size_t start = i;
    while (i < n && v[i] != ',') i++;
    size_t end = i;
    while (end > start && (v[end - 1] == ' ' || v[end - 1] == '\t')) end--;
    if (end - start == elen && memcmp(v + start, etag, elen) == 0) return 1;
  }
  return 0;
}

/* Decimal digits [p, end) as a number, UINT64_MAX for any larger one (a
   position past every file); -1 when a byte is not a digit. */
static int range_number(const char *p, const char *end, uint64_t *out) {
  uint64_t v = 0;
  for (; p < end; p++) {
    if (*p < '0' || *p > '9') return -1;
    unsigned d = (unsigned)(*p - '0');
    v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
  }
  *out = v;
  return 0;
}

/* Range: bytes=a-b | a- | -n (RFC 9110 §14.1.2). Returns 1 with [*from,
   *to] for one satisfiable range, a last-pos past the end clamped to it, a
   suffix longer than the file the whole file; 0 to send the whole file (no
   or several ranges, not bytes, or invalid), -1 when unsatisfiable (416). */
static int parse_range(const char *v, size_t n, uint64_t size, uint64_t *from, uint64_t *to) {
  if (n < 7 || strncasecmp(v, "bytes=", 6) != 0) return 0;
  v += 6;
  n -= 6;
  if (memchr(v, ',', n)) return 0;
  const char *dash = memchr(v, '-', n);
  if (dash == NULL) return 0;
  uint64_t a = 0, b = 0;
  int has_a = dash > v, has_b = dash + 1 < v + n;
  if (range_number(v, dash, &a) != 0 || range_number(dash + 1, v + n, &b) != 0) return 0;
  if (!has_a && !has_b) return 0;
  if (!has_a) { /* the last b bytes */
    if (b == 0 || size == 0) return -1;
    *from = b >= size ? 0 : size - b;
    *to = size - 1;
    return 1;
  }
  if (a >= size) return -1;
  if (has_b && b < a) return 0;
  *from = a;
  *to = has_b && b < size ? b : size - 1;
  return 1;
}

static void stated(uv_fs_t *req) {
  static_req_t *q = req->data;
  clank_conn_t *c = q->conn;
  uv_stat_t st = req->statbuf;
  int rc = (int)req->result;
  uv_fs_req_cleanup(req);
  if (c->closing || rc < 0 || !S_ISREG(st.st_mode)) {
    not_found(q);
    return;
  }
  const clank_request_t *r = &c->req;
  uint64_t size = st.st_size;
  char etag[64], modified[40], lines[256];
  snprintf(etag, sizeof etag, "\"%llx-%llx\"", (unsigned long long)size,
           (unsigned long long)st.st_mtim.tv_sec * 1000000000ull +
               (unsigned long long)st.st_mtim.tv_nsec);
  http_date((time_t)st.st_mtim.tv_sec, modified, sizeof modified);
  snprintf(lines, sizeof lines, "etag: %s\r\nlast-modified: %s\r\ncache-control: no-cache\r\n",
           etag, modified);

  const clank_header_t *inm = clank_request_header(r, "if-none-match", 13, NULL);
  const clank_header_t *ims = clank_request_header(r, "if-modified-since", 17, NULL);
  int fresh =
      inm ? etag_matches(clank_header_value(r, inm), inm->value_len, etag)
          : ims && parse_http_date(clank_header_value(r, ims), ims->value_len) >= st.st_mtim.tv_sec;
  if (fresh) {
    clank_conn_begin(c, 304);
    clank_conn_header_raw(c, lines);
    clank_conn_body(c, NULL, 0);
    close_fd(q);
    finish(q, 0);
    return;
  }
  uint64_t from = 0, to = size ? size - 1 : 0;
  const clank_header_t *range = clank_request_header(r, "range", 5, NULL);
  int ranged = range && r->method == HTTP_GET
                   ? parse_range(clank_header_value(r, range), range->value_len, size, &from, &to)
                   : 0;
  if (ranged < 0) {
    char body_lines[80];
    snprintf(body_lines, sizeof body_lines, "content-range: bytes */%llu\r\n",
             (unsigned long long)size);
    clank_conn_begin(c, 416);
    clank_conn_header_raw(c, body_lines);
    clank_conn_header_raw(c, "content-type: text/plain; charset=utf-8\r\n");
    clank_conn_body(c, "Range not satisfiable.", 22);
    close_fd(q);
    finish(q, 0);
    return;
  }
  clank_conn_begin(c, ranged ? 206 : 200);
  clank_conn_header_raw(c, lines);
  clank_conn_header_raw(c, "accept-ranges: bytes\r\ncontent-type: ");
  clank_conn_header_raw(c, content_type(q->path));
  clank_conn_header_raw(c, "\r\n");
  if (ranged) {
    char cr[96];
    snprintf(cr, sizeof cr, "content-range: bytes %llu-%llu/%llu\r\n", (unsigned long long)from,
             (unsigned long long)to, (unsigned long long)size);
    clank_conn_header_raw(c, cr);
  }
  uint64_t len = size ? to - from + 1 : 0;
  finish(q, clank_conn_body_file(c, q->fd, from, len));
}

static void opened(uv_fs_t *req) {
  static_req_t *q = req->data;
  int fd = (int)req->result;
  uv_fs_req_cleanup(req);
  if (fd < 0 || q->conn->closing) {
    not_found(q);
    return;
  }
  q->fd = fd;
  if (uv_fs_fstat(q->conn->server->loop, &q->fs, fd, stated) != 0) not_found(q);
}

/* The file must resolve (symlinks included) to a path inside the root. */
static void resolved(uv_fs_t *req) {
  static_req_t *q = req->data;
  const char *real = req->result == 0 ? req->ptr : NULL;
  int inside = real && strncmp(real, q->path, q->root_len) == 0 && real[q->root_len] == '/';
  if (inside) snprintf(q->path, strlen(q->path) + 1, "%s", real);
  uv_fs_req_cleanup(req);
  if (!inside || q->conn->closing) {
    not_found(q);
    return;
  }
  if (uv_fs_open(q->conn->server->loop, &q->fs, q->path, O_RDONLY | O_CLOEXEC, 0, opened) != 0)
    not_found(q);
}

int clank_static_serve(clank_conn_t *c, const clank_static_t *s, const char *path, size_t n) {
  char rest[4096];
  if (!decode_rest(path + s->prefix_len + 1, n - s->prefix_len - 1, rest, sizeof rest)) {
    clank_conn_text(c, 404, "Not found.");
    return 0;
  }
  static_req_t *q = malloc(sizeof *q + strlen(s->root) + 1 + strlen(rest) + 1);
  if (q == NULL) {
    clank_conn_text(c, 503, "Service unavailable.");
    return 0;
  }
  q->conn = c;
  q->fd = -1;
  q->more = NULL;
  q->fs.data = q;
  set_path(q, s->root, rest);
  clank_conn_hold(c);
  if (!resolve(q)) {
    clank_conn_release(c);
    free(q);
    clank_conn_text(c, 404, "Not found.");
    return 0;
  }
  return 1;
}

int clank_static_favicon(clank_conn_t *c, const clank_gen_t *g) {
  size_t longest = 0, all = 1;
  for (int i = 0; i < g->nstatics; i++) {
    size_t n = strlen(g->statics[i].root);
    if (n > longest) longest = n;
    all += n + 1;
  }
  size_t path_size = longest + sizeof "/favicon.ico";
  static_req_t *q = malloc(sizeof *q + path_size + all);
  if (q == NULL) {
    clank_conn_text(c, 503, "Service unavailable.");
    return 0;
  }
  /* the folders in app.static's order, copied: the generation may go before the answer */
  char *list = q->path + path_size, *at = list;
  for (int i = 0; i < g->nstatics; i++) at = stpcpy(at, g->statics[i].root) + 1;
  *at = '\0';
  q->conn = c;
  q->fd = -1;
  q->more = list;
  q->fs.data = q;
  clank_conn_hold(c);
  if (next_favicon(q)) return 1;
  clank_conn_release(c);
  free(q);
  no_favicon(c);
  return 0;
}

/* ---- stylesheets changed: live pages re-fetch them (SPEC §11 {"t":"css"}) ---- */

typedef struct static_watch_s {
  uv_fs_event_t event;
  clank_host_t *host;
  struct static_watch_s *next;
} static_watch_t;

static void watch_closed(uv_handle_t *handle) { free(handle->data); }

static void css_changed(uv_fs_event_t *event, const char *file, int events, int status) {
  (void)events;
  static_watch_t *w = event->data;
  size_t n = file ? strlen(file) : 0;
  if (status == 0 && n > 4 && strcmp(file + n - 4, ".css") == 0) clank_live_css(w->host);
}

void clank_static_watch(clank_host_t *h, const clank_gen_t *g) {
  clank_static_unwatch(h);
  for (int i = 0; i < g->nstatics; i++) {
    static_watch_t *w = calloc(1, sizeof *w);
    if (w == NULL) return;
    w->host = h;
    uv_fs_event_init(&h->loop, &w->event);
    w->event.data = w;
    if (uv_fs_event_start(&w->event, css_changed, g->statics[i].root, 0) != 0) {
      uv_close((uv_handle_t *)&w->event, watch_closed);
      continue;
    }
    uv_unref((uv_handle_t *)&w->event);
    w->next = h->static_watches;
    h->static_watches = w;
  }
}

void clank_static_unwatch(clank_host_t *h) {
  while (h->static_watches) {
    static_watch_t *w = h->static_watches;
    h->static_watches = w->next;
    if (!uv_is_closing((uv_handle_t *)&w->event)) uv_close((uv_handle_t *)&w->event, watch_closed);
  }
}
