-- Bodies and cookies against the real clank-run (SPEC §15 "Bodies", §13 limits).
local server = require "helpers.server"
local http = require "helpers.http"
local socket = require "socket"

local app = server.fixture("bodies")
local CRLF = "\r\n"
local MiB = 1024 * 1024

local function post(s, path, content_type, body, extra)
  local headers = { ["content-type"] = content_type }
  for k, v in pairs(extra or {}) do headers[k] = v end
  return assert(http.request(s.port, "POST", path, headers, body))
end

local function set_cookies(res)
  local out = {}
  for _, f in ipairs(res.fields) do
    if f[1] == "set-cookie" then out[#out + 1] = f[2] end
  end
  return out
end

describe("clank-run bodies and cookies", function()
  local s
  setup(function()
    s = server.start(app, { env = { CLANK_SECRET = "s3cret" } })
  end)
  teardown(function()
    assert.are.equal(0, s:stop())
  end)

  it("keeps the request's plain fields as they were, methods in a metatable", function()
    local res = assert(http.get(s.port, "/fields"))
    local keys, meta = res.body:match("^(.*);(%a+)$")
    assert.are.equal("true", meta)
    for _, k in ipairs({ "method", "url", "path", "query", "headers", "scheme" }) do
      assert.is_truthy(("," .. keys .. ","):find("," .. k .. ",", 1, true), k)
    end
    for _, k in ipairs({ "cookies", "form", "json", "body" }) do
      assert.is_falsy(("," .. keys .. ","):find("," .. k .. ",", 1, true), k)
    end
  end)

  describe("request:form()", function()
    it("decodes an urlencoded body, '+' as space, the last of a repeated name winning", function()
      local res = post(s, "/form", "application/x-www-form-urlencoded",
        "name=Ada+Lovelace&tag=a&tag=b&sym=%26%3D%2B&empty=")
      assert.are.equal(200, res.status)
      assert.are.equal("empty=\nname=Ada Lovelace\nsym=&=+\ntag=b\n", res.body)
    end)

    it("reads a multipart body with a file part holding NUL bytes", function()
      local B = "XyZzY"
      local body = "--" .. B .. CRLF
        .. 'Content-Disposition: form-data; name="title"' .. CRLF .. CRLF .. "Hi there" .. CRLF
        .. "--" .. B .. CRLF
        .. 'Content-Disposition: form-data; name="f"; filename="nul.bin"' .. CRLF
        .. "Content-Type: application/x-thing" .. CRLF .. CRLF .. "a\0\0b\r\n" .. CRLF
        .. "--" .. B .. "--" .. CRLF
      local res = post(s, "/form", "multipart/form-data; boundary=" .. B, body)
      assert.are.equal(200, res.status)
      assert.are.equal("f=file:nul.bin:application/x-thing:6:610000620d0a\ntitle=Hi there\n",
        res.body)
    end)

    it("lets the route answer 400 naming the problem of a malformed multipart body", function()
      local body = "--XyZzY" .. CRLF .. 'Content-Disposition: form-data; name="a"' .. CRLF .. CRLF
        .. "never closed"
      local res = post(s, "/form", "multipart/form-data; boundary=XyZzY", body)
      assert.are.equal(400, res.status)
      assert.are.equal("Malformed multipart body: part 1 is not closed by a boundary.", res.body)
      res = post(s, "/form", "multipart/form-data", "x")
      assert.are.equal(400, res.status)
      assert.are.equal("Malformed multipart body: missing or invalid boundary.", res.body)
    end)

    it("answers a form body over 1 MiB with 413 before the route runs", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /form HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        .. "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: " .. (MiB + 1)
        .. "\r\n\r\na=x"))
      local res = assert(conn:read_response())
      conn:close()
      assert.are.equal(413, res.status)
    end)

    it("accepts a form body of exactly 1 MiB", function()
      local body = "a=" .. string.rep("x", MiB - 2)
      local res = post(s, "/form", "application/x-www-form-urlencoded", body)
      assert.are.equal(200, res.status)
      assert.are.equal(MiB, #res.body - 1) -- "a=" .. value .. "\n"
    end)
  end)

  describe("request:json()", function()
    it("decodes strictly", function()
      local res = post(s, "/json", "application/json", '{"n":9007199254740993,"a":[]}')
      assert.are.equal(200, res.status)
      assert.are.equal('{"got":{"a":[],"n":9007199254740993}}', res.body)
    end)

    for _, c in ipairs({
      { "1e400", "Request body is not valid JSON: number out of range at byte 1" },
      { '{"a":1,}', "Request body is not valid JSON: unexpected character at byte 8" },
    }) do
      it("gives nil and a message for " .. c[1], function()
        local res = post(s, "/json", "application/json", c[1])
        assert.are.equal(400, res.status)
        assert.are.equal(c[2], res.body)
      end)
    end

    it("gives nil and a message for no body", function()
      local res = post(s, "/json", "application/json", "")
      assert.are.equal(400, res.status)
      assert.are.equal("A JSON request body is required.", res.body)
    end)
  end)

  describe("cookies", function()
    it("reads the cookie header, skipping junk pairs", function()
      local res = assert(http.get(s.port, "/cookies",
        { cookie = 'a=1; junk; b="two"; bad name=x; c=x y; =v; d=\\; f=caf\195\169; e=3;;' }))
      assert.are.equal(200, res.status)
      assert.are.equal("a=1\nb=two\ne=3\n", res.body)
    end)

    it("answers an empty table without a cookie header", function()
      local res = assert(http.get(s.port, "/cookies"))
      assert.are.equal(200, res.status)
      assert.are.equal("\n", res.body)
    end)

    it("writes one set-cookie per route cookie, in name order, with the defaults", function()
      local res = assert(http.get(s.port, "/set"))
      assert.are.equal(200, res.status)
      assert.are.same({
        "cross=1; Path=/; HttpOnly; Secure; SameSite=None",
        "gone=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax",
        "plain=; Path=/app",
        "session=abc123; Path=/; Max-Age=3600; HttpOnly; SameSite=Strict",
        "theme=dark; Path=/; HttpOnly; SameSite=Lax",
      }, set_cookies(res))
    end)

    for case = 1, 7 do
      it("answers 500 for an invalid route cookie (case " .. case .. ")", function()
        local res = assert(http.get(s.port, "/bad-cookie?case=" .. case))
        assert.are.equal(500, res.status)
        assert.are.same({}, set_cookies(res))
      end)
    end

    it("signs under CLANK_SECRET as HMAC-SHA256, base64url", function()
      -- printf 'clank.cookie\0hello' | openssl dgst -sha256 -hmac s3cret -binary | basenc --base64url
      local res = assert(http.get(s.port, "/sign?v=hello"))
      assert.are.equal("aGVsbG8.P25Gro9kM2PJmFqQ1-R8mxZZS1IGxICx4ALEtsVJDjg", res.body)
    end)

    it("verifies a signed cookie and refuses a tampered one", function()
      local signed = assert(http.get(s.port, "/sign?v=user:42")).body
      local res = assert(http.get(s.port, "/verify", { cookie = "signed=" .. signed }))
      assert.are.equal("value=user:42", res.body)
      local tampered = "dXNlcjo0Mw" .. signed:match("%..*$") -- base64url("user:43")
      res = assert(http.get(s.port, "/verify", { cookie = "signed=" .. tampered }))
      assert.are.equal("nil", res.body)
      res = assert(http.get(s.port, "/verify"))
      assert.are.equal("nil", res.body)
    end)
  end)
end)

describe("clank-run signed cookies without CLANK_SECRET", function()
  after_each(server.kill_all)

  it("verifies after a reload what was signed before it (one secret per run), and warns", function()
    local s = server.start(server.fixture("bodies"), { args = { "--no-watch" }, env = { CLANK_SECRET = "" } })
    local signed = assert(http.get(s.port, "/sign?v=user:7")).body
    s:signal("HUP")
    local deadline = socket.gettime() + 5
    while not s:stderr():find("reloaded in", 1, true) and socket.gettime() < deadline do socket.sleep(0.05) end
    assert.truthy(s:stderr():find("reloaded in", 1, true), s:stderr())
    local res = assert(http.get(s.port, "/verify", { cookie = "signed=" .. signed }))
    assert.are.equal("value=user:7", res.body)
    assert.truthy(s:stderr():find("CLANK_SECRET is not set", 1, true), s:stderr())
    assert.are.equal(0, s:stop())
  end)
end)
