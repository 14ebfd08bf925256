-- app.static under load (SPEC §15): a 1 MiB file read in chunks, answered whole, on keep-alive
-- connections and on connection: close ones (whose last chunk closes the connection as it is
-- written), byte for byte; the sanitizer build fails on any memory error at stop.
local server = require "helpers.server"
local http = require "helpers.http"

local write = require("helpers.files").write

describe("app.static", function()
  after_each(server.kill_all)

  it("sends a 1 MiB file whole, with keep-alive and with connection: close", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "/public'"))
    local parts = {}
    for i = 1, 1024 do
      parts[i] = string.format("%04d", i) .. string.rep(string.char(65 + i % 26), 1020)
    end
    local file = table.concat(parts)
    assert.are.equal(1048576, #file)
    write(dir .. "/public/big.bin", file)
    write(dir .. "/app.lua",
      'local clank = require "clank"\nreturn clank.app { name = "s", static = { ["/assets"] = "public" } }\n')
    local s = server.start(dir .. "/app.lua")
    for _ = 1, 10 do
      local res = assert(http.request(s.port, "GET", "/assets/big.bin", { Connection = "close" }))
      assert.are.equal(200, res.status)
      assert.are.equal(#file, #res.body)
      assert.is_true(res.body == file, "other bytes")
    end
    local conn = assert(http.connect(s.port))
    for _ = 1, 5 do
      assert(conn:send(http.build("GET", "/assets/big.bin")))
      local res = assert(conn:read_response())
      assert.are.equal(200, res.status)
      assert.is_true(res.body == file, "other bytes")
    end
    conn:close()
    -- clients that go away in the middle of the file: the write that fails ends it
    local socket = require "socket"
    for _ = 1, 20 do
      local c = assert(socket.connect("127.0.0.1", s.port))
      c:setoption("linger", { on = true, timeout = 0 }) -- a reset, not a polite close
      assert(c:send(http.build("GET", "/assets/big.bin")))
      c:settimeout(5)
      assert(c:receive(100))
      c:close()
    end
    local res = assert(http.request(s.port, "GET", "/assets/big.bin"))
    assert.is_true(res.body == file, "other bytes")
    assert.are.equal(0, s:stop())
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

-- Browsers ask every page for /favicon.ico (issue 34): an app.static folder's favicon.ico, else an
-- empty 204, never the 404 that was an error in the console and the access log of each page load.
describe("/favicon.ico", function()
  after_each(server.kill_all)

  local dir
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "/css' '" .. dir .. "/img'"))
  end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function app(fields)
    write(dir .. "/app.lua", 'local clank = require "clank"\nreturn clank.app { name = "f", ' .. fields .. " }\n")
    return server.start(dir .. "/app.lua")
  end

  it("answers 204 with no body when the app has no favicon, for GET and HEAD", function()
    local s = app('static = { ["/css"] = "css" }')
    for _, method in ipairs { "GET", "HEAD" } do
      local res = assert(http.request(s.port, method, "/favicon.ico"))
      assert.are.equal(204, res.status, method)
      assert.are.equal("", res.body)
      assert.is_nil(res.headers["content-length"])
    end
    -- only that path, only to read it
    assert.are.equal(404, assert(http.request(s.port, "GET", "/favicon.ico/x")).status)
    assert.are.equal(404, assert(http.request(s.port, "GET", "/img/favicon.ico")).status)
    assert.are.equal(404, assert(http.request(s.port, "POST", "/favicon.ico", {}, "")).status)
    assert.are.equal(0, s:stop())
  end)

  it("answers 204 for an app without static folders", function()
    local s = app('routes = { ["GET /x"] = function() return { status = 200, body = "x" } end }')
    assert.are.equal(204, assert(http.get(s.port, "/favicon.ico")).status)
    assert.are.equal(0, s:stop())
  end)

  it("serves favicon.ico from the first static folder that has one", function()
    local icon = "\0\0\1\0\1\0icon bytes"
    write(dir .. "/img/favicon.ico", icon)
    write(dir .. "/css/site.css", "body{}")
    local s = app('static = { ["/css"] = "css", ["/img"] = "img" }')
    local res = assert(http.get(s.port, "/favicon.ico"))
    assert.are.equal(200, res.status)
    assert.are.equal("image/x-icon", res.headers["content-type"])
    assert.are.equal(icon, res.body)
    -- as a static file: validators, and 304 for the browser's copy
    local again = assert(http.get(s.port, "/favicon.ico", { ["If-None-Match"] = res.headers.etag }))
    assert.are.equal(304, again.status)
    assert.are.equal(200, assert(http.get(s.port, "/img/favicon.ico")).status)
    assert.are.equal(0, s:stop())
  end)

  it("leaves /favicon.ico to the app's own route", function()
    local s = app('static = { ["/img"] = "img" }, routes = { ["GET /favicon.ico"] = function()\n'
      .. 'return { status = 200, headers = { ["content-type"] = "image/svg+xml" }, body = "<svg/>" } end }')
    local res = assert(http.get(s.port, "/favicon.ico"))
    assert.are.equal(200, res.status)
    assert.are.equal("<svg/>", res.body)
    assert.are.equal(0, s:stop())
  end)
end)
