/* A header block as llhttp hands it over, piece by piece, into a
   clank_request_t (names lower-cased, values without trailing whitespace):
   the server's requests and the client's responses are kept alike. */
#ifndef CLANK_HTTP_HEADERS_H
#define CLANK_HTTP_HEADERS_H

#include <stddef.h>

#include "http/request.h"

/* A piece of a header name or value; -1 when the block would pass
   CLANK_MAX_HEADERS or CLANK_MAX_HEADER_BYTES (nothing appended). */
int clank_headers_name(clank_request_t *r, const char *at, size_t len);
int clank_headers_value(clank_request_t *r, const char *at, size_t len);
/* The name, then the value, is complete. */
void clank_headers_name_done(clank_request_t *r);
void clank_headers_value_done(clank_request_t *r);

#endif
