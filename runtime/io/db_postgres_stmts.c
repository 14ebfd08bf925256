/* clank.db.postgres: the prepared statements of one connection (the
   bookkeeping only; db_postgres.c sends what it decides). Keyed by the SQL
   text and the parameter types, since a prepared statement fixes the types
   its parameters had when it was prepared. A text is prepared the second time
   it runs, so SQL built afresh for each call (inlined values, lists of
   varying length) costs what it did before and never crowds out the
   statements an app repeats. */
#include "io/db_postgres.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a, 64 bits: the text, then the types. */
uint64_t clank_pg_stmt_hash(const clank_pg_query_t *q) {
  uint64_t h = 1469598103934665603ULL;
  const unsigned char *p = (const unsigned char *)q->sql;
  for (size_t i = 0; i < q->sqllen; i++) h = (h ^ p[i]) * 1099511628211ULL;
  p = (const unsigned char *)q->types;
  for (size_t i = 0; i < (size_t)q->n * sizeof(Oid); i++) h = (h ^ p[i]) * 1099511628211ULL;
  h = (h ^ (uint64_t)q->n) * 1099511628211ULL;
  return h ? h : 1;
}

/* ---- which texts are worth preparing ---- */

static const char *skip_space_and_comments(const char *s) {
  for (;;) {
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '(') s++;
    if (s[0] == '-' && s[1] == '-') {
      while (*s && *s != '\n') s++;
      continue;
    }
    if (s[0] == '/' && s[1] == '*') { /* they nest in PostgreSQL */
      int depth = 0;
      do {
        if (s[0] == '/' && s[1] == '*') {
          depth++;
          s += 2;
        } else if (s[0] == '*' && s[1] == '/') {
          depth--;
          s += 2;
        } else {
          s++;
        }
      } while (*s && depth > 0);
      continue;
    }
    return s;
  }
}

int clank_pg_preparable(const char *sql) {
  static const char *const words[] = {"select", "insert", "update", "delete", "merge",
                                      "with",   "values", "table",  NULL};
  const char *s = skip_space_and_comments(sql);
  char word[8];
  size_t n = 0;
  while (n < sizeof word && ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
    word[n++] = (char)(*s++ | 0x20);
  if (n == 0 || n == sizeof word) return 0;
  if ((*s >= '0' && *s <= '9') || *s == '_' || *s == '$' || (unsigned char)*s >= 0x80) return 0;
  for (int i = 0; words[i]; i++)
    if (strlen(words[i]) == n && memcmp(words[i], word, n) == 0) return 1;
  return 0;
}

/* ---- the table ---- */

static int same_key(const clank_pg_stmt_t *st, const clank_pg_query_t *q, uint64_t h) {
  return st->hash == h && st->sqllen == q->sqllen && st->n == q->n &&
         memcmp(st->key, q->sql, q->sqllen) == 0 &&
         (q->n == 0 || memcmp(st->key + q->sqllen + 1, q->types, (size_t)q->n * sizeof(Oid)) == 0);
}

clank_pg_stmt_t *clank_pg_stmts_find(clank_pg_stmts_t *s, const clank_pg_query_t *q, uint64_t h) {
  for (int i = 0; i < CLANK_PG_STMTS; i++) {
    clank_pg_stmt_t *st = &s->slots[i];
    if (same_key(st, q, h)) {
      st->used = ++s->tick;
      return st;
    }
  }
  return NULL;
}

int clank_pg_stmts_seen(clank_pg_stmts_t *s, uint64_t h) {
  uint64_t *at = &s->seen[h % CLANK_PG_SEEN];
  if (*at == h) return 1;
  *at = h;
  return 0;
}

static void stmt_free(clank_pg_stmt_t *st) {
  free(st->key);
  memset(st, 0, sizeof *st);
}

clank_pg_stmt_t *clank_pg_stmts_begin(clank_pg_stmts_t *s, const clank_pg_query_t *q, uint64_t h) {
  if (s->ndoomed >= CLANK_PG_DOOMED_MAX) return NULL;
  clank_pg_stmt_t *st = &s->pending;
  stmt_free(st);
  size_t types = (size_t)q->n * sizeof(Oid);
  st->key = malloc(q->sqllen + 1 + types);
  if (st->key == NULL) return NULL;
  memcpy(st->key, q->sql, q->sqllen + 1);
  if (types) memcpy(st->key + q->sqllen + 1, q->types, types);
  st->hash = h;
  st->sqllen = q->sqllen;
  st->n = q->n;
  st->id = ++s->next_id;
  return st;
}

clank_pg_stmt_t *clank_pg_stmts_commit(clank_pg_stmts_t *s) {
  clank_pg_stmt_t *at = NULL;
  for (int i = 0; i < CLANK_PG_STMTS; i++) {
    clank_pg_stmt_t *st = &s->slots[i];
    if (st->hash == 0) {
      at = st;
      break;
    }
    if (at == NULL || st->used < at->used) at = st;
  }
  if (at->hash) clank_pg_stmts_drop(s, at, 1); /* the least recently used */
  *at = s->pending;
  at->used = ++s->tick;
  memset(&s->pending, 0, sizeof s->pending);
  s->count++;
  return at;
}

void clank_pg_stmts_abandon(clank_pg_stmts_t *s) { stmt_free(&s->pending); }

void clank_pg_stmts_drop(clank_pg_stmts_t *s, clank_pg_stmt_t *st, int exists) {
  if (st->hash == 0) return;
  /* room: slots + doomed stay within their bound (see clank_pg_stmts_t) */
  if (exists && s->ndoomed < (int)(sizeof s->doomed / sizeof s->doomed[0]))
    s->doomed[s->ndoomed++] = st->id;
  stmt_free(st);
  s->count--;
}

void clank_pg_stmt_name(unsigned id, char *out) {
  snprintf(out, CLANK_PG_NAME_SIZE, "clank_s%u", id);
}

void clank_pg_stmts_deallocate_sql(clank_pg_stmts_t *s, char *out) {
  size_t len = 0;
  for (int i = 0; i < s->ndoomed; i++) {
    char name[CLANK_PG_NAME_SIZE];
    clank_pg_stmt_name(s->doomed[i], name);
    len += (size_t)snprintf(out + len, CLANK_PG_DEALLOCATE_SIZE - len, "%sDEALLOCATE %s",
                            i ? ";" : "", name);
  }
  out[len] = '\0';
  s->ndoomed = 0;
}

void clank_pg_stmts_clear(clank_pg_stmts_t *s) {
  for (int i = 0; i < CLANK_PG_STMTS; i++) stmt_free(&s->slots[i]);
  stmt_free(&s->pending);
  s->count = 0;
  s->ndoomed = 0;
}

void clank_pg_stmts_free(clank_pg_stmts_t *s) { clank_pg_stmts_clear(s); }
