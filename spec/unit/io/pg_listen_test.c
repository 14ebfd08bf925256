/* io/pg_listen.c against a real PostgreSQL (CLANK_TEST_POSTGRES_URL, from
   spec/helpers/postgres.sh start DIR), on a loop of its own: two listeners
   on one channel hear each other exactly once, byte for byte and in order,
   never themselves; the 7999-byte payload goes through and the queue stops
   at 1 MiB; a killed backend is reported down once and up again, and hears
   what comes after; a port nobody listens on is reported down once while it
   retries; close is clean at every stage and no callback runs after it.
   Every expected value is written by hand from the module's contract
   (pg_listen.h), not taken from a run. Every wait has a deadline, so the
   program cannot hang. Without a server the cases needing one are skipped
   (a SKIP line, exit status 0). Exit status 1 when any check failed.
   Registered by cmake/ClankTests.cmake as unit/io/pg_listen. */
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "io/pg_listen.h"

#include "../check.h"

/* The password of the unreachable URLs: no reason may show it. */
#define SECRET "s3cretpw"

/* ---- what a listener's callbacks saw ---- */

typedef struct seen_s {
  const char *name;
  clank_pglisten_t *l;
  char history[32]; /* one character a state call: '1' up, '0' down */
  int nstates;
  char reason[512]; /* of the last down */
  int bad_reasons;  /* a down without a reason, on several lines, or with the password */
  char **payloads;
  size_t *lens;
  int n, cap;
  int close_on_notified; /* closes itself from its first notification */
  int closed;
  int after_close; /* callbacks after close: must stay 0 */
} seen_t;

static void on_notified(void *ud, const char *payload, size_t len) {
  seen_t *s = ud;
  if (s->closed) s->after_close++;
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 64;
    s->payloads = realloc(s->payloads, s->cap * sizeof *s->payloads);
    s->lens = realloc(s->lens, s->cap * sizeof *s->lens);
    if (s->payloads == NULL || s->lens == NULL) abort();
  }
  s->payloads[s->n] = malloc(len ? len : 1);
  if (s->payloads[s->n] == NULL) abort();
  memcpy(s->payloads[s->n], payload, len);
  s->lens[s->n++] = len;
  if (s->close_on_notified && !s->closed) {
    s->closed = 1;
    clank_pglisten_close(s->l);
  }
}

static void on_state(void *ud, int up, const char *reason) {
  seen_t *s = ud;
  if (s->closed) s->after_close++;
  if (s->nstates < (int)sizeof s->history - 1) s->history[s->nstates] = up ? '1' : '0';
  s->nstates++;
  if (up) return;
  if (reason == NULL || reason[0] == '\0' || strchr(reason, '\n') || strstr(reason, SECRET))
    s->bad_reasons++;
  snprintf(s->reason, sizeof s->reason, "%s", reason ? reason : "(null)");
}

static clank_pglisten_t *open_seen(uv_loop_t *loop, seen_t *s, const char *name, const char *url,
                                   const char *channel) {
  memset(s, 0, sizeof *s);
  s->name = name;
  char err[256] = "";
  clank_pglisten_events_t ev = {s, on_notified, on_state};
  s->l = clank_pglisten_open(loop, url, channel, ev, err, sizeof err);
  CHECK(s->l != NULL, "%s: open failed: %s", name, err);
  return s->l;
}

static void close_seen(seen_t *s) {
  if (s->l && !s->closed) clank_pglisten_close(s->l);
  s->closed = 1;
}

static void free_seen(seen_t *s) {
  CHECK(s->after_close == 0, "%s: %d callbacks after close", s->name, s->after_close);
  for (int i = 0; i < s->n; i++) free(s->payloads[i]);
  free(s->payloads);
  free(s->lens);
}

static int received(const seen_t *s, int i, const char *payload, size_t len) {
  return i < s->n && s->lens[i] == len && memcmp(s->payloads[i], payload, len) == 0;
}

/* ---- waiting with a deadline ---- */

typedef struct waiter_s {
  uv_loop_t *loop;
  uv_timer_t deadline;
  int expired;
} waiter_t;

static void on_deadline(uv_timer_t *t) {
  waiter_t *w = t->data;
  w->expired = 1;
}

/* Runs the loop until cond(arg) holds or ms have passed; returns whether it holds. */
static int wait_for(waiter_t *w, int (*cond)(const void *), const void *arg, uint64_t ms) {
  w->expired = 0;
  uv_timer_start(&w->deadline, on_deadline, ms, 0);
  while (!(cond && cond(arg)) && !w->expired) uv_run(w->loop, UV_RUN_ONCE);
  uv_timer_stop(&w->deadline);
  return cond && cond(arg);
}

static void wait_ms(waiter_t *w, uint64_t ms) { wait_for(w, NULL, NULL, ms); }

typedef struct count_s {
  const int *at;
  int want;
} count_t;

static int reached(const void *arg) {
  const count_t *c = arg;
  return *c->at >= c->want;
}

/* Waits until *at >= want; the check names what did not come. */
#define WAIT_COUNT(w, at_, want_, ms, what)                                                       \
  do {                                                                                            \
    count_t c_ = {&(at_), (want_)};                                                               \
    CHECK(wait_for((w), reached, &c_, (ms)), "%s: %d of %d after %d ms", (what), *c_.at, c_.want, \
          (ms));                                                                                  \
  } while (0)

/* ---- malformed arguments: no server needed ---- */

static void test_malformed(uv_loop_t *loop) {
  static const struct {
    const char *url, *channel, *why;
  } cases[] = {
      {"postgres://host:5432/db?oops", "c", "a query parameter without ="},
      {"postgresql://host/db?bogus_option=1", "c", "an unknown option"},
      {"postgresql://[::1/db", "c", "an IPv6 address without its ]"},
      {"not a url", "c", "neither a URL nor key=value"},
      {"host=/tmp dbname='unterminated", "c", "an unterminated quoted value"},
      {"postgresql://u:" SECRET "%zz@host/db", "c", "a bad escape in the password"},
      {"postgresql://h1,h2/db", "c", "several hosts"},
      {"host=a,b dbname=x", "c", "several hosts as key=value"},
      {"postgresql://host/db", "", "an empty channel"},
      {"postgresql://host/db", "a channel of sixty-four bytes, one more than a name may hold....",
       "a 64-byte channel"},
      {NULL, "c", "no URL"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char err[256] = "";
    seen_t s;
    memset(&s, 0, sizeof s);
    clank_pglisten_events_t ev = {&s, on_notified, on_state};
    clank_pglisten_t *l =
        clank_pglisten_open(loop, cases[i].url, cases[i].channel, ev, err, sizeof err);
    CHECK(l == NULL, "%s: opened", cases[i].why);
    CHECK(err[0] != '\0', "%s: no reason in err", cases[i].why);
    CHECK(strstr(err, SECRET) == NULL, "%s: the password in err: %s", cases[i].why, err);
    CHECK(s.nstates == 0 && s.n == 0, "%s: a callback ran", cases[i].why);
    if (l) clank_pglisten_close(l);
  }
  CHECK(strlen(cases[9].channel) == 64, "the long channel is %zu bytes", strlen(cases[9].channel));
}

/* ---- a port nobody listens on; close at every stage ---- */

static void test_unreachable(waiter_t *w) {
  seen_t tcp, sock;
  /* a name to resolve, then a refused connection */
  open_seen(w->loop, &tcp, "unreachable tcp",
            "postgresql://clank:" SECRET "@localhost:1/clank_test?connect_timeout=2",
            "unreachable");
  /* a socket folder where no server is: fails as it starts */
  open_seen(w->loop, &sock, "unreachable socket",
            "host=/nonexistent-clank-dir port=1 dbname=clank_test password=" SECRET, "unreachable");
  if (!tcp.l || !sock.l) return;
  CHECK(clank_pglisten_up(tcp.l) == 0, "tcp: up before the loop ran");
  CHECK(tcp.nstates == 0 && sock.nstates == 0, "a state callback before the loop ran");
  WAIT_COUNT(w, tcp.nstates, 1, 5000, "tcp: the first state");
  WAIT_COUNT(w, sock.nstates, 1, 5000, "socket: the first state");
  /* retries at 100, 200, 400 and 800 ms meanwhile: still down, told once */
  wait_ms(w, 1200);
  seen_t *both[] = {&tcp, &sock};
  for (int i = 0; i < 2; i++) {
    seen_t *s = both[i];
    CHECK(strcmp(s->history, "0") == 0, "%s: states \"%s\", want \"0\"", s->name, s->history);
    CHECK(s->bad_reasons == 0, "%s: a bad reason: %s", s->name, s->reason);
    CHECK(clank_pglisten_up(s->l) == 0, "%s: up", s->name);
    CHECK(clank_pglisten_notify(s->l, "x", 1) == -1, "%s: notify while down accepted", s->name);
    close_seen(s); /* mid-backoff */
  }
  wait_ms(w, 300);
  free_seen(&tcp);
  free_seen(&sock);
}

static void test_close_early(waiter_t *w, const char *url) {
  seen_t before, resolving, connecting;
  /* before the first attempt */
  if (open_seen(w->loop, &before, "closed before the loop", "postgresql://localhost:1/x", "c"))
    close_seen(&before);
  /* one turn of the loop starts the first attempt: the look-up of the name */
  if (open_seen(w->loop, &resolving, "closed resolving", "postgresql://localhost:1/x", "c")) {
    uv_run(w->loop, UV_RUN_NOWAIT);
    close_seen(&resolving);
  }
  /* a real server: connecting, or LISTEN on its way */
  memset(&connecting, 0, sizeof connecting);
  if (url && open_seen(w->loop, &connecting, "closed connecting", url, "c")) {
    uv_run(w->loop, UV_RUN_NOWAIT);
    uv_run(w->loop, UV_RUN_NOWAIT);
    close_seen(&connecting);
  }
  wait_ms(w, 300);
  CHECK(before.nstates + before.n == 0, "closed before the loop: a callback");
  CHECK(resolving.nstates + resolving.n == 0, "closed resolving: a callback");
  CHECK(connecting.nstates + connecting.n == 0, "closed connecting: a callback");
  free_seen(&before);
  free_seen(&resolving);
  free_seen(&connecting);
}

/* ---- two listeners on one channel ---- */

#define BIG 7999                       /* the longest payload the contract takes */
#define QUEUE_LIMIT 1048576            /* 1 MiB */
#define QUEUE_FITS (QUEUE_LIMIT / BIG) /* 131 payloads of 7999 bytes: 1047869 bytes */
#define QUEUE_TRIES 200

/* A payload of len bytes told apart by its tag: "007|hijk...". */
static void fill(char *buf, size_t len, int tag) {
  for (size_t i = 0; i < len; i++) buf[i] = (char)('a' + (i + (size_t)tag) % 26);
  char head[8];
  snprintf(head, sizeof head, "%03d|", tag % 1000);
  memcpy(buf, head, len < 4 ? len : 4);
}

static void test_pair(waiter_t *w, const char *url) {
  /* 63 bytes, the most a name holds, with quotes, capitals and spaces: LISTEN must quote it */
  const char *channel = "Clank \"pub\" Sub: a channel of sixty-three bytes, quoted.......!";
  CHECK(strlen(channel) == 63, "the channel is %zu bytes", strlen(channel));
  seen_t a, b;
  open_seen(w->loop, &a, "A", url, channel);
  open_seen(w->loop, &b, "B", url, channel);
  if (!a.l || !b.l) return;
  WAIT_COUNT(w, a.nstates, 1, 10000, "A: up");
  WAIT_COUNT(w, b.nstates, 1, 10000, "B: up");
  CHECK(clank_pglisten_up(a.l) == 1 && clank_pglisten_up(b.l) == 1, "not both up");

  /* byte for byte: UTF-8, quotes, a backslash, a new line, a tab */
  static const char first[] = "h\xc3\xa9llo \"quoted\" 'single' \\ back\nline\ttab \xe2\x82\xac";
  CHECK(clank_pglisten_notify(a.l, first, sizeof first - 1) == 0, "A: notify refused");
  WAIT_COUNT(w, b.n, 1, 5000, "B: the first notification");
  CHECK(received(&b, 0, first, sizeof first - 1), "B: the first payload differs");

  /* in order */
  char text[32];
  for (int i = 0; i < 100; i++) {
    int n = snprintf(text, sizeof text, "order %03d", i);
    CHECK(clank_pglisten_notify(a.l, text, (size_t)n) == 0, "A: notify %d refused", i);
  }
  WAIT_COUNT(w, b.n, 101, 10000, "B: 100 notifications");
  for (int i = 0; i < 100; i++) {
    int n = snprintf(text, sizeof text, "order %03d", i);
    CHECK(received(&b, 1 + i, text, (size_t)n), "B: notification %d is not \"%s\"", 1 + i, text);
  }

  /* the longest payload; one byte more, or a NUL, is refused */
  char *big = malloc(BIG + 1);
  if (big == NULL) abort();
  fill(big, BIG + 1, 0);
  CHECK(clank_pglisten_notify(a.l, big, BIG + 1) == -1, "A: a payload of 8000 bytes accepted");
  CHECK(clank_pglisten_notify(a.l, "a\0b", 3) == -1, "A: a payload with a NUL accepted");
  CHECK(clank_pglisten_notify(a.l, big, BIG) == 0, "A: a payload of 7999 bytes refused");
  WAIT_COUNT(w, b.n, 102, 5000, "B: the 7999-byte notification");
  CHECK(received(&b, 101, big, BIG), "B: the 7999-byte payload differs");

  /* the queue: 131 payloads of 7999 bytes fit in 1 MiB, the 132nd would not; nothing is sent
     before the loop turns, so every one of them waits in it */
  int accepted = 0, first_refused = -1;
  for (int i = 0; i < QUEUE_TRIES; i++) {
    fill(big, BIG, i);
    if (clank_pglisten_notify(a.l, big, BIG) == 0)
      accepted += first_refused < 0; /* none accepted after a refusal */
    else if (first_refused < 0)
      first_refused = i;
  }
  CHECK(accepted == QUEUE_FITS, "A: the queue took %d payloads of 7999 bytes, want %d", accepted,
        QUEUE_FITS);
  CHECK(first_refused == QUEUE_FITS, "A: the first refused is %d, want %d", first_refused,
        QUEUE_FITS);
  WAIT_COUNT(w, b.n, 102 + QUEUE_FITS, 20000, "B: the queued notifications");
  for (int i = 0; i < QUEUE_FITS; i++) {
    fill(big, BIG, i);
    CHECK(received(&b, 102 + i, big, BIG), "B: queued payload %d differs or is out of order", i);
  }
  free(big);

  /* B answers last: A hears it after anything of its own it could have heard, so hearing only
     that proves it heard none of its own. A's last one does the same for B: no duplicate. */
  static const char end_a[] = "the end, from A", end_b[] = "the end, from B";
  CHECK(clank_pglisten_notify(a.l, end_a, sizeof end_a - 1) == 0, "A: notify refused");
  WAIT_COUNT(w, b.n, 103 + QUEUE_FITS, 5000, "B: A's last");
  CHECK(clank_pglisten_notify(b.l, end_b, sizeof end_b - 1) == 0, "B: notify refused");
  WAIT_COUNT(w, a.n, 1, 5000, "A: B's last");
  wait_ms(w, 200);
  CHECK(a.n == 1 && received(&a, 0, end_b, sizeof end_b - 1),
        "A: heard %d notifications, want only B's last", a.n);
  CHECK(b.n == 103 + QUEUE_FITS, "B: heard %d notifications, want %d", b.n, 103 + QUEUE_FITS);
  CHECK(received(&b, 102 + QUEUE_FITS, end_a, sizeof end_a - 1), "B: A's last differs");
  CHECK(strcmp(a.history, "1") == 0, "A: states \"%s\", want \"1\"", a.history);
  CHECK(strcmp(b.history, "1") == 0, "B: states \"%s\", want \"1\"", b.history);
  close_seen(&a);
  close_seen(&b);
  wait_ms(w, 100);
  free_seen(&a);
  free_seen(&b);
}

/* ---- a killed backend ---- */

/* url with application_name set, as a URL or as key=value. */
static char *with_app_name(const char *url, const char *name) {
  size_t n = strlen(url) + strlen(name) + 32;
  char *s = malloc(n);
  if (s == NULL) abort();
  if (strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0)
    snprintf(s, n, "%s%capplication_name=%s", url, strchr(url, '?') ? '&' : '?', name);
  else
    snprintf(s, n, "%s application_name=%s", url, name);
  return s;
}

/* Kills the backends of application_name name from a blocking connection of
   its own; returns how many. */
static int kill_backends(const char *url, const char *name) {
  PGconn *pg = PQconnectdb(url);
  int killed = -1;
  if (PQstatus(pg) == CONNECTION_OK) {
    const char *params[1] = {name};
    PGresult *r = PQexecParams(pg,
                               "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                               " WHERE application_name = $1",
                               1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
      killed = 0;
      for (int i = 0; i < PQntuples(r); i++) killed += strcmp(PQgetvalue(r, i, 0), "t") == 0;
    } else {
      fprintf(stderr, "kill: %s", PQerrorMessage(pg));
    }
    PQclear(r);
  } else {
    fprintf(stderr, "kill: %s", PQerrorMessage(pg));
  }
  PQfinish(pg);
  return killed;
}

static void test_kill(waiter_t *w, const char *url) {
  const char *channel = "pglisten kill";
  char *victim_url = with_app_name(url, "clank_pglisten_victim");
  seen_t victim, other;
  open_seen(w->loop, &victim, "victim", victim_url, channel);
  open_seen(w->loop, &other, "other", url, channel);
  free(victim_url);
  if (!victim.l || !other.l) return;
  WAIT_COUNT(w, victim.nstates, 1, 10000, "victim: up");
  WAIT_COUNT(w, other.nstates, 1, 10000, "other: up");
  static const char before[] = "before the kill", after[] = "after the kill";
  CHECK(clank_pglisten_notify(other.l, before, sizeof before - 1) == 0, "other: notify refused");
  WAIT_COUNT(w, victim.n, 1, 5000, "victim: the notification before the kill");

  CHECK(kill_backends(url, "clank_pglisten_victim") == 1, "not one backend killed");
  WAIT_COUNT(w, victim.nstates, 3, 10000, "victim: down and up again");
  CHECK(strcmp(victim.history, "101") == 0, "victim: states \"%s\", want \"101\"", victim.history);
  CHECK(victim.bad_reasons == 0, "victim: a bad reason: %s", victim.reason);
  CHECK(clank_pglisten_up(victim.l) == 1, "victim: not up after reconnecting");

  CHECK(clank_pglisten_notify(other.l, after, sizeof after - 1) == 0, "other: notify refused");
  WAIT_COUNT(w, victim.n, 2, 5000, "victim: the notification after the kill");
  CHECK(received(&victim, 0, before, sizeof before - 1), "victim: the first payload differs");
  CHECK(received(&victim, 1, after, sizeof after - 1), "victim: the second payload differs");
  CHECK(strcmp(other.history, "1") == 0, "other: states \"%s\", want \"1\"", other.history);
  close_seen(&victim);
  close_seen(&other);
  wait_ms(w, 100);
  CHECK(victim.n == 2, "victim: heard %d notifications, want 2", victim.n);
  free_seen(&victim);
  free_seen(&other);
}

/* ---- close from a callback ---- */

static void test_close_in_callback(waiter_t *w, const char *url) {
  const char *channel = "pglisten close";
  seen_t closer, sender;
  open_seen(w->loop, &closer, "closer", url, channel);
  open_seen(w->loop, &sender, "sender", url, channel);
  if (!closer.l || !sender.l) return;
  closer.close_on_notified = 1;
  WAIT_COUNT(w, closer.nstates, 1, 10000, "closer: up");
  WAIT_COUNT(w, sender.nstates, 1, 10000, "sender: up");
  for (int i = 0; i < 3; i++)
    CHECK(clank_pglisten_notify(sender.l, "three in a row", 14) == 0, "sender: notify refused");
  WAIT_COUNT(w, closer.n, 1, 5000, "closer: the first of three");
  wait_ms(w, 300);
  CHECK(closer.n == 1, "closer: heard %d, want 1 (it closed at the first)", closer.n);
  close_seen(&sender);
  wait_ms(w, 100);
  free_seen(&closer);
  free_seen(&sender);
}

int main(void) {
  uv_loop_t loop;
  waiter_t w = {&loop, {0}, 0};
  if (uv_loop_init(&loop) != 0) return 1;
  uv_timer_init(&loop, &w.deadline);
  w.deadline.data = &w;

  const char *url = getenv("CLANK_TEST_POSTGRES_URL");
  if (url && url[0] == '\0') url = NULL;
  test_malformed(&loop);
  test_unreachable(&w);
  test_close_early(&w, url);
  if (url) {
    test_pair(&w, url);
    test_kill(&w, url);
    test_close_in_callback(&w, url);
  } else {
    printf(
        "SKIP unit/io/pg_listen: no PostgreSQL (CLANK_TEST_POSTGRES_URL is not set): "
        "only the cases without a server ran\n");
  }

  /* Everything is closed: the loop ends once the last close callback has run. */
  uv_unref((uv_handle_t *)&w.deadline);
  w.expired = 0;
  uv_timer_start(&w.deadline, on_deadline, 5000, 0);
  while (uv_run(&loop, UV_RUN_ONCE) && !w.expired) continue;
  CHECK(!w.expired, "handles still open 5 s after every listener closed");
  uv_close((uv_handle_t *)&w.deadline, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0, "the loop still has handles");
  printf("unit/io/pg_listen: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
