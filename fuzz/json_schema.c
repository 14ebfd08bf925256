/* libFuzzer: bytes → clank.json.decode → schema:safeParse (two fixed
   schemas) → the canonical encoding, which must be a fixed point: decoding
   what encode wrote and encoding again gives the same bytes (SPEC §3, §5).
   Everything goes through the Lua API, in one state made at start-up. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "modules/modules.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* check(bytes) -> nil, or what broke. A Lua error is a finding too. */
static const char check_lua[] =
    "local json, s = require 'clank.json', require 'clank.schema'\n"
    "local schemas = {\n"
    "  s.object { title = s.string { min = 1, max = 40 },\n"
    "             tags = s.optional(s.array(s.enum { 'a', 'b' }, { max = 3 })),\n"
    "             size = s.nullable(s.number { min = 0, integer = true }),\n"
    "             meta = s.optional(s.object({ k = s.unknown() }, { strict = false })) },\n"
    "  s.union { s.array(s.union { s.number(), s.string { pattern = '^%a*$' } }),\n"
    "            s.literal(true), s.nullable(s.boolean()), s.unknown() },\n"
    "}\n"
    "local function stable(v, schema)\n"
    "  local e1 = json.encode(v, schema)\n"
    "  local v2, err = json.decode(e1)\n"
    "  if v2 == nil then return 'encode wrote what decode refuses: ' .. err .. ': ' .. e1 end\n"
    "  local e2 = json.encode(v2, schema)\n"
    "  if e1 ~= e2 then return 'round trip not stable: ' .. e1 .. ' then ' .. e2 end\n"
    "end\n"
    "return function(bytes)\n"
    "  local v, err = json.decode(bytes)\n"
    "  if v == nil then\n"
    "    if type(err) ~= 'string' then return 'decode failed without a message' end\n"
    "    return\n"
    "  end\n"
    "  local problem = stable(v)\n"
    "  if problem then return problem end\n"
    "  for _, schema in ipairs(schemas) do\n"
    "    local r = schema:safeParse(v)\n"
    "    if r.success then\n"
    "      problem = stable(r.data, schema)\n"
    "      if problem then return problem end\n"
    "    elseif #r.error.issues == 0 or #r.error.issues > 100 then\n"
    "      return 'a failed parse with ' .. #r.error.issues .. ' issues'\n"
    "    else\n"
    "      local _ = tostring(r.error)\n"
    "    end\n"
    "  end\n"
    "end\n";

static lua_State *L;
static int check_ref;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  L = luaL_newstate();
  luaL_openlibs(L);
  clank_preload_modules(L);
  if (luaL_loadbuffer(L, check_lua, sizeof check_lua - 1, "=check") != LUA_OK ||
      lua_pcall(L, 0, 1, 0) != LUA_OK) {
    fprintf(stderr, "fuzz/json_schema: %s\n", lua_tostring(L, -1));
    exit(1);
  }
  check_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, check_ref);
  lua_pushlstring(L, (const char *)data, size);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK || !lua_isnil(L, -1)) {
    fprintf(stderr, "fuzz/json_schema: %s\n", lua_tostring(L, -1));
    abort();
  }
  lua_pop(L, 1);
  /* Small steps keep the state's memory flat over millions of inputs. */
  lua_gc(L, LUA_GCSTEP, 0);
  return 0;
}
