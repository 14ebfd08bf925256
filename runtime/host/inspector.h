/* /__clank/inspector (SPEC §16): who may open it, the rings of recent
   requests and reloads it shows, and the generation's inspector object (a
   clank.live object over one view, lua/clank/inspector), made on first use. */
#ifndef CLANK_INSPECTOR_H
#define CLANK_INSPECTOR_H

#include <lua.h>
#include <stdint.h>

#include "http/server.h"

#define CLANK_INSPECTOR_KEEP 100 /* requests and reloads kept */
#define CLANK_INSPECTOR_PATH 160 /* longest path kept (longer ones are cut) */
#define CLANK_INSPECTOR_NOTE 160 /* longest reload error kept */

/* The jobs' page (issue 32); its forms post to <it>/<id>/retry and /cancel. */
#define CLANK_INSPECTOR_JOBS "/__clank/inspector/jobs"

typedef struct clank_inspector_request_s {
  char method[16];
  char path[CLANK_INSPECTOR_PATH + 1]; /* no query string, session tokens redacted */
  char id[65];
  int status;
  double ms;
  int64_t at; /* wall time, seconds */
} clank_inspector_request_t;

typedef struct clank_inspector_reload_s {
  int ok;
  double ms;
  int64_t at;
  char note[CLANK_INSPECTOR_NOTE + 1]; /* the failure's first line */
} clank_inspector_reload_t;

/* Two rings; next is where the next entry goes, count how many are held. */
typedef struct clank_inspector_log_s {
  clank_inspector_request_t requests[CLANK_INSPECTOR_KEEP];
  int nrequests, next_request;
  clank_inspector_reload_t reloads[CLANK_INSPECTOR_KEEP];
  int nreloads, next_reload;
} clank_inspector_log_t;

struct clank_host_s;
struct clank_gen_s;

/* Whether the request may see the inspector: the peer and the Host are
   loopback, or the Host is --inspector's (with any port). */
int clank_inspector_allowed(clank_conn_t *c, const char *inspector_host);
/* Paths served by the inspector: the page, its sessions' live channels, and
   the jobs' page with what is under it (its forms' POSTs). */
int clank_inspector_path(const char *p, size_t n);
/* Whether p is the jobs' page or under it. */
int clank_inspector_jobs_path(const char *p, size_t n);
/* Counts one answer (the server's on_answered, through metrics). */
void clank_inspector_record(clank_inspector_log_t *log, clank_conn_t *c, const clank_target_t *t,
                            int status, uint64_t ns);
/* Counts one reload; note: the error (first line kept), or NULL. */
void clank_inspector_reload(clank_inspector_log_t *log, int ok, uint64_t ns, const char *note);
/* Pushes g's inspector object (made on first use), or nil when it failed to load (logged). */
void clank_inspector_push(struct clank_host_s *h, struct clank_gen_s *g);
/* Pushes the handler of g's jobs' page, request → response (lua/clank/inspector/jobs.lua), or
   nil when the inspector failed to load (logged). */
void clank_inspector_push_jobs(struct clank_host_s *h, struct clank_gen_s *g);
/* Pushes the inspector object of L's generation and returns 1 when it was made, else 0. */
int clank_inspector_existing(lua_State *L);

#endif
