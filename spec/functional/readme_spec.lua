-- README.md's command blocks, run (issue 18): every ```sh block, in order, in one temporary home
-- folder holding a `build` link to this build, with $HOME/.local/bin on PATH as the README's
-- install block tells. The HTML comment just above a block says how it is run:
--   (none)                               run with bash -e; it must exit 0
--   <!-- readme-spec: serves -->         it starts a server: run with $PORT free, its start-up
--                                        line awaited, GET / probed, SIGTERM must exit it with 0
--   <!-- readme-spec: with apps/tasks --> run while the tasks app is served (on a throwaway
--                                        database), 127.0.0.1:8080 in the block pointing at it
--   <!-- readme-spec: skip (why) -->     not run: only for what installs packages, runs the suite
--                                        or needs PostgreSQL, and the reason must be given
local server = require "helpers.server"
local http = require "helpers.http"
local socket = require "socket"

local source_dir = server.source_dir()
local build_dir = os.getenv("CLANK_BUILD_DIR")

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local data = f:read("a")
  f:close()
  return data
end

-- The ```sh blocks: { text, marker, line }.
local function blocks()
  local out, marker, current, start = {}, nil, nil, nil
  local n = 0
  for line in (read(source_dir .. "/README.md") .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if current then
      if line == "```" then
        out[#out + 1] = { text = table.concat(current, "\n") .. "\n", marker = marker, line = start }
        current, marker = nil, nil
      else
        current[#current + 1] = line
      end
    elseif line == "```sh" then
      current, start = {}, n
    elseif line:match("^<!%-%- readme%-spec: .* %-%->$") then
      marker = line:match("^<!%-%- readme%-spec: (.*) %-%->$")
    elseif line ~= "" then
      marker = nil -- a marker counts only just above its block
    end
  end
  return out
end

local home, env_prefix

-- env ... bash -e -c block (to run in the home folder).
local function bash(text, extra_env)
  local env = env_prefix
  for k, v in pairs(extra_env or {}) do env = env .. " " .. quote(k .. "=" .. v) end
  -- without the sanitizer build's LD_PRELOAD: the blocks run cmake, man and curl (clank-run has
  -- the sanitizer runtime linked in)
  return "env -u LD_PRELOAD " .. env .. " bash -e -c " .. quote(text)
end

local function shell(text, extra_env)
  return "cd " .. quote(home) .. " && " .. bash(text, extra_env)
end

local function run_block(text, extra_env)
  local base = os.tmpname()
  os.execute("timeout -s KILL 60 sh -c " .. quote(shell(text, extra_env)) .. " </dev/null >"
    .. quote(base .. ".out") .. " 2>" .. quote(base .. ".err") .. "; echo $? >" .. quote(base .. ".rc"))
  local rc, out, err = tonumber(read(base .. ".rc"):match("%d+")), read(base .. ".out"), read(base .. ".err")
  for _, p in ipairs { base, base .. ".out", base .. ".err", base .. ".rc" } do os.remove(p) end
  return rc, out, err
end

local serving = {} -- blocks still serving, stopped by teardown whatever happened

-- Starts the block in a process group of its own; waits for clank-run's start-up line.
local function serve_block(text)
  local port = server.free_port()
  local base = os.tmpname()
  -- the inner sh prints its pid (the group's, under setsid) and becomes bash, then the server
  local inner = "echo $$; cd " .. quote(home) .. " && exec " .. bash(text, { PORT = tostring(port) })
    .. " </dev/null >" .. quote(base .. ".out") .. " 2>" .. quote(base .. ".err")
  local p = assert(io.popen("setsid sh -c " .. quote(inner) .. "; echo $? >" .. quote(base .. ".rc"), "r"))
  local pid = tonumber(p:read("l"))
  local deadline = socket.gettime() + server.start_timeout
  local line
  repeat
    line = read(base .. ".out"):match("^([^\n]*)\n")
    if not line then socket.sleep(0.02) end
  until line or socket.gettime() > deadline or read(base .. ".rc") ~= ""
  local proc = { pid = pid, pipe = p, base = base, line = line, port = port }
  serving[proc] = true
  function proc.stop()
    serving[proc] = nil
    os.execute("bash -c 'kill -TERM -- -" .. pid .. "' 2>/dev/null")
    local until_ = socket.gettime() + server.stop_timeout
    while read(base .. ".rc") == "" and socket.gettime() < until_ do socket.sleep(0.02) end
    if read(base .. ".rc") == "" then os.execute("bash -c 'kill -KILL -- -" .. pid .. "' 2>/dev/null") end
    p:close()
    local rc = tonumber(read(base .. ".rc"):match("%d+"))
    local err = read(base .. ".err")
    for _, f in ipairs { base, base .. ".out", base .. ".err", base .. ".rc" } do os.remove(f) end
    return rc, err
  end
  return proc
end

describe("README.md", function()
  setup(function()
    assert(build_dir and build_dir ~= "", "CLANK_BUILD_DIR is not set")
    local p = assert(io.popen("mktemp -d /tmp/clank-readme.XXXXXX"))
    home = p:read("l")
    p:close()
    assert(os.execute("ln -s " .. quote(build_dir) .. " " .. quote(home .. "/build")))
    env_prefix = table.concat({
      quote("HOME=" .. home),
      quote("PATH=" .. home .. "/.local/bin:" .. os.getenv("PATH")),
      "MANPATH=", "CLANK_LUA_DIR=",
    }, " ")
  end)

  teardown(function()
    for proc in pairs(serving) do proc.stop() end
    server.kill_all()
    if home then os.execute("rm -rf " .. quote(home)) end
  end)

  it("keeps ./dev run and ./dev test as its first commands, marked not to be run", function()
    local first = blocks()[1]
    assert.are.equal(1, first.text:find("./dev run", 1, true))
    assert.truthy(first.text:find("\n./dev test", 1, true))
    assert.truthy(first.marker and first.marker:match("^skip %(.+%)$"), tostring(first.marker))
  end)

  it("runs every command block", function()
    local all = blocks()
    assert.is_true(#all >= 8, "only " .. #all .. " sh blocks")
    local ran = 0
    for _, b in ipairs(all) do
      local where = "README.md:" .. b.line .. ":\n" .. b.text
      local marker = b.marker
      if marker and marker:match("^skip") then
        assert.truthy(marker:match("^skip %(.+%)$"), "a skip marker gives its reason: " .. where)
      elseif marker == "serves" then
        local proc = serve_block(b.text)
        local line, res = proc.line, proc.line and http.get(proc.port, "/")
        local rc, err = proc.stop()
        assert.is_string(line, "no start-up line from " .. where .. "\n" .. err)
        assert.truthy(line:match("^clank%-run: serving .- at http://127%.0%.0%.1:" .. proc.port .. "/$"), line)
        assert.are.equal(200, res and res.status, where)
        assert.are.equal(0, rc, where .. err)
        ran = ran + 1
      elseif marker == "with apps/tasks" then
        local db = home .. "/tasks-readme.db"
        local s = server.start(source_dir .. "/apps/tasks", { env = { CLANK_TASKS_DB = db } })
        local text = b.text:gsub("127%.0%.0%.1:8080", "127.0.0.1:" .. s.port)
        local rc, out, err = run_block(text)
        assert.are.equal(0, rc, where .. out .. err)
        assert.truthy(out:find('{"ok":true,"output":{"created":true,"id":"', 1, true), out)
        assert.truthy(out:find('"title":"Ship docs"', 1, true), out)
        assert.are.equal(0, s:stop())
        ran = ran + 1
      else
        assert.is_nil(marker, "unknown marker " .. tostring(marker) .. " at " .. where)
        local rc, out, err = run_block(b.text)
        assert.are.equal(0, rc, where .. out .. err)
        ran = ran + 1
      end
    end
    assert.is_true(ran >= 5, "ran only " .. ran)
  end)
end)
