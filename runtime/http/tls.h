/* TLS for the client, in memory: OpenSSL reads ciphertext from what the
   caller feeds in and leaves ciphertext for the caller to write, so any
   uv_stream_t carries it. Certificates and the host name are verified
   against the system store (or a CA file); SNI is sent; TLS >= 1.2. */
#ifndef CLANK_HTTP_TLS_H
#define CLANK_HTTP_TLS_H

#include <stddef.h>

#include "util/buf.h"

typedef struct ssl_ctx_st clank_tls_ctx_t; /* OpenSSL's SSL_CTX */
typedef struct clank_tls_s clank_tls_t;

/* A context verifying peers against ca_file (NULL: the system store), or
   verifying nothing when verify is 0. NULL with a message in err on failure. */
clank_tls_ctx_t *clank_tls_ctx_new(const char *ca_file, int verify, char *err, size_t errlen);
void clank_tls_ctx_free(clank_tls_ctx_t *ctx);

/* A client session for host (SNI and, when the context verifies, the name checked). */
clank_tls_t *clank_tls_new(clank_tls_ctx_t *ctx, const char *host);
void clank_tls_free(clank_tls_t *t);

/* Ciphertext from the peer. Returns 0, or -1 when memory runs out. */
int clank_tls_feed(clank_tls_t *t, const char *data, size_t len);
/* Drives the handshake: 1 done, 0 more bytes needed, -1 failed (see clank_tls_error). */
int clank_tls_handshake(clank_tls_t *t);
/* Plaintext received: > 0 bytes, 0 more bytes needed, -1 failed, -2 the peer closed. */
int clank_tls_read(clank_tls_t *t, char *buf, size_t cap);
/* Encrypts plaintext to send. Returns 0 or -1. */
int clank_tls_write(clank_tls_t *t, const char *data, size_t len);
/* Moves ciphertext to send onto out. */
void clank_tls_take(clank_tls_t *t, clank_buf_t *out);
/* Why the last call failed. */
const char *clank_tls_error(clank_tls_t *t);

#endif
