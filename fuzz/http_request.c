/* libFuzzer: the bytes of one client connection → the server's request path
   (llhttp, SPEC §13's limits, dispatch, the bridge) over fuzz/app/app.lua.
   No listener and no network: the connection is one end of an AF_UNIX
   socketpair handed to the server with clank_conn_open, the harness writes
   the input into the other end in up to three reads' worth of pieces, shuts
   its write side and runs the loop until the server has let go of the
   connection. Every byte the server sent must frame as HTTP/1.1 responses. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "harness_host.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static clank_host_t *host;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  host = harness_host("fuzz/http_request", CLANK_FUZZ_APP);
  return 0;
}

/* ---- checking the output ---- */

#define find harness_find

/* The value of header `name` (lowercase) in a head, or NULL. */
static const char *header(const char *head, size_t n, const char *name, size_t *len) {
  size_t k = strlen(name);
  const char *line = find(head, n, "\r\n") + 2;
  const char *end = head + n;
  while (line < end) {
    const char *eol = find(line, (size_t)(end - line), "\r\n");
    if (eol == NULL) return NULL;
    if ((size_t)(eol - line) > k + 1 && strncasecmp(line, name, k) == 0 && line[k] == ':') {
      const char *v = line + k + 1;
      while (v < eol && *v == ' ') v++;
      *len = (size_t)(eol - v);
      return v;
    }
    line = eol + 2;
  }
  return NULL;
}

static int parse_size(const char *v, size_t n, int base, uint64_t *out) {
  if (n == 0 || n > 15) return -1;
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    int d;
    char ch = v[i];
    if (ch >= '0' && ch <= '9')
      d = ch - '0';
    else if (base == 16 && ch >= 'a' && ch <= 'f')
      d = ch - 'a' + 10;
    else if (base == 16 && ch >= 'A' && ch <= 'F')
      d = ch - 'A' + 10;
    else
      return -1;
    x = x * (uint64_t)base + (uint64_t)d;
  }
  *out = x;
  return 0;
}

/* Whether out[pos..] is a sequence of whole responses. A response with a
   content-length may have no body (an answer to HEAD): both readings are tried. */
static int responses(const char *out, size_t len, size_t pos, int depth) {
  if (pos == len) return 1;
  if (depth > 400) return 0;
  const char *s = out + pos;
  size_t n = len - pos;
  if (n < 17 || memcmp(s, "HTTP/1.1 ", 9) != 0) return 0;
  for (int i = 9; i < 12; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  if (s[9] == '0' || s[12] != ' ') return 0;
  int status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
  const char *eoh = find(s, n, "\r\n\r\n");
  if (eoh == NULL) return 0;
  size_t head = (size_t)(eoh - s) + 4;
  for (const char *p = s; p < eoh; p++) /* a bare CR or LF would split the head */
    if ((*p == '\r' && p[1] != '\n') || (*p == '\n' && p[-1] != '\r')) return 0;
  size_t vlen;
  const char *cl = header(s, head - 2, "content-length", &vlen);
  const char *te = header(s, head - 2, "transfer-encoding", &vlen);
  if (status < 200 || status == 204 || status == 304) {
    if (cl && status != 304) return 0;
    if (te) return 0;
    return responses(out, len, pos + head, depth + 1);
  }
  if (cl && te) return 0;
  if (te) {
    if (vlen != 7 || memcmp(te, "chunked", 7) != 0) return 0;
    size_t p = pos + head;
    for (;;) {
      const char *eol = find(out + p, len - p, "\r\n");
      if (eol == NULL) return 0;
      uint64_t size;
      if (parse_size(out + p, (size_t)(eol - (out + p)), 16, &size) != 0) return 0;
      p = (size_t)(eol - out) + 2;
      if (size > len - p || len - p - size < 2) return 0;
      if (memcmp(out + p + size, "\r\n", 2) != 0) return 0;
      p += size + 2;
      if (size == 0) return responses(out, len, p, depth + 1);
    }
  }
  if (cl == NULL) return 0; /* every answer here is framed by its length */
  header(s, head - 2, "content-length", &vlen);
  uint64_t body;
  if (parse_size(cl, vlen, 10, &body) != 0) return 0;
  if (body <= n - head && responses(out, len, pos + head + body, depth + 1)) return 1;
  return body > 0 && responses(out, len, pos + head, depth + 1);
}

/* ---- one input ---- */

static uint32_t fnv(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  harness_client_t cl;
  harness_connect(host, &cl);
  /* Where the reads split comes from the input itself, so the fuzzer explores
     it, while a hand-written seed stays plain HTTP. */
  uint32_t h = fnv(data, size);
  size_t a = size ? h % (size + 1) : 0;
  size_t b = a + (size - a ? (h >> 16) % (size - a + 1) : 0);
  harness_send(host, &cl, data, a);
  harness_send(host, &cl, data + a, b - a);
  harness_send(host, &cl, data + b, size - b);
  harness_finish(host, &cl);
  if (getenv("CLANK_FUZZ_SHOW")) fprintf(stderr, "%.*s\n", (int)cl.got.len, cl.got.data);
  if (!responses(cl.got.data, cl.got.len, 0, 0))
    harness_fail("not a sequence of whole HTTP/1.1 responses", cl.got.data, cl.got.len);
  close(cl.fd);
  clank_buf_free(&cl.got);
  return 0;
}
