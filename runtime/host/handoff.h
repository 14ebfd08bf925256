/* Session ownership across workers (SPEC §13): a view session belongs to
   worker hash(ID) mod N and an MCP session to hash(Mcp-Session-Id) mod N;
   a request for one that lands elsewhere is handed to its owner, the
   socket and the bytes read so far, through the master over an IPC pipe.
   The hash is FNV-1a 64 of the ID's bytes (lua/clank/live/token.lua
   computes the same to make IDs its worker owns). */
#ifndef CLANK_HANDOFF_H
#define CLANK_HANDOFF_H

#include <stddef.h>
#include <stdint.h>

#include "http/server.h"
#include "util/buf.h"

struct clank_host_s;

/* The IPC messages between a worker and its master: this head, then len bytes. */
enum { CLANK_IPC_READY = 1, CLANK_IPC_HANDOFF = 2 };
typedef struct clank_ipc_head_s {
  uint32_t type;
  uint32_t worker; /* to the master: the target; from it: the sender */
  uint32_t len;
} clank_ipc_head_t;
#define CLANK_IPC_MAX (256 * 1024) /* a longer message is a broken peer */

uint64_t clank_fnv1a64(const char *s, size_t n);

/* Opens the worker's IPC pipe (h->worker->ipc_fd) and tells the master it is ready. */
int clank_handoff_start(struct clank_host_s *h, const char *app_name);

/* After the loop closed (the pipe with it): frees what the pipe used. */
void clank_handoff_free(struct clank_host_s *h);

/* At a request's header block: the worker that owns the session this request
   is for, or -1 when it is not one of another worker's (serve it here). */
int clank_handoff_owner(struct clank_host_s *h, const char *path, size_t path_len,
                        const clank_request_t *r, int *live);
/* Hands c to worker `owner` and returns CLANK_HTTP_ANSWERED; while that worker
   is down, answers 503 with retry-after: 1 instead, or closes the live channel
   (*live from clank_handoff_owner) with 1013. */
int clank_handoff(clank_conn_t *c, int owner, int live);
/* The server's on_detach. */
void clank_handoff_detached(clank_conn_t *c, clank_buf_t *bytes);

#endif
