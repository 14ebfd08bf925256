/* What the harnesses that drive the real server share (http_request.c,
   live_frames.c): the host, set up once with an app as clank-run loads it,
   and a client at the other end of an AF_UNIX socketpair given to the server
   with clank_conn_open, read while the harness turns the loop. No listener
   and no network. */
#ifndef CLANK_FUZZ_HARNESS_HOST_H
#define CLANK_FUZZ_HARNESS_HOST_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "host/host.h"
#include "util/buf.h"

#define HARNESS_MAX_TURNS 20000 /* loop iterations one input may take before it is a hang */

typedef struct harness_client_s {
  int fd;
  clank_buf_t got; /* everything the server sent */
  int eof;
  unsigned turns;
} harness_client_t;

/* Loads the app (CLANK_FUZZ_APP, else default_app) into a host of its own,
   with short time limits; "fuzz/NAME" names the harness in messages. */
clank_host_t *harness_host(const char *name, const char *default_app);
/* Prints what, and what the server sent, then aborts: a finding. */
void harness_fail(const char *what, const char *out, size_t len) __attribute__((noreturn));
/* A new connection to h; the client's end is non-blocking. */
void harness_connect(clank_host_t *h, harness_client_t *cl);
/* Reads what the server sent so far. */
void harness_read(harness_client_t *cl);
/* One loop iteration, then what the server wrote (a hang past the turn limit fails). */
void harness_turn(clank_host_t *h, harness_client_t *cl, uv_run_mode mode);
/* Writes n bytes, turning the loop while the server reads them. */
void harness_send(clank_host_t *h, harness_client_t *cl, const uint8_t *p, size_t n);
/* Shuts the client's write side and turns the loop until the server let go
   of every connection; the server must have closed its side. */
void harness_finish(clank_host_t *h, harness_client_t *cl);
/* The first occurrence of what in s[0..n), or NULL. */
const char *harness_find(const char *s, size_t n, const char *what);

#endif
