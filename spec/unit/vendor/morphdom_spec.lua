-- vendor/morphdom: the files the build embeds are morphdom's own, byte for byte, as the npm
-- package pinned in vendor/npm/package-lock.json has them (issue 34: a build needs no npm, and
-- what it embeds is still exactly the pinned package). Compared with vendor/npm/node_modules
-- (which `npm ci` installs from the lock file, checking its integrity hash) and, when npm's
-- cache holds the package's tarball, with the tarball whose SHA-512 is the lock file's
-- integrity, unpacked here.
local files = require "helpers.files"
local server = require "helpers.server"

local quote = files.quote
local source = server.source_dir()
local vendored = source .. "/vendor/morphdom"
local installed = source .. "/vendor/npm/node_modules/morphdom"
local FILES = { "LICENSE", "dist/morphdom-umd.min.js" }

local function read(path) return (assert(files.read(path), "cannot read " .. path)) end

-- cmd's stdout, nil when it fails; without the sanitizer build's LD_PRELOAD (tar, npm and
-- sha512sum are not ours to sanitize, and a leak report fails them)
local function run(cmd)
  local p = assert(io.popen("env -u LD_PRELOAD " .. cmd .. " 2>/dev/null"))
  local out = p:read("a")
  local ok = p:close()
  return ok and out or nil
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function base64_to_hex(s)
  local bits = s:gsub("=+$", ""):gsub(".", function(c)
    local v = B64:find(c, 1, true) - 1
    local out = ""
    for i = 5, 0, -1 do out = out .. ((v >> i) & 1) end
    return out
  end)
  local hex = {}
  for i = 1, #bits - #bits % 8, 8 do hex[#hex + 1] = ("%02x"):format(tonumber(bits:sub(i, i + 7), 2)) end
  return table.concat(hex)
end

-- What package-lock.json pins for morphdom: its version and integrity.
local function pinned()
  local lock = require("cjson").decode(read(source .. "/vendor/npm/package-lock.json"))
  local entry = assert(lock.packages["node_modules/morphdom"], "morphdom is not in the lock file")
  return entry.version, entry.integrity
end

describe("vendor/morphdom", function()
  local version, integrity = pinned()

  it("names the pinned version and integrity in its README, the version on its first line", function()
    local readme = read(vendored .. "/README.md")
    assert.are.equal("# morphdom " .. version, readme:match("^[^\n]*"))
    assert.truthy(readme:find(integrity, 1, true), "README.md does not name " .. integrity)
    assert.truthy(readme:find("morphdom-" .. version .. ".tgz", 1, true))
  end)

  it("is the npm package's LICENSE and dist file byte for byte (vendor/npm/node_modules)", function()
    if not files.read(installed .. "/package.json") then
      pending("vendor/npm/node_modules is not installed (vendor/deps.sh --test installs it)")
      return
    end
    local package = require("cjson").decode(read(installed .. "/package.json"))
    assert.are.equal(version, package.version)
    for _, name in ipairs(FILES) do
      local want, got = read(installed .. "/" .. name), read(vendored .. "/" .. name)
      assert.are.equal(#want, #got, name .. ": sizes differ")
      assert.is_true(want == got, name .. " differs from the npm package's")
    end
  end)

  it("is the pinned tarball's LICENSE and dist file byte for byte (from npm's cache)", function()
    local algorithm, digest = integrity:match("^(sha512)%-(.+)$")
    assert.truthy(algorithm, "the lock file's integrity is not SHA-512: " .. integrity)
    local hex = base64_to_hex(digest)
    assert.are.equal(128, #hex)
    local cache = (run("npm config get cache") or ""):match("[^\n]+") or (os.getenv("HOME") .. "/.npm")
    local tarball = ("%s/_cacache/content-v2/sha512/%s/%s/%s"):format(cache, hex:sub(1, 2), hex:sub(3, 4),
      hex:sub(5))
    if not files.read(tarball) then
      pending("npm's cache (" .. cache .. ") does not hold morphdom " .. version .. "'s tarball")
      return
    end
    assert.are.equal(hex, (run("sha512sum " .. quote(tarball)) or ""):match("^%x+"))
    for _, name in ipairs(FILES) do
      local want = run("tar -xzOf " .. quote(tarball) .. " " .. quote("package/" .. name))
      assert.truthy(want and #want > 0, "the tarball has no package/" .. name)
      assert.is_true(want == read(vendored .. "/" .. name), name .. " differs from the tarball's")
    end
  end)
end)
