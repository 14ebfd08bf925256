-- Slow clients and the limits around them (SPEC §13): slowloris, readers
-- that stop reading, the connection cap's 503, running out of descriptors,
-- chunk extensions. Deadlines are shortened with CLANK_TEST_LIMITS.
local server = require "helpers.server"
local http = require "helpers.http"
local socket = require "socket"

local slow = server.fixture("slow")
local MiB = 1024 * 1024
local BIG = 8 * MiB -- the fixture's GET /big

local function rss_kib(pid)
  local f = io.open("/proc/" .. pid .. "/status", "r")
  if not f then
    return nil
  end
  local text = f:read("a")
  f:close()
  return tonumber(text:match("VmRSS:%s*(%d+)"))
end

-- Polls stderr until it matches pattern (the log is flushed once per loop iteration).
local function wait_log(s, pattern, seconds)
  local deadline = http.now() + (seconds or 5)
  repeat
    local text = s:stderr()
    if text:find(pattern) then
      return text
    end
    http.sleep(0.02)
  until http.now() > deadline
  return nil
end

-- Reads what the server sends until it closes: bytes read, and how it ended.
local function drain(conn, seconds)
  local total, deadline = 0, http.now() + seconds
  while true do
    conn.sock:settimeout(math.max(0, deadline - http.now()), "t")
    local data, err, partial = conn.sock:receive(256 * 1024)
    total = total + #(data or partial or "")
    if not data then
      return total, err
    end
  end
end

describe("clank-run slow clients (SPEC §13)", function()
  after_each(server.kill_all)

  it("keeps answering others while 500 connections send their heads a byte a second", function()
    local s = server.start(slow, { env = { CLANK_TEST_LIMITS = "header_ms=2000" } })
    local head = http.build("GET", "/hello")
    local loris = {}
    for i = 1, 500 do
      local sock = socket.tcp()
      sock:settimeout(2)
      assert(sock:connect("127.0.0.1", s.port))
      sock:settimeout(0)
      loris[i] = sock
    end
    local sent, requests, worst = 0, 0, 0
    local t0 = http.now()
    while http.now() - t0 < 2.6 do
      if http.now() - t0 >= sent then -- one byte a second on every connection
        sent = sent + 1
        for _, sock in ipairs(loris) do
          sock:send(head:sub(sent, sent))
        end
      end
      local started = http.now()
      local res = assert(http.get(s.port, "/hello"))
      assert.are.equal(200, res.status)
      worst = math.max(worst, http.now() - started)
      requests = requests + 1
      http.sleep(0.05)
    end
    print(string.format("\nslowloris: %d requests beside 500 slow heads, worst %.1f ms",
      requests, worst * 1000))
    assert.is_true(requests >= 10)
    assert.is_true(worst < (server.sanitized and 1 or 0.25), "worst latency " .. worst .. " s")
    -- past the header deadline every slow connection got its 408
    local timed_out = 0
    for _, sock in ipairs(loris) do
      sock:settimeout(2)
      local line = sock:receive("*l")
      if line and line:match("^HTTP/1%.1 408 ") then
        timed_out = timed_out + 1
      end
      sock:close()
    end
    assert.are.equal(500, timed_out)
    assert.are.equal(0, s:stop())
  end)

  for _, close in ipairs({ false, true }) do
    local which = close and "connection: close answers" or "keep-alive answers"
    it("closes readers that stop reading at the write deadline, holding the body once (" .. which .. ")", function()
      local s = server.start(slow, { env = { CLANK_TEST_LIMITS = "write_ms=500" } })
      assert.are.equal(200, assert(http.get(s.port, "/hello")).status)
      local before = rss_kib(s.pid)
      local readers = {}
      for i = 1, 50 do
        readers[i] = assert(http.connect(s.port))
        assert(readers[i]:send(http.build("GET", "/big", close and { Connection = "close" } or nil)))
      end
      http.sleep(0.3)
      local held = rss_kib(s.pid)
      -- copied per connection, 50 answers of 8 MiB would be 400 MiB
      assert.is_true(held - before < 64 * 1024,
        string.format("RSS grew by %d KiB with 50 stalled readers", held - before))
      http.sleep(0.7) -- past write_ms
      for _, conn in ipairs(readers) do
        local total, how = drain(conn, 5)
        assert.is_true(total < BIG, "a stalled reader got the whole answer")
        assert.truthy(how == "closed" or how:find("reset"), how)
        conn:close()
      end
      assert.are.equal(200, assert(http.get(s.port, "/hello")).status)
      assert.are.equal(0, s:stop())
    end)
  end

  it("answers a client that half-closed, and closes one that does not read at the write deadline", function()
    local s = server.start(slow, { env = { CLANK_TEST_LIMITS = "write_ms=500" } })
    local reader = assert(http.connect(s.port))
    assert(reader:send(http.build("GET", "/hello")))
    assert(reader:shutdown())
    local res = assert(reader:read_response())
    assert.are.equal(200, res.status)
    assert.is_true(reader:closed(2))
    reader:close()
    local stalled = assert(http.connect(s.port))
    assert(stalled:send(http.build("GET", "/big")))
    assert(stalled:shutdown())
    http.sleep(1) -- past write_ms
    local total, how = drain(stalled, 5)
    assert.is_true(total < BIG, "a stalled reader got the whole answer")
    assert.truthy(how == "closed" or how:find("reset"), how)
    stalled:close()
    assert.are.equal(200, assert(http.get(s.port, "/hello")).status)
    assert.are.equal(0, s:stop())
  end)

  -- A keep-alive connection that once took a large body must not hold a buffer of that size
  -- while it waits for its next request: 30 of them at 2 MiB would keep 60 MiB.
  it("gives a large body's memory back once its request is answered", function()
    -- ASan keeps freed memory in quarantine: without it, RSS shows what is held
    local asan = os.getenv("ASAN_OPTIONS")
    local s = server.start(slow, { env = asan and { ASAN_OPTIONS = asan .. ":quarantine_size_mb=0" } or nil })
    local body = string.rep("b", 2 * MiB)
    local function upload(conn)
      assert(conn:send(http.build("POST", "/upload", { ["content-type"] = "application/octet-stream" }, body)))
      local res = assert(conn:read_response())
      assert.are.equal(200, res.status)
      assert.are.equal("got " .. #body, res.body)
    end
    local warm = assert(http.connect(s.port))
    upload(warm)
    local before = rss_kib(s.pid)
    local idle = {}
    for i = 1, 30 do
      idle[i] = assert(http.connect(s.port))
      upload(idle[i])
    end
    local held = rss_kib(s.pid)
    assert.is_true(held - before < 24 * 1024,
      string.format("RSS grew by %d KiB with 30 idle connections after 2 MiB bodies", held - before))
    for _, conn in ipairs(idle) do
      upload(conn) -- still usable
      conn:close()
    end
    warm:close()
    assert.are.equal(0, s:stop())
  end)

  it("lets a reader that keeps reading have the whole answer", function()
    local s = server.start(slow, { env = { CLANK_TEST_LIMITS = "write_ms=500" } })
    local res = assert(http.get(s.port, "/big"))
    assert.are.equal(BIG, #res.body)
    assert.are.equal(0, s:stop())
  end)

  it("answers 503 with retry-after past the connection cap, and never resets", function()
    local s = server.start(slow, { env = { CLANK_TEST_LIMITS = "max_connections=4" } })
    local conns = {}
    for i = 1, 40 do
      conns[i] = assert(http.connect(s.port))
      assert(conns[i]:send(http.build("GET", "/hello")))
    end
    local served, refused = 0, 0
    for _, conn in ipairs(conns) do
      local res = assert(conn:read_response())
      if res.status == 200 then
        served = served + 1
      else
        assert.are.equal(503, res.status)
        assert.are.equal("1", res.headers["retry-after"])
        assert.are.equal("close", res.headers["connection"])
        -- then an orderly end: "closed", not "connection reset by peer"
        conn.sock:settimeout(2)
        local data, err = conn.sock:receive(1)
        assert.is_nil(data)
        assert.are.equal("closed", err)
        refused = refused + 1
      end
    end
    -- the first 4 hold their slots (keep-alive); a slot a 503 frees may serve a late one
    assert.is_true(served >= 4, served .. " served")
    assert.is_true(refused >= 20, refused .. " refused")
    assert.are.equal(40, served + refused)
    for _, conn in ipairs(conns) do
      conn:close()
    end
    assert.are.equal(0, s:stop())
  end)

  it("answers the 10,001st connection with 503 at the default cap", function()
    -- this process holds 10,001 sockets: its file limit must allow them
    local shell = io.popen("ulimit -n")
    local limit = tonumber(shell:read("a"):match("%d+")) or math.huge
    shell:close()
    if limit < 10100 then
      pending("the file limit (" .. limit .. ") is too low for 10,001 connections")
      return
    end
    local s = server.start(slow) -- clank-run raises its own file limit to the hard one
    local conns = {}
    local t0 = http.now()
    for i = 1, 10000 do
      local sock = socket.tcp()
      sock:settimeout(5)
      assert(sock:connect("127.0.0.1", s.port))
      conns[i] = sock
    end
    local extra = assert(http.connect(s.port)) -- the 10,001st
    assert(extra:send(http.build("GET", "/hello")))
    local refused = assert(extra:read_response())
    assert.are.equal(503, refused.status)
    assert.are.equal("1", refused.headers["retry-after"])
    print(string.format("\n10,001 connections opened and answered in %.2f s", http.now() - t0))
    extra:close()
    -- the first of the 10,000 is served
    local first = setmetatable({ sock = conns[1], port = s.port }, getmetatable(extra))
    assert(first:send(http.build("GET", "/hello")))
    assert.are.equal(200, assert(first:read_response()).status)
    for _, sock in ipairs(conns) do
      sock:close()
    end
    assert.are.equal(0, s:stop())
  end)

  it("sheds connections past the file limit with a counting log line, and recovers", function()
    local s = server.start(slow, { nofile = { soft = 64, hard = 64 } })
    local conns = {}
    for i = 1, 100 do
      conns[i] = assert(http.connect(s.port))
    end
    local log = wait_log(s, "out of file descriptors: closed %d+ connections", 5)
    assert.truthy(log, "no log line counting the shed connections:\n" .. s:stderr())
    for _, conn in ipairs(conns) do
      conn:close()
    end
    http.sleep(0.3)
    local res = assert(http.get(s.port, "/hello"))
    assert.are.equal(200, res.status)
    -- one line, not one per connection
    local _, lines = s:stderr():gsub("out of file descriptors", "")
    assert.are.equal(1, lines)
    assert.are.equal(0, s:stop())
  end)

  it("counts chunk extensions toward the header limit (431)", function()
    local s = server.start(slow)
    local function chunked(ext)
      return "POST /default HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        .. "5" .. ext .. "\r\nhello\r\n0\r\n\r\n"
    end
    local ok = assert(http.raw(s.port, chunked(";name=value")))
    assert.are.equal(200, ok.status)
    assert.are.equal("got 5", ok.body)
    local res, conn = http.raw(s.port, chunked(";big=" .. string.rep("v", 20 * 1024)))
    assert(res, conn)
    assert.are.equal(431, res.status)
    conn:close()
    assert.are.equal(0, s:stop())
  end)
end)
