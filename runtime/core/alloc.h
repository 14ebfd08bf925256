/* A generation's Lua allocator (SPEC §13's memory cap): lua_Alloc over
   malloc with accounting. Growth is charged to the task running; past the
   cap, the running task that holds its share is refused (Lua raises a
   memory error in it, and the preemption hook keeps raising RESOURCE_LIMIT
   until it ends), while others are served from a reserve, so the runtime's
   own calls outside tasks never fail and the process never panics. */
#ifndef CLANK_ALLOC_H
#define CLANK_ALLOC_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

#include "core/scheduler.h"

/* Blocks up to this size are kept for reuse once freed (alloc.c), up to
   CLANK_ALLOC_CACHE_BYTES in all, or half of what Lua holds when that is
   more: about what a collection cycle frees, so that Lua's blocks rarely go
   through malloc and free (whose bins cost a keyed click over a tenth of its
   CPU when the bound was 1 MiB, and a publish to a thousand sessions a
   second in the round whose sweep freed hundreds of megabytes). Cached bytes
   are not `used`: the cap counts Lua's. */
#define CLANK_ALLOC_SMALL 512
#define CLANK_ALLOC_CACHE_BYTES ((size_t)16 << 20)

/* 1 where Lua's heap is advised to the kernel for huge pages (glibc on
   Linux, not under AddressSanitizer, whose allocator is its own): a
   publish to a thousand sessions touches a gigabyte of small blocks, and
   in 4 KiB pages each new page of the heap is a fault and the collector's
   walks miss the TLB. */
#if defined(__linux__) && defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
#define CLANK_ALLOC_HUGE_HEAP 1
#else
#define CLANK_ALLOC_HUGE_HEAP 0
#endif

typedef struct clank_alloc_block_s clank_alloc_block_t;

typedef struct clank_alloc_s {
  size_t used;          /* bytes Lua holds now */
  size_t cap;           /* 0: no cap */
  clank_sched_t *sched; /* whose running task is charged */
  int pressure;         /* a task was refused: the owner checks the generation once it ended */
  size_t cached;        /* bytes kept in cache */
  char *advised_top;    /* the heap's end when last advised (CLANK_ALLOC_HUGE_HEAP) */
  char *populated_to;   /* the heap faulted in ahead up to here (clank_alloc_populate) */
  char *reached;        /* the highest end of a block from the heap: its top's room is above */
  char *ahead_failed;   /* the heap's end when clank_alloc_ahead could not make room there */
  uint64_t tight_collected_at; /* loop time of clank_alloc_tight's last full collection */
  unsigned unmerged; /* small blocks given back to malloc since it last merged them (alloc.c) */
  clank_alloc_block_t *cache[CLANK_ALLOC_SMALL / 16]; /* freed small blocks, by size class */
} clank_alloc_t;

/* The lua_Alloc; ud is a clank_alloc_t. */
void *clank_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
/* Connected sessions count against the cap (SPEC §13): 1 when L's capped
   allocator holds over 80 % of its cap after a full collection, made at most
   every 2 s (in between, what it holds now says); 0 for an uncapped state. */
int clank_alloc_tight(lua_State *L);
/* A large heap's room ahead faulted in before it is used (CLANK_ALLOC_HUGE_HEAP): Lua's heap
   grows by what the work allocates until a cycle frees its garbage, and the first write to each
   new page is a fault in which the kernel clears it (2 MiB at a time in huge pages). A publish
   to a thousand sessions allocated 33 MiB of new heap and spent a tenth to a fifth of its CPU
   there. Once Lua holds POPULATE_FROM bytes, glibc grows the heap by an eighth of that at a
   time (32 MiB at least), and clank_alloc_populate faults the room it grew in ahead, in idle
   time. The room is at most an eighth of the largest heap Lua held (glibc's pad is the
   process's) and the 128 KiB glibc keeps before it trims.
   → the bytes of that room still to fault in (0: none, or the heap is small, or the kernel
   cannot; populating again is then no cost). */
size_t clank_alloc_unpopulated(const clank_alloc_t *a);
/* Faults in up to most bytes of that room (MADV_POPULATE_WRITE) → the bytes still to do. */
size_t clank_alloc_populate(clank_alloc_t *a, size_t most);
/* That room comes when a burst's block does not fit in the heap's top: the burst then writes
   the rest of its blocks to new pages, each a fault (a publish to a thousand sessions that grew
   the heap spent a tenth of its CPU there). clank_alloc_short says the top's free room is under
   half of what the heap grows by (as far as the blocks given say: 0 also for a small heap or
   where there is no such room); clank_alloc_ahead then grows the heap now, in idle time, for
   clank_alloc_populate to fault in → 1 when it tried. */
int clank_alloc_short(const clank_alloc_t *a);
int clank_alloc_ahead(clank_alloc_t *a);
/* Frees the blocks kept for reuse: after lua_close, or to give memory back. */
void clank_alloc_drain(clank_alloc_t *a);

#endif
