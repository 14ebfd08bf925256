/* The listener: binding, accepting, stopping. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/server.h"

void clank_server_init_parser_settings(llhttp_settings_t *s);

static void on_connection(uv_stream_t *listener, int status) {
  clank_server_t *s = listener->data;
  if (status < 0 || s->stopping) return;
  clank_conn_accept(s);
}

static int is_loopback(const struct sockaddr_storage *ss) {
  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
    return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
  }
  if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
    return memcmp(&a->sin6_addr, &in6addr_loopback, sizeof in6addr_loopback) == 0;
  }
  return 0;
}

int clank_server_listen(clank_server_t *s, uv_loop_t *loop, const char *host, int port,
                        int *bound_port, char *err, size_t errlen) {
  s->loop = loop;
  clank_server_init_parser_settings(&s->settings);
  s->read_buf = malloc(CLANK_READ_CHUNK);
  uv_random(NULL, NULL, &s->id_prefix, sizeof s->id_prefix, 0, NULL);
  struct sockaddr_storage addr;
  const char *name = strcmp(host, "localhost") == 0 ? "127.0.0.1" : host;
  if (uv_ip4_addr(name, port, (struct sockaddr_in *)&addr) != 0 &&
      uv_ip6_addr(name, port, (struct sockaddr_in6 *)&addr) != 0) {
    snprintf(err, errlen, "%s is not an IP address", host);
    return -1;
  }
  uv_tcp_init(loop, &s->listener);
  s->listener.data = s;
  s->listening = 1;
  int rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&addr, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&s->listener, 1024, on_connection);
  if (rc != 0) {
    snprintf(err, errlen, "cannot listen on %s:%d: %s", host, port, uv_strerror(rc));
    return -1;
  }
  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &len);
  *bound_port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                  : ((struct sockaddr_in *)&bound)->sin_port);
  s->loopback = is_loopback(&bound);
  return 0;
}

void clank_server_stop(clank_server_t *s) {
  if (s->stopping) return;
  s->stopping = 1;
  if (s->listening) {
    uv_close((uv_handle_t *)&s->listener, NULL);
    s->listening = 0;
  }
  for (clank_conn_t *c = s->conns, *next; c; c = next) {
    next = c->next;
    if (c->closing) continue;
    if (c->phase == CLANK_PHASE_IDLE && c->in.len == 0) {
      if (c->writing || c->out.len)
        c->close_after = 1;
      else
        clank_conn_close(c);
    }
  }
  if (s->nconns == 0 && s->on_drained) s->on_drained(s);
}

void clank_server_free_all(clank_server_t *s) {
  clank_conn_t *c = s->conns;
  while (c) {
    clank_conn_t *next = c->next;
    clank_buf_free(&c->in);
    clank_buf_free(&c->out);
    clank_buf_free(&c->wbuf);
    clank_request_free(&c->req);
    free(c);
    c = next;
  }
  s->conns = NULL;
  free(s->read_buf);
  s->read_buf = NULL;
}

void clank_server_close_all(clank_server_t *s) {
  for (clank_conn_t *c = s->conns, *next; c; c = next) {
    next = c->next;
    clank_conn_close(c);
  }
}

const char *clank_server_date(clank_server_t *s) {
  uint64_t sec = uv_now(s->loop) / 1000;
  if (sec != s->date_sec || s->date[0] == '\0') {
    s->date_sec = sec;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(s->date, sizeof s->date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  }
  return s->date;
}
