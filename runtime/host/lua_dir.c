/* Where the Lua side of `require "clank"` is (SPEC §16), and the reference
   manual beside it (issue 34): an environment variable, or a folder relative
   to the executable; and putting the Lua side on package.path. */
#include "host/lua_dir.h"

#include <lauxlib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

static int has_file(const char *dir, const char *probe) {
  char path[PATH_MAX + 64];
  if (strlen(dir) >= PATH_MAX) return 0;
  snprintf(path, sizeof path, "%s/%s", dir, probe);
  return access(path, R_OK) == 0;
}

/* $env; else the first of exe's folder + rel[i] that holds probe; else
   fallback. Only paths relative to the executable, never one compiled in:
   an installed or packaged binary must not depend on the tree it was built
   from. A build folder holds links to the source's lua/ and doc/
   (cmake/ClankInstall.cmake). */
static void find_dir(char *out, size_t n, const char *env_name, const char *const rel[3],
                     const char *probe, const char *fallback) {
  const char *env = getenv(env_name);
  if (env && *env) {
    snprintf(out, n, "%s", env);
    return;
  }
  char exe[PATH_MAX];
  size_t len = sizeof exe;
  if (uv_exepath(exe, &len) == 0) {
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    for (size_t i = 0; i < 3; i++) {
      char dir[PATH_MAX + 32];
      snprintf(dir, sizeof dir, "%s%s", exe, rel[i]);
      if (has_file(dir, probe) && strlen(dir) < n) {
        memcpy(out, dir, strlen(dir) + 1);
        return;
      }
    }
  }
  snprintf(out, n, "%s", fallback);
}

void clank_find_lua_dir(char *out, size_t n) {
  static const char *const rel[3] = {"/../share/clank/lua", "/lua", "/../lua"};
  find_dir(out, n, "CLANK_LUA_DIR", rel, "clank/init.lua", "/usr/share/clank/lua");
}

void clank_find_doc_dir(char *out, size_t n) {
  static const char *const rel[3] = {"/../share/clank/doc", "/doc", "/../doc"};
  find_dir(out, n, "CLANK_DOC_DIR", rel, "README.md", "/usr/share/clank/doc");
}

void clank_prepend_lua_dir(lua_State *L, const char *dir) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 2);
}
