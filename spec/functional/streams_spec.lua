-- Streamed route answers, clank.sse, per-route bodyLimit and the CSRF rule
-- (SPEC §15, with §13's 1 MiB of buffered streamed output).
local server = require "helpers.server"
local http = require "helpers.http"

local slow = server.fixture("slow")
local MiB = 1024 * 1024

-- Reads a response head; returns status, headers (lower-case names).
local function read_head(conn, deadline)
  local line = assert(conn:receive("*l", deadline))
  local status = tonumber(line:match("^HTTP/1%.1 (%d+)"))
  local headers = {}
  while true do
    local h = assert(conn:receive("*l", deadline))
    if h == "" then
      break
    end
    local k, v = h:match("^([^:]+):%s*(.*)$")
    headers[k:lower()] = v
  end
  return status, headers
end

-- Reads one chunk: its data, "" for the last one, or nil, error.
local function read_chunk(conn, deadline)
  local size_line, err = conn:receive("*l", deadline)
  if not size_line then
    return nil, err
  end
  local size = tonumber(size_line:match("^%x+"), 16)
  if size == 0 then
    assert(conn:receive("*l", deadline))
    return ""
  end
  local data
  data, err = conn:receive(size, deadline)
  if not data then
    return nil, err
  end
  assert(conn:receive("*l", deadline))
  return data
end

local function deadline(seconds)
  return http.now() + (seconds or http.timeout)
end

describe("clank-run streamed route answers (SPEC §15)", function()
  local s = server.for_describe(slow)

  it("sends the head, then each chunk as send writes it", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("GET", "/ticks")))
    local d = deadline()
    local status, headers = read_head(conn, d)
    assert.are.equal(200, status)
    assert.are.equal("chunked", headers["transfer-encoding"])
    local times, chunks = {}, {}
    while true do
      local data = assert(read_chunk(conn, d))
      if data == "" then
        break
      end
      chunks[#chunks + 1] = data
      times[#times + 1] = http.now()
    end
    assert.are.same({ "tick 1\n", "tick 2\n", "tick 3\n" }, chunks)
    -- the route sleeps 150 ms between sends: the chunks were not held back to the end
    assert.is_true(times[3] - times[1] >= 0.25, "chunks arrived together")
    conn:close()
  end)

  it("makes send wait while the client does not read, and goes on when it does", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("GET", "/stream?n=200"))) -- 200 chunks of 64 KiB: 12.5 MiB
    http.sleep(1)
    -- the server answers others meanwhile, and the route is waiting in send
    local rec = assert(http.get(s.port, "/record"))
    local ended, sent = rec.body:match("^(%a+) (%d+)$")
    assert.are.equal("running", ended)
    sent = tonumber(sent)
    -- 1 MiB in the server, the rest in the kernel's socket buffers
    assert.is_true(sent < 150, "the route sent " .. sent .. " chunks to a client that reads nothing")
    assert.are.equal(200, assert(http.get(s.port, "/hello")).status)
    -- reading lets the route finish
    local res = assert(conn:read_response({ timeout = 20 }))
    assert.are.equal(200 * 64 * 1024, #res.body)
    assert.are.equal("done 200", assert(http.get(s.port, "/record")).body)
    conn:close()
  end)

  it("makes send return false once the client is gone", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("GET", "/stream?n=100000")))
    local status = read_head(conn, deadline())
    assert.are.equal(200, status)
    conn:close()
    local body
    local d = deadline(5)
    repeat
      http.sleep(0.05)
      body = assert(http.get(s.port, "/record")).body
    until body:match("^gone") or http.now() > d
    assert.matches("^gone %d+$", body)
  end)

  it("closes the connection without the last chunk when the stream fails, with one log line", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("GET", "/fails")))
    local d = deadline()
    local status = read_head(conn, d)
    assert.are.equal(200, status)
    assert.are.equal("first\n", assert(read_chunk(conn, d)))
    local data, err = read_chunk(conn, d)
    assert.is_nil(data)
    assert.are.equal("closed", err)
    conn:close()
    local lines
    repeat
      http.sleep(0.02)
      local _, n = s:stderr():gsub("stream failed on purpose", "")
      lines = n
    until lines > 0 or http.now() > d
    assert.are.equal(1, lines)
  end)

  it("writes server-sent events with clank.sse", function()
    local res = assert(http.get(s.port, "/events"))
    assert.are.equal(200, res.status)
    assert.are.equal("text/event-stream", res.headers["content-type"])
    assert.are.equal(": hello\n\n"
      .. "data: one\n\n"
      .. "event: update\nid: 7\ndata: {\"a\":\"x\",\"b\":2}\n\n"
      .. "retry: 1500\ndata: line 1\ndata: line 2\n\n", res.body)
  end)
end)

describe("clank-run per-route bodyLimit (SPEC §15)", function()
  local s = server.for_describe(slow)

  it("reads a body over 1 MiB on a route that allows it", function()
    local res = assert(http.request(s.port, "POST", "/upload", nil, string.rep("u", 1500000)))
    assert.are.equal(200, res.status)
    assert.are.equal("got 1500000", res.body)
  end)

  it("answers 413 over the route's limit, and over 1 MiB without one", function()
    -- the server answers before the body is all sent: http.raw reads the answer all the same
    local big = assert(http.raw(s.port, http.build("POST", "/upload", nil, string.rep("u", 2 * MiB + 1))))
    assert.are.equal(413, big.status)
    local default = assert(http.raw(s.port, http.build("POST", "/default", nil, string.rep("u", 1500000))))
    assert.are.equal(413, default.status)
    local tiny = assert(http.request(s.port, "POST", "/tiny", nil, "eleven byte"))
    assert.are.equal(413, tiny.status)
    local fits = assert(http.request(s.port, "POST", "/tiny", nil, "ten bytes!"))
    assert.are.equal(200, fits.status)
    assert.are.equal("got 10", fits.body)
  end)

  it("fails to load a bodyLimit over 64 MiB, naming the route", function()
    local code, _, stderr = server.run({ "--check", server.fixture("slow", "too_big.lua") })
    assert.are.equal(1, code)
    assert.matches("POST /huge", stderr, 1, true)
    assert.matches("bodyLimit", stderr, 1, true)
  end)
end)

describe("clank-run CSRF rule for unsafe-method routes (SPEC §15)", function()
  local s = server.for_describe(slow)

  local function post(method, path, headers)
    return assert(http.request(s.port, method, path, headers, "x"))
  end

  it("refuses sec-fetch-site: cross-site and a foreign Origin with 403 text", function()
    for _, case in ipairs({
      { "POST", "/default", { ["Sec-Fetch-Site"] = "cross-site" } },
      { "POST", "/default", { Origin = "http://evil.example" } },
      { "DELETE", "/item", { Origin = "http://evil.example" } },
      { "POST", "/default", { Origin = "http://127.0.0.1:1" } }, -- another port is another origin
    }) do
      local res = post(case[1], case[2], case[3])
      assert.are.equal(403, res.status, case[1] .. " " .. case[2])
      assert.matches("^text/plain", res.headers["content-type"])
    end
  end)

  it("serves the server's own origin, an allowed one, and requests without either header", function()
    local host = "127.0.0.1:" .. s.port
    local own = "http://" .. host
    assert.are.equal(200, post("POST", "/default",
      { Host = host, Origin = own, ["Sec-Fetch-Site"] = "same-origin" }).status)
    assert.are.equal(200, post("POST", "/default", { Origin = "http://trusted.example" }).status)
    assert.are.equal(200, post("POST", "/default", {}).status)
    assert.are.equal(200, post("DELETE", "/item", { Host = host, Origin = own }).status)
  end)

  it("serves a crossSite = true route from anywhere", function()
    local res = post("POST", "/hook", { Origin = "http://evil.example", ["Sec-Fetch-Site"] = "cross-site" })
    assert.are.equal(200, res.status)
    assert.are.equal("hooked", res.body)
  end)
end)
