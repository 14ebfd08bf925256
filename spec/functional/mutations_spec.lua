-- clank-run must not crash, hang or leak on malformed input (SPEC §13: every
-- framing error is a 400 and a close; the process lives). Valid requests are
-- mutated with a fixed seed — bytes flipped, dropped, duplicated, cut — and
-- each goes out on its own connection; afterwards the server still answers
-- and, under the sanitizers, stops clean.
local server = require "helpers.server"
local http = require "helpers.http"
local socket = require "socket"

local seeds = {
  "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n",
  "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello",
  "POST /echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n",
  "POST /actions/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    .. "Content-Length: 14\r\n\r\n{\"text\":\"hi\"}",
  "GET /manifest HTTP/1.1\r\nHost: localhost\r\nIf-None-Match: W/\"x\", *\r\n\r\n",
  "POST /__clank/mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    .. "Content-Length: 40\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
}

local interesting = { "\0", "\r", "\n", " ", ":", "%", "\255", "0", "9", "-", "\"", "{", "[" }

local function mutate(s, rng)
  local kind = rng(5)
  local i = rng(#s)
  if kind == 1 then -- flip a byte
    return s:sub(1, i - 1) .. string.char(rng(256) - 1) .. s:sub(i + 1)
  elseif kind == 2 then -- drop a run
    return s:sub(1, i - 1) .. s:sub(i + rng(8))
  elseif kind == 3 then -- repeat a run
    local j = math.min(#s, i + rng(16))
    return s:sub(1, j) .. s:sub(i, j):rep(rng(40)) .. s:sub(j + 1)
  elseif kind == 4 then -- an interesting byte
    return s:sub(1, i - 1) .. interesting[rng(#interesting)] .. s:sub(i)
  else -- cut short
    return s:sub(1, i)
  end
end

describe("clank-run under mutated requests", function()
  it("answers each of 400 with a well-formed status line, or nothing, and keeps serving", function()
    local s = server.start(server.fixture("bridge"), {
      env = { CLANK_TEST_LIMITS = "header_ms=300,body_ms=300,drain_ms=200" },
    })
    math.randomseed(20261130)
    local rng = math.random
    local answers = 0
    for n = 1, 400 do
      local bytes = seeds[(n - 1) % #seeds + 1]
      for _ = 1, rng(3) do bytes = mutate(bytes, rng) end
      local conn = assert(http.connect(s.port))
      conn:send(bytes, 2)
      conn.sock:settimeout(0.05)
      local data, _, partial = conn.sock:receive("*a") -- until close, or the short timeout
      data = data or partial or ""
      if #data > 0 then
        answers = answers + 1
        assert.truthy(data:find("^HTTP/1%.1 [1-5]%d%d "), ("case %d got %q for %q"):format(n, data:sub(1, 40), bytes))
      end
      conn:close()
    end
    assert.is_true(answers > 200, answers .. " answers") -- most mutations still get a status
    -- the server lives and still answers a well-formed request
    local res = assert(http.get(s.port, "/manifest"))
    assert.are.equal(200, res.status)
    socket.sleep(0.4) -- let the short deadlines close what was left half-sent
    assert.are.equal(0, s:stop())
  end)
end)
