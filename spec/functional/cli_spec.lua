-- clank-run's command line (SPEC §2): start-up line, options, exit codes, logs.
local server = require "helpers.server"
local http = require "helpers.http"
local socket = require "socket"
local cjson = require "cjson"

local basic = server.fixture("basic")

describe("clank-run command line", function()
  after_each(server.kill_all)

  describe("start-up", function()
    it("prints exactly `clank-run: serving <name> at http://127.0.0.1:PORT/` on stdout", function()
      local s = server.start(basic)
      assert.are.equal("clank-run: serving basic at http://127.0.0.1:" .. s.port .. "/",
        s.startup_line)
      assert.are.equal(0, s:stop())
    end)

    it("picks a real free port for --port 0 and serves on it", function()
      local s = server.start(basic)
      assert.is_true(s.port > 0)
      local res = assert(http.get(s.port, "/hello"))
      assert.are.equal(200, res.status)
      assert.are.equal("Hello, world!\n", res.body)
      assert.are.equal(0, s:stop())
    end)

    it("listens on $PORT when no --port is given", function()
      local port = server.free_port()
      local s = server.start(basic, { port = false, env = { PORT = tostring(port) } })
      assert.are.equal(port, s.port)
      assert.are.equal("clank-run: serving basic at http://127.0.0.1:" .. port .. "/",
        s.startup_line)
      local res = assert(http.get(port, "/hello"))
      assert.are.equal(200, res.status)
      assert.are.equal(0, s:stop())
    end)

    it("lets --port win over $PORT", function()
      local port = server.free_port()
      local s = server.start(basic, { port = 0, env = { PORT = tostring(port) } })
      assert.are_not.equal(port, s.port)
      assert.are.equal(0, s:stop())
    end)

    it("exits 1 when the port is already taken", function()
      local holder = assert(socket.bind("127.0.0.1", 0))
      local _, port = holder:getsockname()
      local code, stdout = server.run({ "--port", tostring(port), basic })
      holder:close()
      assert.are.equal(1, code)
      assert.are.equal("", stdout)
    end)
  end)

  describe("options", function()
    it("prints the --host address in the start-up line", function()
      local s = server.start(basic, { args = { "--host", "127.0.0.1" } })
      assert.are.equal("clank-run: serving basic at http://127.0.0.1:" .. s.port .. "/",
        s.startup_line)
      assert.are.equal(0, s:stop())
    end)

    it("serves with --no-watch", function()
      local s = server.start(basic, { args = { "--no-watch" } })
      assert.are.equal(200, assert(http.get(s.port, "/hello")).status)
      assert.are.equal(0, s:stop())
    end)

    it("serves with --workers 2: one start-up line, every request answered, exit 0 on SIGTERM", function()
      local s = server.start(basic, { args = { "--workers", "2" } })
      assert.are.equal("clank-run: serving basic at http://127.0.0.1:" .. s.port .. "/",
        s.startup_line)
      for i = 1, 20 do
        local res = assert(http.get(s.port, "/say?v=w" .. i))
        assert.are.equal(200, res.status)
        assert.are.equal("w" .. i, res.body)
      end
      assert.are.equal(0, s:stop())
      assert.are.equal("clank-run: serving basic at http://127.0.0.1:" .. s.port .. "/\n",
        s:stdout())
    end)

    it("raises the soft RLIMIT_NOFILE to the hard limit", function()
      local s = server.start(basic, { nofile = { soft = 256, hard = 4096 } })
      local f = assert(io.open("/proc/" .. s.pid .. "/limits"))
      local limits = f:read("a")
      f:close()
      local soft, hard = limits:match("Max open files%s+(%d+)%s+(%d+)")
      assert.are.equal("4096", hard)
      assert.are.equal("4096", soft)
      assert.are.equal(0, s:stop())
    end)
  end)

  describe("app loading", function()
    it("loads Debian's cjson, modules from the app's folder and from LUA_PATH_5_4", function()
      local s = server.start(server.fixture("modules"), {
        env = { LUA_PATH_5_4 = server.source_dir() .. "/spec/fixtures/lua_path/?.lua;;" },
      })
      local res = assert(http.get(s.port, "/modules"))
      assert.are.equal(200, res.status)
      assert.are.equal('cjson={"a":1} local=from-app-folder ext=from-LUA_PATH_5_4', res.body)
      assert.are.equal(0, s:stop())
    end)

    it("fails to load (exit 1) an app that waits in a coroutine of its own", function()
      local code, _, stderr = server.run({ "--port", "0", server.fixture("sleeps_at_load") })
      assert.are.equal(1, code)
      assert.truthy(stderr:find("clank.sleep: cannot wait here (not in a handler coroutine)", 1, true),
        "stderr: " .. stderr)
      assert.truthy(stderr:find("sleeps_at_load/app.lua:3:", 1, true), "stderr: " .. stderr)
    end)
  end)

  describe("informational options", function()
    it("answers --version with exit 0 and the version and commit on stdout", function()
      local code, stdout = server.run({ "--version" })
      assert.are.equal(0, code)
      -- "clank-run 0.1.0 (git 1a2b3c4)", "-dirty" after the hash when the tree it was built from
      -- had uncommitted changes; "unknown" without git (spec/functional/version_spec: which)
      local commit = stdout:match("^clank%-run 0%.1%.0 %(git (%S+)%)\n$")
      assert.truthy(commit, "stdout: " .. stdout)
      assert.truthy(commit == "unknown" or commit:match("^%x%x%x%x%x%x%x+$")
        or commit:match("^%x%x%x%x%x%x%x+%-dirty$"), "commit: " .. commit)
    end)

    it("answers --help with exit 0 and the options on stdout", function()
      local code, stdout = server.run({ "--help" })
      assert.are.equal(0, code)
      assert.truthy(stdout:find("--port", 1, true), "--help does not mention --port: " .. stdout)
    end)
  end)

  describe("bad usage", function()
    it("exits 2 on an unknown option", function()
      local code = server.run({ "--frobnicate", basic })
      assert.are.equal(2, code)
    end)

    it("exits 2 when no app is given", function()
      local code = server.run({})
      assert.are.equal(2, code)
    end)

    it("exits 2 when --port is not a number", function()
      local code = server.run({ "--port", "eighty", basic })
      assert.are.equal(2, code)
    end)

    it("exits 2 on an unknown --log format", function()
      local code = server.run({ "--log", "xml", basic })
      assert.are.equal(2, code)
    end)
  end)

  describe("an app that fails to load", function()
    it("exits 1 and names the file and line of a syntax error on stderr", function()
      local code, stdout, stderr = server.run({ "--port", "0", server.fixture("broken") })
      assert.are.equal(1, code)
      assert.are.equal("", stdout)
      assert.truthy(stderr:find("broken/app.lua:3:", 1, true), "stderr: " .. stderr)
    end)

    it("exits 1 and names the file and line of an error raised while loading", function()
      local code, _, stderr = server.run({ "--port", "0", server.fixture("raises") })
      assert.are.equal(1, code)
      assert.truthy(stderr:find("raises/app.lua:2:", 1, true), "stderr: " .. stderr)
      assert.truthy(stderr:find("raised while loading", 1, true), "stderr: " .. stderr)
    end)

    -- An error with no position of its own is placed at the app's frame that raised it, not at
    -- `return clank.app {` (issue 34); clank.app's own, raised through that tail call, is there.
    describe("without a position of its own", function()
      local files = require "helpers.files"
      local dir
      before_each(function()
        dir = os.tmpname()
        os.remove(dir)
        assert(os.execute("mkdir " .. files.quote(dir)))
        dir = io.popen("realpath " .. files.quote(dir)):read("l") -- module sources name real paths
      end)
      after_each(function() os.execute("rm -rf " .. files.quote(dir)) end)

      local function first_error_line(app)
        files.write(dir .. "/app.lua", app)
        local code, _, stderr = server.run({ "--check", dir .. "/app.lua" })
        assert.are.equal(1, code)
        return stderr:match("^clank%-run: cannot load [^\n]*\n([^\n]*)"), stderr
      end

      for _, case in ipairs {
        { "error(msg, 0) in a function the top level calls", table.concat({
          'local clank = require "clank"',
          "local function check()",
          '  error("missing setting CLANK_X", 0)',
          "end",
          "check()",
          'return clank.app { name = "x" }',
        }, "\n"), "app.lua:3: missing setting CLANK_X" },
        { "an error object that is a table, in a module of the app's folder", table.concat({
          'local clank = require "clank"',
          'require "settings"',
          'return clank.app { name = "x" }',
        }, "\n"), "settings.lua:2: (error object is a table value)" },
        { "a misused builder (a C function's error)", table.concat({
          'local clank = require "clank"',
          "",
          'local a = clank.defineAction { name = "no spaces", description = "d",',
          "  input = clank.schema.object {}, handler = function() end }",
          'return clank.app { name = "x", actions = { a } }',
        }, "\n"), "app.lua:3: clank.defineAction: 'name' must match ^[A-Za-z][A-Za-z0-9_.-]*$ "
          .. "and be at most 128 bytes" },
        { "clank.app's own error, through return clank.app {", table.concat({
          'local clank = require "clank"',
          "local name = 5",
          "return clank.app {",
          "  name = name,",
          "}",
        }, "\n"), "app.lua:3: clank.app: field 'name' must be a string, got number" },
      } do
        it("names the line for " .. case[1], function()
          files.write(dir .. "/settings.lua", "local t = {}\nerror(t)\nreturn t\n")
          local line, stderr = first_error_line(case[2])
          assert.are.equal(dir .. "/" .. case[3], line, stderr)
        end)
      end
    end)

    it("exits 1 naming the route that collides with GET /manifest", function()
      local code, _, stderr = server.run({ "--port", "0", server.fixture("reserved_manifest") })
      assert.are.equal(1, code)
      assert.truthy(stderr:find("GET /manifest", 1, true), "stderr: " .. stderr)
    end)

    it("exits 1 naming the route that collides with /actions/", function()
      local code, _, stderr = server.run({ "--port", "0", server.fixture("reserved_actions") })
      assert.are.equal(1, code)
      assert.truthy(stderr:find("POST /actions/mine", 1, true), "stderr: " .. stderr)
    end)

    it("exits 1 when the app file does not exist", function()
      local code, _, stderr = server.run({ "--port", "0", server.fixture("no_such_app") })
      assert.are.equal(1, code)
      assert.truthy(stderr:find("no_such_app/app.lua", 1, true), "stderr: " .. stderr)
    end)
  end)

  describe("--check", function()
    it("exits 0 for an app that loads", function()
      local code = server.run({ "--check", basic })
      assert.are.equal(0, code)
    end)

    it("exits 1 for an app that does not load", function()
      local code, _, stderr = server.run({ "--check", server.fixture("broken") })
      assert.are.equal(1, code)
      assert.truthy(stderr:find("broken/app.lua:3:", 1, true), "stderr: " .. stderr)
    end)

    for _, app in ipairs({ "basic", "bridge" }) do
      it("prints exactly the bytes GET /manifest serves (" .. app .. ")", function()
        local code, stdout = server.run({ "--check", server.fixture(app) })
        assert.are.equal(0, code)
        local s = server.start(server.fixture(app))
        local res = assert(http.get(s.port, "/manifest"))
        assert.are.equal(200, res.status)
        assert.are.equal(res.body, stdout)
        assert.are.equal(0, s:stop())
      end)
    end

    it("prints the manifest of an app without actions", function()
      local code, stdout = server.run({ "--check", basic })
      assert.are.equal(0, code)
      assert.are.equal('{"actions":[],"description":"Fixture app for the functional specs",'
        .. '"name":"basic","protocol":"clank-agent/1"}', stdout)
    end)
  end)

  describe("logging", function()
    it("writes logs to stderr and nothing but the start-up line to stdout", function()
      local s = server.start(basic)
      assert.are.equal(200, assert(http.get(s.port, "/hello")).status)
      assert.are.equal(404, assert(http.get(s.port, "/nope")).status)
      assert.are.equal(500, assert(http.get(s.port, "/boom")).status)
      assert.are.equal(0, s:stop())
      assert.are.equal("clank-run: serving basic at http://127.0.0.1:" .. s.port .. "/\n",
        s:stdout())
      local stderr = s:stderr()
      assert.truthy(stderr:find("/hello", 1, true), "no access log line for /hello: " .. stderr)
      assert.truthy(stderr:find("boom on purpose", 1, true), "no error log line: " .. stderr)
    end)

    it("makes every stderr line a JSON object with --log json", function()
      local s = server.start(basic, { args = { "--log", "json" } })
      assert.are.equal(200, assert(http.get(s.port, "/hello")).status)
      assert.are.equal(404, assert(http.get(s.port, "/nope")).status)
      assert.are.equal(500, assert(http.get(s.port, "/boom")).status)
      assert.are.equal(0, s:stop())
      local stderr = s:stderr()
      local lines = 0
      for line in stderr:gmatch("[^\n]+") do
        lines = lines + 1
        local ok, value = pcall(cjson.decode, line)
        assert.is_true(ok, "not JSON: " .. line)
        assert.are.equal("table", type(value), "not a JSON object: " .. line)
        assert.is_nil(value[1], "a JSON array, not an object: " .. line)
      end
      assert.is_true(lines >= 3, "expected log lines for 3 requests, got: " .. stderr)
      assert.truthy(stderr:find("boom on purpose", 1, true), "no error log line: " .. stderr)
    end)

    it("logs print and Lua-side failures as JSON lines with --log json", function()
      local s = server.start(basic, { args = { "--log", "json" } })
      assert.are.equal(200, assert(http.get(s.port, "/print")).status)
      assert.are.equal(200, assert(http.get(s.port, "/spawn-boom")).status)
      assert.are.equal(200, assert(http.get(s.port, "/hello")).status)
      assert.are.equal(0, s:stop())
      assert.are.equal("clank-run: serving basic at http://127.0.0.1:" .. s.port .. "/\n", s:stdout())
      local printed, failed
      for line in s:stderr():gmatch("[^\n]+") do
        local ok, value = pcall(cjson.decode, line)
        assert.is_true(ok and type(value) == "table", "not a JSON object: " .. line)
        if value.msg == "printed\t42" then printed = value end
        if type(value.msg) == "string" and value.msg:find("spawned boom on purpose", 1, true) then
          failed = value
        end
      end
      assert.truthy(printed, "no JSON line for print: " .. s:stderr())
      assert.are.equal("info", printed.level)
      assert.truthy(failed, "no JSON line for the spawned task's failure: " .. s:stderr())
      assert.are.equal("error", failed.level)
      assert.truthy(failed.msg:find("app.lua:%d+: spawned boom on purpose"), failed.msg)
    end)
  end)

  describe("its Lua side", function()
    local function tempdir()
      local dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir -p '" .. dir .. "'"))
      return dir
    end

    it("takes $CLANK_LUA_DIR over every other place", function()
      local empty = tempdir()
      -- the specs' own LUA_PATH would find lua/ too: only Lua's defaults here
      local plain = { LUA_PATH = ";;", LUA_CPATH = ";;" }
      local code, _, stderr = server.run({ "--check", basic },
        { env = { CLANK_LUA_DIR = empty, LUA_PATH = plain.LUA_PATH, LUA_CPATH = plain.LUA_CPATH } })
      assert.are.equal(1, code)
      assert.truthy(stderr:find("module 'clank' not found", 1, true), stderr)
      assert.truthy(stderr:find(empty .. "/clank/init.lua", 1, true), stderr)
      os.execute("rm -rf '" .. empty .. "'")
      local copy = tempdir()
      assert(os.execute("cp -r '" .. server.source_dir() .. "/lua/.' '" .. copy .. "'"))
      code = server.run({ "--check", basic },
        { env = { CLANK_LUA_DIR = copy, LUA_PATH = plain.LUA_PATH, LUA_CPATH = plain.LUA_CPATH } })
      assert.are.equal(0, code)
      os.execute("rm -rf '" .. copy .. "'")
    end)

    it("is found by a binary outside the source tree through the build folder's lua link", function()
      -- an out-of-tree build: cmake/ClankInstall.cmake links <build>/lua to the source's lua/
      -- (the binary names no folder of the tree it was built from; SPEC §16)
      local dir = tempdir()
      local binary = dir .. "/clank-run"
      assert(os.execute("cp '" .. os.getenv("CLANK_RUN") .. "' '" .. binary .. "'"))
      assert(os.execute("ln -s '" .. server.source_dir() .. "/lua' '" .. dir .. "/lua'"))
      local code, stdout, stderr = server.run({ "--check", basic },
        { binary = binary, env = { LUA_PATH = ";;", LUA_CPATH = ";;" } })
      assert.are.equal(0, code, stderr)
      assert.truthy(stdout:find('"protocol":"clank-agent/1"', 1, true), stdout)
      os.execute("rm -rf '" .. dir .. "'")
    end)
  end)
end)
