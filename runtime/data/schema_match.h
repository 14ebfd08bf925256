/* Lua patterns matched in linear time: what clank.schema's `pattern` checks
   with (SPEC §3). Pure C, no Lua: fuzz/pattern.c drives it alone.

   A pattern is checked and sized by clank_match_size, compiled once into
   memory the caller owns by clank_match_compile (nothing to free but that
   memory), and answers clank_match_find as string.find(s, p) ~= nil does,
   in at most (len + 1) * (items + 1) steps whatever the input. */
#ifndef CLANK_SCHEMA_MATCH_H
#define CLANK_SCHEMA_MATCH_H

#include <stddef.h>

/* Lua's LUA_MAXCAPTURES: string.find raises beyond it. */
#define CLANK_MATCH_MAX_CAPTURES 32
/* Single-byte items (a character, `.`, a class or a set, quantified or not). */
#define CLANK_MATCH_MAX_ITEMS 255

typedef struct clank_match_s clank_match_t;

/* Checks the Lua pattern p (len bytes, any byte allowed): NULL, with the
   bytes its compiled form takes in *size, or why it cannot be compiled:
   Lua's own messages for malformed patterns; %b, %f and back-references
   (not regular); more captures or items than the limits above. */
const char *clank_match_size(const char *p, size_t len, size_t *size);

/* Compiles p, which clank_match_size accepted, into mem: *size bytes
   aligned for a uint64_t, owned by the caller. Returns mem. */
clank_match_t *clank_match_compile(const char *p, size_t len, void *mem);

/* 1 when string.find(s, p) would find a match, else 0. */
int clank_match_find(const clank_match_t *m, const char *s, size_t len);

/* The same, adding the steps taken (states looked at) to *steps. */
int clank_match_find_counted(const clank_match_t *m, const char *s, size_t len, size_t *steps);

/* Its items, for the bound on steps. */
size_t clank_match_items(const clank_match_t *m);

#endif
