/* core/alloc.c's cache of freed small blocks: a block Lua frees is handed
   out again for the next one of its size class, the cache holds at most
   CLANK_ALLOC_CACHE_BYTES or half of what Lua holds, the larger (the rest
   goes back to malloc), cached bytes are not counted as used, a drain
   empties it, the heap it grows is advised for huge pages, a large heap's
   room ahead is faulted in when asked, and what goes back to malloc is
   merged as it goes. Exit status
   0 when every case passes; each failure prints a line. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* sbrk */
#endif
#include <inttypes.h>
#include <lua.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../check.h"
#include "core/alloc.h"

static void *new_block(clank_alloc_t *a, size_t n) { return clank_alloc(a, NULL, LUA_TTABLE, n); }
static void free_block(clank_alloc_t *a, void *p, size_t n) { clank_alloc(a, p, n, 0); }

static void reuses_a_freed_block(void) {
  clank_alloc_t a = {0};
  void *p = new_block(&a, 56);
  CHECK(p != NULL && a.used == 56, "a 56-byte block: used %zu", a.used);
  free_block(&a, p, 56);
  CHECK(a.used == 0 && a.cached == 64, "freed: used %zu, cached %zu (its class is 64)", a.used,
        a.cached);
  void *q = new_block(&a, 50); /* the same class: 49..64 bytes */
  CHECK(q == p, "the next block of its class is the freed one");
  CHECK(a.cached == 0 && a.used == 50, "taken again: cached %zu, used %zu", a.cached, a.used);
  free_block(&a, q, 50);
  clank_alloc_drain(&a);
  CHECK(a.cached == 0, "drained: cached %zu", a.cached);
}

static void resizes_in_place_within_a_class(void) {
  clank_alloc_t a = {0};
  char *p = new_block(&a, 40);
  memcpy(p, "0123456789", 10);
  CHECK(clank_alloc(&a, p, 40, 48) == p, "40 to 48 bytes stays in its block");
  char *q = clank_alloc(&a, p, 48, 200);
  CHECK(q != NULL && memcmp(q, "0123456789", 10) == 0, "48 to 200 bytes keeps the content");
  CHECK(a.used == 200, "used %zu after growing to 200", a.used);
  free_block(&a, q, 200);
  clank_alloc_drain(&a);
}

/* Twice the bound in 64-byte blocks, all freed: the cache fills to its
   bound and the rest goes back to malloc. */
static void holds_at_most_its_bound(void) {
  clank_alloc_t a = {0};
  size_t n = CLANK_ALLOC_CACHE_BYTES / 64 * 2;
  void **blocks = malloc(n * sizeof *blocks);
  if (!blocks) {
    CHECK(0, "out of memory for the test");
    return;
  }
  for (size_t i = 0; i < n; i++) blocks[i] = new_block(&a, 64);
  CHECK(a.used == n * 64, "used %zu of %zu", a.used, n * 64);
  for (size_t i = 0; i < n; i++) free_block(&a, blocks[i], 64);
  CHECK(a.used == 0, "all freed: used %zu", a.used);
  CHECK(a.cached == CLANK_ALLOC_CACHE_BYTES, "cached %zu, bound %zu", a.cached,
        (size_t)CLANK_ALLOC_CACHE_BYTES);
  /* blocks larger than CLANK_ALLOC_SMALL are never kept */
  void *big = new_block(&a, CLANK_ALLOC_SMALL + 1);
  free_block(&a, big, CLANK_ALLOC_SMALL + 1);
  CHECK(a.cached == CLANK_ALLOC_CACHE_BYTES, "a large block is not cached: %zu", a.cached);
  clank_alloc_drain(&a);
  CHECK(a.cached == 0, "drained: cached %zu", a.cached);
  free(blocks);
}

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
#include <malloc.h>
/* Small blocks given back to malloc (the cache full) are merged every 65,536 of them: after
   four times that, freed past the bound, glibc's fastbins hold fewer than 65,536 chunks (all of
   them without the merges, which a later request of a kilobyte merges at once). */
static void merges_what_it_gives_back(void) {
  clank_alloc_t a = {0};
  size_t bound = CLANK_ALLOC_CACHE_BYTES / 64, n = bound + 4 * 65536;
  void **blocks = malloc(n * sizeof *blocks);
  if (!blocks) {
    CHECK(0, "out of memory for the test");
    return;
  }
  for (size_t i = 0; i < n; i++) blocks[i] = new_block(&a, 64);
  for (size_t i = 0; i < n; i++) free_block(&a, blocks[i], 64);
  struct mallinfo2 m = mallinfo2();
  CHECK(m.smblks < 65536, "fastbin chunks after %zu blocks went back to malloc: %zu", n - bound,
        m.smblks);
  clank_alloc_drain(&a);
  free(blocks);
}
#else
static void merges_what_it_gives_back(void) {}
#endif

/* While Lua holds more than twice the bound, the cache may hold half of what
   it holds: 96 MiB live (one large block), then 64 MiB of 64-byte blocks
   freed. The cache stops at c = (96 + 64 - c) / 2, 160/3 MiB, and a block
   freed after that goes back to malloc. */
static void holds_half_of_a_large_heap(void) {
  clank_alloc_t a = {0};
  size_t mib = (size_t)1 << 20, n = 64 * mib / 64;
  void **blocks = malloc(n * sizeof *blocks);
  void *live = new_block(&a, 96 * mib);
  if (!blocks || !live) {
    CHECK(0, "out of memory for the test");
    free(blocks);
    return;
  }
  for (size_t i = 0; i < n; i++) blocks[i] = new_block(&a, 64);
  for (size_t i = 0; i < n; i++) free_block(&a, blocks[i], 64);
  CHECK(a.used == 96 * mib, "the large block is left: used %zu", a.used);
  CHECK(a.cached > 53 * mib && a.cached <= 160 * mib / 3,
        "cached %zu, above the 16 MiB bound, at most a third of 160 MiB", a.cached);
  free_block(&a, live, 96 * mib);
  clank_alloc_drain(&a);
  CHECK(a.cached == 0 && a.used == 0, "drained: cached %zu, used %zu", a.cached, a.used);
  free(blocks);
}

#if CLANK_ALLOC_HUGE_HEAP
/* The VmFlags of the mapping that holds p, from /proc/self/smaps, into
   flags; 0 when not found. */
static int flags_of_mapping(const void *p, char *flags, size_t size) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return 0;
  char line[512];
  int inside = 0, found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    uintptr_t from, to;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &from, &to) == 2) {
      inside = (uintptr_t)p >= from && (uintptr_t)p < to;
    } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
      snprintf(flags, size, "%.*s", (int)(size - 1), line + 8);
      found = 1;
    }
  }
  fclose(f);
  return found;
}

/* Where the kernel has transparent huge pages, the heap Lua's blocks grow
   into is advised for them ("hg" among its mapping's VmFlags): 80 MiB of
   64-byte blocks, past a few steps of the heap's growth (the earlier cases
   left free room in it), then the mapping of the heap's last byte. */
static void advises_the_heap_it_grows(void) {
  FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (thp == NULL) {
    printf("unit/core/alloc: no transparent huge pages here, the advice is not checked\n");
    return;
  }
  fclose(thp);
  clank_alloc_t a = {0};
  size_t n = ((size_t)80 << 20) / 64;
  void **blocks = malloc(n * sizeof *blocks);
  char *top = sbrk(0);
  if (!blocks) {
    CHECK(0, "out of memory for the test");
    return;
  }
  for (size_t i = 0; i < n; i++) blocks[i] = new_block(&a, 64);
  char *grown = sbrk(0), flags[512] = "";
  CHECK(grown > top, "the heap grew: from %p to %p", (void *)top, (void *)grown);
  CHECK(flags_of_mapping(grown - 1, flags, sizeof flags), "the heap's end is in smaps");
  CHECK(strstr(flags, " hg") != NULL, "the heap it grew is advised for huge pages: VmFlags%s",
        flags);
  for (size_t i = 0; i < n; i++) free_block(&a, blocks[i], 64);
  clank_alloc_drain(&a);
  free(blocks);
}

/* Whether the page that holds p is resident. */
static int resident(const char *p) {
  uintptr_t page = (uintptr_t)getpagesize();
  unsigned char in = 0;
  if (mincore((void *)((uintptr_t)p & ~(page - 1)), 1, &in) != 0) return -1;
  return in & 1;
}

/* Once Lua holds 256 MiB (POPULATE_FROM), the room the heap grew in ahead is
   faulted in by clank_alloc_populate, a few MiB a call, and not before: 16
   MiB blocks (malloc's, untouched) up to 128 MiB leave nothing to do; up to
   304 MiB the heap's last page is not resident until the calls are done. */
static void populates_the_room_of_a_large_heap(void) {
  clank_alloc_t a = {0};
  enum { BLOCKS = 19 };
  void *blocks[BLOCKS];
  size_t block = (size_t)16 << 20;
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = clank_alloc(&a, NULL, LUA_TSTRING, block);
    if (blocks[i] == NULL) {
      CHECK(0, "out of memory for the test");
      return;
    }
    if (i == 7) CHECK(clank_alloc_unpopulated(&a) == 0, "128 MiB: nothing to populate");
  }
  char *end = sbrk(0);
  size_t room = clank_alloc_unpopulated(&a);
  CHECK(room >= ((size_t)32 << 20), "304 MiB: the room to populate is %zu bytes", room);
  int before = resident(end - 1);
  if (before == -1) {
    printf("unit/core/alloc: mincore failed, the population is not checked\n");
  } else {
    CHECK(before == 0, "the heap's last page is not resident before");
    int calls = 0;
    size_t left = room;
    while (left > 0 && calls < 1000) {
      size_t next = clank_alloc_populate(&a, (size_t)4 << 20);
      CHECK(next < left || next == 0, "each call does some: %zu then %zu", left, next);
      left = next;
      calls++;
    }
    CHECK(left == 0 && calls >= (int)(room >> 22), "done in %d calls of 4 MiB", calls);
    CHECK(resident(end - 1) == 1, "the heap's last page is resident after");
    CHECK(clank_alloc_unpopulated(&a) == 0, "nothing left to populate");
  }
  for (int i = 0; i < BLOCKS; i++) clank_alloc(&a, blocks[i], block, 0);
  clank_alloc_drain(&a);
}
/* A large heap whose top has little free room left (under half of what it grows by, its
   blocks say) is grown by clank_alloc_ahead, not by the next block: after it, the heap has
   room to fault in, and a 16 MiB block (a burst's) takes no growth. */
static void grows_a_short_heap_ahead(void) {
  clank_alloc_t a = {0};
  enum { BLOCKS = 19, SMALL = 120 };
  void *blocks[BLOCKS], *small[SMALL];
  size_t block = (size_t)16 << 20, mib = (size_t)1 << 20;
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = clank_alloc(&a, NULL, LUA_TSTRING, block);
    if (blocks[i] == NULL) {
      CHECK(0, "out of memory for the test");
      return;
    }
  }
  int n = 0; /* 1 MiB blocks until the room is short */
  while (n < SMALL && !clank_alloc_short(&a)) {
    small[n] = clank_alloc(&a, NULL, LUA_TSTRING, mib);
    if (small[n] == NULL) break;
    n++;
  }
  CHECK(clank_alloc_short(&a), "short after %d blocks of 1 MiB", n);
  char *top = sbrk(0);
  CHECK(clank_alloc_ahead(&a) == 1, "it grows the heap");
  CHECK((char *)sbrk(0) > top, "the heap's end moved up: %p -> %p", (void *)top, sbrk(0));
  CHECK(!clank_alloc_short(&a), "not short after");
  CHECK(clank_alloc_unpopulated(&a) > 0, "the new room is there to fault in");
  char *end = sbrk(0);
  void *burst = clank_alloc(&a, NULL, LUA_TSTRING, block);
  CHECK(burst != NULL && (char *)sbrk(0) == end, "a 16 MiB block fits without growing the heap");
  if (burst) clank_alloc(&a, burst, block, 0);
  while (n > 0) clank_alloc(&a, small[--n], mib, 0);
  for (int i = 0; i < BLOCKS; i++) clank_alloc(&a, blocks[i], block, 0);
  clank_alloc_drain(&a);
}
#else
static void grows_a_short_heap_ahead(void) {}
static void advises_the_heap_it_grows(void) {
  printf("unit/core/alloc: this build does not advise its heap (CLANK_ALLOC_HUGE_HEAP 0)\n");
}
static void populates_the_room_of_a_large_heap(void) {}
#endif

int main(void) {
  reuses_a_freed_block();
  resizes_in_place_within_a_class();
  holds_at_most_its_bound();
  holds_half_of_a_large_heap();
  advises_the_heap_it_grows();
  populates_the_room_of_a_large_heap();
  grows_a_short_heap_ahead();
  merges_what_it_gives_back();
  printf("unit/core/alloc: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
