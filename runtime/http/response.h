/* The response writer's parts: status reasons. The writer itself is
   declared in http/server.h (clank_conn_begin ...). */
#ifndef CLANK_RESPONSE_H
#define CLANK_RESPONSE_H

#include <stddef.h>


const char *clank_status_reason(int status);

#endif
