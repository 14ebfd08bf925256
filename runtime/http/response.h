/* The response writer's parts: status reasons. The writer itself is
   declared in http/server.h (clank_conn_begin ...). */
#ifndef CLANK_RESPONSE_H
#define CLANK_RESPONSE_H

#include <stddef.h>

#include "http/server.h"

const char *clank_status_reason(int status);
/* The 101 answer of an upgrade (connection.c's clank_conn_upgrade). */
void clank_conn_switch(clank_conn_t *c, const char *protocol, const char *header_lines);

#endif
