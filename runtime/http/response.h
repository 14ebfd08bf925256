/* Responses written into a connection's output buffer: status line, headers,
   body, in one piece. */
#ifndef CLANK_RESPONSE_H
#define CLANK_RESPONSE_H

#include <stddef.h>

#include "util/buf.h"

const char *clank_status_reason(int status);

typedef struct clank_response_meta_s {
  int status;
  int keep_alive; /* 0 adds connection: close */
  int http10;     /* an HTTP/1.0 keep-alive answer says so */
  int head_only;  /* HEAD: headers with the body's length, no body */
} clank_response_meta_t;

/* Appends the status line and the headers every response carries. The caller
   appends its own header lines, then calls clank_response_end. */
void clank_response_begin(clank_buf_t *out, const clank_response_meta_t *m, const char *date);
/* Ends the header block with content-length and appends the body. */
void clank_response_end(clank_buf_t *out, const clank_response_meta_t *m, const char *body,
                        size_t len);
/* A whole text/plain response. */
void clank_response_text(clank_buf_t *out, const clank_response_meta_t *m, const char *date,
                         const char *body);

#endif
