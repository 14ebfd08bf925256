/* Topics beyond one Lua state (issue 28; the design is in pubsub.h). */
#include "host/pubsub.h"

#include <errno.h>
#include <lauxlib.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/protect.h"
#include "core/scheduler.h"
#include "data/json.h"
#include "host/generation.h"
#include "host/host.h"
#include "io/pg_listen.h"

#define CHANNEL_MAX 63 /* PostgreSQL's identifiers (NAMEDATALEN - 1) */
/* Under a steady stream of publishes, one pg_notify at most every NOTIFY_GAP_MS, carrying the
   records of the turns in between: each is a transaction PostgreSQL commits and signals to
   every listener (this one too), which cost it 20 to 50 µs per create of the tasks app under
   load when every turn that published sent one. The first publish after a quiet gap goes at
   once; a gap's records go early once they fill a notification. */
#define NOTIFY_GAP_MS 2

typedef struct clank_pubsub_s {
  clank_host_t *host;
  char instance[CLANK_INSTANCE_ID + 1];
  clank_buf_t out; /* this turn's publishes, as records */
  uv_prepare_t flush;
  int flushing;
  /* --workers: the datagram socket to the master */
  uv_poll_t topics;
  int topics_fd, topics_open, topics_lost;
  /* several instances: the PostgreSQL listener */
  clank_pglisten_t *pg;
  uv_timer_t pg_gap;   /* active: a notification went less than NOTIFY_GAP_MS ago */
  clank_buf_t pg_out;  /* the records gathered since, for the next one */
  int pg_was_down;     /* it was down once: a reconnect re-loads every subscribed session */
  clank_buf_t trouble; /* health's reason, as a JSON string; empty while all is well */
  char in[CLANK_TOPICS_DGRAM + 1];
} pubsub_t;

int clank_pubsub_instance(char out[CLANK_INSTANCE_ID + 1]) {
  unsigned char raw[CLANK_INSTANCE_ID / 2];
  if (RAND_bytes(raw, sizeof raw) != 1) return -1;
  for (size_t i = 0; i < sizeof raw; i++) snprintf(out + 2 * i, 3, "%02x", raw[i]);
  return 0;
}

/* ---- in: to the current generation's clank.pubsub ---- */

/* [fn, args...] → fn(args...) in a task of its own, charged like a request. */
static int in_task(lua_State *L) { return clank_sched_call(L, lua_gettop(L) - 1); }

/* pubsub[method](text?), protected; a failure is logged. */
static void call_pubsub(pubsub_t *ps, const char *method, const char *text, size_t n) {
  clank_gen_t *g = ps->host->gen;
  if (g == NULL) return;
  lua_State *L = g->L;
  int top = lua_gettop(L);
  lua_pushcfunction(L, in_task);
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, "clank.pubsub") != LUA_TTABLE ||
      lua_getfield(L, -1, method) != LUA_TFUNCTION) {
    lua_settop(L, top); /* nobody in this state uses topics */
    return;
  }
  lua_replace(L, top + 2);
  lua_settop(L, top + 2);
  int nargs = 1;
  if (text) {
    lua_pushlstring(L, text, n);
    nargs++;
  }
  if (clank_pcall(L, nargs, 0) != LUA_OK) {
    clank_log_msg(&ps->host->log, "error", "pubsub: %s failed: %s", method,
                  clank_error_text(L, -1));
  }
  lua_settop(L, top);
}

static void topics_readable(uv_poll_t *p, int status, int events) {
  (void)events;
  pubsub_t *ps = p->data;
  if (status < 0) {
    uv_poll_stop(p);
    return;
  }
  for (int budget = 64; budget > 0; budget--) { /* then the loop's other work goes first */
    ssize_t n = recv(ps->topics_fd, ps->in, sizeof ps->in, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    if ((size_t)n <= CLANK_TOPICS_DGRAM) call_pubsub(ps, "receive", ps->in, (size_t)n);
  }
}

static void pg_notified(void *ud, const char *payload, size_t n) {
  pubsub_t *ps = ud;
  /* "<instance>\n<records>": this instance's own went to its workers already */
  if (n <= CLANK_INSTANCE_ID || payload[CLANK_INSTANCE_ID] != '\n' ||
      memcmp(payload, ps->instance, CLANK_INSTANCE_ID) == 0)
    return;
  call_pubsub(ps, "receive", payload + CLANK_INSTANCE_ID + 1, n - CLANK_INSTANCE_ID - 1);
}

static void pg_state(void *ud, int up, const char *reason) {
  pubsub_t *ps = ud;
  clank_host_t *h = ps->host;
  h->metrics->pubsub_listener = up ? CLANK_LISTENER_UP : CLANK_LISTENER_DOWN;
  if (up) {
    clank_buf_reset(&ps->trouble);
    if (ps->pg_was_down) {
      clank_log_msg(&h->log, "info",
                    "pubsub: the PostgreSQL listener is back; every subscribed view re-loads");
      call_pubsub(ps, "resync", NULL, 0); /* what was missed meanwhile */
    }
    return;
  }
  ps->pg_was_down = 1;
  char text[512];
  snprintf(text, sizeof text,
           "The PostgreSQL listener of topics is down (%s): publishes reach this instance only "
           "until it reconnects.",
           reason ? reason : "no reason given");
  clank_buf_reset(&ps->trouble);
  clank_buf_appendc(&ps->trouble, '"');
  if (clank_json_escape(&ps->trouble, text, strlen(text)) != 0) { /* a reason not UTF-8 */
    clank_buf_reset(&ps->trouble);
    clank_buf_appends(&ps->trouble, "\"The PostgreSQL listener of topics is down.");
  }
  clank_buf_appends(&ps->trouble, "\"");
  clank_buf_appendc(&ps->trouble, '\0');
  ps->trouble.len--; /* the NUL stays after the text */
  clank_log_msg(&h->log, "warn", "pubsub: the PostgreSQL listener is down, retrying: %s",
                reason ? reason : "no reason given");
}

/* ---- out: once per loop turn ---- */

/* The length of the longest run of whole records from p that fits in max. */
static size_t records_within(const char *p, size_t n, size_t max) {
  if (n <= max) return n;
  size_t cut = 0;
  for (size_t i = 0; i < max; i++)
    if (p[i] == '\n') cut = i + 1;
  return cut;
}

static uint64_t count_records(const char *p, size_t n) {
  uint64_t records = 0;
  for (size_t i = 0; i < n; i++) records += p[i] == '\n';
  return records;
}

static void send_to_workers(pubsub_t *ps, const char *p, size_t n) {
  while (n > 0) {
    size_t take = records_within(p, n, CLANK_TOPICS_DGRAM);
    if (take == 0) return; /* a record longer than a datagram: publish's limits forbid it */
    if (send(ps->topics_fd, p, take, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
      ps->host->metrics->topics_dropped += count_records(p, take);
      if (!ps->topics_lost) {
        ps->topics_lost = 1;
        clank_log_msg(&ps->host->log, "warn",
                      "pubsub: the master takes topics too slowly: publishes to the other "
                      "workers are dropped (%s)",
                      strerror(errno));
      }
    }
    p += take;
    n -= take;
  }
}

static void send_to_instances(pubsub_t *ps, const char *p, size_t n) {
  char payload[CLANK_PGLISTEN_PAYLOAD_MAX];
  const size_t head = CLANK_INSTANCE_ID + 1;
  memcpy(payload, ps->instance, CLANK_INSTANCE_ID);
  payload[CLANK_INSTANCE_ID] = '\n';
  while (n > 0) {
    size_t take = records_within(p, n, sizeof payload - head);
    if (take == 0) return;
    memcpy(payload + head, p, take);
    if (clank_pglisten_notify(ps->pg, payload, head + take) != 0) /* down: said by pg_state */
      ps->host->metrics->topics_dropped += count_records(p, take);
    p += take;
    n -= take;
  }
}

/* The gap after a notification is over: what gathered in it goes, and opens another. */
static void pg_gap_over(uv_timer_t *t) {
  pubsub_t *ps = t->data;
  if (ps->pg_out.len == 0) return; /* quiet: the next publish goes at once */
  if (ps->pg) send_to_instances(ps, ps->pg_out.data, ps->pg_out.len);
  clank_buf_reset(&ps->pg_out);
  uv_timer_start(&ps->pg_gap, pg_gap_over, NOTIFY_GAP_MS, 0);
}

static void to_instances(pubsub_t *ps, const char *p, size_t n) {
  if (uv_is_active((uv_handle_t *)&ps->pg_gap)) {
    if (clank_buf_append(&ps->pg_out, p, n) != 0) {
      ps->host->metrics->topics_dropped += count_records(p, n);
      return;
    }
    if (ps->pg_out.len < CLANK_PGLISTEN_PAYLOAD_MAX - CLANK_INSTANCE_ID - 1) return;
    p = ps->pg_out.data; /* a notification's worth: no reason to wait */
    n = ps->pg_out.len;
  }
  send_to_instances(ps, p, n);
  clank_buf_reset(&ps->pg_out);
  uv_timer_start(&ps->pg_gap, pg_gap_over, NOTIFY_GAP_MS, 0);
}

static void flush(uv_prepare_t *p) {
  pubsub_t *ps = p->data;
  uv_prepare_stop(p);
  ps->flushing = 0;
  if (ps->topics_open) send_to_workers(ps, ps->out.data, ps->out.len);
  if (ps->pg) to_instances(ps, ps->out.data, ps->out.len);
  clank_buf_reset(&ps->out);
}

/* relay(topic, payload_text?): one publish for the others; upvalue 1: ps. */
static int relay(lua_State *L) {
  pubsub_t *ps = lua_touserdata(L, lua_upvalueindex(1));
  size_t tn, pn = 0;
  const char *topic = luaL_checklstring(L, 1, &tn);
  const char *payload = luaL_optlstring(L, 2, NULL, &pn);
  clank_buf_append(&ps->out, topic, tn);
  if (payload) {
    clank_buf_appendc(&ps->out, ' ');
    clank_buf_append(&ps->out, payload, pn);
  }
  clank_buf_appendc(&ps->out, '\n');
  if (!ps->flushing) {
    ps->flushing = 1;
    uv_prepare_start(&ps->flush, flush);
  }
  return 0;
}

void clank_pubsub_attach(clank_host_t *h, clank_gen_t *g) {
  pubsub_t *ps = h->pubsub;
  if (ps == NULL) return;
  lua_pushlightuserdata(g->L, ps);
  lua_pushcclosure(g->L, relay, 1);
  lua_setfield(g->L, LUA_REGISTRYINDEX, CLANK_RELAY_KEY);
}

/* The channel: "clank." and the app's name, cut to an identifier's length. */
static void channel_of(const char *app, char out[CHANNEL_MAX + 1]) {
  int n = snprintf(out, CHANNEL_MAX + 1, "clank.%s", app);
  if (n > CHANNEL_MAX) { /* cut before a whole character: a channel is UTF-8 text */
    n = CHANNEL_MAX;
    while (n > 0 && ((unsigned char)out[n] & 0xC0) == 0x80) n--;
    out[n] = '\0';
  }
}

int clank_pubsub_start(clank_host_t *h, const char *url, char *err, size_t errlen) {
  int pg = url && *url;
  if (!pg && h->worker == NULL) return 0; /* nobody else to tell */
  pubsub_t *ps = calloc(1, sizeof *ps);
  if (ps == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  ps->host = h;
  ps->topics_fd = -1;
  if (h->worker)
    memcpy(ps->instance, h->worker->instance, sizeof ps->instance);
  else if (clank_pubsub_instance(ps->instance) != 0) {
    snprintf(err, errlen, "no random bytes for the instance id");
    free(ps);
    return -1;
  }
  if (pg) {
    char channel[CHANNEL_MAX + 1];
    channel_of(h->gen->name, channel);
    clank_pglisten_events_t ev = {.ud = ps, .notified = pg_notified, .state = pg_state};
    ps->pg = clank_pglisten_open(&h->loop, url, channel, ev, err, errlen);
    if (ps->pg == NULL) {
      free(ps);
      return -1;
    }
    h->metrics->pubsub_listener = CLANK_LISTENER_DOWN; /* until it listens */
    uv_timer_init(&h->loop, &ps->pg_gap);
    ps->pg_gap.data = ps;
  }
  uv_prepare_init(&h->loop, &ps->flush);
  ps->flush.data = ps;
  if (h->worker && h->worker->topic_fd >= 0 &&
      uv_poll_init_socket(&h->loop, &ps->topics, h->worker->topic_fd) == 0) {
    ps->topics_fd = h->worker->topic_fd;
    ps->topics_open = 1;
    ps->topics.data = ps;
    int room = CLANK_TOPICS_BUFFER;
    setsockopt(ps->topics_fd, SOL_SOCKET, SO_SNDBUF, &room, sizeof room);
    uv_poll_start(&ps->topics, UV_READABLE, topics_readable);
    uv_unref((uv_handle_t *)&ps->topics);
  }
  h->pubsub = ps;
  clank_pubsub_attach(h, h->gen);
  return 0;
}

const char *clank_pubsub_trouble(const clank_host_t *h) {
  const pubsub_t *ps = h->pubsub;
  return ps && ps->trouble.len ? ps->trouble.data : NULL;
}

void clank_pubsub_stop(clank_host_t *h) {
  pubsub_t *ps = h->pubsub;
  if (ps == NULL) return;
  if (ps->pg) clank_pglisten_close(ps->pg); /* its handles close through its own callbacks */
  ps->pg = NULL;
}

void clank_pubsub_free(clank_host_t *h) {
  pubsub_t *ps = h->pubsub;
  if (ps == NULL) return;
  if (ps->topics_fd >= 0) close(ps->topics_fd);
  clank_buf_free(&ps->out);
  clank_buf_free(&ps->pg_out);
  clank_buf_free(&ps->trouble);
  free(ps);
  h->pubsub = NULL;
}
