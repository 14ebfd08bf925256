/* The response writer: every answer the server sends, whoever makes it,
   goes through these functions, so the status line, the connection
   decision, framing, HEAD and the access log are written in one place. */
#include "http/response.h"

#include <string.h>
#include <strings.h>

#include "http/server.h"
#include "util/bytes.h"

const char *clank_status_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

static int has_no_body(int status) { return status < 200 || status == 204 || status == 304; }

/* RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" /
   "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA */
int clank_http_token(const char *s, size_t n) {
  static const char extra[] = "!#$%&'*+-.^_`|~";
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
          (ch && strchr(extra, ch))))
      return 0;
  }
  return 1;
}

/* RFC 9110 §5.5: field-value = *field-content; field-content = field-vchar
   [ 1*( SP / HTAB / field-vchar ) field-vchar ]; field-vchar = VCHAR /
   obs-text. So: no control character but HTAB, and no white space at
   either end. */
int clank_http_field_value(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if ((ch < 0x20 && ch != '\t') || ch == 0x7f) return 0;
  }
  if (n > 0 && (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t')) return 0;
  return 1;
}

static int owned_header(const char *name, size_t n) {
  return (n == 14 && strncasecmp(name, "content-length", n) == 0) ||
         (n == 17 && strncasecmp(name, "transfer-encoding", n) == 0) ||
         (n == 10 && strncasecmp(name, "connection", n) == 0);
}

/* x-request-id (SPEC §13): the client's when it is 1-64 of A-Za-z0-9._-,
   else one made up: 16 hex digits, a random prefix per run plus a count. */
/* The 8 lowercase hex digits of v, most significant first, at out: its
   nibbles spread one to a byte, then made digits, all 8 at once. */
static void hex8(char *out, uint32_t v) {
  const uint64_t ones = 0x0101010101010101ULL;
  uint64_t x = v;
  x = (x | (x << 16)) & 0x0000FFFF0000FFFFULL;
  x = (x | (x << 8)) & 0x00FF00FF00FF00FFULL;
  x = (x | (x << 4)) & (ones * 0x0F); /* byte k: nibble k, least significant first */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  x = __builtin_bswap64(x); /* most significant first, as the bytes are stored */
#endif
  uint64_t letters = ((x + ones * 6) >> 4) & ones; /* 1 where the nibble is 10-15 */
  x += ones * '0' + letters * ('a' - '0' - 10);
  memcpy(out, &x, 8);
}

const char *clank_conn_request_id(clank_conn_t *c) {
  clank_request_t *r = &c->req;
  if (r->id_len) return r->id;
  const clank_header_t *h = r->nheaders ? clank_request_header(r, "x-request-id", 12, NULL) : NULL;
  if (h && h->value_len >= 1 && h->value_len <= 64) {
    const char *v = clank_header_value(r, h);
    size_t i = 0;
    while (i < h->value_len &&
           ((v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= 'a' && v[i] <= 'z') ||
            (v[i] >= '0' && v[i] <= '9') || v[i] == '.' || v[i] == '_' || v[i] == '-'))
      i++;
    if (i == h->value_len) {
      memcpy(r->id, v, i);
      r->id[i] = '\0';
      r->id_len = (uint8_t)i;
      return r->id;
    }
  }
  uint64_t n = c->server->id_prefix + c->server->id_next++;
  hex8(r->id, (uint32_t)(n >> 32));
  hex8(r->id + 8, (uint32_t)n);
  r->id_len = 16;
  r->id[16] = '\0';
  return r->id;
}

void clank_conn_begin(clank_conn_t *c, int status) {
  clank_buf_t *out = &c->out;
  clank_request_t *r = &c->req;
  int keep_alive = clank_conn_keep_alive(c);
  if (!keep_alive) c->close_after = 1;
  c->status = status;
  c->head_mark = out->len;
  /* statuses are three digits (100-599): no division loop */
  char line[] = "HTTP/1.1 000 ";
  line[9] = (char)('0' + status / 100 % 10);
  line[10] = (char)('0' + status / 10 % 10);
  line[11] = (char)('0' + status % 10);
  clank_buf_append(out, line, sizeof line - 1);
  clank_buf_appends(out, clank_status_reason(status));
  clank_buf_appends(out, "\r\ndate: ");
  clank_buf_appends(out, clank_server_date(c->server));
  clank_buf_appends(out, "\r\nx-content-type-options: nosniff\r\nx-request-id: ");
  clank_conn_request_id(c);
  if (clank_buf_reserve(out, sizeof r->id + 2) == 0) {
    /* the whole array, a fixed size (a `rep movs` otherwise: clank_conn_request_id) */
    memcpy(out->data + out->len, r->id, sizeof r->id);
    memcpy(out->data + out->len + r->id_len, "\r\n", 2);
    out->len += r->id_len + 2u;
  }
  if (!keep_alive)
    clank_buf_appends(out, "connection: close\r\n");
  else if (r->http_major == 1 && r->http_minor == 0)
    clank_buf_appends(out, "connection: keep-alive\r\n");
}

int clank_conn_header(clank_conn_t *c, const char *name, size_t name_len, const char *value,
                      size_t value_len) {
  if (!clank_http_token(name, name_len) || !clank_http_field_value(value, value_len) ||
      owned_header(name, name_len))
    return -1;
  clank_buf_t *out = &c->out;
  clank_buf_append(out, name, name_len);
  clank_buf_append(out, ": ", 2);
  clank_buf_append(out, value, value_len);
  clank_buf_append(out, "\r\n", 2);
  return 0;
}

void clank_conn_header_raw(clank_conn_t *c, const char *lines) {
  clank_buf_appends(&c->out, lines);
}

void clank_conn_cancel(clank_conn_t *c) { c->out.len = c->head_mark; }

static void log_access(clank_conn_t *c, size_t bytes) {
  const clank_request_t *r = &c->req;
  c->answered = 1;
  if (r->url_len == 0) return; /* no request was read (the connection cap) */
  uint64_t ns = uv_hrtime() - r->started_ns;
  clank_log_access(c->server->log, llhttp_method_name((llhttp_method_t)r->method),
                   clank_request_url(r), r->url_len, c->status, bytes, ns, r->id, r->id_len);
  if (c->server->on_answered) c->server->on_answered(c, c->status, ns);
}

static void end_head(clank_conn_t *c, uint64_t len) {
  clank_buf_t *out = &c->out;
  if (has_no_body(c->status)) {
    clank_buf_appends(out, "\r\n");
    return;
  }
  clank_buf_append(out, "content-length: ", 16);
  clank_buf_append_uint(out, (size_t)len);
  clank_buf_append(out, "\r\n\r\n", 4);
}

void clank_conn_body_length(clank_conn_t *c, uint64_t len) {
  end_head(c, len);
  log_access(c, (size_t)len);
}

void clank_conn_body(clank_conn_t *c, const char *body, size_t len) {
  end_head(c, len);
  if (!has_no_body(c->status) && c->req.method != HTTP_HEAD) clank_buf_append(&c->out, body, len);
  log_access(c, len);
}

/* Bodies under this are copied: a reference costs more than the copy. */
#define BODY_COPY_MAX (16 * 1024)

void clank_conn_body_ref(clank_conn_t *c, const char *body, size_t len, clank_release_fn release,
                         void *ud, uintptr_t token) {
  int sent = !has_no_body(c->status) && c->req.method != HTTP_HEAD;
  if (!sent || len < BODY_COPY_MAX) {
    clank_conn_body(c, body, len);
    release(ud, token);
    return;
  }
  end_head(c, len);
  log_access(c, len);
  clank_conn_out_ref(c, body, len, release, ud, token); /* held once, not copied (SPEC §13) */
}

void clank_conn_stream_start(clank_conn_t *c) {
  const clank_request_t *r = &c->req;
  /* HTTP/1.0 has no chunks: the body then ends with the connection. */
  c->chunked = !(r->http_major == 1 && r->http_minor == 0);
  if (c->chunked)
    clank_buf_appends(&c->out, "transfer-encoding: chunked\r\n\r\n");
  else
    clank_buf_appends(&c->out, "\r\n");
  log_access(c, 0);
  clank_conn_flush(c);
}

void clank_conn_stream_chunk(clank_conn_t *c, const char *data, size_t len) {
  if (len == 0 || c->closing) return; /* an empty chunk would end the stream */
  clank_buf_t *out = &c->out;
  if (c->chunked) {
    char size[20];
    int k = (int)sizeof size;
    size_t n = len;
    do {
      size[--k] = clank_hex_digits[n & 15];
      n >>= 4;
    } while (n);
    clank_buf_append(out, size + k, sizeof size - (size_t)k);
    clank_buf_append(out, "\r\n", 2);
  }
  clank_buf_append(out, data, len);
  if (c->chunked) clank_buf_append(out, "\r\n", 2);
  clank_conn_flush(c);
}

void clank_conn_stream_end(clank_conn_t *c) {
  if (c->closing) return;
  if (c->chunked)
    clank_buf_appends(&c->out, "0\r\n\r\n");
  else
    c->close_after = 1;
  clank_conn_flush(c);
}

void clank_conn_switch(clank_conn_t *c, const char *protocol, const char *header_lines) {
  clank_buf_t *out = &c->out;
  c->status = 101;
  clank_buf_appends(out, "HTTP/1.1 101 Switching Protocols\r\ndate: ");
  clank_buf_appends(out, clank_server_date(c->server));
  clank_buf_appends(out, "\r\nconnection: Upgrade\r\nupgrade: ");
  clank_buf_appends(out, protocol);
  clank_buf_appends(out, "\r\n");
  clank_buf_appends(out, header_lines);
  clank_buf_appends(out, "\r\n");
  log_access(c, 0);
}

void clank_conn_answer(clank_conn_t *c, int status, const char *type_lines, const char *body,
                       size_t len) {
  clank_conn_begin(c, status);
  clank_conn_header_raw(c, type_lines);
  clank_conn_body(c, body, len);
}

void clank_conn_text(clank_conn_t *c, int status, const char *body) {
  clank_conn_answer(c, status, "content-type: text/plain; charset=utf-8\r\n", body, strlen(body));
}
