/* The response writer's parts: status reasons. The writer itself is
   declared in http/server.h (clank_conn_begin ...). */
#ifndef CLANK_RESPONSE_H
#define CLANK_RESPONSE_H

#include <stddef.h>

#include "http/server.h"

const char *clank_status_reason(int status);
/* The 101 answer of an upgrade (connection.c's clank_conn_upgrade). */
/* Ends the head with content-length: len; the body follows by other means
   (connection.c's file body). */
void clank_conn_body_length(clank_conn_t *c, uint64_t len);
void clank_conn_switch(clank_conn_t *c, const char *protocol, const char *header_lines);
/* Queues len bytes at data after what is written so far, without copying
   them; release(ud, token) once they are written or the connection closes
   (at once when it cannot take them). */
void clank_conn_out_ref(clank_conn_t *c, const char *data, size_t len, clank_release_fn release,
                        void *ud, uintptr_t token);

#endif
