/* One HTTP/1.1 client connection, the HTTP library's second user: name
   resolution (uv_getaddrinfo), TCP, TLS (http/tls.h), a request written
   as given and its response parsed by llhttp (strict, header blocks kept
   as the server keeps them: http/headers.h). Events go up through a
   handler table, with a data slot. It knows no Lua; pooling and waiting
   belong to its user. */
#ifndef CLANK_HTTP_CLIENT_H
#define CLANK_HTTP_CLIENT_H

#include <llhttp.h>
#include <uv.h>

#include "http/request.h"
#include "http/tls.h"
#include "util/buf.h"

typedef struct clank_client_s clank_client_t;

typedef struct clank_client_handler_s {
  /* The response head is in c->res (c->status). */
  void (*on_head)(clank_client_t *c);
  /* Body bytes, decoded from chunks. */
  void (*on_body)(clank_client_t *c, const char *data, size_t len);
  /* The response ended; c->keep_alive says whether c may carry another. */
  void (*on_end)(clank_client_t *c);
  /* c failed and is closing; kind is "dns", "connect", "tls" or "protocol".
     c->stale: a reused connection the peer had closed before answering
     (the request may be sent again on a new one). */
  void (*on_error)(clank_client_t *c, const char *kind, const char *message);
} clank_client_handler_t;

struct clank_client_s {
  uv_loop_t *loop;
  uv_tcp_t tcp;
  uv_getaddrinfo_t gai;
  uv_connect_t connect_req;
  uv_write_t wreq;
  llhttp_t parser;
  llhttp_settings_t settings;
  clank_request_t res; /* the response head: headers as for a request */
  int status;
  clank_tls_ctx_t *tls_ctx; /* NULL: plain TCP (not owned) */
  clank_tls_t *tls;
  char *host;
  int port;
  struct sockaddr_storage *addrs; /* resolved, in the order they are tried */
  int naddrs, next_addr;
  clank_buf_t pending; /* the request, until the connection is ready */
  clank_buf_t out;     /* bytes for the socket */
  clank_buf_t wbuf;    /* the write in flight */
  clank_buf_t body;    /* body bytes parsed from the last read */
  char *rbuf;
  const clank_client_handler_t *handler;
  void *data;
  void (*on_idle_close)(clank_client_t *c);
  uint64_t idle_since; /* loop time it went idle (its pool's) */
  clank_client_t *next;
  int inflight;            /* handles and requests whose callbacks are still due */
  unsigned ready : 1;      /* connected (and TLS done) */
  unsigned connecting : 1; /* resolving, connecting or in the handshake */
  unsigned closing : 1;
  unsigned writing : 1;
  unsigned paused : 1;    /* the user reads slower than the peer sends */
  unsigned head_only : 1; /* the request was HEAD: no body follows */
  unsigned got_head : 1;  /* the parser saw the final head */
  unsigned told_head : 1; /* on_head ran */
  unsigned complete : 1;  /* the parser saw the end of the response */
  unsigned informational : 1;
  unsigned got_bytes : 1; /* any response byte came */
  unsigned used : 1;      /* it carried a response before */
  unsigned stale : 1;
  unsigned keep_alive : 1;
  unsigned idle : 1; /* between requests: any input or EOF closes it */
};

/* A connection to host:port, over TLS when tls_ctx is given; NULL when
   memory runs out. Nothing happens until clank_client_send. */
clank_client_t *clank_client_new(uv_loop_t *loop, const char *host, int port,
                                 clank_tls_ctx_t *tls_ctx);
/* Sends the request (connecting first when needed); its response's events
   go to h. head_only: the request was HEAD. */
void clank_client_send(clank_client_t *c, const clank_client_handler_t *h, void *data,
                       const char *request, size_t len, int head_only);
/* Stops or restarts reading (a reader slower than the peer). */
void clank_client_pause(clank_client_t *c, int paused);
/* Between requests: no handler; it closes itself if the peer sends or
   closes, and then calls on_close (its owner's, with c->data = data). */
void clank_client_idle(clank_client_t *c, void (*on_close)(clank_client_t *c), void *data);
/* Closes; its memory goes once libuv has given back its handles. */
void clank_client_close(clank_client_t *c);

#endif
