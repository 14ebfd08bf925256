/* The listener: binding, accepting, stopping. */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/server.h"

void clank_server_init_parser_settings(llhttp_settings_t *s);

#define ACCEPT_BATCH 64   /* accepts per wake-up, so a flood cannot starve the loop */
#define SHED_LOG_MS 10000 /* shed connections are counted in one line this often */
#define PAUSE_MS 50       /* out of descriptors: accepting waits this long */

static void shed_log(uv_timer_t *t) {
  clank_server_t *s = t->data;
  if (s->shed == 0) return;
  clank_log_msg(s->log, "warn", "out of file descriptors: closed %llu connections at accept",
                (unsigned long long)s->shed);
  s->shed = 0;
  s->shed_logged_at = uv_now(s->loop);
}

/* Counts shed connections: a line at once when none went out for 10 s, else
   one with the rest when the 10 s are over. */
static void count_shed(clank_server_t *s, unsigned n) {
  s->shed += n;
  uint64_t now = uv_now(s->loop);
  if (s->shed_logged_at == 0 || now >= s->shed_logged_at + SHED_LOG_MS)
    shed_log(&s->shed_log);
  else if (!uv_is_active((uv_handle_t *)&s->shed_log))
    uv_timer_start(&s->shed_log, shed_log, s->shed_logged_at + SHED_LOG_MS - now, 0);
}

static void resume_accepting(uv_timer_t *t);
static void on_readable(uv_poll_t *p, int status, int events);

static void pause_accepting(clank_server_t *s) {
  uv_poll_stop(&s->accepting);
  uv_timer_start(&s->pause, resume_accepting, PAUSE_MS, 0);
}

/* Out of descriptors: the reserve one makes room to accept the excess and
   close it, so the client learns at once and the listener stops being
   readable (else the loop would spin on it). */
static void shed(clank_server_t *s, int lfd) {
  unsigned n = 0;
  if (s->reserve_fd >= 0) {
    close(s->reserve_fd);
    s->reserve_fd = -1;
    for (;;) {
      int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
      if (fd < 0) break;
      close(fd);
      n++;
    }
    s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  if (n) count_shed(s, n);
  if (n == 0 || s->reserve_fd < 0) pause_accepting(s);
}

static void resume_accepting(uv_timer_t *t) {
  clank_server_t *s = t->data;
  if (s->stopping) return;
  if (s->reserve_fd < 0) s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  uv_poll_start(&s->accepting, UV_READABLE, on_readable);
}

static void on_readable(uv_poll_t *p, int status, int events) {
  (void)events;
  clank_server_t *s = p->data;
  if (status < 0 || s->stopping) return;
  int lfd = p->io_watcher.fd;
  for (int i = 0; i < ACCEPT_BATCH; i++) {
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      s->out_of_fds = 0;
      clank_conn_accept(s, fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EMFILE && errno != ENFILE) return;
    /* Connections answered 503 at the cap free their descriptors within a
       loop iteration or two: wait for them once; shed only when a pause
       freed nothing. */
    if (s->out_of_fds && i == 0) {
      shed(s, lfd);
    } else {
      s->out_of_fds = 1;
      pause_accepting(s);
    }
    return;
  }
}

/* The address of ss as 16 bytes: an IPv4 one mapped (::ffff:a.b.c.d). */
static void address_bytes(const struct sockaddr_storage *ss, unsigned char out[16]) {
  memset(out, 0, 16);
  if (ss->ss_family == AF_INET6) {
    memcpy(out, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
  } else if (ss->ss_family == AF_INET) {
    out[10] = out[11] = 0xff;
    memcpy(out + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
  }
}

/* libuv 1.44 has no flag for SO_REUSEPORT: the socket is made here and
   handed to the handle, which then binds it as usual. */
static int open_reuseport(uv_tcp_t *t, int family) {
  int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return uv_translate_sys_error(errno);
  int on = 1;
  int rc = 0;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0)
    rc = uv_translate_sys_error(errno);
  if (rc == 0) rc = uv_tcp_open(t, fd);
  if (rc != 0) close(fd);
  return rc;
}

void clank_server_init(clank_server_t *s, uv_loop_t *loop) {
  s->loop = loop;
  clank_server_init_parser_settings(&s->settings);
  s->read_buf = malloc(CLANK_READ_CHUNK);
  uv_random(NULL, NULL, &s->id_prefix, sizeof s->id_prefix, 0, NULL);
  uv_check_init(loop, &s->flush_check);
  uv_prepare_init(loop, &s->flush_prepare);
  s->flush_check.data = s->flush_prepare.data = s;
  s->flush_open = 1;
}

int clank_server_listen(clank_server_t *s, uv_loop_t *loop, const char *host, int port,
                        int *bound_port, char *err, size_t errlen) {
  clank_server_init(s, loop);
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
  s->reserve_fd = -1;
  int rc = s->reuseport ? open_reuseport(&s->listener, addr.ss_family) : 0;
  if (rc == 0) rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&addr, 0);
  if (rc == 0) rc = s->listener.delayed_error; /* libuv keeps EADDRINUSE for uv_listen */
  uv_os_fd_t lfd = -1;
  if (rc == 0) rc = uv_fileno((uv_handle_t *)&s->listener, &lfd);
  /* Accepted by hand, not through uv_listen: libuv sheds connections past
     the file limit without a word, and SPEC §13 wants them counted. */
  if (rc == 0 && listen(lfd, 1024) != 0) rc = uv_translate_sys_error(errno);
  if (rc == 0) rc = uv_poll_init_socket(loop, &s->accepting, lfd);
  if (rc == 0) {
    s->accepting.data = s;
    uv_poll_start(&s->accepting, UV_READABLE, on_readable);
    uv_timer_init(loop, &s->pause);
    uv_timer_init(loop, &s->shed_log);
    s->pause.data = s->shed_log.data = s;
    s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    s->listening = 2; /* the poll and its timers are open too */
  }
  if (rc != 0) {
    snprintf(err, errlen, "cannot listen on %s:%d: %s", host, port, uv_strerror(rc));
    return -1;
  }
  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &len);
  *bound_port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                  : ((struct sockaddr_in *)&bound)->sin_port);
  address_bytes(&bound, s->addr);
  return 0;
}

void clank_server_stop(clank_server_t *s) {
  if (s->stopping) return;
  s->stopping = 1;
  if (s->listening == 2) {
    shed_log(&s->shed_log);
    uv_close((uv_handle_t *)&s->accepting, NULL); /* before the socket it watches */
    uv_close((uv_handle_t *)&s->pause, NULL);
    uv_close((uv_handle_t *)&s->shed_log, NULL);
  }
  if (s->listening) {
    uv_close((uv_handle_t *)&s->listener, NULL);
    s->listening = 0;
  }
  if (s->reserve_fd >= 0) close(s->reserve_fd);
  s->reserve_fd = -1;
  if (s->flush_open) { /* the answers still to come are written as they come */
    clank_server_flush_deferred(s);
    s->flush_open = 0;
    if (!uv_is_closing((uv_handle_t *)&s->flush_check)) {
      uv_close((uv_handle_t *)&s->flush_check, NULL);
      uv_close((uv_handle_t *)&s->flush_prepare, NULL);
    }
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

size_t clank_conn_peer_address(clank_conn_t *c, char *out, size_t outlen) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  if (outlen == 0 || uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0) return 0;
  int rc = -1;
  if (ss.ss_family == AF_INET) {
    rc = uv_ip4_name((struct sockaddr_in *)&ss, out, outlen);
  } else if (ss.ss_family == AF_INET6) {
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) { /* one client, one spelling */
      rc = inet_ntop(AF_INET, &a6->sin6_addr.s6_addr[12], out, (socklen_t)outlen) ? 0 : -1;
    } else {
      rc = uv_ip6_name(a6, out, outlen);
    }
  }
  return rc == 0 ? strlen(out) : 0;
}
