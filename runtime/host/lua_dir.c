/* Where the Lua side of `require "clank"` is (SPEC §16): $CLANK_LUA_DIR or
   a folder relative to the executable; and putting it on package.path. */
#include "host/lua_dir.h"

#include <lauxlib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

static int has_lua_side(const char *dir) {
  char probe[PATH_MAX + 64];
  if (strlen(dir) >= PATH_MAX) return 0;
  snprintf(probe, sizeof probe, "%s/clank/init.lua", dir);
  return access(probe, R_OK) == 0;
}

/* Only paths relative to the executable, never one compiled in: an installed
   or packaged binary must not depend on the tree it was built from. A build
   folder holds a `lua` link to the source's (cmake/ClankInstall.cmake). */
void clank_find_lua_dir(char *out, size_t n) {
  const char *env = getenv("CLANK_LUA_DIR");
  if (env && *env) {
    snprintf(out, n, "%s", env);
    return;
  }
  char exe[PATH_MAX];
  size_t len = sizeof exe;
  if (uv_exepath(exe, &len) == 0) {
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    const char *rel[] = {"/../share/clank/lua", "/lua", "/../lua"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
      char dir[PATH_MAX + 32];
      snprintf(dir, sizeof dir, "%s%s", exe, rel[i]);
      if (has_lua_side(dir) && strlen(dir) < n) {
        memcpy(out, dir, strlen(dir) + 1);
        return;
      }
    }
  }
  snprintf(out, n, "%s", "/usr/share/clank/lua");
}

void clank_prepend_lua_dir(lua_State *L, const char *dir) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 2);
}
