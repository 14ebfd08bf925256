-- The request and response shapes of app routes, dispatch and errors (SPEC §2, §13).
local server = require "helpers.server"
local http = require "helpers.http"

local BOOM_LINE = 7 -- the line of error("boom on purpose") in fixtures/apps/basic/app.lua
local LATE_BOOM_LINE = 94 -- error("late boom on purpose"), after a clank.sleep
local CONTEXT_BOOM_LINE = 11 -- error("context failed on purpose") in fixtures/apps/counting/app.lua

-- Waits until `text` shows up in the server's stderr past `from` (the log is
-- flushed once per loop iteration) and returns that part of stderr.
local function log_after(s, from, text)
  local log
  for _ = 1, 100 do
    log = s:stderr():sub(from + 1)
    if log:find(text, 1, true) then
      break
    end
    http.sleep(0.02)
  end
  return log
end

local function count_lines(log, text)
  local hits = 0
  for line in log:gmatch("[^\n]+") do
    if line:find(text, 1, true) then
      hits = hits + 1
    end
  end
  return hits
end

local function fixture_line(path, n)
  local f = assert(io.open(path))
  local i = 0
  for line in f:lines() do
    i = i + 1
    if i == n then
      f:close()
      return line
    end
  end
  f:close()
end

describe("clank-run routes", function()
  local s = server.for_describe(server.fixture("basic"))

  local function inspect(method, target, headers, body)
    local res = assert(http.request(s.port, method, target, headers, body))
    assert.are.equal(200, res.status)
    return http.parse_lines(res.body), res
  end

  describe("request shape", function()
    it("passes the method, the raw target as url, the path and scheme = http", function()
      local r = inspect("GET", "/inspect?a=1&b=two")
      assert.are.equal("GET", r.method)
      assert.are.equal("/inspect?a=1&b=two", r.url)
      assert.are.equal("/inspect", r.path)
      assert.are.equal("http", r.scheme)
      assert.are.equal("table", r.query_type)
      assert.are.equal("table", r.headers_type)
    end)

    it("keeps percent escapes in url and decodes them in query values", function()
      local r = inspect("GET", "/inspect?b=x%20y&c=%C3%A9t%C3%A9&d=%26%3D")
      assert.are.equal("/inspect?b=x%20y&c=%C3%A9t%C3%A9&d=%26%3D", r.url)
      assert.are.equal("x y", r["query.b"])
      assert.are.equal("\u{e9}t\u{e9}", r["query.c"])
      assert.are.equal("&=", r["query.d"])
    end)

    it("lets the last value win for a repeated query key", function()
      local r = inspect("GET", "/inspect?a=1&a=2&a=3")
      assert.are.equal("3", r["query.a"])
    end)

    it("gives an empty query table when there is no query string", function()
      local r = inspect("GET", "/inspect")
      assert.are.equal("table", r.query_type)
      assert.are.equal("/inspect", r.url)
      assert.are.equal("/inspect", r.path)
      for k in pairs(r) do
        assert.is_nil(k:match("^query%."), "unexpected query key " .. k)
      end
    end)

    it("gives the request and ctx to a handler that takes any number of arguments", function()
      local res = assert(http.get(s.port, "/varargs"))
      assert.are.equal(200, res.status)
      assert.are.equal("n=2 method=GET path=/varargs ctx=table", res.body)
    end)

    it("lower-cases header names and joins repeated headers with \", \"", function()
      local r = inspect("GET", "/inspect", {
        { "X-Mixed-Case", "Value Kept" },
        { "X-Multi", "one" },
        { "X-Multi", "two" },
        { "x-multi", "three" },
      })
      assert.are.equal("Value Kept", r["header.x-mixed-case"])
      assert.are.equal("one, two, three", r["header.x-multi"])
      assert.are.equal("127.0.0.1", r["header.host"])
      assert.is_nil(r["header.X-Mixed-Case"])
    end)

    it("trims whitespace around header values and keeps an empty value", function()
      local r = inspect("GET", "/inspect", { { "X-Padded", "\t padded value \t" }, { "X-Empty", "" } })
      assert.are.equal("padded value", r["header.x-padded"])
      assert.are.equal("", r["header.x-empty"])
    end)

    it("passes the request body of a POST", function()
      local r = inspect("POST", "/inspect", { { "Content-Type", "text/plain" } }, "some body")
      assert.are.equal("POST", r.method)
      assert.are.equal("some body", r.body)
      assert.are.equal("9", r["header.content-length"])
    end)

    it("passes a chunked request body reassembled", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        .. "5\r\nhello\r\n1;ext=1\r\n,\r\n6\r\n world\r\n0\r\n\r\n"))
      local res = assert(conn:read_response())
      conn:close()
      assert.are.equal(200, res.status)
      assert.are.equal("hello, world", res.body)
    end)

    it("routes PUT and DELETE by method", function()
      assert.are.equal("PUT", inspect("PUT", "/inspect", nil, "x").method)
      assert.are.equal("DELETE", inspect("DELETE", "/inspect").method)
    end)
  end)

  describe("response shape", function()
    it("sends the route's status and body with content-type text/plain; charset=utf-8 by default", function()
      local res = assert(http.get(s.port, "/hello"))
      assert.are.equal(200, res.status)
      assert.are.equal("HTTP/1.1", res.version)
      assert.are.equal("Hello, world!\n", res.body)
      assert.are.equal("text/plain; charset=utf-8", res.headers["content-type"])
      assert.are.equal("14", res.headers["content-length"])
    end)

    it("sends a Date header in IMF-fixdate form (RFC 9110 §6.6.1)", function()
      local res = assert(http.get(s.port, "/hello"))
      assert.truthy(res.headers["date"], "no date header")
      assert.truthy(res.headers["date"]:match("^%a%a%a, %d%d %a%a%a %d%d%d%d %d%d:%d%d:%d%d GMT$"),
        res.headers["date"])
    end)

    it("sends a custom status", function()
      local res = assert(http.get(s.port, "/teapot"))
      assert.are.equal(418, res.status)
      assert.are.equal("short and stout", res.body)
    end)

    -- RFC 9110: a name is a token (§5.6.2), a value a field-value (§5.5): visible characters,
    -- SP and HTAB inside, none at either end, no other control character.
    local function pct(str)
      return (str:gsub("[^%w]", function(c) return string.format("%%%02X", c:byte()) end))
    end
    for _, case in ipairs({
      { "x-ok", "plain value", 200 },
      { "x-tab", "a\tb", 200 },
      { "x!#$%&'*+-.^_`|~", "v", 200 },
      { "x-obs", "caf\xC3\xA9", 200 },
      { "x(y", "v", 500 },
      { "x y", "v", 500 },
      { "x:y", "v", 500 },
      { "", "v", 500 },
      { "x-nl", "a\nb", 500 },
      { "x-cr", "a\rb", 500 },
      { "x-nul", "a\0b", 500 },
      { "x-del", "a\127b", 500 },
      { "x-lead", " v", 500 },
      { "x-trail", "v\t", 500 },
      { "content-length", "5", 500 },
      { "Transfer-Encoding", "chunked", 500 },
      { "connection", "close", 500 },
    }) do
      local name, value, status = case[1], case[2], case[3]
      it(string.format("answers a route header %q: %q with %d", name, value, status), function()
        local res = assert(http.get(s.port, "/header?name=" .. pct(name) .. "&value=" .. pct(value)))
        assert.are.equal(status, res.status)
        if status == 200 then
          assert.are.equal(value, res.headers[name:lower()])
        end
      end)
    end

    it("sends the route's headers, a list value as repeated header lines", function()
      local res = assert(http.get(s.port, "/headers"))
      assert.are.equal(200, res.status)
      assert.are.equal("yes", res.headers["x-custom"])
      assert.are.equal(2, res.count["set-cookie"])
      local cookies = {}
      for _, f in ipairs(res.fields) do
        if f[1] == "set-cookie" then
          cookies[#cookies + 1] = f[2]
        end
      end
      assert.are.same({ "a=1; Path=/", "b=2; Path=/" }, cookies)
      assert.are.equal("with headers", res.body)
    end)

    it("keeps a content-type set by the route", function()
      local res = assert(http.get(s.port, "/typed"))
      assert.are.equal("text/html; charset=utf-8", res.headers["content-type"])
      assert.are.equal(1, res.count["content-type"])
      assert.are.equal("<p>hi</p>", res.body)
    end)

    it("sends a table body as canonical JSON with content-type application/json", function()
      local res = assert(http.get(s.port, "/table"))
      assert.are.equal(200, res.status)
      assert.truthy(res.headers["content-type"]:find("^application/json"),
        res.headers["content-type"])
      assert.are.equal('{"list":["a","b"],"n":1,"ok":true}', res.body)
    end)

    it("sends a 64 KiB body whole", function()
      local res = assert(http.get(s.port, "/big"))
      assert.are.equal(200, res.status)
      assert.are.equal(65536, #res.body)
      assert.is_true(res.body == string.rep("0123456789abcdef", 4096))
    end)

    it("answers a POST with an empty body", function()
      local res = assert(http.request(s.port, "POST", "/echo", nil, ""))
      assert.are.equal(200, res.status)
      assert.are.equal("", res.body)
      assert.are.equal("0", res.headers["content-length"])
    end)

    it("answers HEAD on an unknown path with 404 and no body", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("HEAD", "/nope") .. http.build("GET", "/say?v=next")))
      local res = assert(conn:read_response({ method = "HEAD" }))
      assert.are.equal(404, res.status)
      local nxt = assert(conn:read_response())
      assert.are.equal("next", nxt.body)
      conn:close()
    end)

    it("sends a 204 without a body", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("GET", "/empty") .. http.build("GET", "/hello")))
      local res = assert(conn:read_response())
      assert.are.equal(204, res.status)
      -- RFC 9110 §8.6: no content-length in a 204
      assert.is_nil(res.headers["content-length"])
      assert.is_nil(res.headers["transfer-encoding"])
      local nxt = assert(conn:read_response())
      assert.are.equal(200, nxt.status)
      assert.are.equal("Hello, world!\n", nxt.body)
      conn:close()
    end)

    it("answers HEAD on a GET route like GET, with the same content-length and no body", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("HEAD", "/hello")))
      local res = assert(conn:read_response({ method = "HEAD" }))
      assert.are.equal(200, res.status)
      assert.are.equal("14", res.headers["content-length"])
      assert.are.equal("text/plain; charset=utf-8", res.headers["content-type"])
      -- no body bytes follow: the next response on the connection parses cleanly
      assert(conn:send(http.build("GET", "/hello")))
      local nxt = assert(conn:read_response())
      assert.are.equal(200, nxt.status)
      assert.are.equal("Hello, world!\n", nxt.body)
      conn:close()
    end)

    it("answers HEAD on a 64 KiB route with content-length 65536 and no body", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("HEAD", "/big") .. http.build("GET", "/hello")))
      local res = assert(conn:read_response({ method = "HEAD" }))
      assert.are.equal(200, res.status)
      assert.are.equal("65536", res.headers["content-length"])
      local nxt = assert(conn:read_response())
      assert.are.equal("Hello, world!\n", nxt.body)
      conn:close()
    end)
  end)

  describe("dispatch", function()
    it("answers an unknown path with 404 text/plain `Not found.`", function()
      local res = assert(http.get(s.port, "/no/such/path"))
      assert.are.equal(404, res.status)
      assert.truthy(res.headers["content-type"]:find("^text/plain"), res.headers["content-type"])
      assert.are.equal("Not found.", res.body)
    end)

    it("answers a known path with an unrouted method with 405 and allow (SPEC §15)", function()
      local res = assert(http.request(s.port, "DELETE", "/hello"))
      assert.are.equal(405, res.status)
      assert.are.equal("GET, HEAD", res.headers["allow"])
      assert.are.equal("Method not allowed.", res.body)
    end)

    it("does not match a route on a path prefix or with a trailing slash", function()
      assert.are.equal(404, assert(http.get(s.port, "/hello/")).status)
      assert.are.equal(404, assert(http.get(s.port, "/hellothere")).status)
    end)

    it("matches a route whatever the query string", function()
      local res = assert(http.get(s.port, "/hello?x=1"))
      assert.are.equal(200, res.status)
      assert.are.equal("Hello, world!\n", res.body)
    end)

    -- The bridge answers its reserved paths (SPEC §2, §5): basic has no actions.
    for _, path in ipairs({ "/manifest", "/.well-known/clank" }) do
      it("answers GET " .. path .. " with 200 and the bridge's manifest", function()
        local res = assert(http.get(s.port, path))
        assert.are.equal(200, res.status)
        assert.are.equal('{"actions":[],"description":"Fixture app for the functional specs",'
          .. '"name":"basic","protocol":"clank-agent/1"}', res.body)
        assert.truthy(res.headers["content-type"]:lower():find("^application/json"),
          res.headers["content-type"])
        assert.are.equal("no-cache", res.headers["cache-control"])
      end)
    end

    it("answers GET /actions/x with the bridge's JSON 404", function()
      local res = assert(http.get(s.port, "/actions/x"))
      assert.are.equal(404, res.status)
      assert.are.equal('{"error":{"code":"NOT_FOUND","message":"Agent endpoint not found."},"ok":false}',
        res.body)
      assert.are.equal("no-store", res.headers["cache-control"])
    end)

    -- Until MCP and view sessions land (SPEC §6, §11), /__clank/ answers 404.
    it("answers the reserved path /__clank/x with 404 for now", function()
      local res = assert(http.get(s.port, "/__clank/x"))
      assert.are.equal(404, res.status)
    end)
  end)

  describe("errors", function()
    it("has the fixtures' errors on the expected lines", function()
      local basic, counting = server.fixture("basic"), server.fixture("counting")
      assert.truthy(fixture_line(basic, BOOM_LINE):find('error("boom on purpose")', 1, true))
      assert.truthy(fixture_line(basic, LATE_BOOM_LINE):find('error("late boom on purpose")', 1, true))
      assert.truthy(fixture_line(counting, CONTEXT_BOOM_LINE):find('error("context failed on purpose")', 1, true))
    end)

    it("answers a route that raises with 500, a generic body and a file:line log, and keeps serving", function()
      local before = #s:stderr()
      local res = assert(http.get(s.port, "/boom"))
      assert.are.equal(500, res.status)
      assert.is_nil(res.body:find("boom on purpose", 1, true), "error text leaked: " .. res.body)
      assert.is_nil(res.body:find("app.lua", 1, true), "file name leaked: " .. res.body)
      local log = log_after(s, before, "boom on purpose")
      assert.are.equal(1, count_lines(log, "app.lua:" .. BOOM_LINE .. ": boom on purpose"),
        "stderr after the request:\n" .. log)
      local nxt = assert(http.get(s.port, "/hello"))
      assert.are.equal(200, nxt.status)
      assert.are.equal("Hello, world!\n", nxt.body)
    end)

    it("answers a route that raises after waiting with 500 and a file:line log", function()
      local before = #s:stderr()
      local res = assert(http.get(s.port, "/boom-later"))
      assert.are.equal(500, res.status)
      assert.is_nil(res.body:find("late boom", 1, true), "error text leaked: " .. res.body)
      local log = log_after(s, before, "late boom on purpose")
      assert.are.equal(1, count_lines(log, "app.lua:" .. LATE_BOOM_LINE .. ": late boom on purpose"),
        "stderr after the request:\n" .. log)
      assert.are.equal(200, assert(http.get(s.port, "/hello")).status)
    end)

    it("keeps the connection usable after a 500", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("GET", "/boom") .. http.build("GET", "/hello")))
      local list = assert(conn:read_responses(2))
      assert.are.equal(500, list[1].status)
      assert.are.equal(200, list[2].status)
      conn:close()
    end)
  end)
end)

describe("clank-run context(request)", function()
  after_each(server.kill_all)

  it("runs once per routed request, never for a 404, and is the handler's second argument", function()
    local s = server.start(server.fixture("counting"))
    local first = assert(http.get(s.port, "/ctx"))
    assert.are.equal(200, first.status)
    assert.are.equal("calls=1 path=/ctx marker=from-context", first.body)
    assert.are.equal(404, assert(http.get(s.port, "/nope")).status)
    local second = assert(http.get(s.port, "/ctx?again=1"))
    assert.are.equal("calls=2 path=/ctx marker=from-context", second.body)
    assert.are.equal(0, s:stop())
  end)

  it("answers 500 with a file:line log when context raises, and keeps serving", function()
    local s = server.start(server.fixture("counting"))
    local res = assert(http.get(s.port, "/ctx-boom"))
    assert.are.equal(500, res.status)
    assert.is_nil(res.body:find("unreachable", 1, true))
    assert.is_nil(res.body:find("context failed", 1, true), "error text leaked: " .. res.body)
    local log = log_after(s, 0, "context failed on purpose")
    assert.are.equal(1, count_lines(log, "app.lua:" .. CONTEXT_BOOM_LINE .. ": context failed on purpose"),
      "stderr:\n" .. log)
    assert.are.equal(200, assert(http.get(s.port, "/ctx")).status)
    assert.are.equal(0, s:stop())
  end)
end)

-- Route patterns (SPEC §15): fixtures/apps/patterns answers each request with
-- the route's key and request.params as "key=value" lines.
describe("clank-run route patterns", function()
  local s = server.for_describe(server.fixture("patterns"))

  local function routed(target, method)
    local res = assert(http.request(s.port, method or "GET", target))
    assert.are.equal(200, res.status, target .. ": " .. tostring(res.body))
    return http.parse_lines(res.body)
  end

  local function count_params(r)
    local n = 0
    for k in pairs(r) do
      if k:find("^param%.") then
        n = n + 1
      end
    end
    return n
  end

  describe("request.params", function()
    it("captures a parameter segment", function()
      local r = routed("/tasks/42")
      assert.are.equal("GET /tasks/:id", r.route)
      assert.are.equal("42", r["param.id"])
      assert.are.equal(1, count_params(r))
    end)

    it("is an empty table on an exact route", function()
      local r = routed("/plain")
      assert.are.equal("GET /plain", r.route)
      assert.are.equal("table", r.params_type)
      assert.are.equal(0, count_params(r))
    end)

    it("captures several parameters and leaves the query out", function()
      local r = routed("/tasks/7/comments/c9?id=no&cid=no")
      assert.are.equal("GET /tasks/:id/comments/:cid", r.route)
      assert.are.equal("7", r["param.id"])
      assert.are.equal("c9", r["param.cid"])
    end)

    it("percent-decodes like decodeURIComponent (%20, %2F, UTF-8; + stays +)", function()
      assert.are.equal("a b", routed("/tasks/a%20b")["param.id"])
      assert.are.equal("a+b", routed("/tasks/a+b")["param.id"])
      assert.are.equal("\u{e9}t\u{e9}", routed("/tasks/%C3%A9t%C3%A9")["param.id"])
      local r = routed("/tasks/x%2Fy/comments/%3F%23")
      assert.are.equal("x/y", r["param.id"])
      assert.are.equal("?#", r["param.cid"])
    end)

    it("answers 400 where decodeURIComponent would throw (bad escape, not UTF-8)", function()
      for _, target in ipairs { "/tasks/%ZZ", "/tasks/a%2", "/tasks/%FF", "/tasks/%C3", "/tasks/%C0%AF",
        "/tasks/%ED%A0%80" } do
        local res = assert(http.get(s.port, target))
        assert.are.equal(400, res.status, target)
      end
    end)

    it("gives *rest the rest of the path without its leading slash, decoded", function()
      local r = routed("/files/a/b%20c/d.txt")
      assert.are.equal("GET /files/*rest", r.route)
      assert.are.equal("a/b c/d.txt", r["param.rest"])
    end)

    it("lets *rest be empty after the slash, and not match without it", function()
      local r = routed("/files/")
      assert.are.equal("GET /files/*rest", r.route)
      assert.are.equal("", r["param.rest"])
      assert.are.equal(404, assert(http.get(s.port, "/files")).status)
    end)

    it("does not match an empty parameter segment or extra segments", function()
      assert.are.equal(404, assert(http.get(s.port, "/tasks/")).status)
      assert.are.equal(404, assert(http.get(s.port, "/tasks/1/comments")).status)
      assert.are.equal(404, assert(http.get(s.port, "/tasks/1/comments/2/3")).status)
    end)
  end)

  describe("precedence", function()
    it("prefers a static segment to a parameter", function()
      local r = routed("/tasks/new")
      assert.are.equal("GET /tasks/new", r.route)
      assert.are.equal(0, count_params(r))
    end)

    it("prefers a parameter to a wildcard", function()
      local r = routed("/files/one")
      assert.are.equal("GET /files/:name", r.route)
      assert.are.equal("one", r["param.name"])
      assert.are.equal("GET /files/*rest", routed("/files/one/two").route)
    end)

    it("compares segment by segment: the first segment that differs decides", function()
      -- /mix/b/*rest has the static segment where /mix/:x/c has a parameter
      local r = routed("/mix/b/c")
      assert.are.equal("GET /mix/b/*rest", r.route)
      assert.are.equal("c", r["param.rest"])
      assert.are.equal("GET /mix/:x/c", routed("/mix/q/c").route)
      assert.are.equal("GET /:section/:item", routed("/mix/q").route)
    end)
  end)

  describe("methods", function()
    it("answers HEAD through the GET pattern, without a body", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("HEAD", "/tasks/42") .. http.build("GET", "/tasks/42")))
      local head = assert(conn:read_response({ method = "HEAD" }))
      local get = assert(conn:read_response())
      assert.are.equal(200, head.status)
      assert.are.equal("", head.body)
      assert.are.equal(tostring(#get.body), head.headers["content-length"])
      conn:close()
    end)

    it("runs the pattern of the request's method", function()
      assert.are.equal("POST /tasks/:id", routed("/tasks/5", "POST").route)
      assert.are.equal("DELETE /tasks/:id", routed("/tasks/5", "DELETE").route)
    end)

    it("answers 405 with allow: the methods, sorted, with HEAD beside GET", function()
      local res = assert(http.request(s.port, "PUT", "/tasks/5"))
      assert.are.equal(405, res.status)
      assert.are.equal("DELETE, GET, HEAD, POST", res.headers["allow"])
      assert.truthy(res.headers["content-type"]:find("^text/plain"), res.headers["content-type"])
      assert.are.equal("Method not allowed.", res.body)
    end)

    it("answers 405 for an exact route with another method", function()
      local res = assert(http.get(s.port, "/only-put"))
      assert.are.equal(405, res.status)
      assert.are.equal("PUT", res.headers["allow"])
      assert.are.equal("Method not allowed.", res.body)
    end)

    it("lists only the methods whose routes match the path", function()
      local res = assert(http.request(s.port, "DELETE", "/opt/a/z"))
      assert.are.equal(405, res.status)
      assert.are.equal("PATCH", res.headers["allow"])
      res = assert(http.request(s.port, "DELETE", "/opt/a"))
      assert.are.equal(405, res.status)
      assert.are.equal("GET, HEAD, OPTIONS", res.headers["allow"])
    end)

    it("answers 404, not 405, where no route has the path", function()
      local res = assert(http.request(s.port, "POST", "/no/such/path"))
      assert.are.equal(404, res.status)
      assert.are.equal("Not found.", res.body)
    end)
  end)

  describe("reserved paths", function()
    it("win over a pattern that would match them", function()
      -- GET /:section/:item would match each of these
      local res = assert(http.get(s.port, "/actions/x"))
      assert.are.equal(404, res.status)
      assert.truthy(res.headers["content-type"]:find("^application/json"), res.headers["content-type"])
      res = assert(http.get(s.port, "/views/x"))
      assert.are.equal(404, res.status)
      assert.are.equal("Not found.", res.body)
      assert.are.equal(404, assert(http.get(s.port, "/__clank/x")).status)
      assert.are.equal(404, assert(http.request(s.port, "POST", "/views/x")).status)
      assert.are.equal(200, assert(http.get(s.port, "/manifest")).status)
    end)
  end)
end)

describe("clank-run route patterns that fail to load", function()
  local function load_with(routes, check)
    local path = os.tmpname() .. ".lua"
    local lines = { 'local clank = require "clank"', "local function h() return { status = 200 } end",
      "return clank.app {", "  routes = {" }
    for _, key in ipairs(routes) do
      lines[#lines + 1] = string.format("    [%q] = h,", key)
    end
    lines[#lines + 1] = "  },"
    lines[#lines + 1] = "}"
    local f = assert(io.open(path, "w"))
    f:write(table.concat(lines, "\n"), "\n")
    f:close()
    local code, stdout, stderr = server.run(check and { "--check", path } or { "--port", "0", path })
    os.remove(path)
    return code, stdout, stderr, path
  end

  local cases = {
    { "an empty parameter name", { "GET /a/:" }, { "GET /a/:", "empty parameter name" } },
    { "an empty wildcard name", { "GET /a/*" }, { "GET /a/*", "empty parameter name" } },
    { "* before the last segment", { "GET /a/*rest/b" }, { "GET /a/*rest/b" } },
    { "* inside a segment", { "GET /a/b*c" }, { "GET /a/b*c" } },
    { "a parameter named twice", { "GET /a/:x/:x" }, { "GET /a/:x/:x", "'x' twice" } },
    { "a parameter and the wildcard with one name", { "GET /a/:x/*x" }, { "GET /a/:x/*x", "'x' twice" } },
    { "two routes of the same shape", { "GET /a/:x", "GET /a/:y" },
      { "routes 'GET /a/:x' and 'GET /a/:y' can never be told apart" } },
    { "two wildcard routes of the same shape", { "PUT /f/:a/*r", "PUT /f/:b/*s" },
      { "routes 'PUT /f/:a/*r' and 'PUT /f/:b/*s' can never be told apart" } },
    { "a reserved prefix (/actions/)", { "GET /actions/:name" }, { "GET /actions/:name", "/actions/" } },
    { "a reserved prefix (/__clank/)", { "GET /__clank/*rest" }, { "GET /__clank/*rest", "/__clank/" } },
    { "a reserved prefix (/views/)", { "POST /views/:v" }, { "POST /views/:v", "/views/" } },
  }
  for _, case in ipairs(cases) do
    it("exits 1 naming the route for " .. case[1], function()
      local code, stdout, stderr, path = load_with(case[2])
      assert.are.equal(1, code, stderr)
      assert.are.equal("", stdout)
      assert.truthy(stderr:find(path, 1, true), "stderr: " .. stderr)
      for _, text in ipairs(case[3]) do
        assert.truthy(stderr:find(text, 1, true), "no " .. text .. " in stderr: " .. stderr)
      end
    end)
  end

  it("loads the same shape under two methods, and a parameter beside a literal", function()
    local code, _, stderr = load_with({ "GET /a/:x", "POST /a/:y", "GET /a/b", "GET /a/*rest", "GET /:x/b" }, true)
    assert.are.equal(0, code, stderr)
  end)
end)
