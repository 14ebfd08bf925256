-- app.static beside live views and an independent HTTP client (SPEC §11, §14, §15): a served
-- stylesheet that changes is pushed to live pages as {"t":"css"} without a reload of the app,
-- other static changes push nothing, and single ranges read with curl equal the file's bytes.
local server = require "helpers.server"
local http = require "helpers.http"
local ws = require "helpers.websocket"
local cjson = require "cjson"

local write = require("helpers.files").write

local APP = [[
local clank = require "clank"
local h = clank.h
local home = clank.defineView {
  name = "home",
  render = function() return h.main(nil, h.h1(nil, "Styled")) end,
}
return clank.app {
  name = "styled", views = { home },
  static = { ["/assets"] = "public" },
  page = { stylesheets = { "/assets/app.css" } },
}
]]

local function make_app()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "/public'"))
  write(dir .. "/app.lua", APP)
  write(dir .. "/public/app.css", "main { color: red; }\n")
  write(dir .. "/public/notes.txt", "one\n")
  return dir
end

local function generation(port)
  local res = assert(http.get(port, "/__clank/health"))
  assert.are.equal(200, res.status)
  return cjson.decode(res.body).generation
end

local function open_live(port)
  local res = assert(http.get(port, "/"))
  assert.are.equal(200, res.status)
  assert.truthy(res.body:find('<link rel="stylesheet" href="/assets/app.css">', 1, true), res.body)
  local id = res.body:match('data%-clank%-session="([^"]+)"')
  assert.truthy(id, res.body)
  local origin = "127.0.0.1:" .. port
  local live = assert(ws.connect(port, "/__clank/sessions/" .. id .. "/live",
    { Host = origin, Origin = "http://" .. origin }))
  local first = assert(live:next_json())
  assert.are.equal("html", first.t)
  return live
end

describe("app.static with live views", function()
  after_each(server.kill_all)

  it("pushes {t = 'css'} when a served stylesheet changes, and reloads nothing", function()
    local dir = make_app()
    local s = server.start(dir .. "/app.lua")
    local before = generation(s.port)
    local live = open_live(s.port)

    -- a change to another kind of file is not a stylesheet: nothing arrives
    write(dir .. "/public/notes.txt", "two\n")
    local kind, data = live:next_message(0.5)
    assert.is_nil(kind, "unexpected message: " .. tostring(data))

    write(dir .. "/public/app.css", "main { color: blue; }\n")
    local msg = assert(live:next_json(nil, 5))
    assert.are.same({ t = "css" }, msg)
    -- the file is served anew, and the app was not loaded again
    local css = assert(http.get(s.port, "/assets/app.css"))
    assert.are.equal("main { color: blue; }\n", css.body)
    assert.are.equal(before, generation(s.port))
    live:close()
    assert.are.equal(0, s:stop())
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("answers single ranges byte for byte as curl reads them", function()
    local dir = make_app()
    local parts = {}
    for i = 0, 4095 do parts[#parts + 1] = string.char(i % 251, (i * 7) % 256) end
    local file = table.concat(parts):rep(32) -- 256 KiB of non-text bytes
    write(dir .. "/public/blob.bin", file)
    local s = server.start(dir .. "/app.lua")
    local url = ("http://127.0.0.1:%d/assets/blob.bin"):format(s.port)
    local function curl(range)
      local out = os.tmpname()
      -- without the sanitizer build's LD_PRELOAD (curl deadlocks at start under libasan), and
      -- killed if it hangs all the same
      local p = assert(io.popen(("env -u LD_PRELOAD timeout -s KILL 20 curl -s --max-time 10 "
        .. "-o '%s' -w '%%{http_code}' --range '%s' '%s'")
        :format(out, range, url)))
      local status = tonumber(p:read("a"))
      p:close()
      local f = assert(io.open(out, "rb"))
      local body = f:read("a")
      f:close()
      os.remove(out)
      return status, body
    end
    -- RFC 9110 §14.1.2: first-last inclusive, -N the last N bytes, N- to the end
    local cases = {
      { "0-0", 1, 1 }, { "100-1099", 101, 1100 }, { "65530-65545", 65531, 65546 },
      { "-500", #file - 499, #file }, { "262000-", 262001, #file },
      { "262000-999999", 262001, #file },
    }
    for _, case in ipairs(cases) do
      local status, body = curl(case[1])
      assert.are.equal(206, status, case[1])
      assert.is_true(body == file:sub(case[2], case[3]), "other bytes for " .. case[1])
    end
    local status = curl(#file .. "-")
    assert.are.equal(416, status)
    assert.are.equal(0, s:stop())
    os.execute("rm -rf '" .. dir .. "'")
  end)

  -- spec/browser/static_files covers .. and its percent escapes; here the raw spellings a
  -- browser would never send: NUL, backslashes, overlong UTF-8 dots and slashes, double escapes.
  it("answers 404 to traversal in raw spellings, never the file beside the folder", function()
    local dir = make_app()
    write(dir .. "/secret.txt", "secret: 42\n")
    assert(os.execute("mkdir -p '" .. dir .. "/public/sub'"))
    local s = server.start(dir .. "/app.lua")
    for _, path in ipairs {
      "/assets/%00app.css", "/assets/app.css%00", "/assets/app.css%00.txt",
      "/assets/sub\\..\\..\\secret.txt", "/assets/sub/..\\..\\secret.txt",
      "/assets/..%5c..%5csecret.txt", "/assets/%c0%ae%c0%ae/secret.txt",
      "/assets/%c0%ae%c0%ae%c0%afsecret.txt", "/assets/%e0%80%ae%e0%80%ae/secret.txt",
      "/assets/%252e%252e/secret.txt", "/assets/sub/%2e%2e%2f%2e%2e%2fsecret.txt",
    } do
      local res = assert(http.get(s.port, path))
      assert.are.equal(404, res.status, path)
      assert.is_nil(res.body:find("secret: 42", 1, true), path)
    end
    assert.are.equal(200, assert(http.get(s.port, "/assets/app.css")).status)
    assert.are.equal(0, s:stop())
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
