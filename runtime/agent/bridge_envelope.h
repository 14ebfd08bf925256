/* The bridge's failure envelope (SPEC §5), written in one place
   (bridge_envelope.c) for the bridge and for the host's own answers on
   agent paths: {"error":{"code":...,"message":...},"ok":false}, the bytes
   the canonical encoder writes for that table. No Lua. */
#ifndef CLANK_BRIDGE_ENVELOPE_H
#define CLANK_BRIDGE_ENVELOPE_H

#include "util/buf.h"

/* The headers every failure envelope goes with. */
#define CLANK_BRIDGE_ENVELOPE_HEADERS \
  "content-type: application/json\r\ncache-control: no-store\r\n"

/* Appends the envelope of code and message (NUL-terminated, escaped as
   canonical JSON escapes strings) to out: returns 0; or -1 when out could
   not grow, -2 when code or message is not UTF-8, out then as it was. */
int clank_bridge_envelope(clank_buf_t *out, const char *code, const char *message);
/* The same for 413 PAYLOAD_TOO_LARGE: `Request body exceeds N bytes.` */
int clank_bridge_envelope_too_large(clank_buf_t *out, long long max_bytes);

/* An envelope around an error object written by the caller: the bytes
   before it and after it. */
#define CLANK_BRIDGE_ENVELOPE_OPEN "{\"error\":"
#define CLANK_BRIDGE_ENVELOPE_CLOSE ",\"ok\":false}"

/* The envelope of the action timeout (SPEC §5 step 8: 504 TIMEOUT), as
   clank_bridge_envelope writes it, and its length. */
extern const char clank_bridge_timeout_body[];
extern const size_t clank_bridge_timeout_len;

#endif
