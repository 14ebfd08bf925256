/* What clank-run tells on start besides its start-up line (SPEC §2 keeps
   stdout to that line, so these go to the log on stderr), and the hint for a
   port that is taken. */
#ifndef CLANK_HOST_ANNOUNCE_H
#define CLANK_HOST_ANNOUNCE_H

#include <stddef.h>

#include "options.h"
#include "util/log.h"

/* One log line each: the manifest, the MCP endpoint and, where it answers,
   the inspector (loopback, or --inspector HOST). */
void clank_announce_urls(clank_log_t *log, const clank_options_t *o, int port);

/* Appends "; try --port 0 ..." to a listen error when the port is taken. */
void clank_announce_listen_hint(char *err, size_t errlen);

#endif
