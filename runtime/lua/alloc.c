/* The capped, accounted allocator (see alloc.h). */
#include "lua/alloc.h"

#include <stdlib.h>

#include "lua/preempt.h"

/* A task is refused once it allocated this part of the cap (its share):
   one request cannot take the others' memory, and a request that merely
   allocates next, while another grew the heap, is not the one stopped. */
#define SHARE_DIVISOR 4

static size_t reserve_of(size_t cap) { return cap / 8 > (16u << 20) ? cap / 8 : (16u << 20); }

/* 1 when the growth may happen, 0 when the running task is refused. */
static int admit(clank_alloc_t *a, size_t grow) {
  clank_sched_t *s = a->sched;
  clank_task_t *t = s ? s->running : NULL;
  if (t) t->mem_charged += grow;
  if (a->used + grow <= a->cap || t == NULL) return 1;
  if (!t->mem_over && t->mem_charged >= a->cap / SHARE_DIVISOR) {
    t->mem_over = 1;
    a->pressure = 1;
    if (s->watchdog) clank_watchdog_poke(s->watchdog, t->co);
    return 0;
  }
  /* The reserve: the runtime's own work and the refused task's way out. */
  return a->used + grow <= a->cap + reserve_of(a->cap);
}

void *clank_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  clank_alloc_t *a = ud;
  size_t old = ptr ? osize : 0; /* without ptr, osize is a type tag */
  if (nsize == 0) {
    free(ptr);
    a->used -= old;
    return NULL;
  }
  if (nsize > old && a->cap && !admit(a, nsize - old)) return NULL;
  void *p = realloc(ptr, nsize);
  if (p == NULL) return NULL;
  a->used = a->used - old + nsize;
  return p;
}
