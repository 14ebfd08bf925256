/* io/db_postgres_stmts.c, the prepared statements a PostgreSQL connection
   keeps (db_postgres.h), without a server: which texts may be prepared; a
   text is prepared on its second run; the key is the text and the parameter
   types; the least recently used statement is evicted and its name doomed;
   no new statement while CLANK_PG_DOOMED_MAX names wait; the DEALLOCATE text;
   slots + doomed never pass their bound. Every expected value is written by
   hand from the header's contract. Exit status 1 when any check failed.
   Registered by cmake/ClankTests.cmake as unit/io/db_postgres_stmts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/db_postgres.h"

#include "../check.h"

#define INT8 20
#define TEXT_UNKNOWN 0
#define BYTEA 17

/* A query of sql with n parameters of the given types (types outlive it). */
static clank_pg_query_t query(const char *sql, int n, Oid *types) {
  clank_pg_query_t q;
  memset(&q, 0, sizeof q);
  q.sql = sql;
  q.sqllen = strlen(sql);
  q.n = n;
  q.types = types;
  return q;
}

/* Prepares q as db_postgres.c does on a second run: begin, then the server says yes. */
static clank_pg_stmt_t *prepare(clank_pg_stmts_t *s, const clank_pg_query_t *q) {
  uint64_t h = clank_pg_stmt_hash(q);
  if (clank_pg_stmts_begin(s, q, h) == NULL) return NULL;
  return clank_pg_stmts_commit(s);
}

static void test_preparable(void) {
  static const struct {
    const char *sql;
    int want;
  } cases[] = {
      {"SELECT 1", 1},
      {"select * from t", 1},
      {"  \n\tInsert INTO t VALUES ($1)", 1},
      {"UPDATE t SET a = 1", 1},
      {"DELETE FROM t", 1},
      {"WITH x AS (SELECT 1) SELECT * FROM x", 1},
      {"VALUES (1), (2)", 1},
      {"TABLE t", 1},
      {"MERGE INTO t USING s ON true WHEN MATCHED THEN DO NOTHING", 1},
      {"(SELECT 1) UNION (SELECT 2)", 1},
      {"-- a comment\nSELECT 1", 1},
      {"/* one /* nested */ still */ SELECT 1", 1},
      {"SELECT*FROM t", 1},
      {"BEGIN", 0},
      {"COMMIT", 0},
      {"ROLLBACK", 0},
      {"SET search_path TO x", 0},
      {"DEALLOCATE ALL", 0},
      {"DISCARD ALL", 0},
      {"CREATE TABLE t (a int)", 0},
      {"ALTER TABLE t ADD COLUMN b int", 0},
      {"EXPLAIN SELECT 1", 0},
      {"PREPARE p AS SELECT 1", 0},
      {"selected", 0},
      {"select_1", 0},
      {"select1", 0},
      {"", 0},
      {"   ", 0},
      {"-- only a comment", 0},
      {"/* unterminated SELECT", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    CHECK(clank_pg_preparable(cases[i].sql) == cases[i].want, "preparable(\"%s\") != %d",
          cases[i].sql, cases[i].want);
}

static void test_key(void) {
  clank_pg_stmts_t *s = calloc(1, sizeof *s);
  Oid int8[1] = {INT8}, text[1] = {TEXT_UNKNOWN}, bytea[1] = {BYTEA};
  clank_pg_query_t a = query("SELECT $1 AS v", 1, int8);
  clank_pg_query_t b = query("SELECT $1 AS v", 1, text);
  clank_pg_query_t c = query("SELECT $1 AS v", 1, bytea);
  clank_pg_query_t d = query("SELECT $1 AS w", 1, int8);
  CHECK(clank_pg_stmt_hash(&a) != clank_pg_stmt_hash(&b), "types change the hash");
  CHECK(clank_pg_stmt_hash(&a) != 0, "a hash is never 0");

  /* seen: the first run says no, the second yes */
  uint64_t ha = clank_pg_stmt_hash(&a);
  CHECK(clank_pg_stmts_seen(s, ha) == 0, "first run: not seen");
  CHECK(clank_pg_stmts_seen(s, ha) == 1, "second run: seen");
  CHECK(clank_pg_stmts_seen(s, clank_pg_stmt_hash(&b)) == 0, "other types: not seen");

  clank_pg_stmt_t *sa = prepare(s, &a);
  CHECK(sa != NULL && sa->id == 1, "the first statement is clank_s1");
  CHECK(clank_pg_stmts_find(s, &a, ha) == sa, "found by text and types");
  CHECK(clank_pg_stmts_find(s, &b, clank_pg_stmt_hash(&b)) == NULL, "not for text parameters");
  CHECK(clank_pg_stmts_find(s, &c, clank_pg_stmt_hash(&c)) == NULL, "not for bytea parameters");
  CHECK(clank_pg_stmts_find(s, &d, clank_pg_stmt_hash(&d)) == NULL, "not for another text");
  clank_pg_stmt_t *sb = prepare(s, &b);
  CHECK(sb != NULL && sb->id == 2 && sb != sa, "text parameters: a statement of their own");
  CHECK(s->count == 2, "two statements, not %d", s->count);

  char name[CLANK_PG_NAME_SIZE];
  clank_pg_stmt_name(42, name);
  CHECK(strcmp(name, "clank_s42") == 0, "name: %s", name);

  /* a PREPARE the server refused leaves nothing */
  CHECK(clank_pg_stmts_begin(s, &d, clank_pg_stmt_hash(&d)) != NULL, "begin");
  clank_pg_stmts_abandon(s);
  CHECK(clank_pg_stmts_find(s, &d, clank_pg_stmt_hash(&d)) == NULL, "abandoned: not found");
  CHECK(s->count == 2 && s->ndoomed == 0, "abandoned: count %d, doomed %d", s->count, s->ndoomed);

  /* dropped: gone from the server already (26000) or still there (doomed) */
  clank_pg_stmts_drop(s, sa, 0);
  CHECK(s->count == 1 && s->ndoomed == 0, "dropped, gone: count %d doomed %d", s->count,
        s->ndoomed);
  clank_pg_stmts_drop(s, sb, 1);
  CHECK(s->count == 0 && s->ndoomed == 1 && s->doomed[0] == 2, "dropped, doomed: %d %d", s->count,
        s->ndoomed);
  char sql[CLANK_PG_DEALLOCATE_SIZE];
  clank_pg_stmts_deallocate_sql(s, sql);
  CHECK(strcmp(sql, "DEALLOCATE clank_s2") == 0, "deallocate: %s", sql);
  CHECK(s->ndoomed == 0, "deallocated: none doomed");
  clank_pg_stmts_free(s);
  free(s);
}

/* CLANK_PG_STMTS + 1 texts: the least recently used one goes, its name doomed. */
static void test_lru(void) {
  clank_pg_stmts_t *s = calloc(1, sizeof *s);
  static char texts[CLANK_PG_STMTS + 8][40];
  clank_pg_query_t q[CLANK_PG_STMTS + 8];
  for (int i = 0; i < CLANK_PG_STMTS + 8; i++) {
    snprintf(texts[i], sizeof texts[i], "SELECT %d AS v", i);
    q[i] = query(texts[i], 0, NULL);
  }
  for (int i = 0; i < CLANK_PG_STMTS; i++) prepare(s, &q[i]);
  CHECK(s->count == CLANK_PG_STMTS && s->ndoomed == 0, "full: %d", s->count);
  clank_pg_stmts_find(s, &q[0], clank_pg_stmt_hash(&q[0])); /* 0 used again: 1 is the oldest */
  clank_pg_stmt_t *st = prepare(s, &q[CLANK_PG_STMTS]);
  CHECK(st != NULL && st->id == CLANK_PG_STMTS + 1, "the 65th statement");
  CHECK(s->count == CLANK_PG_STMTS, "still %d statements, not %d", CLANK_PG_STMTS, s->count);
  CHECK(s->ndoomed == 1 && s->doomed[0] == 2, "clank_s2 doomed (%d: %u)", s->ndoomed, s->doomed[0]);
  CHECK(clank_pg_stmts_find(s, &q[1], clank_pg_stmt_hash(&q[1])) == NULL, "1 evicted");
  CHECK(clank_pg_stmts_find(s, &q[0], clank_pg_stmt_hash(&q[0])) != NULL, "0 kept");
  CHECK(clank_pg_stmts_find(s, &q[2], clank_pg_stmt_hash(&q[2])) != NULL, "2 kept");

  /* DEALLOCATE ALL: everything forgotten, the doomed too */
  clank_pg_stmts_clear(s);
  CHECK(s->count == 0 && s->ndoomed == 0, "cleared: %d %d", s->count, s->ndoomed);
  CHECK(clank_pg_stmts_find(s, &q[0], clank_pg_stmt_hash(&q[0])) == NULL, "cleared: not found");
  clank_pg_stmts_free(s);
  free(s);
}

/* Inside a transaction nothing is deallocated: after CLANK_PG_DOOMED_MAX
   evictions no statement is added, and slots + doomed stay bounded however
   many are dropped. */
static void test_bound(void) {
  clank_pg_stmts_t *s = calloc(1, sizeof *s);
  static char texts[400][40];
  clank_pg_query_t q[400];
  for (int i = 0; i < 400; i++) {
    snprintf(texts[i], sizeof texts[i], "SELECT %d AS bound", i);
    q[i] = query(texts[i], 0, NULL);
  }
  int added = 0, refused = 0;
  for (int i = 0; i < 200; i++) {
    if (prepare(s, &q[i]))
      added++;
    else
      refused++;
    CHECK(s->count + s->ndoomed <= CLANK_PG_STMTS + CLANK_PG_DOOMED_MAX, "bound at %d: %d + %d", i,
          s->count, s->ndoomed);
  }
  CHECK(added == CLANK_PG_STMTS + CLANK_PG_DOOMED_MAX, "added %d", added);
  CHECK(refused == 200 - added, "refused %d", refused);
  CHECK(s->ndoomed == CLANK_PG_DOOMED_MAX, "doomed %d", s->ndoomed);
  /* every statement goes stale (0A000 inside the transaction): all doomed, none lost */
  for (int i = 0; i < CLANK_PG_STMTS; i++) clank_pg_stmts_drop(s, &s->slots[i], 1);
  CHECK(s->count == 0 && s->ndoomed == CLANK_PG_STMTS + CLANK_PG_DOOMED_MAX, "all doomed: %d %d",
        s->count, s->ndoomed);
  CHECK(clank_pg_stmts_begin(s, &q[300], clank_pg_stmt_hash(&q[300])) == NULL,
        "no statement while names wait");
  char sql[CLANK_PG_DEALLOCATE_SIZE];
  clank_pg_stmts_deallocate_sql(s, sql);
  int n = 0;
  for (const char *p = sql; (p = strstr(p, "DEALLOCATE clank_s")) != NULL; p++) n++;
  CHECK(n == CLANK_PG_STMTS + CLANK_PG_DOOMED_MAX, "%d DEALLOCATEs", n);
  CHECK(strncmp(sql, "DEALLOCATE clank_s", 18) == 0 && sql[strlen(sql) - 1] != ';',
        "one statement after another: %.40s", sql);
  CHECK(prepare(s, &q[300]) != NULL, "added again once deallocated");
  clank_pg_stmts_free(s);
  free(s);
}

int main(void) {
  test_preparable();
  test_key();
  test_lru();
  test_bound();
  printf("%d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
