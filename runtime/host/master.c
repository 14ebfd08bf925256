/* The master of --workers N (SPEC §13). It runs no libuv loop and loads no
   Lua: it stays a single thread, so every worker, the first ones and a
   restarted one alike, is forked from the same clean process. Signals are
   read from a signalfd; each worker has a socketpair to it (host/handoff.h),
   which says when it is ready and carries the connections it hands to
   another worker: the master relays them, socket and bytes. A second
   socketpair, of datagrams, carries topics (host/pubsub.h): what one worker
   publishes the master sends on to every other, never waiting — a worker
   too slow to take them loses them (at most once), the others go on. */
#define _GNU_SOURCE
#include "host/master.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "host/announce.h"
#include "host/handoff.h"
#include "host/host.h"
#include "host/pubsub.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 10000
#define STABLE_MS 10000 /* a worker that lived this long is restarted at the shortest backoff */
#define HELD_FDS 16     /* sockets received from a worker, not yet relayed */

typedef struct worker_slot_s {
  pid_t pid; /* 0: not running */
  uint64_t started_ms;
  uint64_t restart_at_ms; /* 0: no restart due */
  unsigned backoff_ms;
  int ipc;        /* the master's end of its socketpair; -1 */
  int eof;        /* the worker closed its end */
  clank_buf_t in; /* its messages, not yet whole */
  int fds[HELD_FDS], nfds;
  int topics;      /* the master's end of its topics' socketpair; -1 */
  int topics_lost; /* said once per worker: its topics are dropped */
} worker_slot_t;

typedef struct master_s {
  const clank_options_t *o;
  clank_options_t wo; /* the workers' options: the port resolved */
  clank_log_t log;
  clank_worker_t w;
  worker_slot_t slots[CLANK_MAX_WORKERS];
  int listen_fd, sig_fd;
  size_t shared_bytes;
  sigset_t old_mask;
  pid_t self;
  int stopping, failed, running, ready;
  char name[256]; /* the app's, as the first worker ready tells it */
  size_t name_len;
  char topics[CLANK_TOPICS_DGRAM + 1]; /* one datagram being relayed (+1: one too long shows) */
} master_t;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A child that loads the app as --check does (its manifest to /dev/null):
   a failure prints file:line there, before any worker starts. */
static int app_loads(master_t *m) {
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &m->old_mask, NULL);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1);
    clank_options_t c = *m->o;
    c.check = 1;
    c.workers = 1;
    exit(clank_host_serve(&c, NULL));
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Binds (without listening) a SO_REUSEPORT socket: port 0 becomes a free
   port every worker then binds too, and holding it keeps the port ours
   while a worker restarts. */
static int hold_port(master_t *m, char *err, size_t errlen) {
  const clank_options_t *o = m->o;
  struct sockaddr_storage addr;
  const char *name = strcmp(o->host, "localhost") == 0 ? "127.0.0.1" : o->host;
  if (uv_ip4_addr(name, o->port, (struct sockaddr_in *)&addr) != 0 &&
      uv_ip6_addr(name, o->port, (struct sockaddr_in6 *)&addr) != 0) {
    snprintf(err, errlen, "%s is not an IP address", o->host);
    return -1;
  }
  socklen_t len =
      addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int on = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0 ||
      bind(fd, (struct sockaddr *)&addr, len) != 0) {
    snprintf(err, errlen, "cannot listen on %s:%d: %s", o->host, o->port,
             uv_strerror(uv_translate_sys_error(errno)));
    if (fd >= 0) close(fd);
    return -1;
  }
  struct sockaddr_storage bound;
  len = sizeof bound;
  getsockname(fd, (struct sockaddr *)&bound, &len);
  m->wo.port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                 : ((struct sockaddr_in *)&bound)->sin_port);
  m->listen_fd = fd;
  return 0;
}

static void drop_ipc(worker_slot_t *s) {
  if (s->ipc >= 0) close(s->ipc);
  s->ipc = -1;
  if (s->topics >= 0) close(s->topics);
  s->topics = -1;
  s->topics_lost = 0;
  while (s->nfds > 0) close(s->fds[--s->nfds]);
  clank_buf_reset(&s->in);
  s->eof = 0;
}

static void spawn(master_t *m, int i) {
  worker_slot_t *s = &m->slots[i];
  s->restart_at_ms = 0;
  int sv[2] = {-1, -1}, tv2[2] = {-1, -1};
  pid_t pid = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0 &&
                      socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, tv2) == 0
                  ? fork()
                  : -1;
  if (pid < 0) {
    clank_log_msg(&m->log, "error", "cannot start worker %d: %s", i, strerror(errno));
    for (int k = 0; k < 2; k++) {
      if (sv[k] >= 0) close(sv[k]);
      if (tv2[k] >= 0) close(tv2[k]);
    }
    s->restart_at_ms = now_ms() + BACKOFF_MAX_MS;
    return;
  }
  if (pid == 0) {
    close(m->sig_fd);
    close(m->listen_fd);
    close(sv[0]);
    close(tv2[0]);
    for (int k = 0; k < m->w.count; k++) drop_ipc(&m->slots[k]);
    /* Its own process group: a terminal's ^C reaches the master alone,
       which forwards it once (two would make the worker exit at once). */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* the master gone, the worker stops too */
    if (getppid() != m->self) _exit(1);
    sigprocmask(SIG_SETMASK, &m->old_mask, NULL);
    clank_worker_t w = m->w;
    w.index = i;
    w.ipc_fd = sv[1];
    w.topic_fd = tv2[1];
    exit(clank_host_serve(&m->wo, &w));
  }
  close(sv[1]);
  close(tv2[1]);
  s->ipc = sv[0];
  s->topics = tv2[0];
  /* room for bursts: a datagram socketpair queues up to the sender's buffer */
  int room = CLANK_TOPICS_BUFFER;
  setsockopt(s->topics, SOL_SOCKET, SO_SNDBUF, &room, sizeof room);
  /* a stuck worker must not stall the master: a relay waits at most this long */
  struct timeval tv = {.tv_sec = 1};
  setsockopt(s->ipc, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  s->pid = pid;
  s->started_ms = now_ms();
  m->running++;
}

static void signal_all(master_t *m, int signum) {
  for (int i = 0; i < m->w.count; i++)
    if (m->slots[i].pid > 0) kill(m->slots[i].pid, signum);
}

static void reap(master_t *m) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    int i = 0;
    while (i < m->w.count && m->slots[i].pid != pid) i++;
    if (i == m->w.count) continue;
    worker_slot_t *s = &m->slots[i];
    s->pid = 0;
    m->w.up[i] = 0;
    drop_ipc(s);
    m->running--;
    int clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (m->stopping) { /* the exit code: 0 when every worker stopped cleanly */
      if (!clean) m->failed = 1;
      continue;
    }
    char how[64];
    if (WIFSIGNALED(status))
      snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(status));
    else
      snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
    if (m->ready < m->w.count) { /* it never served: the start-up failed */
      clank_log_msg(&m->log, "error", "worker %d (pid %d) %s while starting", i, (int)pid, how);
      continue;
    }
    uint64_t now = now_ms();
    s->backoff_ms = now - s->started_ms >= STABLE_MS || s->backoff_ms == 0 ? BACKOFF_MIN_MS
                    : s->backoff_ms * 2 > BACKOFF_MAX_MS                   ? BACKOFF_MAX_MS
                                                                           : s->backoff_ms * 2;
    s->restart_at_ms = now + s->backoff_ms;
    clank_log_msg(&m->log, "warn", "worker %d (pid %d) %s; restarting it in %u ms", i, (int)pid,
                  how, s->backoff_ms);
  }
}

static void on_signal(master_t *m, int signum) {
  if (signum == SIGCHLD) {
    reap(m);
  } else if (signum == SIGHUP) {
    signal_all(m, SIGHUP); /* every worker reloads the same files */
  } else if (m->stopping) {
    clank_log_msg(&m->log, "warn", "second signal: exiting at once");
    signal_all(m, SIGKILL);
    clank_log_flush(&m->log);
    _exit(1);
  } else {
    m->stopping = 1;
    for (int i = 0; i < m->w.count; i++) m->slots[i].restart_at_ms = 0;
    signal_all(m, signum);
  }
}

/* Sends a message (and the socket fd, when >= 0) whole, or not at all. */
static int send_whole(int sock, const clank_ipc_head_t *head, const char *bytes, int fd) {
  char cbuf[CMSG_SPACE(sizeof(int))];
  struct iovec iov[2] = {{(void *)head, sizeof *head}, {(void *)bytes, head->len}};
  struct msghdr msg = {.msg_iov = iov, .msg_iovlen = head->len ? 2 : 1};
  if (fd >= 0) {
    memset(cbuf, 0, sizeof cbuf);
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof cbuf;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  }
  size_t left = sizeof *head + head->len;
  while (left > 0) {
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    left -= (size_t)n;
    msg.msg_control = NULL; /* the socket went with the first bytes */
    msg.msg_controllen = 0;
    while (n > 0 && msg.msg_iovlen > 0) {
      size_t take = (size_t)n < msg.msg_iov->iov_len ? (size_t)n : msg.msg_iov->iov_len;
      msg.msg_iov->iov_base = (char *)msg.msg_iov->iov_base + take;
      msg.msg_iov->iov_len -= take;
      n -= (ssize_t)take;
      if (msg.msg_iov->iov_len == 0) {
        msg.msg_iov++;
        msg.msg_iovlen--;
      }
    }
  }
  return 0;
}

/* A connection worker `from` hands to head->worker: relayed with its socket,
   or dropped (closed) when that worker is not serving. */
static void relay(master_t *m, int from, const clank_ipc_head_t *head, const char *bytes, int fd) {
  int to = (int)head->worker;
  if (fd < 0) return;
  if (to >= 0 && to < m->w.count && m->slots[to].pid > 0 && m->w.up[to] && m->slots[to].ipc >= 0) {
    clank_ipc_head_t out = {.type = CLANK_IPC_HANDOFF, .worker = (uint32_t)from, .len = head->len};
    if (send_whole(m->slots[to].ipc, &out, bytes, fd) != 0) {
      clank_log_msg(&m->log, "warn", "worker %d takes no connections: stopping it", to);
      kill(m->slots[to].pid, SIGKILL);
    }
  }
  close(fd);
}

static void on_message(master_t *m, int i, const clank_ipc_head_t *head, const char *bytes) {
  worker_slot_t *s = &m->slots[i];
  if (head->type == CLANK_IPC_READY) {
    m->w.up[i] = 1;
    if (m->ready++ == 0) {
      m->name_len = head->len < sizeof m->name - 1 ? head->len : sizeof m->name - 1;
      memcpy(m->name, bytes, m->name_len);
      m->name[m->name_len] = '\0';
    }
  } else if (head->type == CLANK_IPC_HANDOFF) {
    int fd = -1;
    if (s->nfds > 0) { /* the oldest socket is this message's */
      fd = s->fds[0];
      memmove(s->fds, s->fds + 1, sizeof(int) * (size_t)--s->nfds);
    }
    relay(m, i, head, bytes, fd);
  }
}

static void read_ipc(master_t *m, int i) {
  worker_slot_t *s = &m->slots[i];
  if (clank_buf_reserve(&s->in, 64 * 1024) != 0) return;
  char cbuf[CMSG_SPACE(sizeof(int) * HELD_FDS)];
  struct iovec iov = {s->in.data + s->in.len, s->in.cap - s->in.len};
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
  ssize_t n = recvmsg(s->ipc, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    s->eof = 1; /* it is exiting: reap() will see it */
    return;
  }
  if (n < 0) return;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t j = 0; j < k; j++) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + j * sizeof(int), sizeof fd);
      if (s->nfds < HELD_FDS)
        s->fds[s->nfds++] = fd;
      else
        close(fd);
    }
  }
  s->in.len += (size_t)n;
  size_t pos = 0;
  while (s->in.len - pos >= sizeof(clank_ipc_head_t)) {
    clank_ipc_head_t head;
    memcpy(&head, s->in.data + pos, sizeof head);
    if (head.len > CLANK_IPC_MAX) { /* not a worker's message: stop listening to it */
      s->eof = 1;
      break;
    }
    if (s->in.len - pos - sizeof head < head.len) break;
    on_message(m, i, &head, s->in.data + pos + sizeof head);
    pos += sizeof head + head.len;
  }
  clank_buf_consume(&s->in, pos);
}

/* The datagrams worker i sent, each to every other worker serving. */
static void relay_topics(master_t *m, int i) {
  worker_slot_t *s = &m->slots[i];
  for (int budget = 64; budget > 0 && s->topics >= 0; budget--) {
    ssize_t n = recv(s->topics, m->topics, sizeof m->topics, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    if ((size_t)n > CLANK_TOPICS_DGRAM) continue; /* not a worker's: dropped */
    for (int k = 0; k < m->w.count; k++) {
      worker_slot_t *to = &m->slots[k];
      if (k == i || to->pid <= 0 || !m->w.up[k] || to->topics < 0) continue;
      if (send(to->topics, m->topics, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
          !to->topics_lost) {
        to->topics_lost = 1;
        clank_log_msg(&m->log, "warn",
                      "worker %d takes topics too slowly: publishes to it are dropped (%s)", k,
                      strerror(errno));
      }
    }
  }
}

static void announce(master_t *m) {
  const clank_options_t *o = m->o;
  const char *shown = strchr(o->host, ':') ? "[" : "";
  printf("clank-run: serving %s at http://%s%s%s:%d/\n", m->name, shown, o->host, *shown ? "]" : "",
         m->wo.port);
  fflush(stdout);
  clank_announce_urls(&m->log, &m->wo, m->wo.port);
}

/* Restarts due now; returns the poll timeout until the next one (-1: none). */
static int restarts(master_t *m) {
  uint64_t now = now_ms(), next = 0;
  for (int i = 0; i < m->w.count; i++) {
    worker_slot_t *s = &m->slots[i];
    if (s->restart_at_ms == 0) continue;
    if (s->restart_at_ms <= now)
      spawn(m, i);
    else if (next == 0 || s->restart_at_ms < next)
      next = s->restart_at_ms;
  }
  return next ? (int)(next - now) : -1;
}

static int supervise(master_t *m) {
  int announced = 0;
  for (;;) {
    if (m->stopping && m->running == 0) return m->failed ? 1 : 0;
    if (!announced && m->ready < m->w.count && m->running < m->w.count && !m->stopping) {
      signal_all(m, SIGKILL); /* a worker could not start: neither do the others */
      m->stopping = 1;
      m->failed = 1;
      continue; /* every one may be gone already: no signal would end the poll */
    }
    if (!announced && m->ready >= m->w.count) {
      announced = 1;
      announce(m);
    }
    clank_log_flush(&m->log);
    /* first: a worker started now must be in this poll's set, or its ready
       message and its topics would wait for some other wake-up */
    int timeout = m->stopping ? -1 : restarts(m);
    struct pollfd p[2 * CLANK_MAX_WORKERS + 1] = {{.fd = m->sig_fd, .events = POLLIN}};
    int who[2 * CLANK_MAX_WORKERS + 1], np = 1; /* who: the worker, negated -1 for topics */
    for (int i = 0; i < m->w.count; i++) {
      if (m->slots[i].ipc < 0 || m->slots[i].eof) continue;
      p[np] = (struct pollfd){.fd = m->slots[i].ipc, .events = POLLIN};
      who[np++] = i;
      if (m->slots[i].topics < 0) continue;
      p[np] = (struct pollfd){.fd = m->slots[i].topics, .events = POLLIN};
      who[np++] = -1 - i;
    }
    if (poll(p, (nfds_t)np, timeout) < 0 && errno != EINTR) return 1;
    for (int k = 1; k < np; k++) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (who[k] >= 0)
        read_ipc(m, who[k]);
      else if (p[k].revents & POLLIN)
        relay_topics(m, -1 - who[k]);
      else { /* the worker's end is gone: reap() will see it exit */
        close(m->slots[-1 - who[k]].topics);
        m->slots[-1 - who[k]].topics = -1;
      }
    }
    if (p[0].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(m->sig_fd, &si, sizeof si) == (ssize_t)sizeof si) on_signal(m, (int)si.ssi_signo);
    }
  }
}

int clank_master_main(const clank_options_t *o) {
  master_t *m = calloc(1, sizeof *m);
  if (m == NULL) return 1;
  m->o = o;
  m->wo = *o;
  m->self = getpid();
  m->listen_fd = m->sig_fd = -1;
  m->w.count = o->workers;
  for (int i = 0; i < CLANK_MAX_WORKERS; i++) m->slots[i].ipc = m->slots[i].topics = -1;
  clank_log_init(&m->log, o->log_format, 2);
  signal(SIGPIPE, SIG_IGN);
  int code = 1;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, &m->old_mask);
  char err[512];
  if (clank_host_secret(m->w.secret) != 0 || clank_pubsub_instance(m->w.instance) != 0) goto done;
  const char *configured = getenv("CLANK_SECRET");
  if (configured == NULL || *configured == '\0') /* SPEC §11: said once, by the master */
    clank_log_msg(&m->log, "warn",
                  "CLANK_SECRET is not set: the workers share a secret made for this run, so "
                  "session tokens and MCP sessions end with it");
  if (!app_loads(m)) goto done;
  if (hold_port(m, err, sizeof err) != 0) {
    clank_announce_listen_hint(err, sizeof err);
    fprintf(stderr, "clank-run: %s\n", err);
    goto done;
  }
  /* the workers' counters (metrics.c sums them) and which of them serve */
  m->shared_bytes = sizeof(clank_metrics_t) * (size_t)m->w.count + sizeof(int) * CLANK_MAX_WORKERS;
  void *shared =
      mmap(NULL, m->shared_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    fprintf(stderr, "clank-run: cannot start workers: %s\n", strerror(errno));
    goto done;
  }
  m->w.slots = shared;
  m->w.up = (volatile int *)(m->w.slots + m->w.count);
  m->sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (m->sig_fd < 0) goto done;
  for (int i = 0; i < m->w.count; i++) spawn(m, i);
  code = supervise(m);
done:
  if (m->w.slots) munmap(m->w.slots, m->shared_bytes);
  for (int i = 0; i < m->w.count; i++) {
    drop_ipc(&m->slots[i]);
    clank_buf_free(&m->slots[i].in);
  }
  clank_log_flush(&m->log);
  clank_log_free(&m->log);
  if (m->listen_fd >= 0) close(m->listen_fd);
  if (m->sig_fd >= 0) close(m->sig_fd);
  free(m);
  return code;
}
