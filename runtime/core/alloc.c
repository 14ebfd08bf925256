/* The capped, accounted allocator (see alloc.h). */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* sbrk, getpagesize, madvise */
#endif
#include "core/alloc.h"

#include <stdlib.h>
#include <string.h>

#if CLANK_ALLOC_HUGE_HEAP
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "core/preempt.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* A task is refused once it allocated this part of the cap (its share):
   one request cannot take the others' memory, and a request that merely
   allocates next, while another grew the heap, is not the one stopped. */
#define SHARE_DIVISOR 4

/* Small blocks (strings, tables, closures: most of a request's) are kept
   by size class when Lua frees them and handed out again, so a request's
   allocations rarely reach malloc. Lua says a block's size when it frees
   or resizes it, so the classes need no header. */
#define CLASS_BYTES 16
#define CLASS_COUNT (CLANK_ALLOC_SMALL / CLASS_BYTES)

struct clank_alloc_block_s {
  struct clank_alloc_block_s *next;
};

static size_t class_of(size_t n) { return (n - 1) / CLASS_BYTES; }
static size_t class_bytes(size_t c) { return (c + 1) * CLASS_BYTES; }

static size_t reserve_of(size_t cap) { return cap / 8 > (16u << 20) ? cap / 8 : (16u << 20); }

/* admit past the cap: 0 when the running task t is refused. */
static __attribute__((noinline)) int admit_over(clank_alloc_t *a, clank_task_t *t, size_t grow) {
  if (!t->mem_over && t->mem_charged >= a->cap / SHARE_DIVISOR) {
    t->mem_over = 1;
    a->pressure = 1;
    if (a->sched->watchdog) clank_watchdog_poke(a->sched->watchdog, t->co);
    return 0;
  }
  /* The reserve: the runtime's own work and the refused task's way out. */
  if (a->used + grow <= a->cap + reserve_of(a->cap)) return 1;
  /* The heap is full, whoever filled it: the task is refused as over its
     share (a 503, not an error its own code could catch and mistake for
     its own), and the owner checks the generation. */
  if (!t->mem_over) {
    t->mem_over = 1;
    if (a->sched->watchdog) clank_watchdog_poke(a->sched->watchdog, t->co);
  }
  a->pressure = 1;
  return 0;
}

/* 1 when the growth may happen, 0 when the running task is refused. */
static inline int admit(clank_alloc_t *a, size_t grow) {
  clank_sched_t *s = a->sched;
  clank_task_t *t = s ? s->running : NULL;
  if (t) t->mem_charged += grow;
  if (__builtin_expect(a->used + grow <= a->cap || t == NULL, 1)) return 1;
  return admit_over(a, t, grow);
}

#if CLANK_ALLOC_HUGE_HEAP
/* The heap in huge pages. glibc grows its heap with brk, which cannot be
   hooked: after a block comes from malloc, what the heap gained since the
   last look is advised MADV_HUGEPAGE (with transparent huge pages in
   "madvise" mode, the kernel then backs it in 2 MiB pages; in "never" mode
   the advice does nothing). A 2 MiB page is only used for a range that lies
   whole inside the heap when first touched, so glibc is told to grow it
   HEAP_GROWTH at a time (M_TOP_PAD); that stops its moving mmap threshold,
   which is set where it would end (large blocks stay in the heap too).
   glibc's own tunable glibc.malloc.hugetlb=1 does this for every arena,
   but is read from the environment at start only. */
#define HEAP_GROWTH ((size_t)32 << 20)
/* Past this much Lua memory the heap grows by an eighth of it at a time, and
   that room is faulted in ahead (see clank_alloc_populate in alloc.h). */
#define POPULATE_FROM ((size_t)256 << 20)
#define HUGE_PAGE ((size_t)2 << 20)
#define MAX_GROWTH ((size_t)1 << 30)

static size_t growth_for(const clank_alloc_t *a) {
  size_t eighth = a->used >= POPULATE_FROM ? (a->used / 8 + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1) : 0;
  if (eighth > MAX_GROWTH) eighth = MAX_GROWTH; /* (mallopt takes an int) */
  return eighth > HEAP_GROWTH ? eighth : HEAP_GROWTH;
}

/* Blocks this size come from the heap's top (below the mmap threshold, HEAP_GROWTH). */
#define PROBE_BYTES (HEAP_GROWTH - HUGE_PAGE)
#define MAX_PROBES 8

/* block, n: where a block malloc or realloc just gave starts (0: none), and its size. */
static __attribute__((noinline)) void advise_heap(clank_alloc_t *a, uintptr_t block, size_t n) {
  char *top = sbrk(0);
  if (top == (char *)-1) return;
  if (block != 0 && block < (uintptr_t)top && block + n > (uintptr_t)a->reached)
    a->reached = (char *)(block + n);
  if (a->advised_top == NULL) {
    mallopt(M_TOP_PAD, (int)HEAP_GROWTH);
    mallopt(M_MMAP_THRESHOLD, (int)HEAP_GROWTH);
    a->populated_to = top; /* what the heap holds now is in use, or glibc's */
  } else if (top > a->advised_top) {
    uintptr_t page = (uintptr_t)getpagesize();
    uintptr_t from = (uintptr_t)a->advised_top & ~(page - 1);
    (void)madvise((void *)from, (size_t)((uintptr_t)top - from), MADV_HUGEPAGE);
    /* (M_TOP_PAD is the process's: a worker's small state sets it no lower than the
       large one's last growth, which the next growth of the large one sets again) */
    size_t growth = growth_for(a);
    if (growth > HEAP_GROWTH) mallopt(M_TOP_PAD, (int)growth);
  }
  a->advised_top = top; /* lower too, after a trim: what grows again is advised again */
  if (a->populated_to > top) a->populated_to = top;
  if (a->reached > top) a->reached = top;
}

/* The free room at the heap's top wanted before a burst: half of what it grows by. */
static size_t room_wanted(const clank_alloc_t *a) { return growth_for(a) / 2; }

int clank_alloc_short(const clank_alloc_t *a) {
  if (a->used < POPULATE_FROM || a->advised_top == NULL || a->reached == NULL) return 0;
  if (a->advised_top == a->ahead_failed) return 0; /* (until the heap's end moves) */
  return (size_t)(a->advised_top - a->reached) < room_wanted(a);
}

/* glibc grows its heap only for a block its top cannot hold, by what the block lacks and
   M_TOP_PAD more; a free that leaves the top over M_TOP_PAD trims it back to that. So blocks
   taken from the top until it grows, and freed, leave a top of M_TOP_PAD: the room the heap
   grows by, there now. The first one starts where the top did (the real room: frees merge
   into the top, which `reached` does not see). */
int clank_alloc_ahead(clank_alloc_t *a) {
  if (!clank_alloc_short(a)) return 0;
  char *top = sbrk(0);
  if (top == (char *)-1) return 0;
  void *probes[MAX_PROBES];
  int n = 0;
  while (n < MAX_PROBES) {
    void *q = malloc(PROBE_BYTES);
    if (q == NULL) break;
    probes[n++] = q;
    if ((char *)sbrk(0) != top) break; /* it grew */
  }
  char *first = n > 0 ? probes[0] : NULL;
  while (n > 0) free(probes[--n]);
  advise_heap(a, 0, 0);
  if (first != NULL && first < a->advised_top) a->reached = first;
  /* the heap could not grow (glibc then maps memory apart): not tried again until it moves */
  if (clank_alloc_short(a)) a->ahead_failed = a->advised_top;
  return 1;
}

size_t clank_alloc_unpopulated(const clank_alloc_t *a) {
  if (a->used < POPULATE_FROM || a->populated_to == NULL) return 0;
  return a->advised_top > a->populated_to ? (size_t)(a->advised_top - a->populated_to) : 0;
}

size_t clank_alloc_populate(clank_alloc_t *a, size_t most) {
  size_t left = clank_alloc_unpopulated(a);
  if (left == 0) return 0;
  /* the heap now: a trim since the last growth (by any thread) lowered it */
  char *top = sbrk(0);
  if (top == (char *)-1 || top <= a->populated_to) {
    a->populated_to = a->advised_top;
    return 0;
  }
  if (top < a->advised_top) a->advised_top = top;
  uintptr_t page = (uintptr_t)getpagesize();
  uintptr_t from = (uintptr_t)a->populated_to & ~(page - 1);
  size_t n = (size_t)((uintptr_t)a->advised_top - from);
  if (n > most) n = most & ~(page - 1);
  if (n == 0) return left;
  if (madvise((void *)from, n, MADV_POPULATE_WRITE) != 0) {
    /* a kernel before 5.14 (EINVAL), or the heap trimmed meanwhile: the room is left to
       the first writes, as without this */
    a->populated_to = a->advised_top;
    return 0;
  }
  a->populated_to = (char *)(from + n);
  return (size_t)(a->advised_top - a->populated_to);
}
#else
static void advise_heap(clank_alloc_t *a, uintptr_t block, size_t n) {
  (void)a;
  (void)block;
  (void)n;
}
int clank_alloc_short(const clank_alloc_t *a) {
  (void)a;
  return 0;
}
int clank_alloc_ahead(clank_alloc_t *a) {
  (void)a;
  return 0;
}
size_t clank_alloc_unpopulated(const clank_alloc_t *a) {
  (void)a;
  return 0;
}
size_t clank_alloc_populate(clank_alloc_t *a, size_t most) {
  (void)a;
  (void)most;
  return 0;
}
#endif

/* A block from malloc, the heap it may have grown advised. */
static __attribute__((noinline)) void *fresh(clank_alloc_t *a, size_t n) {
  void *p = malloc(n);
  advise_heap(a, (uintptr_t)p, n);
  return p;
}

static inline __attribute__((always_inline)) void *take(clank_alloc_t *a, size_t n) {
  if (n > CLANK_ALLOC_SMALL) return fresh(a, n);
  size_t c = class_of(n);
  clank_alloc_block_t *b = a->cache[c];
  if (b == NULL) return fresh(a, class_bytes(c));
  UNPOISON(b, class_bytes(c));
  a->cache[c] = b->next;
  a->cached -= class_bytes(c);
  __builtin_prefetch(b->next); /* the next take of this class reads it */
  return b;
}

/* How much the cache may hold (see CLANK_ALLOC_CACHE_BYTES). */
static inline size_t cache_bound(const clank_alloc_t *a) {
  return a->used / 2 > CLANK_ALLOC_CACHE_BYTES ? a->used / 2 : CLANK_ALLOC_CACHE_BYTES;
}

/* glibc keeps freed chunks of up to 128 bytes in fastbins, unmerged, until a request of a
   kilobyte or more merges all of them at once (malloc_consolidate). A collection that frees
   hundreds of megabytes once the cache is full leaves millions there: after a full
   collection over the heap of 10,000 quiet sessions, the next such request spent 1 to 2 s
   merging them, inside whatever live event made it, which was stopped over its CPU budget. So every
   MERGE_EVERY small blocks given back, a request of that size merges them while they are
   few and still in the cache: about a millisecond each time. */
#define MERGE_EVERY 65536u
#define MERGE_REQUEST 2048 /* past glibc's per-thread cache (1032 bytes), which would answer it */

static __attribute__((noinline)) void merge_freed(clank_alloc_t *a) {
  a->unmerged = 0;
  void *volatile request = malloc(MERGE_REQUEST); /* (volatile: a compiler drops free(malloc())) */
  free(request);
}

static inline __attribute__((always_inline)) void give(clank_alloc_t *a, void *p, size_t n) {
  if (n > CLANK_ALLOC_SMALL || a->cached + class_bytes(class_of(n)) > cache_bound(a)) {
    free(p);
    if (n <= CLANK_ALLOC_SMALL && ++a->unmerged >= MERGE_EVERY) merge_freed(a);
    return;
  }
  size_t c = class_of(n);
  clank_alloc_block_t *b = p;
  b->next = a->cache[c];
  a->cache[c] = b;
  a->cached += class_bytes(c);
  POISON(b, class_bytes(c));
}

/* A block resized (ptr and nsize not NULL nor 0): kept apart, so the new
   and freed blocks most calls are about take no registers to save. */
static __attribute__((noinline)) void *resize(clank_alloc_t *a, void *ptr, size_t old,
                                              size_t nsize) {
  if (nsize > old && a->cap && !admit(a, nsize - old)) return NULL;
  void *p;
  if (old > CLANK_ALLOC_SMALL && nsize > CLANK_ALLOC_SMALL) {
    p = realloc(ptr, nsize);
    advise_heap(a, (uintptr_t)p, nsize);
  } else if (old <= CLANK_ALLOC_SMALL && nsize <= CLANK_ALLOC_SMALL &&
             class_of(old) == class_of(nsize)) {
    p = ptr; /* the block has room already */
  } else {
    p = take(a, nsize);
    if (p == NULL) return NULL;
    memcpy(p, ptr, old < nsize ? old : nsize);
    give(a, ptr, old);
  }
  if (p == NULL) return NULL;
  a->used = a->used - old + nsize;
  return p;
}

void *clank_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  clank_alloc_t *a = ud;
  if (ptr == NULL) { /* a new block (osize is a type tag) */
    if (nsize == 0) return NULL;
    if (a->cap && !admit(a, nsize)) return NULL;
    void *p = take(a, nsize);
    if (p != NULL) a->used += nsize;
    return p;
  }
  if (nsize == 0) {
    give(a, ptr, osize);
    a->used -= osize;
    return NULL;
  }
  return resize(a, ptr, osize, nsize);
}

#define TIGHT_COLLECT_MS 2000

static int over_tight(const clank_alloc_t *a) { return a->used > a->cap / 10 * 8; }

int clank_alloc_tight(lua_State *L) {
  void *ud;
  if (lua_getallocf(L, &ud) != clank_alloc) return 0;
  clank_alloc_t *a = ud;
  if (a->cap == 0 || !over_tight(a)) return 0;
  uint64_t now = a->sched ? uv_now(a->sched->loop) + 1 : 1; /* never 0: "not yet" */
  if (a->tight_collected_at == 0 || now - a->tight_collected_at >= TIGHT_COLLECT_MS) {
    a->tight_collected_at = now;
    /* what it holds may be garbage. The collection is the state's, not the running task's:
       over a heap of gigabytes it takes longer than a task's CPU budget, and a session's mount
       that asked was stopped for it. */
    uint64_t began = clank_run_clock();
    lua_gc(L, LUA_GCCOLLECT);
    clank_task_t *t = a->sched ? a->sched->running : NULL;
    if (t) t->resumed_at += clank_run_clock() - began;
  }
  return over_tight(a);
}

void clank_alloc_drain(clank_alloc_t *a) {
  for (size_t c = 0; c < CLASS_COUNT; c++) {
    while (a->cache[c]) {
      clank_alloc_block_t *b = a->cache[c];
      UNPOISON(b, class_bytes(c));
      a->cache[c] = b->next;
      free(b);
    }
  }
  a->cached = 0;
}
