-- luacheck configuration for the whole tree: `luacheck lua spec apps bench`
-- (ctest runs it as style/luacheck; any warning fails).
std = "lua54"
max_line_length = 120
exclude_files = {
  "**/node_modules/**",
  "build*/**",
  -- A fixture app that does not parse, on purpose: cli_spec loads it.
  "spec/fixtures/apps/broken/**",
}

-- busted's globals, in the specs and their helpers (not in the fixture apps they serve).
local busted = {
  "describe", "it", "before_each", "after_each", "setup", "teardown", "pending",
  "assert", "spy", "stub", "mock", "finally", "insulate", "expose",
  "lazy_setup", "lazy_teardown", "strict_setup", "strict_teardown",
}
files["spec/unit"] = { read_globals = busted }
files["spec/functional"] = { read_globals = busted }
files["spec/helpers"] = { read_globals = busted }
-- An app's own specs, run by `clank-run test DIR` (and the starter's, copied by `clank-run new`).
files["apps/tasks/spec"] = { read_globals = busted }
files["apps/hello/spec"] = { read_globals = busted }
files["lua/clank/starter/spec"] = { read_globals = busted }

-- The OpenResty baseline runs in nginx's LuaJIT, with ngx_lua's `ngx` global.
files["bench/nginx"] = { std = "luajit+ngx_lua" }
