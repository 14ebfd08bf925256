/* clank-run new, clank-run test (SPEC §16), clank-run users (issue 30) and
   clank-run jobs (issue 32): runs the runtime's Lua script for the command
   (lua/clank/cli/) in a Lua state of its own, which it owns and closes, with
   clank-run's modules. */
#include "host/command.h"

#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "host/lua_dir.h"
#include "modules/modules.h"
#include "core/protect.h"

/* fs.mkdir(path) → true | nil, err (an existing folder is an error: `new`
   never writes into one). */
static int fs_mkdir(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  if (mkdir(path, 0777) != 0) return luaL_fileresult(L, 0, path);
  lua_pushboolean(L, 1);
  return 1;
}

/* fs.exists(path) → whether anything (file, folder, dangling link) is there. */
static int fs_exists(lua_State *L) {
  struct stat st;
  lua_pushboolean(L, lstat(luaL_checkstring(L, 1), &st) == 0);
  return 1;
}

/* fs.isdir(path) → whether path is a folder. */
static int fs_isdir(lua_State *L) {
  struct stat st;
  lua_pushboolean(L, stat(luaL_checkstring(L, 1), &st) == 0 && S_ISDIR(st.st_mode));
  return 1;
}

/* fs.realpath(path) → the absolute path | nil, err */
static int fs_realpath(lua_State *L) {
  char real[PATH_MAX];
  if (realpath(luaL_checkstring(L, 1), real) == NULL)
    return luaL_fileresult(L, 0, lua_tostring(L, 1));
  lua_pushstring(L, real);
  return 1;
}

static const luaL_Reg fs_funcs[] = {{"mkdir", fs_mkdir},
                                    {"exists", fs_exists},
                                    {"isdir", fs_isdir},
                                    {"realpath", fs_realpath},
                                    {NULL, NULL}};

/* [module, lua_dir, o] → the script's exit status: require(module)(target,
   { luaDir, fs, args }). */
static int run_script(lua_State *L) {
  const char *module = lua_tostring(L, 1);
  const char *lua_dir = lua_tostring(L, 2);
  const clank_options_t *o = lua_touserdata(L, 3);
  lua_getglobal(L, "require");
  lua_pushstring(L, module);
  lua_call(L, 1, 1);
  lua_pushstring(L, o->app_path);
  lua_createtable(L, 0, 3);
  lua_pushstring(L, lua_dir);
  lua_setfield(L, -2, "luaDir");
  luaL_newlib(L, fs_funcs);
  lua_setfield(L, -2, "fs");
  lua_createtable(L, o->rest_argc, 0);
  for (int i = 0; i < o->rest_argc; i++) {
    lua_pushstring(L, o->rest_argv[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "args");
  lua_call(L, 2, 1);
  return 1;
}

int clank_command_main(const clank_options_t *o) {
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "clank-run: out of memory\n");
    return 1;
  }
  luaL_openlibs(L);
  clank_preload_modules(L);
  char lua_dir[PATH_MAX];
  clank_find_lua_dir(lua_dir, sizeof lua_dir);
  clank_prepend_lua_dir(L, lua_dir);
  lua_pushcfunction(L, run_script);
  lua_pushstring(L, o->command == CLANK_COMMAND_NEW     ? "clank.cli.new"
                    : o->command == CLANK_COMMAND_USERS ? "clank.cli.users"
                    : o->command == CLANK_COMMAND_JOBS  ? "clank.cli.jobs"
                                                        : "clank.cli.test");
  lua_pushstring(L, lua_dir);
  lua_pushlightuserdata(L, (void *)o);
  int code;
  if (clank_pcall(L, 3, 1) != LUA_OK) {
    fprintf(stderr, "clank-run: %s\n", clank_error_text(L, -1));
    code = 1;
  } else {
    code = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 1;
  }
  fflush(stdout);
  lua_close(L);
  return code;
}
