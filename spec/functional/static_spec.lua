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
