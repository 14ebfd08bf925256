/* Hot reload's eyes (SPEC §14): owns the watch list (the app's files and
   their folders' uv_fs_event handles, or a polling timer), notices and
   debounces changes, and skips those that leave a file's contents equal.
   What a reload does is host.c's. */
#include "host/reload.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEBOUNCE_MS 50
#define POLL_MS 500

struct clank_watched_dir_s {
  uv_fs_event_t event;
  clank_reloader_t *r;
  char *path;
  clank_watched_dir_t *next;
};

void clank_reloader_hash_file(const char *path, unsigned char out[32]) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  char buf[16384];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    EVP_DigestUpdate(ctx, "\1missing", 8);
  } else {
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) EVP_DigestUpdate(ctx, buf, (size_t)n);
    close(fd);
  }
  unsigned int len = 32;
  EVP_DigestFinal_ex(ctx, out, &len);
  EVP_MD_CTX_free(ctx);
}

/* SHA-256 over every watched file's path and contents hash, so "changed"
   means the bytes changed (a touch or an identical save reloads nothing).
   fresh: read the files now; else use each file's hash from when the
   loading generation read it. */
static void hash_files(clank_reloader_t *r, unsigned char out[32], int fresh) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  for (int i = 0; i < r->nfiles; i++) {
    unsigned char h[32];
    if (fresh) clank_reloader_hash_file(r->files[i], h);
    EVP_DigestUpdate(ctx, r->files[i], strlen(r->files[i]) + 1);
    EVP_DigestUpdate(ctx, fresh ? h : r->seen[i], 32);
  }
  unsigned int len = 32;
  EVP_DigestFinal_ex(ctx, out, &len);
  EVP_MD_CTX_free(ctx);
}

static void maybe_reload(clank_reloader_t *r) {
  unsigned char now[32];
  hash_files(r, now, 1);
  if (memcmp(now, r->hash, sizeof now) == 0) return;
  r->reload(r->ud); /* calls clank_reloader_loaded, which takes the new hash */
}

static void debounced(uv_timer_t *t) { maybe_reload(t->data); }

static void polled(uv_timer_t *t) { maybe_reload(t->data); }

static void start_polling(clank_reloader_t *r, const char *why) {
  if (r->polling) return;
  r->polling = 1;
  clank_log_msg(r->log, "warn", "%s; polling every %d ms for changes", why, POLL_MS);
  uv_timer_start(&r->poll, polled, POLL_MS, POLL_MS);
}

static int watched_file(clank_reloader_t *r, const char *dir, const char *name) {
  size_t dlen = strlen(dir);
  for (int i = 0; i < r->nfiles; i++) {
    const char *f = r->files[i];
    if (strncmp(f, dir, dlen) == 0 && f[dlen] == '/' && strcmp(f + dlen + 1, name) == 0) return 1;
  }
  return 0;
}

/* Editors save by writing a temporary file and renaming it over the old
   one: watching the folder catches that; events for other files are ignored. */
static void dir_changed(uv_fs_event_t *e, const char *name, int events, int status) {
  (void)events;
  clank_watched_dir_t *d = e->data;
  clank_reloader_t *r = d->r;
  if (status < 0 || name == NULL || !watched_file(r, d->path, name)) return;
  uv_timer_start(&r->debounce, debounced, DEBOUNCE_MS, 0);
}

static void dir_closed(uv_handle_t *h) {
  clank_watched_dir_t *d = h->data;
  free(d->path);
  free(d);
}

static void watch_dir(clank_reloader_t *r, const char *dir) {
  for (clank_watched_dir_t *d = r->dirs; d; d = d->next)
    if (strcmp(d->path, dir) == 0) return;
  clank_watched_dir_t *d = calloc(1, sizeof *d);
  if (d == NULL) return;
  d->r = r;
  d->path = strdup(dir);
  uv_fs_event_init(r->loop, &d->event);
  d->event.data = d;
  d->next = r->dirs;
  r->dirs = d;
  int rc = uv_fs_event_start(&d->event, dir_changed, dir, 0);
  if (rc == UV_ENOSPC || rc == UV_EMFILE)
    start_polling(r, "the kernel has no file watches left");
  else if (rc != 0)
    clank_log_msg(r->log, "warn", "cannot watch %s: %s", dir, uv_strerror(rc));
}

void clank_reloader_init(clank_reloader_t *r, uv_loop_t *loop, clank_log_t *log, int watching,
                         void (*reload)(void *ud), void *ud) {
  memset(r, 0, sizeof *r);
  r->loop = loop;
  r->log = log;
  r->watching = watching;
  r->reload = reload;
  r->ud = ud;
  uv_timer_init(loop, &r->debounce);
  uv_timer_init(loop, &r->poll);
  r->debounce.data = r->poll.data = r;
  uv_unref((uv_handle_t *)&r->debounce);
  uv_unref((uv_handle_t *)&r->poll);
  const char *force = getenv("CLANK_FORCE_POLL");
  if (watching && force && strcmp(force, "1") == 0) start_polling(r, "CLANK_FORCE_POLL=1");
}

void clank_reloader_file(void *ud, const char *path, const unsigned char *seen) {
  clank_reloader_t *r = ud;
  for (int i = 0; i < r->nfiles; i++)
    if (strcmp(r->files[i], path) == 0) return;
  if (r->nfiles == r->capfiles) {
    int cap = r->capfiles ? r->capfiles * 2 : 16;
    char **files = realloc(r->files, sizeof *files * (size_t)cap);
    if (files == NULL) return;
    r->files = files;
    unsigned char(*hashes)[32] = realloc(r->seen, sizeof *hashes * (size_t)cap);
    if (hashes == NULL) return;
    r->seen = hashes;
    r->capfiles = cap;
  }
  /* the contents as the generation loading it read them (hashed just before,
     on its thread, or now when it loads on the loop): a write during a load
     then still differs afterwards */
  if (seen)
    memcpy(r->seen[r->nfiles], seen, sizeof r->seen[0]);
  else
    clank_reloader_hash_file(path, r->seen[r->nfiles]);
  r->files[r->nfiles++] = strdup(path);
  if (!r->watching || r->polling) return;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == NULL) return;
  *slash = '\0';
  watch_dir(r, dir[0] ? dir : "/");
}

void clank_reloader_begin(clank_reloader_t *r) {
  r->before = r->files;
  r->before_seen = r->seen;
  r->nbefore = r->nfiles;
  r->files = NULL;
  r->seen = NULL;
  r->nfiles = r->capfiles = 0;
}

void clank_reloader_end(clank_reloader_t *r, int loaded) {
  for (int i = 0; i < r->nbefore; i++) {
    if (!loaded) clank_reloader_file(r, r->before[i], NULL);
    free(r->before[i]);
  }
  free(r->before);
  free(r->before_seen);
  r->before = NULL;
  r->before_seen = NULL;
  r->nbefore = 0;
  clank_reloader_loaded(r);
}

void clank_reloader_loaded(clank_reloader_t *r) {
  hash_files(r, r->hash, 0);
  /* changed while it loaded? look again once the dust settles */
  if (r->watching) uv_timer_start(&r->debounce, debounced, DEBOUNCE_MS, 0);
}

int clank_reloader_current(clank_reloader_t *r) {
  unsigned char now[32];
  hash_files(r, now, 1);
  return memcmp(now, r->hash, sizeof now) == 0;
}

void clank_reloader_close(clank_reloader_t *r) {
  if (!uv_is_closing((uv_handle_t *)&r->debounce)) uv_close((uv_handle_t *)&r->debounce, NULL);
  if (!uv_is_closing((uv_handle_t *)&r->poll)) uv_close((uv_handle_t *)&r->poll, NULL);
  for (clank_watched_dir_t *d = r->dirs, *next; d; d = next) {
    next = d->next;
    uv_close((uv_handle_t *)&d->event, dir_closed);
  }
  r->dirs = NULL;
  for (int i = 0; i < r->nfiles; i++) free(r->files[i]);
  free(r->files);
  free(r->seen);
  r->files = NULL;
  r->seen = NULL;
  r->nfiles = r->capfiles = 0;
}
