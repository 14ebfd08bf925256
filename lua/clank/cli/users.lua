-- clank-run users add EMAIL [--role NAME]... [--app DIR] (issue 30): adds an account to the
-- app's clank.auth, the way an app with closed registration gets its people. The password is
-- the first line of stdin (typed without echo on a terminal); an empty one gets a random
-- password, printed once. Run by runtime/host/command.c: (target, env) → status.
local USAGE = "usage: clank-run users add EMAIL [--role NAME]... [--app DIR]\n"

local function fail(message)
  io.stderr:write("clank-run users: ", message, "\n")
  return 1
end

local function parse(args)
  local opts = { roles = {}, dir = "." }
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--role" or a == "--app" then
      local value = args[i + 1]
      if not value or value == "" then return nil, a .. " needs a value" end
      if a == "--role" then opts.roles[#opts.roles + 1] = value else opts.dir = value end
      i = i + 2
    elseif a:sub(1, 1) == "-" then
      return nil, "unknown option " .. a
    elseif not opts.command then
      opts.command = a
      i = i + 1
    elseif not opts.email then
      opts.email = a
      i = i + 1
    else
      return nil, "extra argument " .. a
    end
  end
  if opts.command ~= "add" then return nil, "the only command is add" end
  if not opts.email then return nil, "add needs an email" end
  return opts
end

-- The password: stdin's first line, without echo when stdin is a terminal.
local function read_password()
  local tty = os.execute("test -t 0")
  if tty then
    io.stderr:write("Password (empty: a random one): ")
    os.execute("stty -echo")
  end
  local line = io.stdin:read("l")
  if tty then
    os.execute("stty echo")
    io.stderr:write("\n")
  end
  return line or ""
end

return function(_, env)
  local opts, problem = parse(env.args)
  if not opts then return fail(problem .. "\n" .. USAGE) end
  local path = opts.dir:gsub("/+$", "") .. "/app.lua"
  if not env.fs.exists(path) then return fail("no app.lua in " .. opts.dir) end
  local test = require "clank.test"
  local ok, t = pcall(test.app, path)
  if not ok then return fail(tostring(t)) end
  local auth = t.app.auth
  if not auth then return fail(path .. " has no auth (clank.app { auth = clank.auth { ... } })") end
  local password, generated = read_password(), false
  if password == "" then
    password = require("clank.live.token").encode64(require("clank.core").randomBytes(12))
    generated = true
  end
  local added, user = pcall(test.run, function()
    return auth:addUser(opts.email, password, #opts.roles > 0 and opts.roles or nil)
  end)
  if not added then
    return fail(type(user) == "table" and tostring(user.message or user) or tostring(user))
  end
  io.stdout:write("added ", tostring(user.email), " (id ", tostring(user.id), ")\n")
  if generated then io.stdout:write("password: ", password, "\n") end
  return 0
end
