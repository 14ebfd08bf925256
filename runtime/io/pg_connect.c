/* Reaching a PostgreSQL server without blocking the loop (pg_connect.h). */
#include "io/pg_connect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The password as written in a URL's user info (postgresql://user:PASS@host). */
static char *url_password(const char *url) {
  const char *p = strstr(url, "://");
  if (p == NULL) return NULL;
  p += 3;
  size_t end = strcspn(p, "/?#");
  const char *at = NULL;
  for (size_t i = 0; i < end; i++)
    if (p[i] == '@') at = p + i;
  if (at == NULL) return NULL;
  const char *colon = memchr(p, ':', (size_t)(at - p));
  if (colon == NULL) return NULL;
  return strndup(colon + 1, (size_t)(at - colon - 1));
}

static const char *opt_value(const PQconninfoOption *o, const char *keyword) {
  for (; o && o->keyword; o++)
    if (strcmp(o->keyword, keyword) == 0) return o->val && *o->val ? o->val : NULL;
  return NULL;
}

const char *clank_pg_option(const clank_pg_target_t *t, const char *keyword) {
  return opt_value(t->opts, keyword);
}

char *clank_pg_scrub(const clank_pg_target_t *t, const char *msg) {
  char *s = strdup(msg ? msg : "unknown error");
  if (s == NULL) return NULL;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
  for (int i = 0; i < 2; i++) {
    const char *k = t->secret[i];
    size_t kn = k ? strlen(k) : 0;
    if (kn < 3) continue; /* starring every "a" would only garble the message */
    for (char *at = strstr(s, k); at; at = strstr(at + kn, k)) memset(at, '*', kn);
  }
  return s;
}

int clank_pg_target_parse(clank_pg_target_t *t, const char *url, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  t->secret[0] = url_password(url);
  char *perr = NULL;
  t->opts = PQconninfoParse(url, &perr);
  if (t->opts == NULL) {
    char *msg = clank_pg_scrub(t, perr ? perr : "out of memory");
    snprintf(err, errlen, "invalid PostgreSQL URL: %s", msg ? msg : "out of memory");
    free(msg);
    if (perr) PQfreemem(perr);
    clank_pg_target_free(t);
    return -1;
  }
  if (perr) PQfreemem(perr);
  const char *host = opt_value(t->opts, "host");
  if (host && strchr(host, ',')) { /* one name to resolve, one address to give libpq */
    snprintf(err, errlen, "several hosts are not supported");
    clank_pg_target_free(t);
    return -1;
  }
  const char *decoded = opt_value(t->opts, "password");
  t->secret[1] = decoded ? strdup(decoded) : NULL;
  return 0;
}

void clank_pg_target_free(clank_pg_target_t *t) {
  if (t->opts) PQconninfoFree(t->opts);
  free(t->secret[0]);
  free(t->secret[1]);
  memset(t, 0, sizeof *t);
}

void clank_pg_route(const clank_pg_target_t *t, const char **resolve, const char **hostaddr) {
  const char *host = opt_value(t->opts, "host");
  *resolve = *hostaddr = NULL;
  if (host == NULL || host[0] == '/' || host[0] == '@' || opt_value(t->opts, "hostaddr")) return;
  unsigned char ip[16];
  if (uv_inet_pton(AF_INET, host, ip) == 0 || uv_inet_pton(AF_INET6, host, ip) == 0)
    *hostaddr = host;
  else
    *resolve = host;
}

int clank_pg_resolve(uv_loop_t *loop, uv_getaddrinfo_t *req, uv_getaddrinfo_cb cb,
                     const char *host) {
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  return uv_getaddrinfo(loop, req, cb, host, NULL, &hints);
}

int clank_pg_resolved(const char *host, int status, struct addrinfo *res, char *ip, size_t iplen,
                      char *err, size_t errlen) {
  if (status < 0) {
    if (res) uv_freeaddrinfo(res);
    snprintf(err, errlen, "could not resolve host \"%s\": %s", host, uv_strerror(status));
    return -1;
  }
  ip[0] = '\0';
  uv_ip_name(res->ai_addr, ip, iplen);
  uv_freeaddrinfo(res);
  return 0;
}

/* NOTICEs (a DROP ... IF EXISTS that skipped) are not errors: libpq's default
   prints them to stderr. */
static void quiet_notice(void *arg, const char *message) {
  (void)arg;
  (void)message;
}

PGconn *clank_pg_connect_start(const clank_pg_target_t *t, const char *hostaddr,
                               const char *const *defaults, char *err, size_t errlen) {
  size_t n = 0, ndefaults = 0;
  for (const PQconninfoOption *o = t->opts; o->keyword; o++) n++;
  while (defaults && defaults[2 * ndefaults]) ndefaults++;
  size_t cap = n + ndefaults + 3; /* hostaddr, client_encoding, the NULL */
  const char **kw = calloc(cap, sizeof *kw), **vals = calloc(cap, sizeof *vals);
  if (kw == NULL || vals == NULL) {
    free(kw);
    free(vals);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  size_t i = 0;
  for (const PQconninfoOption *o = t->opts; o->keyword; o++) {
    if (o->val == NULL || *o->val == '\0') continue;
    if (hostaddr && strcmp(o->keyword, "hostaddr") == 0) continue;
    kw[i] = o->keyword;
    vals[i++] = o->val;
  }
  if (hostaddr) {
    kw[i] = "hostaddr";
    vals[i++] = hostaddr;
  }
  if (opt_value(t->opts, "client_encoding") == NULL) {
    kw[i] = "client_encoding";
    vals[i++] = "UTF8";
  }
  for (size_t d = 0; d < ndefaults; d++) {
    if (opt_value(t->opts, defaults[2 * d])) continue;
    kw[i] = defaults[2 * d];
    vals[i++] = defaults[2 * d + 1];
  }
  PGconn *pg = PQconnectStartParams(kw, vals, 0);
  free(kw);
  free(vals);
  if (pg == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (PQstatus(pg) == CONNECTION_BAD) {
    char *msg = clank_pg_scrub(t, PQerrorMessage(pg));
    snprintf(err, errlen, "%s", msg ? msg : "out of memory");
    free(msg);
    PQfinish(pg);
    return NULL;
  }
  PQsetNoticeProcessor(pg, quiet_notice, NULL);
  return pg;
}

int clank_pg_connect_poll(PGconn *pg, int *events) {
  switch (PQconnectPoll(pg)) {
    case PGRES_POLLING_OK: return 1;
    case PGRES_POLLING_READING: *events = UV_READABLE; return 0;
    case PGRES_POLLING_WRITING: *events = UV_WRITABLE; return 0;
    default: return -1;
  }
}

int clank_pg_pump(PGconn *pg, int *flushing, int events) {
  if (*flushing) {
    int r = PQflush(pg);
    if (r < 0) return -1;
    *flushing = r == 1;
  }
  if ((events & UV_READABLE) && !PQconsumeInput(pg)) return -1;
  return 0;
}
