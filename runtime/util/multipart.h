/* An incremental multipart/form-data parser (RFC 7578 over RFC 2046, SPEC
   §15 "Bodies"): fed the body in whatever pieces it arrives in, it hands
   each part to a callback as soon as its closing delimiter is seen, so the
   whole body never has to be held at once. It knows neither Lua nor libuv.
   Its verdicts and messages are those of the string parser it replaced:
   "Malformed multipart body: ..." for the same malformations, the first
   one found in body order. */
#ifndef CLANK_MULTIPART_H
#define CLANK_MULTIPART_H

#include <stddef.h>

#include "util/buf.h"

#define CLANK_MULTIPART_MAX_BOUNDARY 70 /* RFC 2046 §5.1.1 */

/* One complete part. Its buffers are the parser's: valid during the call. */
typedef struct clank_multipart_part_s {
  clank_buf_t name, filename, type, data; /* data: only when keep_data */
  size_t offset, length;      /* where the data is in the body, for a caller who holds it all */
  int has_filename, has_type; /* the parameter or header was there (maybe empty) */
} clank_multipart_part_t;

/* Called for each part in order; returns 0, or -1 to stop (feed returns
   CLANK_MULTIPART_NOMEM). The callback may take part->data's memory (then
   zero it). */
typedef int (*clank_multipart_part_fn)(void *ud, clank_multipart_part_t *part);

enum {
  CLANK_MULTIPART_OK = 0,
  CLANK_MULTIPART_MALFORMED = -1, /* clank_multipart_error says why */
  CLANK_MULTIPART_NOMEM = -2,     /* memory ran out, or the callback stopped it */
};

typedef struct clank_multipart_s {
  char delim[4 + CLANK_MULTIPART_MAX_BOUNDARY]; /* "\r\n--" boundary */
  unsigned char fail[4 + CLANK_MULTIPART_MAX_BOUNDARY + 1];
  size_t delim_len;
  size_t matched; /* bytes of delim matched at the end of what was read */
  size_t virt;    /* of those, how many are not part data (CRLFs of the framing) */
  int state;
  int keep_data;       /* 1 (the default): part data is gathered in part.data */
  size_t pos;          /* bytes fed so far */
  size_t data_at;      /* where the current part's data starts */
  unsigned parts;      /* parts begun */
  int pending;         /* a part's own error, told once its delimiter shows it closed */
  unsigned head_crlfs; /* progress through the "\r\n\r\n" ending the header block */
  clank_buf_t head;    /* the header block being read */
  clank_multipart_part_fn on_part;
  void *ud;
  clank_multipart_part_t part;
  char error[128];
} clank_multipart_t;

/* Returns CLANK_MULTIPART_OK, or MALFORMED for a missing or invalid boundary. */
int clank_multipart_init(clank_multipart_t *p, const char *boundary, size_t len,
                         clank_multipart_part_fn on_part, void *ud);
/* Returns CLANK_MULTIPART_OK or an error; after an error, feed returns it again. */
int clank_multipart_feed(clank_multipart_t *p, const char *data, size_t len);
/* The body ended: an error unless the closing delimiter was seen. */
int clank_multipart_finish(clank_multipart_t *p);
const char *clank_multipart_error(const clank_multipart_t *p);
void clank_multipart_free(clank_multipart_t *p);

#endif
