/* /__clank/docs (issue 34): the reference manual, the Markdown of doc/ installed with
   the runtime (host/lua_dir.c finds them), rendered to HTML with libcmark.
   /__clank/docs is doc/README.md, /__clank/docs/<name> (or <name>.md) is
   doc/<name>.md, for a name of letters, digits, - and _; anything else is
   404, so no path leaves the folder. Reading and rendering run on libuv's
   threads, never on the loop. Raw HTML in the Markdown is never rendered
   (libcmark's safe mode); links between pages (x.md#part) become links to
   the served pages, headings get the ids GitHub gives them, and pipe tables
   (which CommonMark lacks) are rendered here. Who may read it is the
   inspector's rule (dispatch.c). Owns a request's job until it is answered. */
#include "host/docs.h"

#include <cmark.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/lua_dir.h"
#include "util/buf.h"
#include "util/bytes.h"

#define PREFIX "/__clank/docs"
#define MAX_NAME 64
#define MAX_SOURCE (1024 * 1024) /* a page larger than this is not ours */

typedef struct docs_job_s {
  uv_work_t work;
  clank_conn_t *conn;
  char name[MAX_NAME + 1];
  int status;      /* 200 or 404, set by the thread */
  clank_buf_t out; /* the page */
} docs_job_t;

int clank_docs_path(const char *p, size_t n) {
  return clank_span_is(p, n, PREFIX) || clank_span_starts(p, n, PREFIX "/");
}

/* The page a path names into name: 1, or 0 when it names none. */
static int page_name(const char *p, size_t n, char name[MAX_NAME + 1]) {
  size_t k = sizeof PREFIX - 1;
  if (n <= k + 1) { /* /__clank/docs or /__clank/docs/ */
    memcpy(name, "README", sizeof "README");
    return 1;
  }
  p += k + 1;
  n -= k + 1;
  if (n > 3 && memcmp(p + n - 3, ".md", 3) == 0) n -= 3;
  if (n == 0 || n > MAX_NAME) return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = p[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '-' || ch == '_'))
      return 0;
  }
  memcpy(name, p, n);
  name[n] = '\0';
  return 1;
}

/* ---- Markdown to HTML (on a thread) ---- */

/* The whole file into b; 0, or -1 when it cannot be read or is too large. */
static int read_file(const char *path, clank_buf_t *b) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -1;
  char chunk[8192];
  size_t got;
  int rc = 0;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
    if (b->len + got > MAX_SOURCE || clank_buf_append(b, chunk, got) != 0) {
      rc = -1;
      break;
    }
  if (ferror(f)) rc = -1;
  fclose(f);
  return rc;
}

/* [s, s + n) with up to 3 spaces of indent skipped. */
static const char *indent(const char *s, const char *end) {
  for (int i = 0; i < 3 && s < end && *s == ' '; i++) s++;
  return s;
}

static int table_line(const char *s, const char *end) {
  s = indent(s, end);
  return s < end && *s == '|';
}

/* A delimiter row: | --- | :---: | ---: | (the outer pipes optional). */
static int delimiter_row(const char *s, const char *end) {
  s = indent(s, end);
  int cells = 0, dashes = 0;
  for (; s < end; s++) {
    if (*s == '-') {
      dashes++;
    } else if (*s == '|') {
      if (dashes) cells++;
      dashes = 0;
    } else if (*s != ':' && *s != ' ' && *s != '\t') {
      return 0;
    }
  }
  return cells + (dashes > 0) > 0;
}

/* A fence line (``` or ~~~): its character, else 0. */
static char fence(const char *s, const char *end) {
  s = indent(s, end);
  if (end - s >= 3 && (s[0] == '`' || s[0] == '~') && s[1] == s[0] && s[2] == s[0]) return s[0];
  return 0;
}

static cmark_node *custom(const char *enter, const char *exit) {
  cmark_node *node = cmark_node_new(CMARK_NODE_CUSTOM_BLOCK);
  cmark_node_set_on_enter(node, enter);
  cmark_node_set_on_exit(node, exit);
  return node;
}

/* Moves the blocks of the Markdown [s, s + n) to the end of parent. */
static void append_markdown(cmark_node *parent, const char *s, size_t n) {
  cmark_node *doc = cmark_parse_document(s, n, CMARK_OPT_VALIDATE_UTF8);
  cmark_node *child;
  while ((child = cmark_node_first_child(doc)) != NULL) {
    cmark_node_unlink(child);
    cmark_node_append_child(parent, child);
  }
  cmark_node_free(doc);
}

/* One row's cells as custom blocks of tag `cell` appended to a new <tr>: a
   cell is what lies between unescaped pipes, `\|` standing for a pipe (in
   code spans too, as GitHub reads tables). */
static void append_row(cmark_node *parent, const char *s, const char *end, int head) {
  cmark_node *tr = custom("<tr>", "</tr>");
  s = indent(s, end);
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
  if (s < end && *s == '|') s++;
  if (end > s && end[-1] == '|' && (end - 1 == s || end[-2] != '\\')) end--;
  clank_buf_t cell = {0};
  for (const char *p = s;; p++) {
    if (p == end || *p == '|') {
      cmark_node *td = head ? custom("<th>", "</th>") : custom("<td>", "</td>");
      append_markdown(td, cell.data ? cell.data : "", cell.len);
      cmark_node_append_child(tr, td);
      clank_buf_reset(&cell);
      if (p == end) break;
      continue;
    }
    if (*p == '\\' && p + 1 < end && p[1] == '|') p++;
    clank_buf_append(&cell, p, 1);
  }
  clank_buf_free(&cell);
  cmark_node_append_child(parent, tr);
}

/* The lines [s, end) of a table (head, delimiter row, body rows). */
static cmark_node *table(const char *s, const char *end) {
  cmark_node *t = custom("<table>", "</table>");
  cmark_node *thead = custom("<thead>", "</thead>");
  cmark_node *tbody = custom("<tbody>", "</tbody>");
  int row = 0;
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *stop = nl ? nl : end;
    if (row == 0) append_row(thead, s, stop, 1);
    if (row > 1) append_row(tbody, s, stop, 0);
    row++;
    s = nl ? nl + 1 : end;
  }
  cmark_node_append_child(t, thead);
  if (cmark_node_first_child(tbody))
    cmark_node_append_child(t, tbody);
  else
    cmark_node_free(tbody);
  return t;
}

/* The document: Markdown with its pipe tables (outside code fences). */
static cmark_node *parse(const char *src, size_t n) {
  cmark_node *root = cmark_node_new(CMARK_NODE_DOCUMENT);
  const char *end = src + n, *chunk = src, *s = src;
  char in_fence = 0;
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *stop = nl ? nl : end, *next = nl ? nl + 1 : end;
    char f = fence(s, stop);
    if (in_fence) {
      if (f == in_fence) in_fence = 0;
    } else if (f) {
      in_fence = f;
    } else if (table_line(s, stop) && next < end) {
      const char *nl2 = memchr(next, '\n', (size_t)(end - next));
      if (delimiter_row(next, nl2 ? nl2 : end)) {
        append_markdown(root, chunk, (size_t)(s - chunk));
        const char *t_end = nl2 ? nl2 + 1 : end;
        while (t_end < end) {
          const char *nl3 = memchr(t_end, '\n', (size_t)(end - t_end));
          if (!table_line(t_end, nl3 ? nl3 : end)) break;
          t_end = nl3 ? nl3 + 1 : end;
        }
        cmark_node_append_child(root, table(s, t_end));
        chunk = s = t_end;
        continue;
      }
    }
    s = next;
  }
  append_markdown(root, chunk, (size_t)(end - chunk));
  return root;
}

/* A link to another page of the manual (name.md, name.md#part, not a URL
   with a scheme or a path): the served page's URL instead. */
static void rewrite_link(cmark_node *link) {
  const char *url = cmark_node_get_url(link);
  if (url == NULL) return;
  size_t n = strcspn(url, "#");
  if (n < 4 || memcmp(url + n - 3, ".md", 3) != 0) return;
  for (size_t i = 0; i < n - 3; i++) {
    char ch = url[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '-' || ch == '_'))
      return;
  }
  char out[MAX_NAME + 512];
  int readme = n - 3 == 6 && memcmp(url, "README", 6) == 0;
  if (readme)
    snprintf(out, sizeof out, "%s%s", PREFIX, url + n);
  else
    snprintf(out, sizeof out, "%s/%.*s%s", PREFIX, (int)(n - 3), url, url + n);
  cmark_node_set_url(link, out);
}

/* The text of a heading as its anchor, the way GitHub makes them: lower
   case, letters, digits, - and _ kept (and bytes past ASCII), spaces
   become -, the rest dropped. */
static void slug_of(cmark_node *heading, clank_buf_t *b) {
  cmark_iter *it = cmark_iter_new(heading);
  cmark_event_type ev;
  while ((ev = cmark_iter_next(it)) != CMARK_EVENT_DONE) {
    cmark_node *node = cmark_iter_get_node(it);
    cmark_node_type t = cmark_node_get_type(node);
    if (ev != CMARK_EVENT_ENTER || (t != CMARK_NODE_TEXT && t != CMARK_NODE_CODE)) continue;
    for (const char *p = cmark_node_get_literal(node); p && *p; p++) {
      unsigned char ch = (unsigned char)*p;
      if (ch >= 'A' && ch <= 'Z') ch = (unsigned char)(ch + 32);
      if (ch == ' ') ch = '-';
      if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
          ch >= 0x80)
        clank_buf_append(b, (const char *)&ch, 1);
    }
  }
  cmark_iter_free(it);
}

/* Links rewritten; the headings' anchors, in document order, into slugs
   (NUL-separated, a repeated one given -1, -2, ... as GitHub does); the
   first heading's text into title. Returns how many headings. */
static int walk(cmark_node *root, clank_buf_t *slugs, clank_buf_t *title) {
  cmark_iter *it = cmark_iter_new(root);
  cmark_event_type ev;
  int headings = 0;
  while ((ev = cmark_iter_next(it)) != CMARK_EVENT_DONE) {
    cmark_node *node = cmark_iter_get_node(it);
    if (ev != CMARK_EVENT_ENTER) continue;
    if (cmark_node_get_type(node) == CMARK_NODE_LINK) rewrite_link(node);
    if (cmark_node_get_type(node) != CMARK_NODE_HEADING) continue;
    clank_buf_t slug = {0};
    slug_of(node, &slug);
    if (headings == 0) {
      cmark_iter *t = cmark_iter_new(node);
      while ((ev = cmark_iter_next(t)) != CMARK_EVENT_DONE) {
        cmark_node_type ty = cmark_node_get_type(cmark_iter_get_node(t));
        const char *lit = cmark_node_get_literal(cmark_iter_get_node(t));
        if (ev == CMARK_EVENT_ENTER && (ty == CMARK_NODE_TEXT || ty == CMARK_NODE_CODE) && lit)
          clank_buf_append(title, lit, strlen(lit));
      }
      cmark_iter_free(t);
    }
    /* a repeat of an earlier anchor: -1, -2, ... */
    size_t base = slug.len;
    for (int k = 1;; k++) {
      int seen = 0;
      for (size_t at = 0; at < slugs->len; at += strlen(slugs->data + at) + 1)
        if (strlen(slugs->data + at) == slug.len &&
            memcmp(slugs->data + at, slug.data, slug.len) == 0)
          seen = 1;
      if (!seen) break;
      slug.len = base;
      char suffix[16];
      int m = snprintf(suffix, sizeof suffix, "-%d", k);
      clank_buf_append(&slug, suffix, (size_t)m);
    }
    clank_buf_append(slugs, slug.data ? slug.data : "", slug.len);
    clank_buf_append(slugs, "", 1);
    clank_buf_free(&slug);
    headings++;
  }
  cmark_iter_free(it);
  return headings;
}

/* Text escaped for HTML. */
static void escaped(clank_buf_t *b, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    switch (s[i]) {
      case '&': clank_buf_append(b, "&amp;", 5); break;
      case '<': clank_buf_append(b, "&lt;", 4); break;
      case '>': clank_buf_append(b, "&gt;", 4); break;
      case '"': clank_buf_append(b, "&quot;", 6); break;
      default: clank_buf_append(b, s + i, 1); break;
    }
  }
}

static const char style[] =
    "body{font:16px/1.55 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fff}"
    "nav{padding:.6rem 1.5rem;border-bottom:1px solid #ddd;background:#f6f6f8}"
    "nav a{margin-right:1rem}main{max-width:52rem;padding:1rem 1.5rem 4rem}"
    "code,pre{font:14px/1.45 ui-monospace,monospace;background:#f2f2f4;border-radius:4px}"
    "code{padding:.1em .25em}pre{padding:.75rem;overflow-x:auto}pre code{padding:0}"
    "table{border-collapse:collapse;margin:1rem 0}th,td{border:1px solid #ccc;"
    "padding:.3rem .5rem;text-align:left;vertical-align:top}th{background:#f6f6f8}"
    "td>p,th>p{margin:0}a{color:#0a58ca}h1,h2,h3{line-height:1.25}";

/* The page of the Markdown in src, into out. */
static void render_page(const char *src, size_t n, clank_buf_t *out) {
  cmark_node *doc = parse(src, n);
  clank_buf_t slugs = {0}, title = {0};
  walk(doc, &slugs, &title);
  char *html = cmark_render_html(doc, CMARK_OPT_SAFE);
  cmark_node_free(doc);
  clank_buf_appendf(out,
                    "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                    "<title>");
  escaped(out, title.data ? title.data : "Clank", title.len);
  clank_buf_appendf(out,
                    "</title><style>%s</style></head><body><nav><a href=\"" PREFIX
                    "\">Manual</a><a href=\"/__clank/inspector\">Inspector</a></nav><main>\n",
                    style);
  /* each <hN> is a heading's (raw HTML is never rendered, text is escaped):
     the next anchor goes in it */
  size_t at = 0;
  for (const char *p = html; *p;) {
    const char *h = strstr(p, "<h");
    while (h && !(h[2] >= '1' && h[2] <= '6' && h[3] == '>')) h = strstr(h + 2, "<h");
    if (h == NULL || at >= slugs.len) {
      clank_buf_append(out, p, strlen(p));
      break;
    }
    clank_buf_append(out, p, (size_t)(h - p) + 3);
    clank_buf_append(out, " id=\"", 5);
    escaped(out, slugs.data + at, strlen(slugs.data + at));
    clank_buf_append(out, "\"", 1);
    at += strlen(slugs.data + at) + 1;
    p = h + 3;
  }
  clank_buf_append(out, "</main></body></html>\n", 22);
  free(html);
  clank_buf_free(&slugs);
  clank_buf_free(&title);
}

static void render_work(uv_work_t *w) {
  docs_job_t *job = w->data;
  char dir[PATH_MAX], path[PATH_MAX + MAX_NAME + 8];
  clank_find_doc_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/%s.md", dir, job->name);
  clank_buf_t src = {0};
  job->status = 404;
  if (read_file(path, &src) == 0) {
    render_page(src.data ? src.data : "", src.len, &job->out);
    job->status = 200;
  }
  clank_buf_free(&src);
}

static void rendered(uv_work_t *w, int status) {
  docs_job_t *job = w->data;
  clank_conn_t *c = job->conn;
  if (!c->closing) {
    if (status == 0 && job->status == 200 && job->out.data)
      clank_conn_answer(c, 200,
                        "content-type: text/html; charset=utf-8\r\n"
                        "cache-control: no-cache\r\n"
                        "referrer-policy: same-origin\r\n"
                        "content-security-policy: default-src 'none'; style-src 'unsafe-inline'; "
                        "img-src 'self' data:; base-uri 'none'; form-action 'none'; "
                        "frame-ancestors 'none'\r\n",
                        job->out.data, job->out.len);
    else
      clank_conn_text(c, 404, "Not found.");
  }
  clank_conn_resume(c);
  clank_conn_release(c);
  clank_buf_free(&job->out);
  free(job);
}

int clank_docs_serve(clank_conn_t *c, const char *p, size_t n) {
  docs_job_t *job = calloc(1, sizeof *job);
  if (job == NULL) {
    clank_conn_text(c, 503, "Service unavailable.");
    return 0;
  }
  if (!page_name(p, n, job->name)) {
    free(job);
    clank_conn_text(c, 404, "Not found.");
    return 0;
  }
  job->conn = c;
  job->work.data = job;
  clank_conn_hold(c);
  if (uv_queue_work(c->server->loop, &job->work, render_work, rendered) != 0) {
    clank_conn_release(c);
    free(job);
    clank_conn_text(c, 503, "Service unavailable.");
    return 0;
  }
  return 1;
}
