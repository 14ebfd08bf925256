-- Starting an app in one command (SPEC §2, §16): clank-run DIR, clank-run new NAME, clank-run
-- test [DIR], the options the runtime keeps for later (--cpu-limit, --memory-limit, --inspector),
-- the addresses told on stderr and the hint for a taken port.
local server = require "helpers.server"
local http = require "helpers.http"
local socket = require "socket"

local basic_dir = server.source_dir() .. "/spec/fixtures/apps/basic"

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function tmpdir()
  local p = assert(io.popen("mktemp -d /tmp/clank-commands.XXXXXX"))
  local dir = p:read("l")
  p:close()
  return dir
end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local data = f:read("a")
  f:close()
  return data
end

local function write(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

-- Polls the server's stderr until it holds `text` (the log is flushed once per loop iteration).
local function wait_stderr(s, text)
  local deadline = socket.gettime() + server.start_timeout
  while socket.gettime() < deadline do
    if s:stderr():find(text, 1, true) then return true end
    socket.sleep(0.02)
  end
  return false, s:stderr()
end

describe("clank-run commands", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function()
    server.kill_all()
    os.execute("rm -rf " .. quote(dir))
  end)

  describe("clank-run DIR", function()
    it("serves DIR/app.lua", function()
      local s = server.start(basic_dir)
      assert.are.equal("clank-run: serving basic at http://127.0.0.1:" .. s.port .. "/", s.startup_line)
      local res = assert(http.get(s.port, "/hello"))
      assert.are.equal("Hello, world!\n", res.body)
      assert.are.equal(0, s:stop())
    end)

    it("serves DIR/ with a trailing slash the same", function()
      local s = server.start(basic_dir .. "/")
      assert.are.equal("clank-run: serving basic at http://127.0.0.1:" .. s.port .. "/", s.startup_line)
      assert.are.equal(0, s:stop())
    end)

    it("exits 1 naming DIR/app.lua for a folder without one", function()
      local code, stdout, stderr = server.run({ "--port", "0", dir })
      assert.are.equal(1, code)
      assert.are.equal("", stdout)
      assert.truthy(stderr:find(dir .. "/app.lua", 1, true), stderr)
    end)
  end)

  describe("clank-run new", function()
    it("writes a starter app that serves its page, stylesheet and action", function()
      local code, stdout = server.run({ "new", "greeter" }, { cwd = dir })
      assert.are.equal(0, code)
      assert.truthy(stdout:find("greeter", 1, true))
      for _, f in ipairs { "app.lua", "README.md", "public/app.css", "spec/app_spec.lua" } do
        assert.is_string(read(dir .. "/greeter/" .. f), "missing " .. f)
      end
      local readme = read(dir .. "/greeter/README.md")
      assert.are.equal(5, select(2, readme:gsub("\n", "")), readme)

      local s = server.start(dir .. "/greeter")
      assert.are.equal("clank-run: serving greeter at http://127.0.0.1:" .. s.port .. "/", s.startup_line)
      local page = assert(http.get(s.port, "/"))
      assert.are.equal(200, page.status)
      assert.truthy(page.body:find("<h1>greeter</h1>", 1, true), page.body)
      assert.truthy(page.body:find('<form', 1, true), page.body)
      local css = assert(http.get(s.port, "/assets/app.css"))
      assert.are.equal(200, css.status)
      assert.are.equal(read(dir .. "/greeter/public/app.css"), css.body)
      local res = assert(http.request(s.port, "POST", "/actions/greet",
        { ["content-type"] = "application/json" }, '{"name":"Ada"}'))
      assert.are.equal(200, res.status)
      assert.are.equal('{"ok":true,"output":{"text":"Hello, Ada!"}}', res.body)
      assert.are.equal(0, s:stop())
    end)

    -- The commands it prints are pasted into a shell: a name with a space or a quote is one word.
    it("prints commands a shell reads as one folder name, whatever the name holds", function()
      for _, case in ipairs {
        { "My App", "'My App'" },
        { "Bob's app", "'Bob'\\''s app'" },
        { "plain-name_1.2", "plain-name_1.2" },
      } do
        local name, word = case[1], case[2]
        local code, stdout, stderr = server.run({ "new", name }, { cwd = dir })
        assert.are.equal(0, code, stderr)
        assert.are.equal("clank-run new: wrote " .. name .. "/ (app.lua, public/app.css, spec/, README.md)\n"
          .. "  serve it:  clank-run " .. word .. "\n"
          .. "  test it:   clank-run test " .. word .. "\n", stdout)
        -- what a shell makes of the printed word: the folder's name, which serves
        local p = assert(io.popen("cd " .. quote(dir) .. " && printf '%s' " .. word))
        assert.are.equal(name, p:read("a"))
        p:close()
        local checked, _, why = server.run({ "--check", name }, { cwd = dir })
        assert.are.equal(0, checked, why)
      end
    end)

    -- One hello (issue 34): the example in apps/ is the starter itself, not a second app.
    it("writes, for the name hello, apps/hello byte for byte", function()
      assert.are.equal(0, (server.run({ "new", "hello" }, { cwd = dir })))
      local files = {}
      local p = assert(io.popen("cd " .. quote(server.source_dir() .. "/apps/hello") .. " && find . -type f | sort"))
      for line in p:lines() do files[#files + 1] = line:sub(3) end
      p:close()
      assert.are.same({ "README.md", "app.lua", "public/app.css", "spec/app_spec.lua" }, files)
      for _, f in ipairs(files) do
        assert.are.equal(read(server.source_dir() .. "/apps/hello/" .. f), read(dir .. "/hello/" .. f), f)
      end
    end)

    it("refuses a folder that exists, exits 1 and writes nothing", function()
      os.execute("mkdir " .. quote(dir .. "/taken"))
      write(dir .. "/taken/app.lua", "-- mine\n")
      local code, stdout, stderr = server.run({ "new", "taken" }, { cwd = dir })
      assert.are.equal(1, code)
      assert.are.equal("", stdout)
      assert.are.equal("clank-run new: taken already exists; choose a new folder name\n", stderr)
      assert.are.equal("-- mine\n", read(dir .. "/taken/app.lua"))
      assert.is_nil(read(dir .. "/taken/README.md"))
    end)

    it("exits 2 without a name", function()
      local code, stdout = server.run({ "new" }, { cwd = dir })
      assert.are.equal(2, code)
      assert.are.equal("", stdout)
    end)
  end)

  describe("clank-run test", function()
    it("runs the starter's spec in clank-run's Lua 5.4 and exits 0", function()
      assert.are.equal(0, (server.run({ "new", "app" }, { cwd = dir })))
      local code, stdout, stderr = server.run({ "test", "app" }, { cwd = dir, timeout = 60 })
      assert.are.equal(0, code, stdout .. stderr)
      assert.truthy(stdout:find("4 successes / 0 failures / 0 errors / 0 pending", 1, true), stdout)
    end)

    it("defaults to the current folder, and the specs see Lua 5.4", function()
      os.execute("mkdir -p " .. quote(dir .. "/spec"))
      write(dir .. "/spec/version_spec.lua",
        'describe("x", function() it("runs on 5.4", function() assert.are.equal("Lua 5.4", _VERSION) end) end)\n')
      local code, stdout, stderr = server.run({ "test" }, { cwd = dir, timeout = 60 })
      assert.are.equal(0, code, stdout .. stderr)
      assert.truthy(stdout:find("1 success / 0 failures", 1, true), stdout)
    end)

    it("exits 1 when a spec fails", function()
      os.execute("mkdir -p " .. quote(dir .. "/spec"))
      write(dir .. "/spec/fails_spec.lua",
        'describe("x", function() it("fails", function() assert.are.equal(1, 2) end) end)\n')
      local code, stdout = server.run({ "test", dir }, { timeout = 60 })
      assert.are.equal(1, code)
      assert.truthy(stdout:find("0 successes / 1 failure", 1, true), stdout)
    end)

    it("exits 1 for a folder without specs", function()
      local code, _, stderr = server.run({ "test", dir })
      assert.are.equal(1, code)
      assert.truthy(stderr:find("has no spec folder", 1, true), stderr)
    end)
  end)

  describe("options kept for the runtime", function()
    local app = server.fixture("basic")
    local bad = {
      { "--cpu-limit", "0" }, { "--cpu-limit", "-5" }, { "--cpu-limit", "abc" }, { "--cpu-limit" },
      { "--memory-limit", "0" }, { "--memory-limit", "1.5" }, { "--memory-limit" },
      { "--inspector", "" }, { "--inspector" },
    }
    for _, args in ipairs(bad) do
      it("exits 2 for " .. table.concat(args, " "), function()
        local argv = { table.unpack(args) }
        argv[#argv + 1] = app
        local code, stdout, stderr = server.run(argv)
        assert.are.equal(2, code)
        assert.are.equal("", stdout)
        assert.truthy(stderr:find(args[1], 1, true), stderr)
      end)
    end

    it("takes good values", function()
      local code = server.run({ "--cpu-limit", "250", "--memory-limit", "64", "--inspector", "10.0.0.2",
        "--check", app })
      assert.are.equal(0, code)
    end)

    it("lists them in --help", function()
      local _, stdout = server.run({ "--help" })
      for _, opt in ipairs { "--cpu-limit MS", "--memory-limit MIB", "--inspector HOST", "new NAME", "test [DIR]" } do
        assert.truthy(stdout:find(opt, 1, true), opt)
      end
    end)
  end)

  describe("start-up", function()
    it("tells the manifest, MCP and inspector addresses on stderr, stdout keeping only its line", function()
      local s = server.start(basic_dir)
      local base = "http://127.0.0.1:" .. s.port
      for _, url in ipairs { base .. "/manifest", base .. "/__clank/mcp", base .. "/__clank/inspector" } do
        assert.is_true(wait_stderr(s, url .. "\n"))
      end
      assert.are.equal(s.startup_line .. "\n", s:stdout())
      assert.are.equal(0, s:stop())
    end)

    it("tells the inspector's address for --inspector HOST", function()
      local s = server.start(basic_dir, { args = { "--inspector", "inspect.example" } })
      assert.is_true(wait_stderr(s, "http://inspect.example:" .. s.port .. "/__clank/inspector\n"))
      assert.are.equal(0, s:stop())
    end)

    it("names the caller's file and line for an error raised by clank.app, as defineAction does", function()
      local cases = {
        { 'local clank = require "clank"\n\nreturn clank.app {\n  nmae = "x",\n}\n', 3,
          "clank.app: unknown field 'nmae'" },
        { 'local clank = require "clank"\nlocal app = clank.app { nmae = "x" }\nreturn app\n', 2,
          "clank.app: unknown field 'nmae'" },
        { 'local clank = require "clank"\nlocal a = clank.defineAction {\n  nmae = "x" }\nreturn a\n', 2,
          "clank.defineAction: unknown field 'nmae'" },
      }
      for _, case in ipairs(cases) do
        write(dir .. "/app.lua", case[1])
        local code, _, stderr = server.run({ "--check", dir })
        assert.are.equal(1, code)
        assert.truthy(stderr:find(dir .. "/app.lua:" .. case[2] .. ": " .. case[3], 1, true), stderr)
      end
    end)

    it("suggests --port 0 when the port is taken", function()
      local holder = assert(socket.bind("127.0.0.1", 0))
      local _, port = holder:getsockname()
      local code, stdout, stderr = server.run({ "--port", tostring(port), basic_dir })
      holder:close()
      assert.are.equal(1, code)
      assert.are.equal("", stdout)
      assert.truthy(stderr:find("address already in use", 1, true), stderr)
      assert.truthy(stderr:find("--port 0", 1, true), stderr)
    end)
  end)
end)
