#include "http/response.h"


const char *clank_status_reason(int status) {
  switch (status) {
  case 100: return "Continue";
  case 200: return "OK";
  case 201: return "Created";
  case 202: return "Accepted";
  case 204: return "No Content";
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
  case 417: return "Expectation Failed";
  case 422: return "Unprocessable Content";
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

static int has_no_body(int status) {
  return status < 200 || status == 204 || status == 304;
}


void clank_response_begin(clank_buf_t *out, const clank_response_meta_t *m, const char *date) {
  clank_buf_append(out, "HTTP/1.1 ", 9);
  clank_buf_append_uint(out, (size_t)m->status);
  clank_buf_appendc(out, ' ');
  clank_buf_appends(out, clank_status_reason(m->status));
  clank_buf_appends(out, "\r\ndate: ");
  clank_buf_appends(out, date);
  clank_buf_append(out, "\r\n", 2);
  if (!m->keep_alive)
    clank_buf_appends(out, "connection: close\r\n");
  else if (m->http10)
    clank_buf_appends(out, "connection: keep-alive\r\n");
}

void clank_response_end(clank_buf_t *out, const clank_response_meta_t *m, const char *body,
                        size_t len) {
  if (has_no_body(m->status)) {
    clank_buf_appends(out, "\r\n");
    return;
  }
  clank_buf_append(out, "content-length: ", 16);
  clank_buf_append_uint(out, len);
  clank_buf_append(out, "\r\n\r\n", 4);
  if (!m->head_only) clank_buf_append(out, body, len);
}

void clank_response_text(clank_buf_t *out, const clank_response_meta_t *m, const char *date,
                         const char *body) {
  clank_response_begin(out, m, date);
  clank_buf_appends(out, "content-type: text/plain; charset=utf-8\r\n");
  clank_response_end(out, m, body, strlen(body));
}
