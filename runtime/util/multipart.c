/* The incremental multipart/form-data parser (multipart.h); owns the bytes
   of a part it is still reading. */
#include "util/multipart.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* Where the parser is: the delimiter "\r\n--boundary" is searched for with
   KMP, so a delimiter split across pieces (or fed a byte at a time) is
   found, and data bytes that turn out not to start one are given back. */
enum {
  S_PREAMBLE, /* before the first delimiter; a CRLF before the body is assumed */
  S_AFTER,    /* just after a delimiter: "--" ends the body, else [ \t]* CRLF */
  S_DASH,     /* after a delimiter and one '-' */
  S_LWSP,     /* after a delimiter and some spaces or tabs */
  S_LF,       /* after a delimiter line's CR */
  S_HEAD,     /* in a part's header block */
  S_DATA,     /* in a part's data */
  S_DONE,     /* the closing delimiter was seen; the epilogue is ignored */
  S_ERROR,
};

enum { P_NONE, P_HEADER_LINE, P_DISPOSITION };

#define PREFIX "Malformed multipart body: "

static int fail(clank_multipart_t *p, const char *fmt, unsigned n) {
  snprintf(p->error, sizeof p->error, fmt, n);
  p->state = S_ERROR;
  return CLANK_MULTIPART_MALFORMED;
}

static void part_reset(clank_multipart_part_t *part) {
  clank_buf_reset(&part->name);
  clank_buf_reset(&part->filename);
  clank_buf_reset(&part->type);
  clank_buf_reset(&part->data);
  part->has_filename = part->has_type = 0;
}

int clank_multipart_init(clank_multipart_t *p, const char *boundary, size_t len,
                         clank_multipart_part_fn on_part, void *ud) {
  memset(p, 0, sizeof *p);
  p->on_part = on_part;
  p->ud = ud;
  p->keep_data = 1;
  if (boundary == NULL || len == 0 || len > CLANK_MULTIPART_MAX_BOUNDARY)
    return fail(p, PREFIX "missing or invalid boundary.", 0);
  memcpy(p->delim, "\r\n--", 4);
  memcpy(p->delim + 4, boundary, len);
  p->delim_len = len + 4;
  /* fail[k]: the longest proper prefix of delim[0..k) that also ends it */
  p->fail[0] = p->fail[1] = 0;
  for (size_t k = 2, j = 0; k <= p->delim_len; k++) {
    while (j > 0 && p->delim[k - 1] != p->delim[j]) j = p->fail[j];
    if (p->delim[k - 1] == p->delim[j]) j++;
    p->fail[k] = (unsigned char)j;
  }
  p->state = S_PREAMBLE;
  p->matched = 2; /* the body may open with the delimiter, CRLF left out */
  p->virt = 2;
  return CLANK_MULTIPART_OK;
}

/* Bytes that are not (or no longer may be) the start of a delimiter: part
   data in S_DATA, dropped elsewhere (the header block keeps its own copy). */
static int out(clank_multipart_t *p, const char *s, size_t n) {
  if (p->state != S_DATA || n == 0 || !p->keep_data) return 0;
  return clank_buf_append(&p->part.data, s, n);
}

/* The first n held bytes (delim[0..n)) go out; the framing's own go nowhere. */
static int held_out(clank_multipart_t *p, size_t n) {
  size_t skip = p->virt < n ? p->virt : n;
  p->virt -= skip;
  return out(p, p->delim + skip, n - skip);
}

/* One byte through the matcher: 1 when it completes a delimiter, -1 when
   memory runs out. */
static int step(clank_multipart_t *p, char c) {
  while (p->matched > 0 && p->delim[p->matched] != c) {
    size_t k = p->fail[p->matched];
    if (held_out(p, p->matched - k) != 0) return -1;
    p->matched = k;
  }
  if (p->delim[p->matched] == c) {
    p->matched++;
    return p->matched == p->delim_len;
  }
  return out(p, &c, 1);
}

/* ---- a part's header block ---- */

static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static int is_tchar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int lower_eq(const char *s, size_t n, const char *word) {
  return n == strlen(word) && strncasecmp(s, word, n) == 0;
}

/* A parameter's value: a quoted-string (backslash escapes undone) or a
   token with trailing white space trimmed. Returns where the rest starts,
   or NULL for a quoted-string that is not closed. */
static const char *param_value(const char *s, const char *end, clank_buf_t *v, int *nomem) {
  clank_buf_reset(v);
  if (s < end && *s == '"') {
    for (s++; s < end; s++) {
      if (*s == '"') {
        for (s++; s < end && is_space(*s); s++) {}
        return s;
      }
      if (*s == '\\' && ++s == end) break;
      if (clank_buf_appendc(v, *s) != 0) *nomem = 1;
    }
    return NULL;
  }
  const char *e = s;
  while (e < end && *e != ';') e++;
  const char *t = e;
  while (t > s && is_space(t[-1])) t--;
  if (clank_buf_append(v, s, (size_t)(t - s)) != 0) *nomem = 1;
  return e;
}

/* content-disposition → form-data with a name, into the part; 0, or -1
   when it is not that. Parameter names are matched without case and a
   repeated one wins last. */
static int disposition(clank_multipart_t *p, const char *s, size_t len, int *nomem) {
  const char *end = s + len, *t = s;
  while (t < end && is_space(*t)) t++;
  const char *type = t;
  while (t < end && *t != ';' && !is_space(*t)) t++;
  int form_data = lower_eq(type, (size_t)(t - type), "form-data");
  int has_name = 0;
  const char *rest = memchr(s, ';', len);
  if (rest == NULL) rest = end;
  clank_buf_t value = {0};
  while (rest < end) {
    const char *r = rest + 1, *name = NULL, *name_end = NULL;
    while (r < end && is_space(*r)) r++;
    name = r;
    while (r < end && *r != '=' && *r != ';' && !is_space(*r)) r++;
    name_end = r;
    while (r < end && is_space(*r)) r++;
    if (*rest != ';' || name_end == name || r == end || *r != '=') {
      /* not a parameter: skip to the next ';' */
      r = rest + (*rest == ';');
      while (r < end && *r != ';') r++;
      rest = r;
      continue;
    }
    for (r++; r < end && is_space(*r); r++) {}
    const char *tail = param_value(r, end, &value, nomem);
    if (tail == NULL) break;
    size_t n = (size_t)(name_end - name);
    if (lower_eq(name, n, "name")) {
      clank_buf_reset(&p->part.name);
      if (clank_buf_append(&p->part.name, value.data, value.len) != 0) *nomem = 1;
      has_name = 1;
    } else if (lower_eq(name, n, "filename")) {
      clank_buf_reset(&p->part.filename);
      if (clank_buf_append(&p->part.filename, value.data, value.len) != 0) *nomem = 1;
      p->part.has_filename = 1;
    }
    rest = tail;
  }
  clank_buf_free(&value);
  return form_data && has_name ? 0 : -1;
}

/* The header block (each line ending in CRLF) → the part's name, filename
   and type, or a pending error. Lines are found as Lua's
   gmatch("([^\r\n]*)\r\n") finds them: stray CR or LF bytes are skipped. */
static int head_done(clank_multipart_t *p) {
  const char *s = p->head.data, *end = s + (p->head.len - 2);
  const char *cd = NULL, *ct = NULL;
  size_t cd_len = 0, ct_len = 0;
  while (s < end) {
    const char *e = s;
    while (e < end && *e != '\r' && *e != '\n') e++;
    if (e + 1 >= end || e[0] != '\r' || e[1] != '\n') {
      s = e < end ? e + 1 : end; /* no match starts before the stray byte: not quadratic */
      continue;
    }
    const char *c = s;
    while (c < e && is_tchar(*c)) c++;
    if (c == s || c == e || *c != ':') {
      p->pending = P_HEADER_LINE;
      return 0;
    }
    const char *v = c + 1, *ve = e;
    while (v < ve && is_space(*v)) v++;
    while (ve > v && is_space(ve[-1])) ve--;
    size_t n = (size_t)(c - s);
    if (lower_eq(s, n, "content-disposition")) {
      cd = v;
      cd_len = (size_t)(ve - v);
    } else if (lower_eq(s, n, "content-type")) {
      ct = v;
      ct_len = (size_t)(ve - v);
    }
    s = e + 2;
  }
  int nomem = 0;
  if (disposition(p, cd ? cd : "", cd_len, &nomem) != 0) p->pending = P_DISPOSITION;
  if (ct) {
    p->part.has_type = 1;
    if (clank_buf_append(&p->part.type, ct, ct_len) != 0) nomem = 1;
  }
  return nomem ? -1 : 0;
}

/* ---- feeding ---- */

/* end: the stream position just after the delimiter. */
static int delimiter_found(clank_multipart_t *p, size_t end) {
  int was = p->state;
  size_t start = end - p->delim_len; /* before data_at when it reused the header's CRLF */
  p->part.offset = p->data_at;
  p->part.length = start > p->data_at ? start - p->data_at : 0;
  p->matched = p->virt = 0;
  p->state = S_AFTER;
  if (was != S_DATA) return CLANK_MULTIPART_OK;
  if (p->pending == P_HEADER_LINE)
    return fail(p, PREFIX "part %u has a malformed header line.", p->parts);
  if (p->pending == P_DISPOSITION)
    return fail(p, PREFIX "part %u has no content-disposition form-data name.", p->parts);
  if (p->on_part && p->on_part(p->ud, &p->part) != 0) return CLANK_MULTIPART_NOMEM;
  part_reset(&p->part);
  return CLANK_MULTIPART_OK;
}

static int head_byte(clank_multipart_t *p, char c, size_t next) {
  if (clank_buf_appendc(&p->head, c) != 0) return CLANK_MULTIPART_NOMEM;
  int r = step(p, c);
  if (r < 0) return CLANK_MULTIPART_NOMEM;
  if (r) return fail(p, PREFIX "part %u has no end of headers.", p->parts);
  const char *h = p->head.data;
  size_t n = p->head.len;
  int empty = n == 2 && h[0] == '\r' && h[1] == '\n';
  if (!empty && !(n >= 4 && memcmp(h + n - 4, "\r\n\r\n", 4) == 0)) return CLANK_MULTIPART_OK;
  /* the data starts; its delimiter may reuse the CRLF just read */
  if (!empty && head_done(p) != 0) return CLANK_MULTIPART_NOMEM;
  if (empty) p->pending = P_DISPOSITION; /* no header: no content-disposition */
  p->state = S_DATA;
  p->data_at = next;
  p->matched = p->virt = 2;
  return CLANK_MULTIPART_OK;
}

int clank_multipart_feed(clank_multipart_t *p, const char *data, size_t len) {
  const char *end = data + len;
  size_t base = p->pos; /* the stream position of data[0] */
  const char *first = data;
  p->pos += len;
  while (data < end) {
    switch (p->state) {
      case S_PREAMBLE:
      case S_DATA: {
        if (p->matched == 0) {
          /* nothing held: bytes up to a CR that starts a delimiter (or is too near the end
             to tell) are data as they are */
          const char *s = data;
          for (;;) {
            const char *cr = memchr(s, '\r', (size_t)(end - s));
            if (cr == NULL) {
              s = end;
              break;
            }
            s = cr;
            if ((size_t)(end - cr) < p->delim_len || memcmp(cr, p->delim, p->delim_len) == 0) break;
            s++;
          }
          if (out(p, data, (size_t)(s - data)) != 0) return CLANK_MULTIPART_NOMEM;
          data = s;
          if (data == end) break;
        }
        int r = step(p, *data++);
        if (r < 0) return CLANK_MULTIPART_NOMEM;
        if (r) {
          int rc = delimiter_found(p, base + (size_t)(data - first));
          if (rc != CLANK_MULTIPART_OK) return rc;
        }
        break;
      }
      case S_AFTER:
        if (*data == '-')
          p->state = S_DASH;
        else if (*data == ' ' || *data == '\t')
          p->state = S_LWSP;
        else if (*data == '\r')
          p->state = S_LF;
        else
          return fail(p, PREFIX "a boundary line is not followed by CRLF.", 0);
        data++;
        break;
      case S_DASH:
        if (*data != '-') return fail(p, PREFIX "a boundary line is not followed by CRLF.", 0);
        p->state = S_DONE;
        data = end;
        break;
      case S_LWSP:
        if (*data == '\r')
          p->state = S_LF;
        else if (*data != ' ' && *data != '\t')
          return fail(p, PREFIX "a boundary line is not followed by CRLF.", 0);
        data++;
        break;
      case S_LF:
        if (*data != '\n') return fail(p, PREFIX "a boundary line is not followed by CRLF.", 0);
        data++;
        p->parts++;
        p->pending = P_NONE;
        clank_buf_reset(&p->head);
        part_reset(&p->part);
        p->state = S_HEAD;
        break;
      case S_HEAD: {
        int rc = head_byte(p, *data, base + (size_t)(data - first) + 1);
        data++;
        if (rc != CLANK_MULTIPART_OK) return rc;
        break;
      }
      case S_DONE: return CLANK_MULTIPART_OK;
      default: return CLANK_MULTIPART_MALFORMED;
    }
  }
  return p->state == S_ERROR ? CLANK_MULTIPART_MALFORMED : CLANK_MULTIPART_OK;
}

int clank_multipart_finish(clank_multipart_t *p) {
  switch (p->state) {
    case S_DONE: return CLANK_MULTIPART_OK;
    case S_ERROR: return CLANK_MULTIPART_MALFORMED;
    case S_PREAMBLE: return fail(p, PREFIX "no opening boundary.", 0);
    case S_HEAD:
    case S_DATA: return fail(p, PREFIX "part %u is not closed by a boundary.", p->parts);
    default: return fail(p, PREFIX "a boundary line is not followed by CRLF.", 0);
  }
}

const char *clank_multipart_error(const clank_multipart_t *p) { return p->error; }

void clank_multipart_free(clank_multipart_t *p) {
  clank_buf_free(&p->head);
  clank_buf_free(&p->part.name);
  clank_buf_free(&p->part.filename);
  clank_buf_free(&p->part.type);
  clank_buf_free(&p->part.data);
}
