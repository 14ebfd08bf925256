-- Building offline (issue 34): a clone of this repository at HEAD, which has no
-- vendor/npm/node_modules, configures and builds clank-run with cmake alone: no npm, no node (a
-- node and an npm that fail stand first on PATH), morphdom taken from vendor/morphdom. The
-- clone's clank-run names its commit in --version. `cpack --config CPackSourceConfig.cmake` in
-- the clone's build makes a source tarball with what the clone tracks, vendor/morphdom included,
-- and no .git, build folder or node_modules; the tarball records its commit, which a build of
-- it reads without git, and configures as the clone did.
-- It tests what is committed: commit first. It configures as the README does (no options: a
-- RelWithDebInfo build) and builds the clank-run target only, with two jobs (about 15 s on an
-- idle machine of two cores); cmake/ClankTests.cmake runs this spec alone (RUN_SERIAL), so that
-- its compiler does not slow the timing-sensitive specs down, and gives it time for a loaded
-- machine. The sanitizer build's run leaves it to the plain one.
local files = require "helpers.files"
local server = require "helpers.server"

local quote = files.quote
local source = server.source_dir()

-- Runs a shell command without the sanitizer build's LD_PRELOAD, bounded in time; returns its
-- exit status and its output (stdout and stderr together).
local function sh(cmd, seconds)
  local base = os.tmpname()
  os.execute(("timeout -s KILL %d env -u LD_PRELOAD sh -c %s </dev/null >%s 2>&1; echo $? >%s")
    :format(seconds or 60, quote(cmd), quote(base .. ".out"), quote(base .. ".rc")))
  local out, rc = files.read(base .. ".out") or "", files.read(base .. ".rc") or ""
  os.remove(base .. ".out")
  os.remove(base .. ".rc")
  os.remove(base)
  return tonumber(rc:match("%d+")), out
end

local function ok(cmd, seconds)
  local rc, out = sh(cmd, seconds)
  assert(rc == 0, ("exit %s from: %s\n%s"):format(tostring(rc), cmd, out:sub(-4000)))
  return out
end

local function lines(text)
  local set = {}
  for line in text:gmatch("[^\n]+") do set[line] = true end
  return set
end

describe("an offline build", function()
  local tmp, clone, head, short, version

  setup(function()
    if os.getenv("CLANK_SANITIZED") then return end
    tmp = ok("mktemp -d /tmp/clank-offline.XXXXXX"):match("[^\n]+")
    clone = tmp .. "/clank"
    version = assert(files.read(source .. "/CMakeLists.txt")):match("project%(clank VERSION ([%d.]+)")
    assert(version, "no version in CMakeLists.txt's project()")
  end)

  teardown(function()
    if tmp then os.execute("rm -rf " .. quote(tmp)) end
  end)

  local function skip_when_sanitized()
    if os.getenv("CLANK_SANITIZED") then
      pending("built once, by the plain build's run: this build is not the one sanitized")
      return true
    end
  end

  it("configures and builds clank-run from a clone without node_modules, npm or node", function()
    if skip_when_sanitized() then return end
    local rc, full = sh("git -C " .. quote(source) .. " rev-parse HEAD")
    if rc ~= 0 then
      pending("the source is not a git checkout")
      return
    end
    head = full:match("%x+")
    short = ok("git -C " .. quote(source) .. " rev-parse --short=7 HEAD"):match("%x+")
    ok("git clone -q --no-checkout " .. quote(source) .. " " .. quote(clone) .. " && git -C " .. quote(clone)
      .. " checkout -q " .. head)
    assert.is_nil(files.read(clone .. "/vendor/npm/node_modules/morphdom/package.json"))
    assert.truthy(files.read(clone .. "/vendor/morphdom/dist/morphdom-umd.min.js"))
    ok("mkdir -p " .. quote(tmp .. "/bin"))
    for _, tool in ipairs { "node", "npm", "npx" } do
      files.write(tmp .. "/bin/" .. tool, "#!/bin/sh\necho \"the build ran " .. tool .. " $*\" >&2\nexit 127\n")
      ok("chmod +x " .. quote(tmp .. "/bin/" .. tool))
    end
    local path = "PATH=" .. quote(tmp .. "/bin") .. ":\"$PATH\" "
    local build = clone .. "/build"
    ok(path .. "cmake -S " .. quote(clone) .. " -B " .. quote(build), 300)
    ok(path .. "cmake --build " .. quote(build) .. " --target clank-run -j 2", 840)

    local rc2, out = sh(quote(build .. "/clank-run") .. " --version")
    assert.are.equal(0, rc2)
    assert.are.equal(("clank-run %s (git %s)\n"):format(version, short), out)
    -- the client it serves starts with the vendored morphdom, named with its version
    local client = assert(files.read(build .. "/generated/clank-client.js"))
    local readme = assert(files.read(source .. "/vendor/morphdom/README.md"))
    local morphdom_version = readme:match("^# morphdom (%S+)")
    assert.are.equal("/*! morphdom " .. morphdom_version .. " ", client:sub(1, #morphdom_version + 14))
    local umd = assert(files.read(source .. "/vendor/morphdom/dist/morphdom-umd.min.js")):gsub("\n+$", "")
    assert.truthy(client:find(umd, 1, true), "the client does not hold vendor/morphdom's file as it is")
  end)

  it("names a new commit, or a changed tracked file, in --version at the next build without a configure", function()
    if skip_when_sanitized() then return end
    if not head then
      pending("needs the clone's build")
      return
    end
    local build = clone .. "/build"
    local function version_after_build()
      ok("cmake --build " .. quote(build) .. " --target clank-run -j 2", 300)
      local rc, out = sh(quote(build .. "/clank-run") .. " --version")
      assert.are.equal(0, rc)
      return out
    end
    local readme = clone .. "/README.md"
    local before = assert(files.read(readme))
    files.write(readme, before .. "\nA change.\n")
    assert.are.equal(("clank-run %s (git %s-dirty)\n"):format(version, short), version_after_build())
    ok("git -C " .. quote(clone) .. " -c user.name=spec -c user.email=spec@localhost commit -q -am 'A change'")
    local new = ok("git -C " .. quote(clone) .. " rev-parse --short=7 HEAD"):match("%x+")
    assert.are_not.equal(short, new)
    assert.are.equal(("clank-run %s (git %s)\n"):format(version, new), version_after_build())
    -- back to the cloned commit, for the tarball below
    ok("git -C " .. quote(clone) .. " reset -q --hard " .. head)
    assert.are.equal(("clank-run %s (git %s)\n"):format(version, short), version_after_build())
  end)

  it("packs a source tarball of what the clone tracks, with its commit and without node_modules", function()
    if skip_when_sanitized() then return end
    if not head then
      pending("needs the clone's build")
      return
    end
    local build = clone .. "/build"
    -- what a working copy collects and a source tarball must leave out
    for _, dir in ipairs { "vendor/npm/node_modules/morphdom", "spec/browser/node_modules/ws", "build-asan",
      "apps/tasks/node_modules" } do
      ok("mkdir -p " .. quote(clone .. "/" .. dir) .. " && touch " .. quote(clone .. "/" .. dir .. "/package.json"))
    end
    ok("cd " .. quote(build) .. " && cpack --config CPackSourceConfig.cmake", 120)
    local tarball = ("%s/clank-%s-Source.tar.gz"):format(build, version)
    local listing = ok("tar -tzf " .. quote(tarball))
    local top = ("clank-%s-Source/"):format(version)
    local packed = {}
    for entry in listing:gmatch("[^\n]+") do
      assert.are.equal(top, entry:sub(1, #top))
      local path = entry:sub(#top + 1)
      assert.is_nil(path:find("node_modules", 1, true), entry)
      assert.is_nil(path:find("^build"), entry)
      assert.is_nil(path:find("^%.git/"), entry)
      if path ~= "" and path:sub(-1) ~= "/" then packed[path] = true end
    end
    for _, f in ipairs { "vendor/morphdom/dist/morphdom-umd.min.js", "vendor/morphdom/LICENSE",
      "vendor/morphdom/README.md", "vendor/npm/package-lock.json", "CMakeLists.txt", ".git-commit" } do
      assert.is_true(packed[f], f .. " is not in the tarball")
    end
    -- every tracked file, and besides them only the recorded commit
    local tracked = lines(ok("git -C " .. quote(clone) .. " ls-files"))
    for f in pairs(tracked) do assert.is_true(packed[f], f .. " is tracked but not in the tarball") end
    for f in pairs(packed) do
      assert.is_true(tracked[f] or f == ".git-commit", f .. " is in the tarball but not tracked")
    end

    local unpacked = tmp .. "/unpacked"
    ok("mkdir -p " .. quote(unpacked) .. " && tar -xzf " .. quote(tarball) .. " -C " .. quote(unpacked))
    local src = unpacked .. "/" .. top:sub(1, -2)
    assert.are.equal(short .. "\n", files.read(src .. "/.git-commit"))
    -- configured without .git, it names the recorded commit (the step runs before any compile)
    ok("PATH=" .. quote(tmp .. "/bin") .. ":\"$PATH\" cmake -S " .. quote(src) .. " -B " .. quote(src .. "/build")
      .. " && cmake --build " .. quote(src .. "/build") .. " --target clank_git_commit", 300)
    local generated = assert(files.read(src .. "/build/generated/git_commit.c"))
    assert.truthy(generated:find('clank_git_commit[] = "' .. short .. '";', 1, true), generated)
  end)
end)
