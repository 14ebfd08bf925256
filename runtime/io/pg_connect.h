/* Reaching a PostgreSQL server without blocking the loop: what clank.db's
   libpq driver (db_postgres.c) and the LISTEN/NOTIFY transport (pg_listen.c)
   both need before a connection is theirs, and to move its bytes after.

   libpq resolves host names blocking, so a name is looked up with
   uv_getaddrinfo first and given to libpq as hostaddr; a socket folder
   (host=/dir) or an IP address needs no look-up. The password of the URL
   never appears in a message: every one goes through clank_pg_scrub. */
#ifndef CLANK_PG_CONNECT_H
#define CLANK_PG_CONNECT_H

#include <libpq-fe.h>
#include <stddef.h>
#include <uv.h>

/* A server as a URL or conninfo string names it. */
typedef struct clank_pg_target_s {
  PQconninfoOption *opts;
  char *secret[2]; /* the password as written in the URL and decoded */
} clank_pg_target_t;

/* Reads url (postgres://, postgresql:// or key=value). Returns 0, or -1 with
   the reason in err (without the password): unreadable, or several hosts. */
int clank_pg_target_parse(clank_pg_target_t *t, const char *url, char *err, size_t errlen);
void clank_pg_target_free(clank_pg_target_t *t);

/* The option's value, or NULL when unset or empty. */
const char *clank_pg_option(const clank_pg_target_t *t, const char *keyword);

/* A malloc'd copy of msg (NULL: "unknown error"), trailing white space
   trimmed, every occurrence of the password replaced with stars. */
char *clank_pg_scrub(const clank_pg_target_t *t, const char *msg);

/* How to reach the server: *resolve is a host name to look up first, or
   NULL; *hostaddr an IP address for libpq as it is, or NULL (a socket
   folder, hostaddr set in the URL, or a name still to resolve). */
void clank_pg_route(const clank_pg_target_t *t, const char **resolve, const char **hostaddr);

/* uv_getaddrinfo for host, any family, stream sockets. */
int clank_pg_resolve(uv_loop_t *loop, uv_getaddrinfo_t *req, uv_getaddrinfo_cb cb,
                     const char *host);
/* The outcome of clank_pg_resolve (res freed here): 0 with the first
   address in ip, or -1 with the reason in err. */
int clank_pg_resolved(const char *host, int status, struct addrinfo *res, char *ip, size_t iplen,
                      char *err, size_t errlen);

/* PQconnectStartParams with t's options, hostaddr (when not NULL) in place of
   the URL's, client_encoding UTF8 and then each pair of `defaults` (keyword,
   value, ..., NULL; may be NULL) unless the URL sets it. NOTICEs are
   dropped rather than printed to stderr. Returns the connection, or NULL
   with the reason in err. Libpq's rule: wait for its socket to be writable,
   then drive it with clank_pg_connect_poll. */
PGconn *clank_pg_connect_start(const clank_pg_target_t *t, const char *hostaddr,
                               const char *const *defaults, char *err, size_t errlen);

/* One step of PQconnectPoll: 1 connected, 0 wait for *events (libpq may have
   opened another socket: watch PQsocket afresh), -1 failed (PQerrorMessage). */
int clank_pg_connect_poll(PGconn *pg, int *events);

/* A connection's socket is ready (events: UV_READABLE, UV_WRITABLE): what
   libpq holds is sent (*flushing: it still holds some), and what came is
   read. 0, or -1 with the reason in PQerrorMessage(pg). */
int clank_pg_pump(PGconn *pg, int *flushing, int events);

#endif
