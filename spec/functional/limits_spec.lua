-- Each limit of SPEC §13 crossed once. Deadlines are shortened through the
-- test-only CLANK_TEST_LIMITS variable (comma-separated key=value): header_ms,
-- body_ms, idle_ms, drain_ms, stop_ms, max_connections.
local server = require "helpers.server"
local http = require "helpers.http"
local socket = require "socket"

local basic = server.fixture("basic")
local MiB = 1024 * 1024

local function start(limits)
  return server.start(basic, { env = { CLANK_TEST_LIMITS = limits } })
end

-- True when the connection has bytes to read (or was closed) within `seconds`.
local function readable(conn, seconds)
  local r = socket.select({ conn.sock }, nil, seconds)
  return r and #r > 0
end

-- Sends `header` then `body` in pieces of `piece` bytes until everything is
-- sent, a send fails, or the server starts answering.
local function send_until_answered(conn, header, body, piece)
  assert(conn:send(header))
  local i = 1
  while i <= #body do
    if readable(conn, 0) then
      return "answered"
    end
    local ok = conn:send(body:sub(i, i + piece - 1), 2)
    if not ok then
      return "send failed"
    end
    i = i + piece
  end
  return "sent"
end

describe("clank-run limits", function()
  -- teardown, not after_each: the body-size tests share one server
  teardown(server.kill_all)

  describe("header deadline (header_ms)", function()
    it("answers an unfinished header block with 408 and closes", function()
      local s = start("header_ms=300")
      local conn = assert(http.connect(s.port))
      local t0 = http.now()
      assert(conn:send("GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
      local res = assert(conn:read_response({ timeout = 5 }))
      local elapsed = http.now() - t0
      assert.are.equal(408, res.status)
      assert.is_true(elapsed >= 0.25, "answered after " .. elapsed .. " s, before the deadline")
      assert.is_true(elapsed < 3, "answered after " .. elapsed .. " s")
      assert.is_true(conn:closed(2))
      conn:close()
      assert.are.equal(0, s:stop())
    end)

    it("counts from the request's first byte even while header lines keep arriving", function()
      local s = start("header_ms=400")
      local conn = assert(http.connect(s.port))
      local t0 = http.now()
      assert(conn:send("GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
      local answered_at
      for i = 1, 30 do
        if readable(conn, 0.1) then
          answered_at = http.now() - t0
          break
        end
        if not conn:send("X-Trickle-" .. i .. ": x\r\n") then
          break
        end
      end
      local res = assert(conn:read_response())
      assert.are.equal(408, res.status)
      assert.truthy(answered_at, "no answer while header lines kept arriving")
      assert.is_true(answered_at >= 0.35, "answered after " .. answered_at .. " s")
      assert.is_true(answered_at < 2, "answered after " .. answered_at .. " s")
      assert.is_true(conn:closed(2))
      conn:close()
      assert.are.equal(0, s:stop())
    end)
  end)

  describe("deadlines and running handlers", function()
    it("starts the header deadline at each request's first byte on a kept-alive connection", function()
      local s = start("header_ms=300")
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("GET", "/say?v=one")))
      assert.are.equal("one", assert(conn:read_response()).body)
      http.sleep(0.5) -- idle, longer than header_ms
      assert(conn:send("GET /say?v=two HTTP/1.1\r\n"))
      http.sleep(0.1)
      assert(conn:send("Host: 127.0.0.1\r\n\r\n"))
      local res = assert(conn:read_response())
      assert.are.equal(200, res.status)
      assert.are.equal("two", res.body)
      conn:close()
      assert.are.equal(0, s:stop())
    end)

    it("does not apply the idle, header or body deadlines while a handler runs", function()
      local s = start("header_ms=200,body_ms=200,idle_ms=200")
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("GET", "/sleep?ms=600")))
      local res = assert(conn:read_response())
      assert.are.equal(200, res.status)
      assert.are.equal("slept 600", res.body)
      conn:close()
      assert.are.equal(0, s:stop())
    end)

    it("does not close a kept-alive connection that is still writing a large response", function()
      local s = start("idle_ms=200")
      local conn = assert(http.connect(s.port))
      local parts = {}
      for i = 1, 40 do
        parts[i] = http.build("GET", "/big")
      end
      assert(conn:send(table.concat(parts))) -- 2.5 MiB of responses, read slowly
      http.sleep(0.5)
      local list = assert(conn:read_responses(40))
      assert.are.equal(65536, #list[40].body)
      conn:close()
      assert.are.equal(0, s:stop())
    end)
  end)

  describe("body deadline (body_ms)", function()
    it("answers an unfinished body with 408 and closes", function()
      local s = start("body_ms=300")
      local conn = assert(http.connect(s.port))
      local t0 = http.now()
      assert(conn:send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\nabc"))
      local res = assert(conn:read_response({ timeout = 5 }))
      local elapsed = http.now() - t0
      assert.are.equal(408, res.status)
      assert.is_true(elapsed >= 0.25, "answered after " .. elapsed .. " s, before the deadline")
      assert.is_true(elapsed < 3, "answered after " .. elapsed .. " s")
      assert.is_true(conn:closed(2))
      conn:close()
      assert.are.equal(0, s:stop())
    end)
  end)

  describe("body deadline while bytes keep arriving", function()
    it("answers 408 when a body trickles past the deadline", function()
      local s = start("body_ms=400")
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 40\r\n\r\n"))
      local t0 = http.now()
      local answered_at
      for _ = 1, 40 do
        if readable(conn, 0.1) then
          answered_at = http.now() - t0
          break
        end
        if not conn:send("b") then
          break
        end
      end
      local res = assert(conn:read_response())
      assert.are.equal(408, res.status)
      assert.truthy(answered_at, "no answer while body bytes kept arriving")
      assert.is_true(answered_at >= 0.35, "answered after " .. answered_at .. " s")
      assert.is_true(conn:closed(2))
      conn:close()
      assert.are.equal(0, s:stop())
    end)
  end)

  describe("idle keep-alive (idle_ms)", function()
    it("closes an idle keep-alive connection silently", function()
      local s = start("idle_ms=300")
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("GET", "/hello")))
      local res = assert(conn:read_response())
      assert.are.equal(200, res.status)
      local t0 = http.now()
      local closed, why = conn:closed(3)
      local elapsed = http.now() - t0
      assert.is_true(closed, "not closed silently: " .. tostring(why))
      assert.is_true(elapsed >= 0.2, "closed after " .. elapsed .. " s, before the idle limit")
      conn:close()
      assert.are.equal(0, s:stop())
    end)

    it("closes a connection that never sends a byte silently", function()
      local s = start("idle_ms=300")
      local conn = assert(http.connect(s.port))
      local closed, why = conn:closed(3)
      assert.is_true(closed, "not closed silently: " .. tostring(why))
      conn:close()
      assert.are.equal(0, s:stop())
    end)

    it("keeps a connection that is used within the idle limit", function()
      local s = start("idle_ms=500")
      local conn = assert(http.connect(s.port))
      for i = 1, 4 do
        assert(conn:send(http.build("GET", "/say?v=" .. i)))
        assert.are.equal(tostring(i), assert(conn:read_response()).body)
        http.sleep(0.25)
      end
      conn:close()
      assert.are.equal(0, s:stop())
    end)
  end)

  describe("draining after an early answer (drain_ms)", function()
    it("closes when the unread body does not arrive within the drain time", function()
      local s = start("drain_ms=300")
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /nope HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n"
        .. string.rep("z", 10)))
      local res = assert(conn:read_response())
      local t0 = http.now()
      assert.are.equal(404, res.status)
      local closed, why = conn:closed(3)
      local elapsed = http.now() - t0
      assert.is_true(closed, "connection not closed: " .. tostring(why))
      assert.is_true(elapsed < 2.5, "closed after " .. elapsed .. " s")
      conn:close()
      assert.are.equal(0, s:stop())
    end)
  end)

  describe("request body size", function()
    local s

    setup(function()
      s = start("drain_ms=300")
    end)

    teardown(function()
      if s then
        assert.are.equal(0, s:stop())
      end
    end)

    it("accepts a body of exactly 1 MiB", function()
      local body = string.rep("0123456789abcdef", MiB // 16)
      local res = assert(http.request(s.port, "POST", "/echo", nil, body))
      assert.are.equal(200, res.status)
      assert.are.equal(MiB, #res.body)
      assert.is_true(res.body == body)
    end)

    it("accepts a chunked body of exactly 1 MiB", function()
      local chunk = string.rep("q", 65536)
      local body = string.rep(string.format("%x\r\n", 65536) .. chunk .. "\r\n", 16) .. "0\r\n\r\n"
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        .. body))
      local res = assert(conn:read_response())
      assert.are.equal(200, res.status)
      assert.are.equal(MiB, #res.body)
      conn:close()
    end)

    it("answers a content-length over 1 MiB with 413 and connection: close", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: "
        .. (MiB + 1) .. "\r\n\r\n"))
      local res = assert(conn:read_response())
      assert.are.equal(413, res.status)
      assert.are.equal("close", (res.headers["connection"] or ""):lower())
      assert.is_true(conn:closed(3))
      conn:close()
    end)

    it("answers a chunked body that grows over 1 MiB with 413 while it streams", function()
      local conn = assert(http.connect(s.port))
      local piece = string.format("%x\r\n", 65536) .. string.rep("c", 65536) .. "\r\n"
      -- 20 × 64 KiB = 1.25 MiB and no last chunk: only the size limit can
      -- answer it before the body deadline (30 s, past the read timeout)
      send_until_answered(conn,
        "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        string.rep(piece, 20), #piece)
      local res = assert(conn:read_response())
      assert.are.equal(413, res.status)
      assert.is_true(conn:closed(3))
      conn:close()
    end)

    it("answers an early 404 with a body over 64 KiB by content-length with connection: close", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /nope HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n"))
      local res = assert(conn:read_response())
      assert.are.equal(404, res.status)
      assert.are.equal("close", (res.headers["connection"] or ""):lower())
      assert.is_true(conn:closed(3))
      conn:close()
    end)

    it("keeps the connection after an early 404 with a 64 KiB body by content-length", function()
      local conn = assert(http.connect(s.port))
      local body = string.rep("k", 65536)
      assert(conn:send("POST /nope HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 65536\r\n\r\n"
        .. body .. http.build("GET", "/say?v=kept")))
      local list = assert(conn:read_responses(2))
      assert.are.equal(404, list[1].status)
      assert.are.equal(200, list[2].status)
      assert.are.equal("kept", list[2].body)
      conn:close()
    end)
  end)

  describe("connections (max_connections)", function()
    it("answers the connection over the limit with 503 and closes it", function()
      local s = start("max_connections=3")
      local conns = {}
      for i = 1, 3 do
        conns[i] = assert(http.connect(s.port))
        assert(conns[i]:send(http.build("GET", "/say?v=" .. i)))
        assert.are.equal(tostring(i), assert(conns[i]:read_response()).body)
      end
      local extra = assert(http.connect(s.port))
      if not readable(extra, 0.3) then
        extra:send(http.build("GET", "/hello")) -- the server may wait for a request
      end
      local res = assert(extra:read_response())
      assert.are.equal(503, res.status)
      assert.is_true(extra:closed(2))
      extra:close()

      -- the accepted connections still work
      assert(conns[2]:send(http.build("GET", "/say?v=still")))
      assert.are.equal("still", assert(conns[2]:read_response()).body)

      -- a slot freed is a slot usable
      conns[1]:close()
      http.sleep(0.2)
      local again = assert(http.get(s.port, "/say?v=again"))
      assert.are.equal(200, again.status)
      assert.are.equal("again", again.body)
      conns[2]:close()
      conns[3]:close()
      assert.are.equal(0, s:stop())
    end)
  end)

  describe("file limit", function()
    it("answers every connection with 200 or 503 when the file limit is below the connection limit", function()
      local s = server.start(basic, { nofile = { soft = 64, hard = 64 } })
      local conns, statuses = {}, { [200] = 0, [503] = 0 }
      for i = 1, 80 do
        conns[i] = assert(http.connect(s.port))
        assert(conns[i]:send(http.build("GET", "/say?v=" .. i)))
      end
      for i = 1, 80 do
        local res = assert(conns[i]:read_response())
        assert.truthy(res.status == 200 or res.status == 503, "status " .. res.status)
        statuses[res.status] = statuses[res.status] + 1
      end
      assert.is_true(statuses[503] > 0, "80 connections fit in 64 file descriptors?")
      assert.is_true(statuses[200] > 0)
      for i = 1, 80 do
        conns[i]:close()
      end
      http.sleep(0.2)
      assert.are.equal(200, assert(http.get(s.port, "/hello")).status)
      assert.are.equal(0, s:stop())
    end)
  end)

  describe("graceful stop bound (stop_ms)", function()
    it("exits 0 within the bound even when a request is still running", function()
      local s = start("stop_ms=500")
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("GET", "/sleep?ms=10000")))
      http.sleep(0.1)
      local t0 = http.now()
      s:signal("TERM")
      local code = s:wait_exit(5)
      local elapsed = http.now() - t0
      assert.are.equal(0, code)
      assert.is_true(elapsed >= 0.4, "exited after " .. elapsed .. " s, before the bound")
      assert.is_true(elapsed < 3, "exited after " .. elapsed .. " s")
      conn:close()
    end)
  end)
end)
