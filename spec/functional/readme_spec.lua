-- The README's and the manual's examples, run as printed (issues 18 and 34).
--
-- README.md's command blocks: every ```sh block, in order, in one temporary home folder holding
-- a `build` link to this build, with $HOME/.local/bin on PATH as the README's install block
-- tells. The HTML comment just above a block says how it is run:
--   (none)                               run with bash -e; it must exit 0
--   <!-- readme-spec: serves -->         it starts a server: run with $PORT free, its start-up
--                                        line awaited, GET / probed, SIGTERM must exit it with 0
--   <!-- readme-spec: with apps/tasks --> run while the tasks app is served (on a throwaway
--                                        database), 127.0.0.1:8080 in the block pointing at it
--   <!-- readme-spec: skip (why) -->     not run: only for what installs packages, runs the suite
--                                        or needs PostgreSQL, and the reason must be given
--
-- Every ```lua block of README.md and doc/*.md, each alone in an empty folder, exactly as
-- printed (nothing is added to it). The comment just above it says how; without one, a block
-- with a line `return clank.app {` is an app, any other a script:
--   <!-- readme-spec: app -->            app.lua, served by clank-run; GET / must not be a 5xx
--                                        and SIGTERM must exit it with 0
--   <!-- readme-spec: app, public/ -->   the same, with a folder public/ holding app.css
--   <!-- readme-spec: script -->         run by plain lua5.4 with this build's modules; exit 0
--   <!-- readme-spec: test -->           a spec: spec/doc_spec.lua of an app `clank-run new`
--                                        wrote, run by `clank-run test`; every test must pass
--   <!-- readme-spec: fragment (why) --> not run: part of an example around it; kept few
--
-- And the documents link only inside the repository: every relative link names a file that
-- exists and, with #part, a heading of it (GitHub's anchors, which /__clank/docs gives too).
local server = require "helpers.server"
local http = require "helpers.http"
local files = require "helpers.files"
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

-- The blocks of a Markdown file fenced as ```lang: { text, marker, line }. Other fences are
-- skipped whole, so that nothing inside them counts as a fence or a marker.
local function blocks(file, lang)
  local out, marker, current, start, other = {}, nil, nil, nil, false
  local n = 0
  for line in (read(file or (source_dir .. "/README.md")) .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if current then
      if line == "```" then
        out[#out + 1] = { text = table.concat(current, "\n") .. "\n", marker = marker, line = start }
        current, marker = nil, nil
      else
        current[#current + 1] = line
      end
    elseif other then
      if line == "```" then other = false end
    elseif line == "```" .. (lang or "sh") then
      current, start = {}, n
    elseif line:match("^```") then
      other, marker = true, nil
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

-- ---- the Lua examples of README.md and doc/*.md ----

local lua_interpreter = os.getenv("CLANK_LUA") or "lua5.4"

-- The documents: README.md, then doc/*.md in name order.
local function documents()
  local list = { source_dir .. "/README.md" }
  local p = assert(io.popen("ls " .. quote(source_dir .. "/doc") .. "/*.md 2>/dev/null"))
  for path in p:lines() do list[#list + 1] = path end
  p:close()
  return list
end

local function short(path)
  return path:sub(#source_dir + 2)
end

local function mkdtemp() return files.tmpdir("clank-example") end
local write = files.write

-- How a ```lua block is run: "app", "script", "test" or "fragment", and the marker's options.
local function mode_of(b)
  local m = b.marker
  if m == nil then
    local app = b.text:find("\nreturn clank%.app {") or b.text:find("^return clank%.app {")
    return app and "app" or "script", {}
  end
  if m:match("^fragment") then
    assert(m:match("^fragment %(.+%)$"), "a fragment marker gives its reason: " .. m)
    return "fragment", {}
  end
  local mode, rest = m:match("^(%a+),?%s*(.*)$")
  assert(mode == "app" or mode == "script" or mode == "test", "unknown marker " .. m)
  local opts = {}
  for word in rest:gmatch("[^,%s]+") do
    assert(word == "public/", "unknown marker option " .. word)
    opts.public = true
  end
  return mode, opts
end

-- Runs a shell command in dir, bounded in time → exit status, stdout and stderr.
local function run_in(dir, cmd, seconds)
  local base = os.tmpname()
  os.execute("cd " .. quote(dir) .. " && timeout -s KILL " .. (seconds or 60) .. " sh -c " .. quote(cmd)
    .. " </dev/null >" .. quote(base .. ".out") .. " 2>" .. quote(base .. ".err") .. "; echo $? >"
    .. quote(base .. ".rc"))
  local rc, out, err = tonumber(read(base .. ".rc"):match("%d+")), read(base .. ".out"), read(base .. ".err")
  for _, p in ipairs { base, base .. ".out", base .. ".err", base .. ".rc" } do os.remove(p) end
  return rc, out, err
end

local runners = {}

function runners.app(b, opts, dir, where)
  if opts.public then
    os.execute("mkdir -p " .. quote(dir .. "/public"))
    write(dir .. "/public/app.css", "body { margin: 0 }\n")
  end
  write(dir .. "/app.lua", b.text)
  local ok, s = pcall(server.start, "app.lua", { cwd = dir })
  assert(ok, where .. "\n" .. tostring(s))
  local res = http.get(s.port, "/")
  local rc = s:stop()
  assert.truthy(res and res.status < 500, where .. "GET / answered " .. tostring(res and res.status)
    .. "\n" .. s:stderr())
  assert.are.equal(0, rc, where .. s:stderr())
end

function runners.script(b, _, dir, where)
  write(dir .. "/script.lua", b.text)
  local rc, out, err = run_in(dir, lua_interpreter .. " script.lua")
  assert.are.equal(0, rc, where .. out .. err)
end

function runners.test(b, _, dir, where)
  local rc, out, err = server.run({ "new", "hello" }, { cwd = dir })
  assert.are.equal(0, rc, out .. err)
  write(dir .. "/hello/spec/doc_spec.lua", b.text)
  rc, out, err = server.run({ "test", "hello", "spec/doc_spec.lua", "--output=plainTerminal" },
    { cwd = dir, timeout = 60 })
  assert.are.equal(0, rc, where .. out .. err)
  local passed, failed, errors = out:match("(%d+) successes? / (%d+) failures? / (%d+) errors?")
  assert.truthy(passed and tonumber(passed) > 0 and failed == "0" and errors == "0", where .. out)
end

describe("the Lua examples", function()
  for _, file in ipairs(documents()) do
    it("of " .. short(file) .. " run as printed", function()
      for _, b in ipairs(blocks(file, "lua")) do
        local where = short(file) .. ":" .. b.line .. ":\n" .. b.text .. "\n"
        local mode, opts = mode_of(b)
        if mode ~= "fragment" then
          local dir = mkdtemp()
          local ok, err = pcall(runners[mode], b, opts, dir, where)
          server.kill_all()
          os.execute("rm -rf " .. quote(dir))
          if not ok then error(err, 0) end
        end
      end
    end)
  end

  it("are mostly whole: fragments are few", function()
    local total, fragments = 0, 0
    for _, file in ipairs(documents()) do
      for _, b in ipairs(blocks(file, "lua")) do
        total = total + 1
        if mode_of(b) == "fragment" then fragments = fragments + 1 end
      end
    end
    assert.is_true(total >= 30, "only " .. total .. " Lua examples")
    assert.is_true(fragments * 10 <= total, fragments .. " of " .. total .. " examples are fragments")
  end)
end)

-- ---- links ----

-- A heading's anchor as GitHub makes it (and /__clank/docs, runtime/host/docs.c): its text
-- without Markdown, lower case, letters, digits, - and _ kept, spaces made -, the rest dropped.
local function anchor(heading)
  local text = heading:gsub("%[([^%]]*)%]%([^)]*%)", "%1"):gsub("[`*]", ""):lower()
  return (text:gsub(" ", "-"):gsub("[^%w_%-\128-\255]", ""))
end

-- The anchors of a Markdown file's headings (outside code fences); a repeat gets -1, -2, ...
local function anchors(path)
  local set, fenced = {}, false
  for line in (read(path) .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^```") then
      fenced = not fenced
    elseif not fenced then
      local text = line:match("^#+%s+(.-)%s*$")
      if text then
        local a, k = anchor(text), 0
        local name = a
        while set[name] do
          k = k + 1
          name = a .. "-" .. k
        end
        set[name] = true
      end
    end
  end
  return set
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

describe("the documents' links", function()
  it("never leave the repository, and the README cites no SPEC", function()
    local readme = read(source_dir .. "/README.md")
    assert.falsy(readme:find("shared/SPEC", 1, true))
    assert.falsy(readme:find("SPEC §", 1, true))
    for _, file in ipairs(documents()) do
      local text = read(file)
      assert.falsy(text:find("%(%.%./shared"), short(file))
      assert.falsy(text:find("SPEC §", 1, true), short(file) .. " cites the SPEC")
    end
  end)

  it("name files and headings that exist", function()
    local checked = 0
    for _, file in ipairs(documents()) do
      local dir = file:match("^(.*)/[^/]*$")
      local fenced = false
      for line in (read(file) .. "\n"):gmatch("([^\n]*)\n") do
        if line:match("^```") then fenced = not fenced end
        if not fenced then
          for target in line:gsub("`[^`]*`", ""):gmatch("%]%(([^)%s]+)%)") do
            if not target:match("^%a[%w+.-]*:") then -- not a URL with a scheme
              local path, part = target:match("^([^#]*)#?(.*)$")
              local full = path == "" and file or (dir .. "/" .. path)
              assert.is_true(exists(full), short(file) .. " links to " .. target .. ": no such file")
              if part ~= "" then
                assert.is_true(anchors(full)[part] == true,
                  short(file) .. " links to " .. target .. ": no such heading")
              end
              checked = checked + 1
            end
          end
        end
      end
    end
    assert.is_true(checked >= 50, "only " .. checked .. " links")
  end)
end)
