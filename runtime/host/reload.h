/* Hot reload's eyes (SPEC §14): which files to watch, noticing that they
   changed (inotify through uv_fs_event on their folders, or 500 ms polling),
   debouncing, and skipping changes that leave the contents equal. What a
   reload does is the host's business (host.c). */
#ifndef CLANK_RELOAD_H
#define CLANK_RELOAD_H

#include <uv.h>

#include "util/log.h"

typedef struct clank_watched_dir_s clank_watched_dir_t;

typedef struct clank_reloader_s {
  uv_loop_t *loop;
  clank_log_t *log;
  int watching; /* off with --no-watch: files are still recorded, for SIGHUP */
  int polling;
  uv_timer_t debounce;
  uv_timer_t poll;
  char **files; /* absolute paths: the app file and every Lua file it loaded from its folder */
  unsigned char (*seen)[32]; /* each file's contents hash when it was loaded */
  int nfiles, capfiles;
  char **before; /* the set a reload started from, until it ends */
  unsigned char (*before_seen)[32];
  int nbefore;
  clank_watched_dir_t *dirs;
  unsigned char hash[32]; /* of the files' contents at the last load */
  void (*reload)(void *ud);
  void *ud;
} clank_reloader_t;

void clank_reloader_init(clank_reloader_t *r, uv_loop_t *loop, clank_log_t *log, int watching,
                         void (*reload)(void *ud), void *ud);
/* clank_gen_opts_t.on_file: a file the app loaded, and the hash of the
   contents it read (NULL: read now). */
void clank_reloader_file(void *r, const char *path, const unsigned char *seen);
/* clank_gen_opts_t.file_hash: the SHA-256 of a file's contents (of a marker
   when it is missing). Thread-safe. */
void clank_reloader_hash_file(const char *path, unsigned char out[32]);
/* Around a reload: the new generation's files become the watched set when it
   loads; when it fails, both sets stay watched (fixing either reloads). */
void clank_reloader_begin(clank_reloader_t *r);
void clank_reloader_end(clank_reloader_t *r, int loaded);
/* After a load (good or bad): the contents now count as seen. */
void clank_reloader_loaded(clank_reloader_t *r);
/* After clank_reloader_loaded: 1 when the files still hold what the load
   read, 0 when one changed since (the debounce then reloads them). */
int clank_reloader_current(clank_reloader_t *r);
/* Closes its handles (their memory is freed in their close callbacks). */
void clank_reloader_close(clank_reloader_t *r);

#endif
