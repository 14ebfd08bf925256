-- Installing Clank (SPEC §16): `cmake --install` into a temporary prefix lays out bin/, the Lua
-- side, the manual, clank.so and the man page; the installed clank-run finds its Lua side and
-- its manual relative to itself from any folder, writes a starter app that serves and whose spec
-- passes; the man page renders without warnings; `cpack -G DEB` makes a package with the same
-- files.
-- CLANK_BUILD_DIR (set by cmake/ClankTests.cmake) is the build folder to install from.
local server = require "helpers.server"
local http = require "helpers.http"

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- Runs a shell command, bounded in time; returns its exit status, stdout and stderr. The
-- sanitizer build's LD_PRELOAD (the ASan runtime, for clank.so in plain lua5.4) is kept only
-- when asked: cmake, cpack, groff and man are not ours to sanitize.
local function sh(cmd, keep_preload)
  local base = os.tmpname()
  os.execute("timeout -s KILL 120 " .. (keep_preload and "" or "env -u LD_PRELOAD ") .. "sh -c "
    .. quote(cmd) .. " </dev/null >" .. quote(base .. ".out") .. " 2>" .. quote(base .. ".err")
    .. "; echo $? >" .. quote(base .. ".rc"))
  local function slurp(path)
    local f = io.open(path, "rb")
    local data = f and f:read("a") or ""
    if f then f:close() end
    os.remove(path)
    return data
  end
  local rc = tonumber(slurp(base .. ".rc"):match("%d+"))
  local out, err = slurp(base .. ".out"), slurp(base .. ".err")
  os.remove(base)
  return rc, out, err
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local build_dir = os.getenv("CLANK_BUILD_DIR")
local source_dir = server.source_dir()

describe("an installed clank", function()
  local prefix, work
  local clank_run

  setup(function()
    assert(build_dir and build_dir ~= "", "CLANK_BUILD_DIR is not set: the build folder to install from")
    local _, out = sh("mktemp -d /tmp/clank-install.XXXXXX")
    local root = out:match("[^\n]+")
    prefix, work = root .. "/prefix", root .. "/work"
    local rc, o, e = sh("mkdir -p " .. quote(work) .. " && cmake --install " .. quote(build_dir)
      .. " --prefix " .. quote(prefix))
    assert(rc == 0, "cmake --install failed:\n" .. o .. e)
    clank_run = prefix .. "/bin/clank-run"
  end)

  teardown(function()
    server.kill_all()
    if prefix then os.execute("rm -rf " .. quote(prefix:match("^(.*)/prefix$"))) end
  end)

  it("lays out bin, the Lua side, the manual, clank.so and the man page under the prefix", function()
    for _, f in ipairs { "bin/clank-run", "share/clank/lua/clank/init.lua", "share/clank/lua/clank/test.lua",
      "share/clank/lua/clank/starter/app.lua", "lib/lua/5.4/clank.so", "share/man/man1/clank-run.1",
      "share/clank/doc/README.md", "share/clank/doc/views.md" } do
      assert.is_true(exists(prefix .. "/" .. f), "missing " .. f)
    end
  end)

  it("names no folder of the source tree in the binary", function()
    local rc, out = sh("grep -c -F " .. quote(source_dir .. "/lua") .. " " .. quote(clank_run))
    assert.are.equal(1, rc) -- grep: no match
    assert.are.equal("0\n", out)
  end)

  it("loads its Lua side from the prefix, relative to itself", function()
    local app_dir = work .. "/where"
    os.execute("mkdir -p " .. quote(app_dir))
    local f = assert(io.open(app_dir .. "/app.lua", "wb"))
    f:write('local clank = require "clank"\n',
      'return clank.app { name = "where", routes = { ["GET /path"] = function()\n',
      '  return { status = 200, body = package.path } end } }\n')
    f:close()
    local s = server.start(app_dir, { binary = clank_run, env = { CLANK_LUA_DIR = "" } })
    local res = assert(http.get(s.port, "/path"))
    assert.are.equal(200, res.status)
    local first = res.body:match("^[^;]+")
    assert.are.equal(prefix .. "/bin/../share/clank/lua/?.lua", first)
    assert.are.equal(0, s:stop())
  end)

  it("serves its manual from the prefix, relative to itself", function()
    local app_dir = work .. "/manual"
    os.execute("mkdir -p " .. quote(app_dir))
    local f = assert(io.open(app_dir .. "/app.lua", "wb"))
    f:write('return require("clank").app { name = "manual" }\n')
    f:close()
    -- a page only the installed copy has: served from there, not from the source tree
    f = assert(io.open(prefix .. "/share/clank/doc/installed.md", "wb"))
    f:write("# Installed here\n\nSee [the views](views.md#pages).\n")
    f:close()
    local s = server.start(app_dir, { binary = clank_run, env = { CLANK_DOC_DIR = "", CLANK_LUA_DIR = "" } })
    local res = assert(http.get(s.port, "/__clank/docs/installed"))
    assert.are.equal(200, res.status)
    assert.truthy(res.body:find('<a href="/__clank/docs/views#pages">', 1, true), res.body)
    assert.are.equal(200, assert(http.get(s.port, "/__clank/docs/views")).status)
    assert.are.equal(0, s:stop())
  end)

  it("writes a starter app from another folder, which serves and whose spec passes", function()
    local code, stdout, stderr = server.run({ "new", "starter" }, { binary = clank_run, cwd = work })
    assert.are.equal(0, code, stderr)
    assert.truthy(stdout:find("starter", 1, true))

    local s = server.start(work .. "/starter", { binary = clank_run })
    assert.are.equal("clank-run: serving starter at http://127.0.0.1:" .. s.port .. "/", s.startup_line)
    local page = assert(http.get(s.port, "/"))
    assert.are.equal(200, page.status)
    assert.truthy(page.body:find("<h1>starter</h1>", 1, true), page.body)
    assert.are.equal(0, s:stop())

    code, stdout, stderr = server.run({ "test", "starter" }, { binary = clank_run, cwd = work, timeout = 60 })
    assert.are.equal(0, code, stdout .. stderr)
    assert.truthy(stdout:find("4 successes / 0 failures / 0 errors", 1, true), stdout)
  end)

  it("loads clank.so into plain lua5.4 from lib/lua/5.4", function()
    local rc, out, err = sh("cd " .. quote(work) .. " && LUA_PATH=" .. quote(prefix .. "/share/clank/lua/?.lua;"
      .. prefix .. "/share/clank/lua/?/init.lua;;") .. " LUA_CPATH=" .. quote(prefix .. "/lib/lua/5.4/?.so;;")
      .. " lua5.4 -e " .. quote('local c = require "clank"; io.write(c.json.encode({ a = 1 }))'), true)
    assert.are.equal(0, rc, err)
    assert.are.equal('{"a":1}', out)
  end)

  it("has a man page that groff and man render without a warning", function()
    local page = prefix .. "/share/man/man1/clank-run.1"
    local rc, out, err = sh("groff -ww -man -Tutf8 " .. quote(page))
    assert.are.equal(0, rc)
    assert.are.equal("", err)
    for _, text in ipairs { "clank-run", "--cpu-limit", "CLANK_SECRET", "CLANK_LUA_DIR", "NO_COLOR",
      "CLANK_FORCE_POLL", "CLANK_DEBUG", "SIGHUP", "EXIT STATUS", "FILES", "EXAMPLES" } do
      assert.truthy(out:gsub("\b.", ""):find(text, 1, true), text)
    end
    rc, out, err = sh("MANWIDTH=80 MAN_KEEP_FORMATTING= man --warnings=w -l " .. quote(page))
    assert.are.equal(0, rc, err)
    assert.are.equal("", err)
    assert.truthy(out:find("clank-run new NAME", 1, true), out)
  end)

  it("packs a Debian package with cpack -G DEB", function()
    local out_dir = work .. "/deb"
    local rc, out, err = sh("cpack -G DEB --config " .. quote(build_dir .. "/CPackConfig.cmake")
      .. " -B " .. quote(out_dir))
    assert.are.equal(0, rc, out .. err)
    local _, ls = sh("ls " .. quote(out_dir) .. "/*.deb")
    local deb = ls:match("[^\n]+")
    assert.is_string(deb, "no .deb in " .. out_dir)
    local info
    rc, info = sh("dpkg-deb --info " .. quote(deb))
    assert.are.equal(0, rc)
    assert.truthy(info:find("Package: clank\n", 1, true), info)
    assert.truthy(info:find("Version: 0.1.0\n", 1, true), info)
    assert.truthy(info:find("Depends: [^\n]*libuv1"), info)
    assert.falsy(info:find("liblua", 1, true), info) -- Lua is linked into clank-run
    assert.truthy(info:find("Depends: [^\n]*libcmark0%.30%.2"), info)
    local contents
    rc, contents = sh("dpkg-deb --contents " .. quote(deb))
    assert.are.equal(0, rc)
    for _, f in ipairs { "./usr/bin/clank-run", "./usr/share/clank/lua/clank/init.lua",
      "./usr/lib/lua/5.4/clank.so", "./usr/share/man/man1/clank-run.1",
      "./usr/share/clank/doc/README.md" } do
      assert.truthy(contents:find(" " .. f .. "\n", 1, true), f)
    end
  end)
end)
