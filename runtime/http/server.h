/* The HTTP/1.1 server: a listener and its connections, on libuv + llhttp. */
#ifndef CLANK_SERVER_H
#define CLANK_SERVER_H

#include <llhttp.h>
#include <uv.h>

#include "http/request.h"
#include "options.h"
#include "util/buf.h"
#include "util/log.h"

typedef struct clank_server_s clank_server_t;
typedef struct clank_conn_s clank_conn_t;

typedef enum {
  CLANK_PHASE_IDLE,    /* between requests */
  CLANK_PHASE_HEAD,    /* reading the header block */
  CLANK_PHASE_BODY,    /* reading a body the handler will get */
  CLANK_PHASE_DRAIN,   /* discarding the body of an early answer */
  CLANK_PHASE_HANDLER, /* a handler runs; input is only buffered */
} clank_phase_t;

struct clank_conn_s {
  uv_tcp_t tcp;
  uv_timer_t timer;
  llhttp_t parser;
  clank_server_t *server;
  clank_conn_t *prev, *next;
  clank_buf_t in;   /* received, not yet parsed */
  clank_buf_t out;  /* responses not yet handed to a write */
  clank_buf_t wbuf; /* the write in flight */
  uv_write_t wreq;
  clank_request_t req;
  clank_phase_t phase;
  size_t drained;      /* body bytes discarded after an early answer */
  uint64_t deadline;   /* loop time the current phase must end by; 0: none */
  uint64_t armed_for;  /* when the timer fires; 0: not running */
  const void *route;   /* what the dispatcher chose at the header block */
  void *gen;           /* the generation that route belongs to, held until the handler runs */
  int lua_request;     /* registry ref (in gen's state) of the request table the header
                          block already made, 0 when none */
  size_t body_limit;   /* the bridge's maxRequestBytes; 0: the 1 MiB cap */
  void *exchange;      /* the dispatcher's in-flight handler, if any */
  int open_handles;    /* freed when both handles closed and no handler runs */
  unsigned writing : 1;
  unsigned closing : 1;     /* handles are closing or closed */
  unsigned close_after : 1; /* close once the output is written */
  unsigned reading : 1;
  unsigned eof : 1;
  unsigned answered : 1;    /* the current request has had its answer */
  unsigned undrainable : 1; /* its unread body is too large to discard */
  unsigned stop_parsing : 1;
};

struct clank_server_s {
  uv_loop_t *loop;
  uv_tcp_t listener;
  int listening;
  int loopback; /* the Host header must then be a loopback name (DNS rebinding) */
  clank_limits_t limits;
  unsigned max_connections;
  unsigned nconns;
  clank_conn_t *conns;
  llhttp_settings_t settings;
  clank_log_t *log;
  void *host; /* what the dispatcher needs (clank_host_t) */
  char date[40];
  uint64_t date_sec;
  int stopping;
  void (*on_drained)(clank_server_t *); /* stopping, and the last connection is gone */
};

int clank_server_listen(clank_server_t *s, uv_loop_t *loop, const char *host, int port,
                        int *bound_port, char *err, size_t errlen);
/* Stops accepting; idle connections close now, busy ones after their response. */
void clank_server_stop(clank_server_t *s);
/* Closes every connection at once (the stop deadline). */
void clank_server_close_all(clank_server_t *s);
const char *clank_server_date(clank_server_t *s);

/* connection.c */
void clank_conn_accept(clank_server_t *s);
void clank_conn_close(clank_conn_t *c);
/* Output written by the dispatcher goes to c->out; this sends it. */
void clank_conn_flush(clank_conn_t *c);
/* The dispatcher's async handler has answered (or failed): go on parsing. */
void clank_conn_handler_done(clank_conn_t *c);
/* Forgets the connection's handler without resuming it (its generation is
   being dropped); frees the connection if it was only waiting for that. */
void clank_conn_detach(clank_conn_t *c);
/* Appends a plain-text answer for the current request and decides whether the
   connection survives it. */
void clank_conn_answer_text(clank_conn_t *c, int status, const char *body, int close);
/* The bridge's failure envelope {"error":{"code","message"},"ok":false}. */
void clank_conn_answer_failure(clank_conn_t *c, int status, const char *code, const char *message,
                               int close);
/* MCP's 403 for a foreign Host (SPEC §6): a JSON-RPC error. */
void clank_conn_answer_rpc_forbidden(clank_conn_t *c);
int clank_conn_keep_alive(clank_conn_t *c);

#endif
