/* Client TLS in memory over OpenSSL (tls.h): contexts (the CA store and
   verification) and sessions, each freed by its own function. */
#include "http/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>

struct clank_tls_s {
  SSL *ssl;
  BIO *in, *out; /* ciphertext from the peer, and for it */
  char error[256];
};

clank_tls_ctx_t *clank_tls_ctx_new(const char *ca_file, int verify, char *err, size_t errlen) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == NULL) {
    snprintf(err, errlen, "cannot make a TLS context");
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  if (verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    int ok = ca_file ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL)
                     : SSL_CTX_set_default_verify_paths(ctx);
    if (!ok) {
      unsigned long e = ERR_get_error();
      snprintf(err, errlen, "cannot load CA certificates%s%s: %s", ca_file ? " from " : "",
               ca_file ? ca_file : "", e ? ERR_reason_error_string(e) : "unknown error");
      ERR_clear_error();
      SSL_CTX_free(ctx);
      return NULL;
    }
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
  }
  return ctx;
}

void clank_tls_ctx_free(clank_tls_ctx_t *ctx) { SSL_CTX_free(ctx); }

clank_tls_t *clank_tls_new(clank_tls_ctx_t *ctx, const char *host) {
  clank_tls_t *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  t->ssl = SSL_new(ctx);
  t->in = BIO_new(BIO_s_mem());
  t->out = BIO_new(BIO_s_mem());
  if (t->ssl == NULL || t->in == NULL || t->out == NULL) {
    if (t->ssl) SSL_free(t->ssl);
    BIO_free(t->in);
    BIO_free(t->out);
    free(t);
    return NULL;
  }
  BIO_set_mem_eof_return(t->in, -1);  /* empty means "more to come", not EOF */
  SSL_set_bio(t->ssl, t->in, t->out); /* the session owns both from here */
  SSL_set_connect_state(t->ssl);
  /* SNI is for names only (RFC 6066 §3); an IP literal is checked as one. */
  ASN1_OCTET_STRING *ip = a2i_IPADDRESS(host);
  if (ip) {
    ASN1_OCTET_STRING_free(ip);
    if (SSL_get_verify_mode(t->ssl) & SSL_VERIFY_PEER)
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), host);
  } else {
    SSL_set_tlsext_host_name(t->ssl, host);
    if (SSL_get_verify_mode(t->ssl) & SSL_VERIFY_PEER) SSL_set1_host(t->ssl, host);
  }
  return t;
}

void clank_tls_free(clank_tls_t *t) {
  if (t == NULL) return;
  SSL_free(t->ssl);
  free(t);
}

int clank_tls_feed(clank_tls_t *t, const char *data, size_t len) {
  return BIO_write(t->in, data, (int)len) == (int)len ? 0 : -1;
}

static int failed(clank_tls_t *t, int rc) {
  int e = SSL_get_error(t->ssl, rc);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
  if (e == SSL_ERROR_ZERO_RETURN) return -2;
  long v = SSL_get_verify_result(t->ssl);
  unsigned long err = ERR_get_error();
  if (v != X509_V_OK)
    snprintf(t->error, sizeof t->error, "certificate verify failed: %s",
             X509_verify_cert_error_string(v));
  else if (err)
    snprintf(t->error, sizeof t->error, "%s", ERR_reason_error_string(err));
  else if (e == SSL_ERROR_SYSCALL)
    snprintf(t->error, sizeof t->error, "connection closed during TLS");
  else
    snprintf(t->error, sizeof t->error, "TLS error %d", e);
  ERR_clear_error();
  return -1;
}

int clank_tls_handshake(clank_tls_t *t) {
  int rc = SSL_do_handshake(t->ssl);
  if (rc == 1) return 1;
  int r = failed(t, rc);
  return r == -2 ? -1 : r;
}

int clank_tls_read(clank_tls_t *t, char *buf, size_t cap) {
  int rc = SSL_read(t->ssl, buf, (int)cap);
  if (rc > 0) return rc;
  return failed(t, rc);
}

int clank_tls_write(clank_tls_t *t, const char *data, size_t len) {
  if (len == 0) return 0;
  int rc = SSL_write(t->ssl, data, (int)len);
  return rc == (int)len ? 0 : -1;
}

void clank_tls_take(clank_tls_t *t, clank_buf_t *out) {
  char *p;
  long n = BIO_get_mem_data(t->out, &p);
  if (n <= 0) return;
  clank_buf_append(out, p, (size_t)n);
  (void)BIO_reset(t->out);
}

const char *clank_tls_error(clank_tls_t *t) { return t->error[0] ? t->error : "TLS failed"; }
