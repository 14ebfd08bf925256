/* The HTTP/1.1 server as a library, in the manner of llhttp and libuv: it
   accepts, parses (llhttp, strict, plus SPEC §13's own checks), limits,
   buffers and writes. What a request means is its user's business: the
   server hands events up through a handler table, with an opaque pointer on
   the server and a data slot on every connection. It knows no Lua. */
#ifndef CLANK_HTTP_SERVER_H
#define CLANK_HTTP_SERVER_H

#include <llhttp.h>
#include <uv.h>

#include "http/request.h"
#include "util/buf.h"
#include "util/log.h"

#define CLANK_READ_CHUNK (64 * 1024) /* one read */

typedef struct clank_server_s clank_server_t;
typedef struct clank_conn_s clank_conn_t;

typedef struct clank_http_limits_s {
  uint64_t header_ms; /* header block, from the request's first byte */
  uint64_t body_ms;   /* body, from the end of the header block */
  uint64_t idle_ms;   /* idle keep-alive connection */
  uint64_t drain_ms;  /* discarding an unread body after an early answer */
  uint64_t write_ms;  /* output pending and not a byte of it taken: close */
  unsigned max_connections;
} clank_http_limits_t;

/* What on_head decides. */
enum {
  CLANK_HTTP_ANSWERED,  /* the handler answered at the header block: the body is discarded */
  CLANK_HTTP_READ_BODY, /* read the body; on_message runs at the end of the message */
};

typedef struct clank_http_handler_s {
  /* The header block is complete and passed the server's checks. May answer
     at once (an early answer) or set a body limit; returns the enum above. */
  int (*on_head)(clank_conn_t *c);
  /* The body grew past the limit on_head set: answer it (NULL: 413 text). */
  void (*on_body_too_large)(clank_conn_t *c);
  /* The message is complete. Returns 1 while the answer is still coming
     (clank_conn_resume when it has been written), 0 when it was written. */
  int (*on_message)(clank_conn_t *c);
  /* The connection closes: let go of what c->data holds. */
  void (*on_close)(clank_conn_t *c);
  /* Streamed output fell below the low mark after clank_conn_stream_full
     said it was full. */
  void (*on_writable)(clank_conn_t *c);
  /* A connection clank_conn_detach marked is ready to leave: nothing is owed
     on it and it reads no more. `bytes` is the request it stopped at (its
     head rebuilt, then the bytes read past it), for whoever adopts the socket
     (clank_conn_adopt); the handler may take its memory (zero it then). It
     closes c (clank_conn_close) once the socket is handed on. */
  void (*on_detach)(clank_conn_t *c, clank_buf_t *bytes);
} clank_http_handler_t;

/* A connection that left HTTP (an upgrade, RFC 9110 §7.8). */
typedef struct clank_upgrade_handler_s {
  /* Bytes from the peer; the upgraded protocol parses them. */
  void (*on_data)(clank_conn_t *c, const char *data, size_t len);
  /* The deadline set with clank_conn_deadline passed. */
  void (*on_timeout)(clank_conn_t *c);
  /* The peer closed its side (or the read failed); the connection closes next. */
  void (*on_eof)(clank_conn_t *c);
  /* Output drained below the low mark after being over the high one. */
  void (*on_drain)(clank_conn_t *c);
} clank_upgrade_handler_t;

/* Called once output handed over by reference is no longer needed: written,
   or its connection closed. */
typedef void (*clank_release_fn)(void *ud, uintptr_t token);

/* Output queued ahead of c->out: a buffer moved out of it, or bytes the
   writer does not own (a body by reference). */
typedef struct clank_piece_s {
  struct clank_piece_s *next;
  const char *data;
  size_t len, off; /* off: how much of it was written */
  clank_buf_t own; /* the bytes, when they are the writer's */
  clank_release_fn release;
  void *ud;
  uintptr_t token;
} clank_piece_t;

typedef enum {
  CLANK_PHASE_IDLE,     /* between requests */
  CLANK_PHASE_HEAD,     /* reading the header block */
  CLANK_PHASE_BODY,     /* reading a body the handler will get */
  CLANK_PHASE_DRAIN,    /* discarding the body of an early answer */
  CLANK_PHASE_HANDLER,  /* the answer is coming; input is only buffered */
  CLANK_PHASE_UPGRADED, /* bytes go to the upgrade handler */
} clank_phase_t;

struct clank_conn_s {
  uv_tcp_t tcp;
  uv_timer_t timer;
  llhttp_t parser;
  clank_server_t *server;
  void *data; /* the user's, conn_data_size bytes zeroed at accept */
  clank_conn_t *prev, *next;
  clank_buf_t in;                    /* received, not yet parsed */
  clank_buf_t out;                   /* responses not yet handed to a write */
  clank_buf_t wbuf;                  /* the write in flight */
  clank_piece_t *queue, *queue_tail; /* written before out, in order */
  size_t queued;                     /* bytes left in the queue */
  size_t wslice;                     /* bytes of the write in flight (a slice) */
  size_t woff;                       /* how much of wbuf was written */
  uint64_t write_by;                 /* loop time the write in flight must end by; 0: none */
  uint64_t read_ns;                  /* uv_hrtime when the oldest unparsed input was read */
  uv_write_t wreq;
  uv_shutdown_t shutdown;
  clank_request_t req;
  clank_phase_t phase;
  const clank_upgrade_handler_t *upgrade;
  size_t body_limit;  /* set by on_head; 0: the 1 MiB cap */
  size_t body_max;    /* set by on_head: the hard cap (413 text) instead of 1 MiB; 0: that */
  size_t drained;     /* body bytes discarded after an early answer */
  size_t head_mark;   /* where the response being written started in out */
  size_t body_bytes;  /* the answer's body length, for the access log */
  uint64_t deadline;  /* loop time the current phase must end by; 0: none */
  uint64_t armed_for; /* when the timer fires; 0: not running */
  int status;         /* the answer being written */
  int open_handles;   /* freed when both handles closed and nothing holds it */
  int holds;          /* clank_conn_hold: a user still points at it */
  unsigned writing : 1;
  unsigned closing : 1;     /* handles are closing or closed */
  unsigned close_after : 1; /* close once the output is written */
  unsigned reading : 1;
  unsigned eof : 1;
  unsigned answered : 1;    /* the current request has had its answer */
  unsigned undrainable : 1; /* its unread body is too large to discard */
  unsigned stop_parsing : 1;
  unsigned chunked : 1;           /* the answer streams in chunks */
  unsigned draining : 1;          /* over the output high mark: tell on_drain when below */
  unsigned lingering : 1;         /* closing gracefully: input is dropped, output ends */
  unsigned shut : 1;              /* the write side was shut down */
  unsigned from_queue : 1;        /* the write in flight is a slice of the queue's head */
  unsigned over_cap : 1;          /* accepted past max_connections: gets a 503 */
  unsigned want_writable : 1;     /* a producer waits for on_writable */
  unsigned close_on_shut : 1;     /* lingering with nothing more to read: close at our FIN */
  unsigned detaching : 1;         /* clank_conn_detach: leaves once nothing is owed */
  unsigned flush_queued : 1;      /* on the server's flush list (clank_conn_flush_later) */
  unsigned input_held : 1;        /* clank_conn_hold_input: an upgraded protocol is behind */
  struct clank_file_body_s *file; /* a file being sent as the answer's body */
  clank_conn_t *flush_next;       /* the next on that list */
};

struct clank_server_s {
  uv_loop_t *loop;
  uv_tcp_t listener; /* bound and listening; accepted from by hand (poll) */
  uv_poll_t accepting;
  uv_timer_t pause; /* accepting paused: no descriptor to shed the excess with */
  uv_timer_t shed_log;
  int reserve_fd;                /* kept for shedding connections when descriptors run out */
  int out_of_fds;                /* accept failed for want of one, and none was accepted since */
  uint64_t shed, shed_logged_at; /* connections shed since the last log line, and when */
  int listening;
  unsigned char addr[16]; /* the address bound, an IPv4 one as ::ffff:a.b.c.d */
  int reuseport; /* set before listening: SO_REUSEPORT, so sibling workers share the port */
  clank_http_limits_t limits;
  const clank_http_handler_t *handler;
  void *data;            /* the user's */
  size_t conn_data_size; /* bytes for each connection's data slot */
  unsigned nconns;
  clank_conn_t *conns;
  llhttp_settings_t settings;
  char *read_buf;   /* every connection reads here first (one loop, one read at a time) */
  clank_log_t *log; /* the access log */
  char date[40];
  uint64_t date_sec;
  uint64_t id_prefix, id_next; /* request ids made up: a random prefix and a count */
  int stopping;
  /* Connections whose answers wait for the loop iteration's reads to end:
     written together, so that one wake-up of a client serves several. Flushed
     after the poll's callbacks, and before the next poll for anything queued
     after those. */
  clank_conn_t *flush_first;
  uv_check_t flush_check;
  uv_prepare_t flush_prepare;
  int flush_open;                       /* the two handles are open and may be started */
  void (*on_drained)(clank_server_t *); /* stopping, and the last connection is gone */
  /* Every answer as it is logged (status, ns since the request's first
     byte); the user's counters. NULL: none. */
  void (*on_answered)(clank_conn_t *c, int status, uint64_t ns);
};

int clank_server_listen(clank_server_t *s, uv_loop_t *loop, const char *host, int port,
                        int *bound_port, char *err, size_t errlen);
/* Readies a server that does not listen: its connections come from
   clank_conn_open (fuzzers and tests drive the server without a listener). */
void clank_server_init(clank_server_t *s, uv_loop_t *loop);
/* Stops accepting; idle connections close now, busy ones after their response. */
void clank_server_stop(clank_server_t *s);
/* Closes every connection at once (the stop deadline). */
void clank_server_close_all(clank_server_t *s);
/* Frees connections a user still held when the loop ended. */
void clank_server_free_all(clank_server_t *s);
const char *clank_server_date(clank_server_t *s);

/* ---- connections (connection.c) ---- */

/* Takes an accepted socket (non-blocking) as a new connection. */
void clank_conn_accept(clank_server_t *s, int fd);
/* A connection over a stream socket connected already (one end of a
   socketpair): it takes sock on success; 0 or a libuv error. */
int clank_conn_open(clank_server_t *s, uv_os_sock_t sock);
void clank_conn_close(clank_conn_t *c);
/* The peer's IP address as text ("127.0.0.1", "::1"; an IPv4 peer on an
   IPv6 socket as IPv4) in out (INET6_ADDRSTRLEN bytes will do); returns
   its length, or 0 when it cannot be read. */
size_t clank_conn_peer_address(clank_conn_t *c, char *out, size_t outlen);
/* Writes what c owes once the loop iteration's reads are done; at once when
   the connection is ending or the server no longer defers (stopping). */
void clank_conn_flush_later(clank_conn_t *c);
/* Writes what every deferred connection owes (the server's loop hooks, and
   its stop). */
void clank_server_flush_deferred(clank_server_t *s);
/* From on_head: the connection leaves this server at this request boundary
   (another process serves it from here). Once earlier answers are written,
   the handler's on_detach gets it; return CLANK_HTTP_ANSWERED. */
void clank_conn_detach(clank_conn_t *c);
/* A connection handed over by another process: the socket is taken from
   the IPC pipe (uv_accept) and `bytes` (what on_detach gave there) are
   parsed before anything read from it. NULL when it could not be taken. */
clank_conn_t *clank_conn_adopt(clank_server_t *s, uv_stream_t *ipc, const char *bytes, size_t len);
/* A user keeps pointing at c after on_close: its memory stays until released. */
void clank_conn_hold(clank_conn_t *c);
void clank_conn_release(clank_conn_t *c);
/* Sends what was written to c->out. */
void clank_conn_flush(clank_conn_t *c);
/* The answer on_message promised has been written: go on parsing. */
void clank_conn_resume(clank_conn_t *c);
/* Whether the connection survives the current answer. */
int clank_conn_keep_alive(clank_conn_t *c);
/* Bytes written but not yet taken by the kernel. */
size_t clank_conn_pending(const clank_conn_t *c);

/* ---- the response writer (one for every answer) ----
   begin → header* → body | stream_start (chunk*, stream_end); the status
   line, date, connection, content-length or chunking, HEAD and the access
   log are the writer's. */
/* The request's x-request-id (SPEC §13): the client's when it is 1-64 of
   A-Za-z0-9._-, else one made up; NUL-terminated, fixed for the request. */
const char *clank_conn_request_id(clank_conn_t *c);
void clank_conn_begin(clank_conn_t *c, int status);
/* Returns 0, or -1 (nothing written) for a name that is not an RFC 9110
   token, a value that is not a field-value, or a header the writer owns
   (content-length, transfer-encoding, connection). */
int clank_conn_header(clank_conn_t *c, const char *name, size_t name_len, const char *value,
                      size_t value_len);
/* A header line known to be valid ("name: value\r\n"...). */
void clank_conn_header_raw(clank_conn_t *c, const char *lines);
/* Drops what begin and header wrote (the answer turned out bad). */
void clank_conn_cancel(clank_conn_t *c);
void clank_conn_body(clank_conn_t *c, const char *body, size_t len);
/* The body, without copying it when it is large: the writer keeps pointing
   at body until release(ud, token) (once, possibly before returning). */
void clank_conn_body_ref(clank_conn_t *c, const char *body, size_t len, clank_release_fn release,
                         void *ud, uintptr_t token);
/* Whether output queued by piece pointers with this ud is still pending. */
int clank_conn_refers_to(const clank_conn_t *c, const void *ud);
void clank_conn_stream_start(clank_conn_t *c);
void clank_conn_stream_chunk(clank_conn_t *c, const char *data, size_t len);
void clank_conn_stream_end(clank_conn_t *c);
/* 1 when the connection holds CLANK_STREAM_HIGH of unsent output: the
   producer should wait for the handler's on_writable. */
int clank_conn_stream_full(clank_conn_t *c);
#define CLANK_STREAM_HIGH (1024 * 1024)
/* Ends the head with content-length: len and sends len bytes of the open
   file fd from offset as the body (HEAD: none), read in chunks off the loop
   as the output drains. The writer owns fd from here (it closes it). Call
   from on_message and return what it returns: 1 while the body is coming
   (the connection resumes once it is sent), 0 when nothing more is owed. */
int clank_conn_body_file(clank_conn_t *c, uv_file fd, uint64_t offset, uint64_t len);
/* A whole text/plain answer. */
void clank_conn_text(clank_conn_t *c, int status, const char *body);
/* A whole answer with a content type. */
void clank_conn_answer(clank_conn_t *c, int status, const char *type_lines, const char *body,
                       size_t len);

/* Header validation (RFC 9110 §5.1, §5.5). */
int clank_http_token(const char *s, size_t n);
int clank_http_field_value(const char *s, size_t n);

/* ---- upgrades ---- */

/* From on_message: answers 101 Switching Protocols to `protocol` with the
   extra header lines given, and the connection leaves HTTP. Bytes already
   read past the request go to h->on_data once on_message returns. From
   on_head (return CLANK_HTTP_ANSWERED) only for a request without a body. */
void clank_conn_upgrade(clank_conn_t *c, const clank_upgrade_handler_t *h, const char *protocol,
                        const char *header_lines);
/* Raw bytes on an upgraded connection. */
void clank_conn_write(clank_conn_t *c, const char *data, size_t len);
/* The same, held until clank_conn_flush: the pieces of one message (a
   frame's head and its payload) leave in one write, not one each. */
void clank_conn_append(clank_conn_t *c, const char *data, size_t len);
/* Ends an upgraded connection gracefully: once its output is written the
   write side is shut down, and input is read and dropped until the peer
   closes or ms pass; then it closes. A close frame thus reaches a peer that
   is still sending (closing at once would reset the connection). */
void clank_conn_linger(clank_conn_t *c, uint64_t ms);
/* Backpressure for an upgraded protocol whose consumer is behind: hold 1
   stops reading the socket (the peer's sends wait in TCP), 0 reads again. */
void clank_conn_hold_input(clank_conn_t *c, int hold);
/* Calls on_timeout after ms (0: no deadline). */
void clank_conn_deadline(clank_conn_t *c, uint64_t ms);

#endif
