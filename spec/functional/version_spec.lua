-- The version and the changes (issue 34): `clank-run --version` names the version of
-- CMakeLists.txt's project() and the git commit the binary was built from, and CHANGELOG.md
-- keeps the changes in Keep a Changelog's form. That a new commit changes --version without a
-- new configure, and what a source tarball names, spec/functional/offline_build checks on a
-- clone of its own.
local files = require "helpers.files"
local server = require "helpers.server"

local quote = files.quote
local source = server.source_dir()

local function git(args)
  local p = assert(io.popen("git -C " .. quote(source) .. " " .. args .. " 2>/dev/null"))
  local out = p:read("a")
  return p:close() and out or nil
end

local project_version = assert(files.read(source .. "/CMakeLists.txt")):match("project%(clank VERSION ([%d.]+)")

describe("clank-run --version", function()
  it("prints `clank-run <version> (git <commit>)`: the project's version and the commit built from", function()
    local code, stdout = server.run({ "--version" })
    assert.are.equal(0, code)
    assert.are.equal("0.1.0", project_version) -- the version the lines below were written for
    local commit = stdout:match("^clank%-run 0%.1%.0 %(git ([^)]+)%)\n$")
    assert.truthy(commit, "stdout: " .. stdout)
    local top = git("rev-parse --show-toplevel")
    if not top then
      assert.are.equal("unknown", commit) -- neither git nor a tarball's .git-commit here
      return
    end
    -- "-dirty": a tracked file differed from that commit when the binary was built
    local hash = commit:match("^(%x%x%x%x%x%x%x+)$") or commit:match("^(%x%x%x%x%x%x%x+)%-dirty$")
    assert.truthy(hash, commit)
    -- a commit of this history: HEAD when the build is fresh, an older one when a commit came
    -- after the build (that the next build names the new one, offline_build checks)
    assert.truthy(git("merge-base --is-ancestor " .. hash .. " HEAD"),
      commit .. " is not HEAD nor one of its ancestors")
  end)
end)

describe("CHANGELOG.md", function()
  local text = assert(files.read(source .. "/CHANGELOG.md"), "no CHANGELOG.md at the top of the source")
  local SECTIONS = { Added = true, Changed = true, Deprecated = true, Removed = true, Fixed = true,
    Security = true }

  it("says it follows Keep a Changelog and starts with an Unreleased section", function()
    assert.are.equal("# Changelog\n", text:sub(1, 12))
    assert.truthy(text:find("[Keep a Changelog](https://keepachangelog.com/", 1, true))
    assert.are.equal("## [Unreleased]", text:match("\n(## [^\n]*)"))
  end)

  it("has only release headings Keep a Changelog allows, newest first, each with sections of its kinds", function()
    local releases, sections_in = {}, {}
    local current
    for line in text:gmatch("[^\n]*") do
      if line:match("^## ") then
        local name = line:match("^## %[Unreleased%]$") and "Unreleased"
          or line:match("^## %[(%d+%.%d+%.%d+)%] %- %d%d%d%d%-%d%d%-%d%d$")
        assert.truthy(name, "not a release heading: " .. line)
        releases[#releases + 1] = name
        current = name
        sections_in[current] = 0
      elseif line:match("^### ") then
        assert.truthy(current, "a section before any release: " .. line)
        assert.truthy(SECTIONS[line:match("^### (.*)$")], "not a Keep a Changelog section: " .. line)
        sections_in[current] = sections_in[current] + 1
      end
    end
    assert.are.equal("Unreleased", releases[1])
    for _, name in ipairs(releases) do assert.is_true(sections_in[name] > 0, name .. " has no section") end
  end)

  it("names the version the build carries", function()
    assert.truthy(text:find(project_version, 1, true), "CHANGELOG.md does not name " .. project_version)
  end)
end)
