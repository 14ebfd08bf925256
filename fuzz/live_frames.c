/* libFuzzer: a sequence of WebSocket frames into a live session (SPEC §11,
   issue 26) over fuzz/app/live.lua. Each input loads the page (a fresh
   session token), opens the session's live channel on a connection of its
   own and sends the frames the input describes: text, continuation, binary,
   close, ping and pong frames, fragmented or not, with reserved bits, unmasked
   or as raw bytes, and events whose value crosses the 64 KiB and 1 MiB limits.
   The server must answer 101, then send only whole, unmasked frames with valid
   opcodes (text frames whole JSON objects in UTF-8, nothing after a close
   frame, close codes from the set the runtime uses or the client's own close
   code echoed, as RFC 6455 §5.5.1 has it), close its side once the
   client shut its own, free the channel, and keep the app under its memory
   cap; no crash, no sanitizer report. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness_host.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BIG_MAX (1100u * 1024u) /* a big event's value: past the 1 MiB message limit */

static clank_host_t *host;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  host = harness_host("fuzz/live_frames", CLANK_FUZZ_LIVE_APP);
  return 0;
}

/* ---- the session ---- */

static void send_text(harness_client_t *cl, const char *s) {
  harness_send(host, cl, (const uint8_t *)s, strlen(s));
}

/* A fresh session id from the page: the token in data-clank-session. */
static void session_id(char *id, size_t cap) {
  harness_client_t page;
  harness_connect(host, &page);
  send_text(&page, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  harness_finish(host, &page);
  static const char attr[] = "data-clank-session=\"";
  const char *at = harness_find(page.got.data, page.got.len, attr);
  if (at == NULL) harness_fail("the page has no session", page.got.data, page.got.len);
  at += sizeof attr - 1;
  const char *end = memchr(at, '"', (size_t)(page.got.data + page.got.len - at));
  if (end == NULL || (size_t)(end - at) >= cap)
    harness_fail("the session id is cut", page.got.data, page.got.len);
  memcpy(id, at, (size_t)(end - at));
  id[end - at] = '\0';
  close(page.fd);
  clank_buf_free(&page.got);
}

/* ---- the client's frames ---- */

/* One frame: FIN and RSV1 as asked, the payload masked with a fixed key
   unless unmasked (which the server must refuse). */
static void frame(clank_buf_t *out, int fin, int rsv, int opcode, int masked, const char *p,
                  size_t n) {
  unsigned char head[14];
  size_t k = 0;
  head[k++] = (unsigned char)((fin ? 0x80 : 0) | (rsv ? 0x40 : 0) | (opcode & 0x0F));
  unsigned char m = masked ? 0x80 : 0;
  if (n < 126) {
    head[k++] = (unsigned char)(m | n);
  } else if (n < 65536) {
    head[k++] = m | 126;
    head[k++] = (unsigned char)(n >> 8);
    head[k++] = (unsigned char)n;
  } else {
    head[k++] = m | 127;
    for (int i = 7; i >= 0; i--) head[k++] = (unsigned char)((uint64_t)n >> (8 * i));
  }
  static const unsigned char key[4] = {0x5a, 0x13, 0xc7, 0x81};
  if (masked) memcpy(head + k, key, 4), k += 4;
  clank_buf_append(out, (const char *)head, k);
  size_t at = out->len;
  clank_buf_append(out, p, n);
  if (masked)
    for (size_t i = 0; i < n; i++) out->data[at + i] ^= (char)key[i & 3];
}

/* An input event whose value is n bytes: past the value limit (64 KiB), and
   for the largest n past the message limit (1 MiB). */
static void big_event(clank_buf_t *out, size_t n) {
  clank_buf_t msg = {0};
  clank_buf_appends(
      &msg, "{\"t\":\"event\",\"seq\":9,\"v\":1,\"key\":\"0.1\",\"type\":\"input\",\"value\":\"");
  for (size_t i = 0; i < n; i++) clank_buf_appendc(&msg, "abc"[i % 3]);
  clank_buf_appends(&msg, "\"}");
  frame(out, 1, 0, 1, 1, msg.data, msg.len);
  clank_buf_free(&msg);
}

/* The close codes the client sent, which the server may echo: those of its
   close frames, and any valid code once raw bytes (which may hold a close
   frame of their own) were sent. */
typedef struct {
  unsigned codes[64];
  size_t ncodes;
  int raw;
} client_closes_t;

/* The input as frames: a control byte (bits 0-2: the kind, 3: not FIN, 4:
   RSV1, 5: unmasked, 6 and 7 both: the payload as raw bytes), a 16-bit
   length, then that much payload (what is left, when less). */
static void frames_of(clank_buf_t *out, const uint8_t *p, size_t size, client_closes_t *sent) {
  static const int opcodes[8] = {1, 1, 0, 2, 8, 9, 10, 1};
  const uint8_t *end = p + size;
  while (end - p >= 3) {
    uint8_t ctl = p[0];
    size_t n = (size_t)p[1] | (size_t)p[2] << 8;
    p += 3;
    if (n > (size_t)(end - p)) n = (size_t)(end - p);
    int kind = ctl & 7;
    if ((ctl & 0xC0) == 0xC0)
      clank_buf_append(out, (const char *)p, n), sent->raw = 1;
    else if (kind == 7)
      big_event(out, n * 32 > BIG_MAX ? BIG_MAX : n * 32);
    else
      frame(out, !(ctl & 0x08), ctl & 0x10, opcodes[kind], !(ctl & 0x20), (const char *)p, n);
    if (kind == 4 && n >= 2 && sent->ncodes < sizeof sent->codes / sizeof sent->codes[0])
      sent->codes[sent->ncodes++] = (unsigned)p[0] << 8 | p[1];
    p += n;
  }
}

/* ---- checking what the server sent ---- */

/* Well-formed UTF-8 sequences (lead and continuation bytes; enough to catch a
   cut or spliced character). */
static int utf8_valid(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    size_t k;
    if (c < 0x80)
      k = 0;
    else if (c >= 0xC2 && c < 0xE0)
      k = 1;
    else if (c >= 0xE0 && c < 0xF0)
      k = 2;
    else if (c >= 0xF0 && c < 0xF5)
      k = 3;
    else
      return 0;
    if (k > n - i - 1) return 0;
    for (size_t j = 1; j <= k; j++)
      if ((s[i + j] & 0xC0) != 0x80) return 0;
    i += k + 1;
  }
  return 1;
}

/* A code a peer may send (RFC 6455 §7.4): what wslay echoes at most. */
static int close_code_valid(unsigned code) {
  return (code >= 1000 && code <= 1011 && code != 1004 && code != 1005 && code != 1006) ||
         (code >= 3000 && code <= 4999);
}

static int close_code_known(unsigned code, const client_closes_t *sent) {
  static const unsigned codes[] = {1000, 1002, 1003, 1007, 1008, 1009,
                                   1011, 1012, 1013, 4404, 4409};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    if (codes[i] == code) return 1;
  for (size_t i = 0; i < sent->ncodes; i++)
    if (sent->codes[i] == code) return close_code_valid(code);
  return sent->raw && close_code_valid(code);
}

static void check_frames(const char *out, size_t len, const client_closes_t *sent) {
  const char *eoh = harness_find(out, len, "\r\n\r\n");
  if (len < 13 || memcmp(out, "HTTP/1.1 101 ", 13) != 0 || eoh == NULL)
    harness_fail("the upgrade was not answered 101", out, len);
  const unsigned char *s = (const unsigned char *)eoh + 4, *end = (const unsigned char *)out + len;
  int closed = 0;
  while (s < end) {
    if (end - s < 2) harness_fail("a frame is cut in its head", out, len);
    if (closed) harness_fail("a frame after the close frame", out, len);
    int op = s[0] & 0x0F;
    if ((s[0] & 0x70) || !(s[0] & 0x80)) harness_fail("a frame with RSV bits or no FIN", out, len);
    if (op != 1 && op != 8 && op != 9 && op != 10)
      harness_fail("an opcode the server never sends", out, len);
    if (s[1] & 0x80) harness_fail("a masked server frame", out, len);
    uint64_t n = s[1] & 0x7F;
    size_t k = 2;
    if (n == 126) {
      if (end - s < 4) harness_fail("a frame is cut in its length", out, len);
      n = (uint64_t)s[2] << 8 | s[3];
      k = 4;
    } else if (n == 127) {
      if (end - s < 10) harness_fail("a frame is cut in its length", out, len);
      n = 0;
      for (int i = 0; i < 8; i++) n = n << 8 | s[2 + i];
      k = 10;
    }
    if (n > (uint64_t)(end - s) - k) harness_fail("a frame is cut in its payload", out, len);
    const unsigned char *p = s + k;
    if (op == 1 && (n < 2 || p[0] != '{' || p[n - 1] != '}' || !utf8_valid(p, n)))
      harness_fail("a text frame that is no JSON object in UTF-8", out, len);
    if (op == 8) {
      closed = 1;
      if (n == 1 || (n >= 2 && !close_code_known((unsigned)p[0] << 8 | p[1], sent)))
        harness_fail("a close frame with an unknown code", out, len);
    }
    s = p + n;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char id[512];
  session_id(id, sizeof id);
  harness_client_t cl;
  harness_connect(host, &cl);
  char upgrade[768];
  snprintf(upgrade, sizeof upgrade,
           "GET /__clank/sessions/%s/live HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
           id);
  send_text(&cl, upgrade);
  clank_buf_t frames = {0};
  client_closes_t sent = {0};
  frames_of(&frames, data, size, &sent);
  harness_send(host, &cl, (const uint8_t *)frames.data, frames.len);
  clank_buf_free(&frames);
  for (int i = 0; i < 8; i++) harness_turn(host, &cl, UV_RUN_NOWAIT);
  harness_finish(host, &cl);
  if (getenv("CLANK_FUZZ_SHOW")) fprintf(stderr, "%.*s\n", (int)cl.got.len, cl.got.data);
  check_frames(cl.got.data, cl.got.len, &sent);
  if (host->lives != NULL) harness_fail("a live channel outlived its connection", NULL, 0);
  const clank_alloc_t *a = &host->gen->alloc;
  if (a->cap && a->used > a->cap) harness_fail("the app's Lua memory is over its cap", NULL, 0);
  close(cl.fd);
  clank_buf_free(&cl.got);
  return 0;
}
