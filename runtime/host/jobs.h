/* Durable jobs' hands in clank-run (issue 32): each generation's jobs
   runner (clank.jobs.runner, registered under CLANK_JOBS_KEY) is started
   when the generation begins to serve and stopped when the process stops;
   the hold count it keeps (clank.core.hold) keeps a retired generation open
   while its jobs finish, and the process up while they drain. */
#ifndef CLANK_HOST_JOBS_H
#define CLANK_HOST_JOBS_H

#include "host/host.h"

/* Installs g's hold function and starts its runner, if the app has one. */
void clank_jobs_attach(clank_host_t *h, clank_gen_t *g);
/* SIGTERM/SIGINT: every generation's runner stops claiming and gets ms to
   finish its running jobs before it gives their leases back. */
void clank_jobs_stop(clank_host_t *h, uint64_t ms);

#endif
