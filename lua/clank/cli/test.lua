-- clank-run test [DIR] [busted options] (SPEC §16): runs DIR/spec with busted in this Lua state,
-- which has clank-run's Lua 5.4 and modules, DIR on package.path (its modules, as clank-run
-- serves them) and `require "clank.test"`. Run by runtime/host/command.c: (dir, env) → status.
return function(dir, env)
  local fs = env.fs
  local real, err = fs.realpath(dir)
  if not real or not fs.isdir(real) then
    io.stderr:write("clank-run test: ", tostring(err or (dir .. " is not a folder")), "\n")
    return 1
  end
  local ok, busted_runner = pcall(require, "busted.runner")
  if not ok then
    io.stderr:write("clank-run test: busted is not installed for Lua 5.4 (Debian: apt-get install lua-busted)\n",
      tostring(busted_runner), "\n")
    return 1
  end
  package.path = real .. "/?.lua;" .. real .. "/?/init.lua;" .. package.path
  package.cpath = real .. "/?.so;" .. package.cpath
  local argv = { [0] = "clank-run test", "--directory=" .. real }
  local positional = false
  for _, a in ipairs(env.args) do
    argv[#argv + 1] = a
    if a:sub(1, 1) ~= "-" and (fs.exists(a) or fs.exists(real .. "/" .. a)) then positional = true end
  end
  if not positional then
    if not fs.isdir(real .. "/spec") then
      io.stderr:write("clank-run test: ", dir, " has no spec folder\n")
      return 1
    end
    argv[#argv + 1] = "spec"
  end
  arg = argv -- luacheck: ignore (busted reads the global arg)
  busted_runner { standalone = false }
  return 0
end
