-- clank-run --public-origin ORIGIN (SPEC §13, §15, §16): behind a TLS proxy the public origin
-- is an allowed Host, the server's own origin for every Origin check, request.scheme, and makes
-- cookies secure by default; the inspector stays loopback-only. Every request goes to
-- 127.0.0.1: the Host and Origin headers are what a proxy and a browser behind it would send.
-- Expected answers are written from the SPEC.
local server = require "helpers.server"
local http = require "helpers.http"
local ws = require "helpers.websocket"
local json = require "clank.json"
local socket = require "socket"

local app = server.fixture("public_origin")

local PUBLIC = "https://app.example"
local HOST = "app.example"
local REFUSED = '{"error":{"code":"ORIGIN_MISMATCH","message":"Cross-origin agent request rejected."},'
  .. '"ok":false}'
local RPC_REFUSED = '{"error":{"code":-32600,"message":"Cross-origin agent request rejected."},'
  .. '"id":null,"jsonrpc":"2.0"}'
local HINT = "Host not allowed. Add its origin to allowedOrigins, start with --public-origin ORIGIN "
  .. "behind a TLS proxy, or with --allow-any-host behind a proxy that checks it."
local USAGE = "clank-run: --public-origin needs an origin like https://app.example, got "

local function request(port, method, path, headers, body)
  local h = {}
  for k, v in pairs(headers or {}) do h[k] = v end
  if body then h["Content-Type"] = "application/json" end
  return assert(http.request(port, method, path, h, body))
end

local function get(port, path, host, headers)
  local h = { Host = host }
  for k, v in pairs(headers or {}) do h[k] = v end
  return request(port, "GET", path, h)
end

local function echo(port, host, origin)
  return request(port, "POST", "/actions/echo", { Host = host, Origin = origin }, '{"text":"x"}')
end

-- The set-cookie lines of a response, in the order sent.
local function set_cookies(res)
  local lines = {}
  for _, f in ipairs(res.fields) do
    if f[1] == "set-cookie" then lines[#lines + 1] = f[2] end
  end
  return lines
end

-- The page's view-session token.
local function page_token(port, host)
  local res = get(port, "/views/page", host)
  assert.are.equal(200, res.status, res.body)
  return assert(res.body:match('data%-clank%-session="([^"]+)"'))
end

local function live(port, host, origin)
  return ws.connect(port, "/__clank/sessions/" .. page_token(port, host) .. "/live",
    { Host = host, Origin = origin })
end

describe("clank-run --public-origin, given a value that is not an origin", function()
  -- value → why, as the usage error says it
  local cases = {
    { "app.example", "it must start with http:// or https://, in lower case" },
    { "ftp://app.example", "it must start with http:// or https://, in lower case" },
    { "HTTPS://app.example", "it must start with http:// or https://, in lower case" },
    { "//app.example", "it must start with http:// or https://, in lower case" },
    { "https://App.Example", "the host must be in lower case" },
    { "https://[FE80::1]", "the host must be in lower case" },
    { "https://app.example/", "an origin has no trailing slash" },
    { "https://app.example/app", "an origin has no path, query or fragment" },
    { "https://app.example?x=1", "an origin has no path, query or fragment" },
    { "https://app.example#top", "an origin has no path, query or fragment" },
    { "https://user@app.example", "an origin has no user information" },
    { "https://user:pw@app.example", "an origin has no user information" },
    { "https://", "it has no host" },
    { "https://:8443", "it has no host" },
    { "https://app..example", "the host has an empty label" },
    { "https://app.example.", "the host has an empty label" },
    { "https://app_example", "the host may hold only letters, digits, - and ." },
    { "https://[::1", "not an IPv6 address between [ and ]" },
    { "https://[app.example]", "not an IPv6 address between [ and ]" },
    { "https://[::1]x", "only a port may follow the IPv6 address" },
    { "https://app.example:", "the port must be a number from 1 to 65535, without leading zeros" },
    { "https://app.example:0", "the port must be a number from 1 to 65535, without leading zeros" },
    { "https://app.example:08443", "the port must be a number from 1 to 65535, without leading zeros" },
    { "https://app.example:65536", "the port must be a number from 1 to 65535, without leading zeros" },
    { "https://app.example:+443", "the port must be a number from 1 to 65535, without leading zeros" },
    { "https://app.example:443", "leave the scheme's default port out, as browsers do" },
    { "http://app.example:80", "leave the scheme's default port out, as browsers do" },
  }

  for _, case in ipairs(cases) do
    it("exits 2 naming the option for " .. case[1], function()
      local code, stdout, stderr = server.run({ "--public-origin", case[1], app })
      assert.are.equal(2, code)
      assert.are.equal("", stdout)
      local first = stderr:match("^[^\n]*")
      assert.are.equal(USAGE .. case[1] .. " (" .. case[2] .. ")", first)
    end)
  end

  it("exits 2 when the value is missing or empty", function()
    for _, args in ipairs({ { app, "--public-origin" }, { "--public-origin", "", app } }) do
      local code, stdout, stderr = server.run(args)
      assert.are.equal(2, code)
      assert.are.equal("", stdout)
      assert.are.equal(USAGE .. "nothing (it is missing)", stderr:match("^[^\n]*"))
    end
  end)
end)

describe("clank-run --public-origin, given an origin", function()
  after_each(server.kill_all)

  it("serves, with the listener's own address in the start-up line", function()
    for _, origin in ipairs({ "https://app.example:8443", "https://[::1]:8443", "http://192.0.2.1" }) do
      local s = server.start(app, { args = { "--public-origin", origin } })
      assert.are.equal("clank-run: serving public_origin at http://127.0.0.1:" .. s.port .. "/",
        s.startup_line)
      assert.are.equal(0, s:stop())
    end
  end)
end)

describe("clank-run --public-origin https://app.example", function()
  local s = server.for_describe(app, { args = { "--public-origin", PUBLIC } })

  it("answers the public origin's Host and refuses a foreign one", function()
    for _, host in ipairs({ HOST, "APP.example", "localhost:" .. s.port, "127.0.0.1" }) do
      local res = get(s.port, "/scheme", host)
      assert.are.equal(200, res.status, host)
      assert.are.equal("https", res.body)
    end
    for _, host in ipairs({ "evil.example", "app.example:8443", "app.example.evil" }) do
      local res = get(s.port, "/scheme", host)
      assert.are.equal(403, res.status, host)
      assert.are.equal(HINT, res.body)
      res = echo(s.port, host, PUBLIC)
      assert.are.equal(403, res.status, host)
      assert.are.equal(REFUSED, res.body)
    end
  end)

  it("gives routes and actions https as request.scheme", function()
    assert.are.equal("https", get(s.port, "/scheme", HOST).body)
    local res = echo(s.port, HOST, nil)
    assert.are.equal(200, res.status, res.body)
    assert.are.equal('{"ok":true,"output":{"scheme":"https","text":"x"}}', res.body)
  end)

  it("takes an action call from the public origin as its own, and refuses plain http", function()
    local res = echo(s.port, HOST, PUBLIC)
    assert.are.equal(200, res.status, res.body)
    assert.are.equal('{"ok":true,"output":{"scheme":"https","text":"x"}}', res.body)
    assert.is_nil(res.headers["access-control-allow-origin"]) -- its own origin: no CORS
    -- the public origin is the server's whatever Host the request names
    assert.are.equal(200, echo(s.port, "localhost:" .. s.port, PUBLIC).status)
    for _, origin in ipairs({ "http://app.example", "https://app.example:8443", "https://evil.example",
      "https://APP.example", "http://localhost:" .. s.port }) do
      res = echo(s.port, HOST, origin)
      assert.are.equal(403, res.status, origin)
      assert.are.equal(REFUSED, res.body)
      assert.are.equal("no-store", res.headers["cache-control"])
    end
  end)

  it("still takes http:// and a loopback Host as its own origin (a tunnel, the inspector)", function()
    local loopback = "localhost:" .. s.port
    assert.are.equal(200, echo(s.port, loopback, "http://" .. loopback).status)
    assert.are.equal(403, echo(s.port, loopback, "https://" .. loopback).status)
    assert.are.equal(403, echo(s.port, loopback, "http://127.0.0.1:" .. s.port).status)
  end)

  it("lets a POST route through the CSRF rule from the public origin only", function()
    local res = request(s.port, "POST", "/note", { Host = HOST, Origin = PUBLIC }, "x")
    assert.are.equal(200, res.status, res.body)
    assert.are.equal("noted", res.body)
    res = request(s.port, "POST", "/note",
      { Host = HOST, Origin = PUBLIC, ["Sec-Fetch-Site"] = "same-origin" }, "x")
    assert.are.equal(200, res.status, res.body)
    for _, origin in ipairs({ "http://app.example", "https://evil.example" }) do
      res = request(s.port, "POST", "/note", { Host = HOST, Origin = origin }, "x")
      assert.are.equal(403, res.status, origin)
      assert.are.equal("Cross-site request refused.", res.body)
    end
  end)

  it("answers MCP from the public origin and refuses plain http", function()
    local init = json.encode({ jsonrpc = "2.0", id = 1, method = "initialize",
      params = { protocolVersion = "2025-11-25", capabilities = {},
                 clientInfo = { name = "spec", version = "0" } } })
    local res = request(s.port, "POST", "/__clank/mcp", { Host = HOST, Origin = PUBLIC }, init)
    assert.are.equal(200, res.status, res.body)
    assert.truthy(res.headers["mcp-session-id"])
    assert.is_nil(res.headers["access-control-allow-origin"])
    res = request(s.port, "POST", "/__clank/mcp", { Host = HOST, Origin = "http://app.example" }, init)
    assert.are.equal(403, res.status)
    assert.are.equal(RPC_REFUSED, res.body)
  end)

  it("upgrades the live channel and makes view sessions for the public origin only", function()
    local client = assert(live(s.port, HOST, PUBLIC))
    assert.are.equal("html", assert(client:next_json()).t)
    client:close()
    local refused, err, res = live(s.port, HOST, "http://app.example")
    assert.is_nil(refused)
    assert.are.equal("handshake answered 403", err)
    assert.are.equal(REFUSED, res.body)
    res = request(s.port, "POST", "/__clank/views/page/sessions", { Host = HOST, Origin = PUBLIC }, "{}")
    assert.are.equal(201, res.status, res.body)
    res = request(s.port, "POST", "/__clank/views/page/sessions",
      { Host = HOST, Origin = "http://app.example" }, "{}")
    assert.are.equal(403, res.status)
    assert.are.equal(REFUSED, res.body)
  end)

  it("makes a route's cookies secure unless the route says secure = false", function()
    local res = get(s.port, "/cookies", HOST)
    assert.are.equal(200, res.status, res.body)
    assert.are.same({
      "insecure=2; Path=/; HttpOnly; SameSite=Lax",
      "plain=1; Path=/; HttpOnly; Secure; SameSite=Lax",
      "secure=3; Path=/; HttpOnly; Secure; SameSite=Lax",
    }, set_cookies(res))
  end)

  it("keeps the inspector to loopback Hosts, even from a loopback peer", function()
    for _, host in ipairs({ HOST, "app.example:" .. s.port }) do
      local res = get(s.port, "/__clank/inspector", host)
      assert.are.equal(404, res.status, host)
      assert.are.equal("Not found.", res.body)
      assert.are.equal(404, get(s.port, "/__clank/sessions/i.abc/live", host).status)
    end
    -- over loopback it opens, and its page's live channel (a plain http origin) connects
    local loopback = "127.0.0.1:" .. s.port
    local res = get(s.port, "/__clank/inspector", loopback)
    assert.are.equal(200, res.status)
    local id = assert(res.body:match('data%-clank%-session="(i%.[^"]+)"'))
    local client = assert(ws.connect(s.port, "/__clank/sessions/" .. id .. "/live",
      { Host = loopback, Origin = "http://" .. loopback }))
    assert.are.equal("html", assert(client:next_json()).t)
    client:close()
  end)
end)

describe("clank-run --public-origin http://app.example:8080", function()
  local s = server.for_describe(app, { args = { "--public-origin", "http://app.example:8080" } })

  it("takes its scheme, so request.scheme is http and cookies are not secure", function()
    local host = "app.example:8080"
    assert.are.equal("http", get(s.port, "/scheme", host).body)
    assert.are.equal(403, get(s.port, "/scheme", HOST).status) -- another port, another origin
    local res = echo(s.port, host, "http://app.example:8080")
    assert.are.equal(200, res.status, res.body)
    assert.are.equal('{"ok":true,"output":{"scheme":"http","text":"x"}}', res.body)
    assert.are.equal(403, echo(s.port, host, "https://app.example:8080").status)
    assert.are.same({
      "insecure=2; Path=/; HttpOnly; SameSite=Lax",
      "plain=1; Path=/; HttpOnly; SameSite=Lax",
      "secure=3; Path=/; HttpOnly; Secure; SameSite=Lax",
    }, set_cookies(get(s.port, "/cookies", host)))
  end)
end)

describe("clank-run --public-origin on every worker and every generation", function()
  after_each(server.kill_all)

  local function check(port)
    assert.are.equal("https", get(port, "/scheme", HOST).body)
    assert.are.equal(200, echo(port, HOST, PUBLIC).status)
    assert.are.equal(REFUSED, echo(port, HOST, "http://app.example").body)
    assert.are.equal("plain=1; Path=/; HttpOnly; Secure; SameSite=Lax",
      set_cookies(get(port, "/cookies", HOST))[2])
  end

  it("holds on each of --workers 2", function()
    local s = server.start(app, { args = { "--public-origin", PUBLIC, "--workers", "2" } })
    for _ = 1, 8 do check(s.port) end -- new connections, spread over the workers by the kernel
    assert.are.equal(0, s:stop())
  end)

  it("holds after a reload", function()
    local s = server.start(app, { args = { "--public-origin", PUBLIC, "--no-watch" } })
    check(s.port)
    s:signal("HUP")
    local deadline = socket.gettime() + 10
    repeat
      socket.sleep(0.05)
      local health = json.decode(get(s.port, "/__clank/health", "127.0.0.1").body)
    until health.generation == 2 or socket.gettime() > deadline
    assert.are.equal(2, json.decode(get(s.port, "/__clank/health", "127.0.0.1").body).generation)
    check(s.port)
    assert.are.equal(0, s:stop())
  end)
end)

describe("clank-run without --public-origin", function()
  local s = server.for_describe(app)

  it("gives http as request.scheme, its http://Host origin, and cookies secure only when asked", function()
    local host = "127.0.0.1:" .. s.port
    assert.are.equal("http", get(s.port, "/scheme", host).body)
    local res = echo(s.port, host, "http://" .. host)
    assert.are.equal(200, res.status, res.body)
    assert.are.equal('{"ok":true,"output":{"scheme":"http","text":"x"}}', res.body)
    assert.are.equal(403, get(s.port, "/scheme", HOST).status)
    assert.are.equal(REFUSED, echo(s.port, host, PUBLIC).body)
    assert.are.same({
      "insecure=2; Path=/; HttpOnly; SameSite=Lax",
      "plain=1; Path=/; HttpOnly; SameSite=Lax",
      "secure=3; Path=/; HttpOnly; Secure; SameSite=Lax",
    }, set_cookies(get(s.port, "/cookies", host)))
  end)
end)
