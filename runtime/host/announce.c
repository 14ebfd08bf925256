/* What clank-run logs on start besides its start-up line (the manifest, the
   MCP endpoint, the inspector, the manual) and the hint for a port that is taken. Owns
   nothing: it formats and logs. */
#include "host/announce.h"

#include <stdio.h>
#include <string.h>

static int is_loopback(const char *host) {
  return strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
         strcmp(host, "localhost") == 0;
}

void clank_announce_urls(clank_log_t *log, const clank_options_t *o, int port) {
  const char *open = strchr(o->host, ':') ? "[" : "";
  const char *close = *open ? "]" : "";
  clank_log_msg(log, "info", "manifest: http://%s%s%s:%d/manifest", open, o->host, close, port);
  clank_log_msg(log, "info", "mcp: http://%s%s%s:%d/__clank/mcp", open, o->host, close, port);
  if (o->inspector_host) {
    const char *iopen = strchr(o->inspector_host, ':') ? "[" : "";
    clank_log_msg(log, "info", "inspector: http://%s%s%s:%d/__clank/inspector", iopen,
                  o->inspector_host, *iopen ? "]" : "", port);
    clank_log_msg(log, "info", "docs: http://%s%s%s:%d/__clank/docs", iopen, o->inspector_host,
                  *iopen ? "]" : "", port);
  } else if (is_loopback(o->host)) {
    clank_log_msg(log, "info", "inspector: http://%s%s%s:%d/__clank/inspector", open, o->host,
                  close, port);
    clank_log_msg(log, "info", "docs: http://%s%s%s:%d/__clank/docs", open, o->host, close, port);
  }
  if (o->development)
    clank_log_msg(log, "info",
                  "development: errors show in the open pages with their tracebacks "
                  "(--production turns this off)");
}

void clank_announce_listen_hint(char *err, size_t errlen) {
  size_t n = strlen(err);
  if (strstr(err, "address already in use") && n < errlen)
    snprintf(err + n, errlen - n, "%s",
             " (another process has this port: pick another with --port N, or --port 0 for any "
             "free one)");
}
