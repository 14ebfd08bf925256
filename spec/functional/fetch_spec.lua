-- clank.fetch (SPEC §12) against an independent HTTP/1.1 and TLS server
-- (spec/helpers/fetch_server.py: Python's http.server and ssl, with a CA
-- and a certificate for DNS:localhost made by the openssl command), in
-- process (the waits run in action handlers, as in async_spec) and inside
-- clank-run (spec/fixtures/apps/fetch).
local clank = require "clank"
local socket = require "socket"
local server = require "helpers.server"
local http = require "helpers.http"
local s = clank.schema

local NOT_IN_COROUTINE = "clank.sleep: cannot wait here (not in a handler coroutine)"

-- Runs fn() as an action's handler and returns what it returns.
local function in_handler(fn)
  local action = clank.defineAction {
    name = "run", description = "Runs a function.", input = s.object {}, sideEffects = "read",
    handler = function() return { value = table.pack(fn()) } end,
  }
  return table.unpack(action({}, {}).value)
end

local function fetch(url, opts)
  return in_handler(function() return clank.fetch(url, opts) end)
end

-- The Python server, its stdin our pipe: it exits when the pipe closes.
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local pipe, plain, tls, ipv6
local ca = dir .. "/ca.pem"

setup(function()
  pipe = assert(io.popen("exec python3 " .. server.source_dir() .. "/spec/helpers/fetch_server.py "
    .. dir .. " > " .. dir .. "/ports 2> " .. dir .. "/stderr", "w"))
  local deadline = socket.gettime() + 20
  repeat
    socket.sleep(0.02)
    local f = io.open(dir .. "/ports")
    local line = f and f:read("l")
    if f then f:close() end
    if line then plain, tls, ipv6 = line:match("^(%d+) (%d+) (%d+)$") end
  until plain or socket.gettime() > deadline
  assert(plain, "the test server did not start")
end)

teardown(function()
  if pipe then pipe:close() end
  os.execute("rm -rf " .. dir)
end)

local function url(path) return "http://127.0.0.1:" .. plain .. path end
local function tls_url(path, host) return "https://" .. (host or "localhost") .. ":" .. tls .. path end

describe("clank.fetch", function()
  it("GETs a body with its status, lower-case headers and url", function()
    local res = assert(fetch(url("/hello")))
    assert.are.equal(200, res.status)
    assert.are.equal("hello", res.body)
    assert.are.equal("text/plain", res.headers["content-type"])
    assert.are.equal("5", res.headers["content-length"])
    assert.are.equal(url("/hello"), res.url)
  end)

  it("connects to an IPv6 literal", function()
    if ipv6 == "0" then return pending("no IPv6 on this machine") end
    local echo = assert(assert(fetch("http://[::1]:" .. ipv6 .. "/echo")):json())
    assert.are.equal("[::1]:" .. ipv6, echo.headers.host)
  end)

  it("joins repeated response headers with a comma and a space", function()
    assert.are.equal("a, b", assert(fetch(url("/repeated"))).headers["x-twice"])
  end)

  it("returns 4xx answers as responses", function()
    local res = assert(fetch(url("/missing")))
    assert.are.equal(404, res.status)
    assert.are.equal("nope", res.body)
  end)

  it("POSTs a body with the caller's headers", function()
    local res = assert(fetch(url("/echo"), {
      method = "post", body = "a=1", headers = { ["X-Thing"] = "yes", ["Content-Type"] = "text/x" } }))
    local echo = assert(res:json())
    assert.are.equal("POST", echo.method)
    assert.are.equal("a=1", echo.body)
    assert.are.equal("3", echo.headers["content-length"])
    assert.are.equal("yes", echo.headers["x-thing"])
    assert.are.equal("text/x", echo.headers["content-type"])
    assert.are.equal("127.0.0.1:" .. plain, echo.headers.host)
  end)

  it("sends json as canonical JSON with its content type", function()
    local echo = assert(assert(fetch(url("/echo"), { method = "PUT", json = { b = { 1, 2 }, a = "x" } })):json())
    assert.are.equal('{"a":"x","b":[1,2]}', echo.body)
    assert.are.equal("application/json", echo.headers["content-type"])
  end)

  it("decodes JSON strictly", function()
    local res = assert(fetch(url("/hello")))
    local value, err = res:json()
    assert.is_nil(value)
    assert.is_string(err)
  end)

  it("reads chunked answers", function()
    assert.are.equal("one,two,three", assert(fetch(url("/chunked"))).body)
  end)

  it("answers HEAD without a body", function()
    local res = assert(fetch(url("/hello"), { method = "HEAD" }))
    assert.are.equal(200, res.status)
    assert.are.equal("", res.body)
    res = assert(fetch(url("/big"), { method = "HEAD", maxBytes = 10 })) -- announced, never sent
    assert.are.equal(tostring(4 * 1024 * 1024), res.headers["content-length"])
  end)

  it("keeps one connection alive for 100 calls", function()
    local before, after = in_handler(function()
      local b = tonumber(assert(clank.fetch(url("/connections"))).body)
      for _ = 1, 100 do
        assert(assert(clank.fetch(url("/hello"))).body == "hello")
      end
      return b, tonumber(assert(clank.fetch(url("/connections"))).body)
    end)
    assert.are.equal(before, after)
  end)

  it("keeps at most 16 idle connections per origin", function()
    local opened = in_handler(function()
      local function wave()
        local done = 0
        for _ = 1, 20 do
          clank.spawn(function()
            assert(assert(clank.fetch(url("/chunked"))).body == "one,two,three")
            done = done + 1
          end)
        end
        for _ = 1, 500 do
          if done == 20 then return end
          clank.sleep(10)
        end
        error("a wave did not finish")
      end
      -- after this one connection is idle
      local before = tonumber(assert(clank.fetch(url("/connections"))).body)
      wave() -- 20 at once: the idle one and 19 new; 16 of them kept
      wave() -- 16 reused, 4 new (with no cap: 20 reused, none new)
      return tonumber(assert(clank.fetch(url("/connections"))).body) - before
    end)
    assert.are.equal(19 + 4, opened)
  end)

  it("sends again on a new connection when a reused one was closed by the server", function()
    local a, b, c, d = in_handler(function()
      local r1 = assert(clank.fetch(url("/quiet-close"))).body
      local r2 = assert(clank.fetch(url("/hello"))).body -- at once: the close is not seen yet
      local r3 = assert(clank.fetch(url("/quiet-close"))).body
      clank.sleep(50) -- the close is seen while idle
      return r1, r2, r3, assert(clank.fetch(url("/hello"))).body
    end)
    assert.are.same({ "bye", "hello", "bye", "hello" }, { a, b, c, d })
  end)

  it("streams server-sent events line by line as they come", function()
    local lines, first_at, done_at = in_handler(function()
      local t0 = socket.gettime()
      local res = assert(clank.fetch(url("/sse"), { stream = true }))
      assert(res.body == nil)
      local out, first = {}, nil
      for line in res:lines() do
        out[#out + 1] = line
        first = first or socket.gettime() - t0
      end
      return out, first, socket.gettime() - t0
    end)
    assert.are.same({ "data: 1", "", "data: 2", "", "data: 3", "" }, lines)
    -- the server waits 0.3 s between the first chunk and the last
    assert.is_true(done_at - first_at >= 0.2, "the first line came only with the last")
  end)

  it("reads a stream chunk by chunk with res:read()", function()
    local chunks = in_handler(function()
      local res = assert(clank.fetch(url("/chunked"), { stream = true }))
      local out = {}
      for chunk in res.read, res do out[#out + 1] = chunk end
      return table.concat(out)
    end)
    assert.are.equal("one,two,three", chunks)
  end)

  it("stops reading the socket while a stream's reader is slow", function()
    local first, sent, total = in_handler(function()
      local r = assert(clank.fetch(url("/firehose"), { stream = true, maxBytes = 64 * 1024 * 1024 }))
      local chunk = assert(r:read())
      clank.sleep(500)
      local so_far = tonumber(assert(clank.fetch(url("/sent"))).body)
      local n = #chunk
      for c in r.read, r do n = n + #c end
      return #chunk, so_far, n
    end)
    assert.is_true(first > 0)
    -- 32 MiB unread would all be taken in 0.5 s; socket buffers hold a few MiB at most
    assert.is_true(sent < 20 * 1024 * 1024, "the server could send " .. sent .. " bytes")
    assert.are.equal(32 * 1024 * 1024, total)
  end)

  describe("redirects", function()
    it("are answers when manual (the default)", function()
      local res = assert(fetch(url("/redirect/1")))
      assert.are.equal(302, res.status)
      assert.are.equal("/redirect/0", res.headers.location)
    end)

    it("are followed up to 5 times", function()
      local res = assert(fetch(url("/redirect/5"), { redirect = "follow" }))
      assert.are.equal(200, res.status)
      assert.are.equal("arrived", res.body)
      assert.are.equal(url("/redirect/0"), res.url)
    end)

    it("fail past 5", function()
      local res, err = fetch(url("/redirect/6"), { redirect = "follow" })
      assert.is_nil(res)
      assert.are.equal("protocol", err.kind)
    end)

    it("turn a POST into a GET without its body on 303, 302 and 301", function()
      for _, code in ipairs({ "303", "302", "301" }) do
        local echo = assert(assert(fetch(url("/r" .. code), {
          method = "POST", json = { a = 1 }, redirect = "follow" })):json())
        assert.are.equal("GET", echo.method, code)
        assert.are.equal("", echo.body, code)
        assert.is_nil(echo.headers["content-type"], code)
      end
    end)

    it("keep the method and body on 307 and 308", function()
      for _, code in ipairs({ "307", "308" }) do
        local echo = assert(assert(fetch(url("/r" .. code), {
          method = "POST", body = "kept", redirect = "follow" })):json())
        assert.are.equal("POST", echo.method, code)
        assert.are.equal("kept", echo.body, code)
      end
    end)

    it("turn a PUT into a GET on 303 only", function()
      local echo = assert(assert(fetch(url("/r303"), { method = "PUT", body = "x", redirect = "follow" })):json())
      assert.are.equal("GET", echo.method)
      echo = assert(assert(fetch(url("/r302"), { method = "PUT", body = "x", redirect = "follow" })):json())
      assert.are.equal("PUT", echo.method)
    end)

    it("drop authorization across origins only", function()
      local auth = { Authorization = "Bearer secret" }
      local same = assert(assert(fetch(url("/r307"), { headers = auth, redirect = "follow" })):json())
      assert.are.equal("Bearer secret", same.headers.authorization)
      local cross = assert(fetch(url("/cross"), { headers = auth, redirect = "follow" }))
      assert.are.equal("http://localhost:" .. plain .. "/echo", cross.url)
      assert.is_nil(assert(cross:json()).headers.authorization)
    end)
  end)

  describe("over TLS", function()
    it("verifies the server against a given CA", function()
      local res = assert(fetch(tls_url("/hello"), { tls = { ca = ca } }))
      assert.are.equal("hello", res.body)
    end)

    it("keeps TLS connections alive", function()
      local before, after = in_handler(function()
        local opts = { tls = { ca = ca } }
        local b = tonumber(assert(clank.fetch(tls_url("/connections"), opts)).body)
        for _ = 1, 20 do assert(clank.fetch(tls_url("/hello"), opts)) end
        return b, tonumber(assert(clank.fetch(tls_url("/connections"), opts)).body)
      end)
      assert.are.equal(before, after)
    end)

    it("refuses a certificate for another host name", function()
      local res, err = fetch(tls_url("/hello", "127.0.0.1"), { tls = { ca = ca } })
      assert.is_nil(res)
      assert.are.equal("tls", err.kind)
      assert.truthy(err.message:find("mismatch"), err.message)
    end)

    it("refuses a certificate the system store does not trust", function()
      local res, err = fetch(tls_url("/hello"))
      assert.is_nil(res)
      assert.are.equal("tls", err.kind)
      assert.truthy(err.message:find("certificate"), err.message)
    end)

    it("takes any certificate with verify = false", function()
      assert.are.equal("hello", assert(fetch(tls_url("/hello", "127.0.0.1"), { tls = { verify = false } })).body)
    end)

    it("streams over TLS", function()
      local res = in_handler(function()
        local r = assert(clank.fetch(tls_url("/sse"), { tls = { ca = ca }, stream = true }))
        local out = {}
        for line in r:lines() do out[#out + 1] = line end
        return out
      end)
      assert.are.same({ "data: 1", "", "data: 2", "", "data: 3", "" }, res)
    end)
  end)

  describe("fails with err.kind", function()
    it("timeout when the server never answers", function()
      local t0 = socket.gettime()
      local res, err = fetch(url("/hang"), { timeout = 200 })
      assert.is_nil(res)
      assert.are.equal("timeout", err.kind)
      assert.is_string(err.message)
      local elapsed = socket.gettime() - t0
      assert.is_true(elapsed >= 0.18 and elapsed < 2, "took " .. elapsed)
    end)

    it("timeout between chunks of a stream", function()
      local chunk, res, err = in_handler(function()
        local r = assert(clank.fetch(url("/slow-body"), { stream = true, timeout = 200 }))
        return r:read(), r:read()
      end)
      assert.are.equal(("x"):rep(10), chunk)
      assert.is_nil(res)
      assert.are.equal("timeout", err.kind)
    end)

    it("aborted when the signal aborts mid-body", function()
      local chunk, res, err, elapsed = in_handler(function()
        local t0 = socket.gettime()
        local r = assert(clank.fetch(url("/slow-body"), { stream = true, signal = clank.timeout(200) }))
        local first = r:read()
        local rest, e = r:read()
        return first, rest, e, socket.gettime() - t0
      end)
      assert.are.equal(("x"):rep(10), chunk)
      assert.is_nil(res)
      assert.are.equal("aborted", err.kind)
      assert.is_true(elapsed < 2, "took " .. elapsed)
    end)

    it("aborted at once for a signal aborted already", function()
      local res, err = in_handler(function()
        local signal = clank.timeout(1)
        clank.sleep(20)
        return clank.fetch(url("/hello"), { signal = signal })
      end)
      assert.is_nil(res)
      assert.are.equal("aborted", err.kind)
    end)

    it("too_large for a body over maxBytes, by its length or as it comes", function()
      for _, path in ipairs({ "/big", "/big-chunked" }) do
        local t0 = socket.gettime()
        local res, err = fetch(url(path), { maxBytes = 100000 })
        assert.is_nil(res, path)
        assert.are.equal("too_large", err.kind, path)
        assert.is_true(socket.gettime() - t0 < 2)
      end
      local res = assert(fetch(url("/big"), { maxBytes = 4 * 1024 * 1024 }))
      assert.are.equal(4 * 1024 * 1024, #res.body)
    end)

    it("too_large when a stream's bytes add up past maxBytes", function()
      local n, err = in_handler(function()
        local r = assert(clank.fetch(url("/big-chunked"), { stream = true, maxBytes = 300000 }))
        local total = 0
        while true do
          local chunk, e = r:read()
          if not chunk then return total, e end
          total = total + #chunk
        end
      end)
      assert.is_true(n <= 300000, "read " .. n)
      assert.are.equal("too_large", err.kind)
    end)

    it("connect when nothing listens", function()
      local sock = socket.bind("127.0.0.1", 0)
      local _, port = sock:getsockname()
      sock:close()
      local res, err = fetch("http://127.0.0.1:" .. port .. "/")
      assert.is_nil(res)
      assert.are.equal("connect", err.kind)
    end)

    it("protocol when the server closes mid-response or sends garbage", function()
      for _, path in ipairs({ "/cut", "/garbage" }) do
        local res, err = fetch(url(path))
        assert.is_nil(res, path)
        assert.are.equal("protocol", err.kind, path)
      end
    end)

    it("dns for an unknown host", function()
      local res, err = fetch("http://nothing.invalid/")
      assert.is_nil(res)
      assert.are.equal("dns", err.kind)
      assert.truthy(err.message:find("nothing.invalid", 1, true), err.message)
    end)
  end)

  it("raises the SPEC message outside a runtime coroutine", function()
    local ok, err = pcall(clank.fetch, url("/hello"))
    assert.is_false(ok)
    assert.truthy(tostring(err):find(NOT_IN_COROUTINE, 1, true), tostring(err))
  end)

  it("raises on a bad URL or header", function()
    assert.has_error(function() fetch("ftp://x/") end)
    assert.has_error(function() fetch(url("/"), { headers = { ["bad name"] = "x" } }) end)
    assert.has_error(function() fetch(url("/"), { headers = { x = "a\r\nb: c" } }) end)
  end)
end)

describe("clank.fetch in clank-run", function()
  local run = server.for_describe(server.fixture("fetch"))

  it("relays another server's answer from a route", function()
    local res = assert(http.get(run.port, "/relay?port=" .. plain .. "&path=/hello"))
    assert.are.equal("200 hello", res.body)
  end)

  it("fetches clank-run itself", function()
    local res = assert(http.get(run.port, "/relay?port=" .. run.port .. "&path=/ping"))
    assert.are.equal("200 pong", res.body)
  end)

  it("aborts an action's fetch with ctx.signal when its client goes away", function()
    local conn = assert(http.connect(run.port))
    assert(conn:send(http.build("POST", "/actions/relay", { ["Content-Type"] = "application/json" },
      '{"port":' .. plain .. ',"path":"/hang"}')))
    local state
    for _ = 1, 100 do
      state = assert(http.get(run.port, "/last")).body
      if state == "running" then break end
      http.sleep(0.01)
    end
    assert.are.equal("running", state)
    conn:reset() -- gone: a reset, not a half-close
    local deadline = socket.gettime() + 3
    repeat
      http.sleep(0.02)
      state = assert(http.get(run.port, "/last")).body
    until state ~= "running" or socket.gettime() > deadline
    assert.are.equal("aborted: aborted: disconnected", state)
  end)

  it("completes 200 fetches from 200 coroutines while serving other requests", function()
    local conn = assert(http.connect(run.port))
    assert(conn:send(http.build("GET", "/fanout?n=200&port=" .. plain)))
    for _ = 1, 5 do
      assert.are.equal("pong", assert(http.get(run.port, "/ping")).body)
    end
    local res = assert(conn:read_response())
    conn:close()
    assert.are.equal("200 done, 0 failed ", res.body)
  end)
end)
