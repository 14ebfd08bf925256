-- Starts and stops the real clank-run for functional specs.
--
--   local server = require "helpers.server"
--   local s = server.start(server.fixture("basic"), { args = { "--log", "json" },
--                                                      env = { CLANK_TEST_LIMITS = "idle_ms=200" } })
--   ... s.port ...
--   assert.are.equal(0, s:stop())
--
-- The process is spawned through io.popen: an inner shell prints its pid and
-- execs clank-run (so the pid is clank-run's own), with stdout and stderr sent to
-- files; the outer shell waits for it and writes its exit status to a file,
-- which wait_exit polls. Under the sanitizer build (CLANK_SANITIZED=1) any
-- sanitizer report on stderr fails the test, and a SIGTERM stop must exit 0.
local socket = require "socket"

local server = {}

local sanitized = os.getenv("CLANK_SANITIZED") == "1"
server.sanitized = sanitized
-- How long anything may take before the test fails instead of hanging.
server.start_timeout = sanitized and 30 or 10
server.stop_timeout = sanitized and 30 or 15

local live = {} -- servers started and not yet reaped

local files = require "helpers.files"
local quote = files.quote

local function read_file(path)
  return files.read(path) or ""
end

local function clank_run()
  local path = os.getenv("CLANK_RUN")
  if not path or path == "" then
    error("CLANK_RUN is not set: point it at the clank-run binary", 3)
  end
  return path
end

function server.source_dir()
  local dir = os.getenv("CLANK_SOURCE_DIR")
  if dir and dir ~= "" then
    return dir
  end
  return "."
end

-- Path of a fixture app: server.fixture("basic") → spec/fixtures/apps/basic/app.lua.
function server.fixture(name, file)
  return server.source_dir() .. "/spec/fixtures/apps/" .. name .. "/" .. (file or "app.lua")
end

local function env_words(env)
  local words = {}
  if env then
    local keys = {}
    for k in pairs(env) do
      keys[#keys + 1] = k
    end
    table.sort(keys)
    for _, k in ipairs(keys) do
      words[#words + 1] = quote(k .. "=" .. tostring(env[k]))
    end
  end
  return words
end

-- Returns an error message when stderr holds a sanitizer report, else nil.
function server.sanitizer_report(stderr)
  for _, marker in ipairs({ "AddressSanitizer", "LeakSanitizer", "runtime error:" }) do
    if stderr:find(marker, 1, true) then
      return "sanitizer report (" .. marker .. ") on clank-run's stderr:\n" .. stderr
    end
  end
  return nil
end

local function check_sanitizers(stderr)
  if sanitized then
    local report = server.sanitizer_report(stderr)
    if report then
      error(report, 3)
    end
  end
end

--------------------------------------------------------------------------------
-- A running server

local Server = {}
Server.__index = Server

function Server:stderr()
  return read_file(self.err_path)
end

function Server:stdout()
  return read_file(self.out_path)
end

-- Sends a signal by name ("TERM", "INT", "HUP", "KILL").
function Server:signal(name)
  assert(not self.exit_code, "clank-run has already exited")
  local ok = os.execute("kill -s " .. name .. " " .. self.pid .. " 2>/dev/null")
  return ok
end

-- Returns the exit status if the process has exited, else nil.
function Server:poll()
  if self.exit_code then
    return self.exit_code
  end
  local status = read_file(self.status_path)
  local code = tonumber(status:match("^(%d+)"))
  if code then
    self.exit_code = code
    if self.pipe then
      self.pipe:close()
      self.pipe = nil
    end
    live[self] = nil
  end
  return self.exit_code
end

-- Waits up to `timeout` seconds for the process to exit. Returns its exit code,
-- or nil, "timeout". Fails the test on a sanitizer report.
function Server:wait_exit(timeout)
  local deadline = socket.gettime() + (timeout or server.stop_timeout)
  while true do
    local code = self:poll()
    if code then
      check_sanitizers(self:stderr())
      return code
    end
    if socket.gettime() >= deadline then
      return nil, "timeout"
    end
    socket.sleep(0.01)
  end
end

-- Kills the process outright (cleanup after a failure); never fails.
function Server:kill()
  if not self:poll() then
    os.execute("kill -s KILL " .. self.pid .. " 2>/dev/null")
    local deadline = socket.gettime() + 10
    while not self:poll() and socket.gettime() < deadline do
      socket.sleep(0.01)
    end
  end
  return self.exit_code
end

-- SIGTERM, then waits for the exit and returns the exit code. The sanitizer
-- build requires exit status 0 (a leak makes ASan exit non-zero).
function Server:stop(timeout)
  if not self:poll() then
    self:signal("TERM")
  end
  local code = self:wait_exit(timeout or server.stop_timeout)
  if not code then
    self:kill()
    error("clank-run (pid " .. self.pid .. ") did not exit within "
      .. (timeout or server.stop_timeout) .. " s of SIGTERM; stderr:\n" .. self:stderr(), 2)
  end
  if sanitized and code ~= 0 then
    error("clank-run exited " .. code .. " after SIGTERM under sanitizers; stderr:\n"
      .. self:stderr(), 2)
  end
  return code
end

Server.__gc = function(self)
  -- A test that failed half-way: never leave a server behind (and never let
  -- the popen handle's finalizer wait for it forever).
  if not self.exit_code then
    os.execute("kill -s KILL " .. self.pid .. " 2>/dev/null")
  end
  for _, path in ipairs({ self.base, self.out_path, self.err_path, self.status_path }) do
    os.remove(path)
  end
end

--------------------------------------------------------------------------------
-- Spawning

-- Fills in `self` (a fresh table) as the running server.
local function spawn(self, argv, env, nofile, cwd)
  local base = os.tmpname()
  self.out_path = base .. ".out"
  self.err_path = base .. ".err"
  self.status_path = base .. ".status"
  self.base = base
  local words = { "env" }
  for _, w in ipairs(env_words(env)) do
    words[#words + 1] = w
  end
  for _, a in ipairs(argv) do
    words[#words + 1] = quote(a)
  end
  local limits = ""
  if nofile then -- soft first: the hard limit may not go below it
    limits = "ulimit -S -n " .. math.floor(nofile.soft) .. " && ulimit -H -n "
      .. math.floor(nofile.hard) .. " && "
  end
  if cwd then limits = limits .. "cd " .. quote(cwd) .. " && " end
  local inner = limits .. "echo $$; exec \"$@\" >" .. quote(self.out_path) .. " 2>" .. quote(self.err_path)
  local cmd = "sh -c " .. quote(inner) .. " sh " .. table.concat(words, " ")
    .. " </dev/null; echo $? >" .. quote(self.status_path .. ".tmp")
    .. " && mv " .. quote(self.status_path .. ".tmp") .. " " .. quote(self.status_path)
  self.pipe = assert(io.popen(cmd, "r"))
  local pid = self.pipe:read("l")
  self.pid = tonumber(pid)
  assert(self.pid, "could not spawn clank-run: " .. tostring(pid))
  setmetatable(self, Server) -- after the popen handle, so __gc runs first
  live[self] = true
  return self
end

-- server.start into `self`; errors name the caller of server.start.
local function start(self, app_path, opts)
  opts = opts or {}
  local argv = { opts.binary or clank_run() }
  if opts.port ~= false then
    argv[#argv + 1] = "--port"
    argv[#argv + 1] = tostring(opts.port or 0)
  end
  for _, a in ipairs(opts.args or {}) do
    argv[#argv + 1] = a
  end
  argv[#argv + 1] = app_path
  spawn(self, argv, opts.env, opts.nofile, opts.cwd)

  local deadline = socket.gettime() + (opts.start_timeout or server.start_timeout)
  while true do
    local out = self:stdout()
    local line = out:match("^([^\n]*)\n")
    if line then
      self.startup_line = line
      local port = line:match("^clank%-run: serving .- at http://[^/]+:(%d+)/$")
      if not port then
        self:kill()
        error("unexpected start-up line from clank-run: " .. string.format("%q", line)
          .. "\nstderr:\n" .. self:stderr(), 3)
      end
      self.port = tonumber(port)
      return self
    end
    local code = self:poll()
    if code then
      error("clank-run exited with status " .. code .. " before printing its start-up line"
        .. "\nstdout:\n" .. out .. "\nstderr:\n" .. self:stderr(), 3)
    end
    if socket.gettime() >= deadline then
      self:kill()
      error("clank-run printed no start-up line within "
        .. (opts.start_timeout or server.start_timeout) .. " s\nstderr:\n" .. self:stderr(), 3)
    end
    socket.sleep(0.01)
  end
end

-- Starts `$CLANK_RUN --port 0 [args] app` and waits for the start-up line.
-- opts.args: extra arguments before the app; opts.env: extra environment;
-- opts.port: a port number, or false to pass no --port at all; opts.binary: another clank-run;
-- opts.nofile = { soft = N, hard = M }: RLIMIT_NOFILE for clank-run; opts.cwd: the folder it
-- runs in (a relative app path is then relative to it).
function server.start(app_path, opts)
  return start({}, app_path, opts)
end

-- Kills every server still running (use in after_each/teardown so a failed
-- test never leaves one behind).
function server.kill_all()
  for s in pairs(live) do
    s:kill()
  end
end

-- One clank-run for the describe block it is called in, as server.start(app_path, opts)
-- starts it: started by the block's setup, stopped by its teardown (where it must exit 0),
-- then whatever server is still running is killed. The server it returns is filled in
-- once setup has run; a later setup of the block may use it.
--
--   describe("clank-run routes", function()
--     local s = server.for_describe(server.fixture("basic"))
--     it("...", function() ... s.port ... end)
--   end)
function server.for_describe(app_path, opts)
  local busted = require "busted" -- the running busted's API (setup and teardown of this block)
  local s = {}
  busted.setup(function()
    start(s, app_path, opts)
  end)
  busted.teardown(function()
    if s.port then
      local code = s:stop()
      if code ~= 0 then
        error("clank-run exited " .. code .. " after SIGTERM; stderr:\n" .. s:stderr(), 0)
      end
    end
    server.kill_all()
  end)
  return s
end

-- Runs a short-lived clank-run: server.run({ "--version" }, { env = {...} })
-- returns exit code, stdout, stderr. Bounded by `timeout` (exit 124 when hit).
-- opts.stdin: what it reads on standard input (else nothing);
-- opts.binary: another clank-run than $CLANK_RUN (a copy elsewhere); opts.cwd: the folder it
-- runs in.
function server.run(args, opts)
  opts = opts or {}
  local base = os.tmpname()
  local out_path, err_path, status_path = base .. ".out", base .. ".err", base .. ".status"
  local words = { "timeout", "-s", "KILL", tostring(opts.timeout or server.start_timeout), "env" }
  for _, w in ipairs(env_words(opts.env)) do
    words[#words + 1] = w
  end
  words[#words + 1] = quote(opts.binary or clank_run())
  for _, a in ipairs(args) do
    words[#words + 1] = quote(a)
  end
  -- the status goes through a file: under LD_PRELOAD=libasan the wrapping
  -- shell's own exit status could be LeakSanitizer's, not clank-run's
  local in_path = "/dev/null"
  if opts.stdin then -- what the command reads on its standard input
    in_path = base .. ".in"
    local f = assert(io.open(in_path, "wb"))
    f:write(opts.stdin)
    f:close()
  end
  local cmd = table.concat(words, " ") .. " <" .. quote(in_path) .. " >" .. quote(out_path) .. " 2>"
    .. quote(err_path)
    .. "; echo $? >" .. quote(status_path)
  if opts.cwd then cmd = "cd " .. quote(opts.cwd) .. " && " .. cmd end
  os.execute(cmd)
  local code = tonumber(read_file(status_path):match("^(%d+)"))
  local stdout, stderr = read_file(out_path), read_file(err_path)
  os.remove(out_path)
  os.remove(err_path)
  os.remove(status_path)
  if opts.stdin then os.remove(in_path) end
  os.remove(base)
  check_sanitizers(stderr)
  return code, stdout, stderr
end

-- A TCP port that was free a moment ago.
function server.free_port()
  local s = assert(socket.bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return tonumber(port)
end

return server
