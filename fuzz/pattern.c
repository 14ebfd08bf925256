/* libFuzzer: a Lua pattern and a subject → clank_match_find (SPEC §3,
   runtime/data/schema_match.c), against Lua's own string.find.

   The input's first byte is the pattern's length (what remains when it is
   shorter), the pattern follows, then the subject; any byte anywhere. A
   pattern the matcher refuses is skipped. For one it accepts: the match
   takes at most (len + 1) * (items + 1) steps, counted or not it answers the
   same, and it answers what string.find answers wherever Lua can finish:
   backtracking costs up to (len + 1)^(repeats + 1) * 2^optionals, so Lua
   sees the longest prefix of the subject that keeps that under a budget,
   and the matcher is asked again on the same prefix. string.find may raise
   only "pattern too complex" (its recursion limit): any other error means
   the matcher accepted a pattern that Lua calls malformed. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/schema_match.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LUA_BUDGET 200000.0 /* backtracking steps Lua is allowed, estimated */

static lua_State *L;
static int find_ref;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  L = luaL_newstate();
  luaL_openlibs(L);
  lua_getglobal(L, "string");
  lua_getfield(L, -1, "find");
  find_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pop(L, 1);
  return 0;
}

static void fail(const char *what, const char *p, size_t plen, const char *s, size_t slen) {
  fprintf(stderr, "fuzz/pattern: %s\npattern (%zu bytes): ", what, plen);
  for (size_t i = 0; i < plen; i++) fprintf(stderr, "\\x%02x", (unsigned char)p[i]);
  fprintf(stderr, "\nsubject (%zu bytes): ", slen);
  for (size_t i = 0; i < slen && i < 200; i++) fprintf(stderr, "\\x%02x", (unsigned char)s[i]);
  fprintf(stderr, "%s\n", slen > 200 ? "..." : "");
  abort();
}

/* The longest prefix of a subject of slen bytes on which string.find(s, p)
   stays within the budget, or -1 when even the empty one may not. Repeats
   and optionals are counted from bytes that could be quantifiers, which
   overestimates (a `-` in a set counts too): only the budget suffers. */
static long lua_prefix(const char *p, size_t plen, size_t slen) {
  int repeats = 0, optionals = 0;
  for (size_t i = 0; i < plen; i++) {
    if (p[i] == '*' || p[i] == '+' || p[i] == '-') repeats++;
    if (p[i] == '?') optionals++;
  }
  if (optionals > 16) return -1;
  long best = -1;
  for (size_t n = 0; n <= slen; n++) {
    double cost = (double)(plen + n + 1) * (double)(1u << optionals);
    for (int r = 0; r <= repeats && cost <= LUA_BUDGET; r++) cost *= (double)(n + 1);
    if (cost > LUA_BUDGET) break;
    best = (long)n;
  }
  return best;
}

/* string.find(s, p) ~= nil: 1 or 0, or -1 when it raised "pattern too complex". */
static int lua_find(const char *p, size_t plen, const char *s, size_t slen) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, find_ref);
  lua_pushlstring(L, s, slen);
  lua_pushlstring(L, p, plen);
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
    const char *err = lua_tostring(L, -1);
    if (err == NULL || strstr(err, "pattern too complex") == NULL)
      fail(err ? err : "string.find raised", p, plen, s, slen);
    lua_pop(L, 1);
    return -1;
  }
  int found = !lua_isnil(L, -1);
  lua_pop(L, 1);
  return found;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  size_t plen = data[0] < size - 1 ? data[0] : size - 1;
  const char *p = (const char *)data + 1, *s = p + plen;
  size_t slen = size - 1 - plen, msize;
  if (clank_match_size(p, plen, &msize) != NULL) return 0;
  clank_match_t *m = clank_match_compile(p, plen, malloc(msize));
  size_t steps = 0, items = clank_match_items(m);
  int found = clank_match_find_counted(m, s, slen, &steps);
  if (steps > (slen + 1) * (items + 1)) fail("too many steps", p, plen, s, slen);
  if (found != clank_match_find(m, s, slen))
    fail("counted and plain runs differ", p, plen, s, slen);
  long n = lua_prefix(p, plen, slen);
  if (n >= 0) {
    int lua = lua_find(p, plen, s, (size_t)n);
    if (lua >= 0 && lua != clank_match_find(m, s, (size_t)n))
      fail(lua ? "string.find finds a match, clank_match_find none"
               : "clank_match_find finds a match, string.find none",
           p, plen, s, (size_t)n);
  }
  free(m);
  lua_gc(L, LUA_GCSTEP, 0);
  return 0;
}
