-- Findings of a security review of the HTTP surface, each pinned down over the wire, with the
-- expected answers taken from SPEC and the RFCs. Every address used is a loopback one.
local server = require "helpers.server"
local http = require "helpers.http"
local ws = require "helpers.websocket"
local json = require "clank.json"

local app = server.fixture("hardening")

local HINT = "Host not allowed. Add its origin to allowedOrigins, start with --public-origin ORIGIN "
  .. "behind a TLS proxy, or with --allow-any-host behind a proxy that checks it."

local function get(port, path, host, headers)
  local h = { Host = host }
  for k, v in pairs(headers or {}) do h[k] = v end
  return assert(http.request(port, "GET", path, h))
end

local function post(port, path, body, headers)
  local h = { ["Content-Type"] = "application/json" }
  for k, v in pairs(headers or {}) do h[k] = v end
  return assert(http.request(port, "POST", path, h, body))
end

local function assert_refused_json(res)
  assert.are.equal(403, res.status, res.body)
  assert.are.same({ ok = false, error = { code = "ORIGIN_MISMATCH",
    message = "Cross-origin agent request rejected." } }, json.decode(res.body))
end

-- The Host a request names is answered 403 everywhere, in each path family's own envelope.
local function assert_host_refused(port, host)
  local res = get(port, "/hello", host)
  assert.are.equal(403, res.status, host)
  assert.are.equal(HINT, res.body)
  assert_refused_json(post(port, "/actions/echo", '{"text":"x"}', { Host = host }))
  assert_refused_json(get(port, "/manifest", host))
  assert_refused_json(get(port, "/__clank/sessions/abc/surface", host))
  res = post(port, "/__clank/mcp", '{"jsonrpc":"2.0","id":1,"method":"ping"}', { Host = host })
  assert.are.equal(403, res.status)
  assert.are.same({ jsonrpc = "2.0", id = json.null,
    error = { code = -32600, message = "Cross-origin agent request rejected." } }, json.decode(res.body))
  assert.are.equal(403, get(port, "/assets/ten.txt", host).status)
  assert.are.equal(403, get(port, "/", host).status)
end

describe("the Host rule on a listener that is not a loopback one (SPEC §13)", function()
  after_each(server.kill_all)

  it("refuses a foreign Host on --host 0.0.0.0, with a hint of where to allow it", function()
    local s = server.start(app, { args = { "--host", "0.0.0.0" } })
    for _, host in ipairs({ "evil.example", "evil.example:" .. s.port, "192.0.2.7:" .. s.port,
      "allowed.test:9000", "allowed.test", "[::2]:" .. s.port, "192.0.2.2" }) do
      assert_host_refused(s.port, host)
    end
    -- loopback names with any port, the host:port allowedOrigins lists, and the address the
    -- listener has (a browser sent to the start-up line's http://0.0.0.0:PORT/ names it)
    for _, host in ipairs({ "localhost", "LocalHost:1", "127.0.0.1:" .. s.port, "127.9.9.9",
      "[::1]:" .. s.port, "allowed.test:8000", "ALLOWED.test:8000", "0.0.0.0:" .. s.port }) do
      assert.are.equal(200, get(s.port, "/hello", host).status, host)
    end
    assert.are.equal(0, s:stop())
  end)

  -- The agents' JSON answers keep SPEC §5's envelope: the hint for them is in the log (issue 34).
  it("logs a refused Host once, naming it and what lets it in", function()
    local s = server.start(app, { args = { "--host", "0.0.0.0" } })
    assert_refused_json(get(s.port, "/manifest", "agent.example:8443"))
    for _ = 1, 3 do assert.are.equal(403, get(s.port, "/hello", "agent.example:8443").status) end
    assert.are.equal(0, s:stop())
    local want = "Host agent.example:8443 not allowed (403): add its origin (http://agent.example:8443 or "
      .. "https://agent.example:8443) to the app's allowedOrigins, start with --public-origin ORIGIN "
      .. "behind a TLS proxy, or with --allow-any-host behind a proxy that checks it"
    local lines = {}
    for line in s:stderr():gmatch("[^\n]+") do
      if line:find(" warn ", 1, true) then lines[#lines + 1] = line:match("%] (.*)$") end
    end
    assert.are.same({ want }, lines) -- the same Host again within 10 s: counted, not logged
  end)

  it("lets a Host naming the listener's own address through, in any spelling of it", function()
    -- a concrete address that is no loopback name, yet reached over loopback
    local s = server.start(app, { args = { "--host", "::ffff:127.0.0.1" } })
    for _, host in ipairs({ "[::ffff:127.0.0.1]:" .. s.port, "[::FFFF:7f00:1]", "localhost" }) do
      assert.are.equal(200, get(s.port, "/hello", host).status, host)
    end
    assert_host_refused(s.port, "[::ffff:127.0.0.2]:" .. s.port)
    assert_host_refused(s.port, "evil.example")
    assert.are.equal(0, s:stop())
  end)

  it("answers any Host with --allow-any-host", function()
    local s = server.start(app, { args = { "--host", "0.0.0.0", "--allow-any-host" } })
    assert.are.equal("hi", get(s.port, "/hello", "app.example").body)
    assert.are.equal(200, post(s.port, "/actions/echo", '{"text":"x"}', { Host = "app.example" }).status)
    assert.are.equal(0, s:stop())
  end)

  it("refuses a foreign Host on every worker of --workers 2", function()
    local s = server.start(app, { args = { "--host", "0.0.0.0", "--workers", "2" } })
    for _ = 1, 8 do -- new connections, spread over the workers by the kernel
      assert.are.equal(403, get(s.port, "/hello", "evil.example").status)
      assert.are.equal(200, get(s.port, "/hello", "localhost:" .. s.port).status)
    end
    assert.are.equal(0, s:stop())
  end)

  it("lets the Host --inspector names load the inspector's script", function()
    local s = server.start(app, { args = { "--inspector", "inspect.test" } })
    local page = get(s.port, "/__clank/inspector", "inspect.test")
    assert.are.equal(200, page.status)
    local script = assert(page.body:match('<script src="(/__clank/client%.[^"]+%.js)"'))
    assert.are.equal(200, get(s.port, script, "inspect.test:" .. s.port).status)
    assert.are.equal(403, get(s.port, script, "other.test").status)
    assert.are.equal(0, s:stop())
  end)
end)

describe("an absolute-form target (RFC 9112 §3.2.2)", function()
  local s = server.for_describe(app)

  local function raw(method, target, headers, body)
    local res = assert(http.raw(s.port, http.build(method, target, headers, body)))
    return res
  end

  it("is the request's Host for the origin checks too, whatever the Host header says", function()
    local target = "http://localhost:" .. s.port .. "/actions/echo"
    local function with(t)
      local h = { ["Content-Type"] = "application/json" }
      for k, v in pairs(t) do h[k] = v end
      return h
    end
    assert_refused_json(raw("POST", target, with { Host = "evil.example", Origin = "http://evil.example" },
      '{"text":"x"}'))
    local res = raw("POST", target, with { Host = "evil.example", Origin = "http://localhost:" .. s.port },
      '{"text":"x"}')
    assert.are.equal(200, res.status, res.body)
    assert.are.equal('{"ok":true,"output":{"text":"x"}}', res.body)
    res = raw("POST", "http://localhost:" .. s.port .. "/note",
      { Host = "evil.example", Origin = "http://evil.example" }, "x")
    assert.are.equal(403, res.status)
    assert.are.equal("Cross-site request refused.", res.body)
  end)

  it("gives the handler the authority as request.headers.host", function()
    local res = raw("GET", "http://LOCALHOST:" .. s.port .. "/host", { Host = "evil.example" })
    assert.are.equal(200, res.status)
    assert.are.equal("LOCALHOST:" .. s.port, res.body)
  end)

  it("answers an authority that is not a valid Host with 400", function()
    local res = raw("GET", "http://user@localhost/hello", { Host = "localhost" })
    assert.are.equal(400, res.status)
  end)
end)

-- base64url as the server writes it (RFC 4648 §5, no padding).
local ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

describe("a view-session token (SPEC §11)", function()
  local s = server.for_describe(app)

  -- A token whose last character carries unused low bits (its length is not a multiple of 4).
  local function token_with_spare_bits()
    for n = 0, 2 do
      local res = get(s.port, "/views/page?pad=" .. string.rep("x", n), "127.0.0.1")
      assert.are.equal(200, res.status)
      local id = assert(res.body:match('data%-clank%-session="([^"]+)"'))
      if #id % 4 ~= 0 then return id end
    end
    error("no token of another length")
  end

  -- The same bytes spelled otherwise: the last character with a spare bit set.
  local function respelled(id)
    local last = ALPHABET:find(id:sub(-1), 1, true) - 1
    assert.are.equal(0, last % (#id % 4 == 2 and 16 or 4)) -- the server leaves them zero
    return id:sub(1, -2) .. ALPHABET:sub(last + 2, last + 2)
  end

  it("is unknown on the HTTP surface when spelled otherwise than issued", function()
    local id = token_with_spare_bits()
    assert.are.equal(200, get(s.port, "/__clank/sessions/" .. id .. "/surface", "127.0.0.1").status)
    for _, other in ipairs({ respelled(id), id .. "=", id .. "==", (id:gsub("-", "+"):gsub("_", "%%2F")) }) do
      if other ~= id then
        local res = get(s.port, "/__clank/sessions/" .. other .. "/surface", "127.0.0.1")
        assert.are.equal(404, res.status, other)
        assert.are.same({ ok = false, error = { code = "NOT_FOUND", message = "Session not found." } },
          json.decode(res.body))
      end
    end
  end)

  it("closes the live channel with 4404 when spelled otherwise than issued", function()
    local id = token_with_spare_bits()
    local origin = { Host = "127.0.0.1:" .. s.port, Origin = "http://127.0.0.1:" .. s.port }
    local first = assert(ws.connect(s.port, "/__clank/sessions/" .. id .. "/live", origin))
    assert.are.equal("html", assert(first:next_json()).t)
    local second = assert(ws.connect(s.port, "/__clank/sessions/" .. respelled(id) .. "/live", origin))
    assert.are.equal(4404, second:close_code(5))
    second:close()
    first:close()
  end)
end)

describe("a byte range on a static file (RFC 9110 §14.1.2)", function()
  local s = server.for_describe(app)

  local function ranged(spec)
    return get(s.port, "/assets/ten.txt", "127.0.0.1", { Range = spec })
  end

  it("clamps a last-pos past the file's end, however many digits it has", function()
    for _, spec in ipairs({ "bytes=0-18446744073709551615", "bytes=0-18446744073709551616",
      "bytes=3-99999999999999999999999999", "bytes=0-10" }) do
      local res = ranged(spec)
      local from = tonumber(spec:match("=(%d+)"))
      assert.are.equal(206, res.status, spec)
      assert.are.equal("bytes " .. from .. "-9/10", res.headers["content-range"], spec)
      assert.are.equal(("0123456789"):sub(from + 1), res.body, spec)
    end
  end)

  it("answers a first-pos past the file's end with 416, however many digits it has", function()
    for _, spec in ipairs({ "bytes=10-", "bytes=18446744073709551615-", "bytes=18446744073709551616-",
      "bytes=99999999999999999999999999-99999999999999999999999999" }) do
      local res = ranged(spec)
      assert.are.equal(416, res.status, spec)
      assert.are.equal("bytes */10", res.headers["content-range"], spec)
    end
  end)

  it("sends the whole file as 206 for a suffix longer than it, however many digits it has", function()
    for _, spec in ipairs({ "bytes=-11", "bytes=-18446744073709551615", "bytes=-99999999999999999999999999" }) do
      local res = ranged(spec)
      assert.are.equal(206, res.status, spec)
      assert.are.equal("bytes 0-9/10", res.headers["content-range"], spec)
      assert.are.equal("0123456789", res.body, spec)
    end
  end)
end)

describe("a WebSocket upgrade with a body", function()
  local s = server.for_describe(app)

  it("is refused with 400, never upgraded", function()
    local res = get(s.port, "/views/page", "127.0.0.1")
    local id = assert(res.body:match('data%-clank%-session="([^"]+)"'))
    local upgrade = { { "Host", "127.0.0.1:" .. s.port }, { "Upgrade", "websocket" },
      { "Connection", "Upgrade" }, { "Sec-WebSocket-Version", "13" },
      { "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==" } }
    local function with(extra)
      local list = {}
      for _, h in ipairs(upgrade) do list[#list + 1] = h end
      for _, h in ipairs(extra) do list[#list + 1] = h end
      return list
    end
    for _, path in ipairs({ "/__clank/sessions/" .. id .. "/live", "/__clank/sessions/i." .. id .. "/live" }) do
      for _, case in ipairs({
        { { { "Content-Length", "5" } }, "hello" },
        { { { "Transfer-Encoding", "chunked" } }, "5\r\nhello\r\n0\r\n\r\n" },
      }) do
        local answer, conn = http.raw(s.port, http.build("GET", path, with(case[1]), case[2]))
        assert.are.equal(400, assert(answer).status, path)
        assert.are.same({ ok = false, error = { code = "BAD_REQUEST",
          message = "A WebSocket handshake has no body." } }, json.decode(answer.body))
        conn:close()
      end
      -- and one without a body is taken (the inspector's with its own token only)
      if not path:find("/i.", 1, true) then
        local ok, conn = http.raw(s.port, http.build("GET", path, with({ { "Content-Length", "0" } })))
        assert.are.equal(101, assert(ok).status)
        conn:close()
      end
    end
  end)
end)
