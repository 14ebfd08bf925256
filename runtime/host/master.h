/* --workers N (SPEC §13): a master process that checks the app, holds the
   port and supervises N forked workers, each a whole host of its own. */
#ifndef CLANK_MASTER_H
#define CLANK_MASTER_H

#include "host/generation.h"
#include "host/metrics.h"
#include "options.h"

#define CLANK_INSTANCE_ID 16 /* hex digits naming one clank-run (host/pubsub.h) */

/* What a forked worker is told by its master. */
typedef struct clank_worker_s {
  int index, count;
  int ipc_fd;   /* its end of the IPC pipe to the master (host/handoff.h) */
  int topic_fd; /* its end of the topics' datagram socket to the master (host/pubsub.h) */
  char instance[CLANK_INSTANCE_ID + 1];     /* this run's id, the same in every worker */
  unsigned char secret[CLANK_SECRET_BYTES]; /* the same in every worker */
  clank_metrics_t *slots;                   /* shared memory: count slots, this worker's at index */
  volatile int *up; /* shared memory: up[i] while worker i serves (the master writes it) */
} clank_worker_t;

/* Runs the master; returns the exit code. */
int clank_master_main(const clank_options_t *o);

#endif
