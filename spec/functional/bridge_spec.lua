-- The agent bridge mounted in the real clank-run, over HTTP (SPEC §2, §5, §13).
-- Every expected status, code, message, header and body is written from the SPEC.
local server = require "helpers.server"
local answers = require "helpers.bridge"
local http = require "helpers.http"
local socket = require "socket"

local FOREIGN = "http://localhost:5173" -- in the fixture's allowedOrigins

local EMPTY_INPUT = '{"additionalProperties":false,"properties":{},"required":[],"type":"object"}'
local MANIFEST = '{"actions":['
  .. '{"confirmation":"write","description":"Raises a Lua error.","inputSchema":' .. EMPTY_INPUT
  .. ',"name":"boom","sideEffects":"read"},'
  .. '{"confirmation":"write","description":"Raises an ActionError.","inputSchema":' .. EMPTY_INPUT
  .. ',"name":"conflict","sideEffects":"read"},'
  .. '{"confirmation":"write","description":"Echo a text.","inputSchema":{"additionalProperties":false,'
  .. '"properties":{"tags":{"items":{"type":"string"},"type":"array"},"text":{"minLength":1,"type":"string"}},'
  .. '"required":["text"],"type":"object"},"name":"echo","outputSchema":{"additionalProperties":false,'
  .. '"properties":{"tags":{"items":{"type":"string"},"type":"array"},"text":{"type":"string"}},'
  .. '"required":["tags","text"],"type":"object"},"sideEffects":"read"},'
  .. '{"confirmation":"write","description":"Takes a secret.","inputSchema":{"additionalProperties":false,'
  .. '"properties":{"password":{"format":"password","minLength":20,"type":"string"},'
  .. '"role":{"enum":["admin","user"],"type":"string"},"user":{"type":"string"}},'
  .. '"required":["password","user"],"type":"object"},"name":"login","sideEffects":"read"},'
  .. '{"confirmation":"always","description":"Delete one note.","inputSchema":{"additionalProperties":false,'
  .. '"properties":{"id":{"type":"string"}},"required":["id"],"type":"object"},"name":"notes.delete",'
  .. '"sideEffects":"destructive"},'
  .. '{"confirmation":"write","description":"Sleeps ms.","inputSchema":{"additionalProperties":false,'
  .. '"properties":{"ms":{"type":"integer"}},"required":["ms"],"type":"object"},"name":"slow",'
  .. '"sideEffects":"read"},'
  .. '{"confirmation":"write","description":"Reports the ctx.","inputSchema":' .. EMPTY_INPUT
  .. ',"name":"whoami","sideEffects":"read"}'
  .. '],"description":"Fixture app for the bridge specs","name":"bridge","protocol":"clank-agent/1"}'

local ETAG = answers.etag(MANIFEST)

local failure_body, assert_json_type = answers.failure_body, answers.assert_json_type
local assert_failure, assert_ok = answers.assert_failure, answers.assert_ok

-- POST /actions/<name> with a JSON content type unless headers say otherwise
-- (a false value leaves a header out).
local function post(port, target, body, headers)
  local h = { ["Content-Type"] = "application/json" }
  for k, v in pairs(headers or {}) do
    if v == false then h[k] = nil else h[k] = v end
  end
  return assert(http.request(port, "POST", target, h, body))
end

describe("clank.bridge in clank-run", function()
  local s = server.for_describe(server.fixture("bridge"))

  describe("the manifest", function()
    for _, path in ipairs({ "/manifest", "/.well-known/clank" }) do
      it("answers GET " .. path .. " with 200, the canonical manifest, no-cache and the etag", function()
        local res = assert(http.get(s.port, path))
        assert.are.equal(200, res.status)
        assert.are.equal(MANIFEST, res.body)
        assert_json_type(res)
        assert.are.equal("no-cache", res.headers["cache-control"])
        assert.are.equal(ETAG, res.headers.etag)
      end)
    end

    for _, inm in ipairs({ ETAG, "W/" .. ETAG, '"0000000000000000", ' .. ETAG, "*" }) do
      it("answers If-None-Match: " .. inm .. " with 304, the etag and no body", function()
        local res = assert(http.get(s.port, "/manifest", { ["If-None-Match"] = inm }))
        assert.are.equal(304, res.status)
        assert.are.equal(ETAG, res.headers.etag)
        assert.are.equal("", res.body)
      end)
    end

    it("answers a stale If-None-Match with 200 and the manifest", function()
      local res = assert(http.get(s.port, "/.well-known/clank", { ["If-None-Match"] = '"0000000000000000"' }))
      assert.are.equal(200, res.status)
      assert.are.equal(MANIFEST, res.body)
    end)
  end)

  describe("methods", function()
    for _, method in ipairs({ "GET", "PUT", "DELETE", "OPTIONS" }) do
      it("answers " .. method .. " on an action path with 404 NOT_FOUND `Agent endpoint not found.`", function()
        local res = assert(http.request(s.port, method, "/actions/echo"))
        assert_failure(res, 404, "NOT_FOUND", "Agent endpoint not found.")
      end)
    end

    it("answers HEAD on an action path with 404 and no body", function()
      local res = assert(http.request(s.port, "HEAD", "/actions/echo"))
      assert.are.equal(404, res.status)
      assert.are.equal("no-store", res.headers["cache-control"])
      assert.are.equal("", res.body)
    end)

    it("answers GET on /actions/ and a nested action path with the bridge's 404", function()
      for _, path in ipairs({ "/actions/", "/actions/a/b" }) do
        assert_failure(assert(http.get(s.port, path)), 404, "NOT_FOUND", "Agent endpoint not found.")
      end
    end)

    it("leaves paths that only contain /actions/ or end with /manifest to the app (404 Not found.)", function()
      for _, req in ipairs({ { "POST", "/api/actions/echo" }, { "GET", "/api/manifest" },
                             { "GET", "/x/.well-known/clank" } }) do
        local res = assert(http.request(s.port, req[1], req[2], { ["Content-Type"] = "application/json" },
          req[1] == "POST" and '{"text":"x"}' or nil))
        assert.are.equal(404, res.status)
        assert.are.equal("Not found.", res.body)
        assert.truthy(res.headers["content-type"]:find("^text/plain"), res.headers["content-type"])
      end
    end)

    it("answers POST and HEAD on /manifest with 404", function()
      -- SPEC §2 sends only GET /manifest to the bridge; whether the other
      -- methods get the bridge's JSON 404 or the plain one is left open.
      assert.are.equal(404, assert(http.request(s.port, "HEAD", "/manifest")).status)
      assert.are.equal(404, post(s.port, "/manifest", "{}").status)
    end)

    it("answers a CORS preflight from an allowed origin with 204 and the CORS headers", function()
      local res = assert(http.request(s.port, "OPTIONS", "/actions/echo", {
        Origin = FOREIGN,
        ["Access-Control-Request-Method"] = "POST",
        ["Access-Control-Request-Headers"] = "content-type, x-clank-confirmation",
      }))
      assert.are.equal(204, res.status)
      assert.are.equal(FOREIGN, res.headers["access-control-allow-origin"])
      assert.are.equal("POST", res.headers["access-control-allow-methods"])
      assert.are.equal("content-type, x-clank-confirmation", res.headers["access-control-allow-headers"])
      assert.are.equal("Origin", res.headers["vary"])
      assert.are.equal("", res.body)
    end)

    it("answers a preflight from another origin with 404", function()
      local res = assert(http.request(s.port, "OPTIONS", "/actions/echo", { Origin = "http://evil.example" }))
      assert_failure(res, 404, "NOT_FOUND", "Agent endpoint not found.")
    end)
  end)

  describe("origin", function()
    it("answers sec-fetch-site: cross-site with 403 ORIGIN_MISMATCH", function()
      local res = post(s.port, "/actions/echo", '{"text":"x"}', { ["Sec-Fetch-Site"] = "cross-site" })
      assert_failure(res, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.")
    end)

    it("answers a foreign origin that is not allowed with 403 ORIGIN_MISMATCH", function()
      for _, origin in ipairs({ "http://evil.example", "http://localhost:5174", FOREIGN .. "/" }) do
        local res = post(s.port, "/actions/echo", '{"text":"x"}', { Origin = origin })
        assert_failure(res, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.")
      end
    end)

    it("lets the server's own origin through (http:// + Host)", function()
      local host = "127.0.0.1:" .. s.port
      local res = post(s.port, "/actions/echo", '{"text":"x"}', { Host = host, Origin = "http://" .. host })
      assert_ok(res, '{"tags":[],"text":"x"}')
      res = post(s.port, "/actions/echo", '{"text":"x"}',
        { Host = "localhost:" .. s.port, Origin = "http://localhost:" .. s.port })
      assert_ok(res, '{"tags":[],"text":"x"}')
    end)

    it("lets an allowed origin through with access-control-allow-origin and vary: Origin", function()
      local res = post(s.port, "/actions/echo", '{"text":"x"}', { Origin = FOREIGN })
      assert_ok(res, '{"tags":[],"text":"x"}')
      assert.are.equal(FOREIGN, res.headers["access-control-allow-origin"])
      assert.are.equal("Origin", res.headers["vary"])
    end)

    it("lets a request without origin through (requireOrigin is false)", function()
      assert_ok(post(s.port, "/actions/echo", '{"text":"x"}'), '{"tags":[],"text":"x"}')
    end)

    it("reads each request of one connection by its own origin and name", function()
      local conn = assert(http.connect(s.port))
      local json = { ["Content-Type"] = "application/json" }
      local function with_origin(origin)
        return { ["Content-Type"] = "application/json", Origin = origin }
      end
      assert(conn:send(http.build("POST", "/actions/echo", json, '{"text":"a"}')
        .. http.build("POST", "/actions/echo", with_origin(FOREIGN), '{"text":"b"}')
        .. http.build("POST", "/actions/echo", with_origin("http://evil.example"), '{"text":"c"}')
        .. http.build("POST", "/actions/conflict", json, "{}")
        .. http.build("POST", "/actions/echo", json, '{"text":"d"}')))
      local list = assert(conn:read_responses(5))
      assert_ok(list[1], '{"tags":[],"text":"a"}')
      assert.is_nil(list[1].headers["access-control-allow-origin"])
      assert_ok(list[2], '{"tags":[],"text":"b"}')
      assert.are.equal(FOREIGN, list[2].headers["access-control-allow-origin"])
      assert_failure(list[3], 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.")
      assert_failure(list[4], 409, "NOTE_EXISTS", "A note with this title exists.", '{"title":"dup"}')
      assert_ok(list[5], '{"tags":[],"text":"d"}')
      assert.is_nil(list[5].headers["access-control-allow-origin"])
      conn:close()
    end)

    it("answers a Host that is not a loopback name with 403 ORIGIN_MISMATCH on agent paths (DNS rebinding)", function()
      -- SPEC §13 names the code for agent paths but not the message.
      local res = post(s.port, "/actions/echo", '{"text":"x"}', { Host = "evil.example" })
      assert.are.equal(403, res.status)
      assert.truthy(res.body:find('"code":"ORIGIN_MISMATCH"', 1, true), res.body)
      assert_json_type(res)
      res = assert(http.get(s.port, "/manifest", { Host = "evil.example:80" }))
      assert.are.equal(403, res.status)
      assert.truthy(res.body:find('"code":"ORIGIN_MISMATCH"', 1, true), res.body)
    end)

    it("compares its own origin exactly (an origin in another case is refused)", function()
      local res = post(s.port, "/actions/echo", '{"text":"x"}',
        { Host = "localhost:" .. s.port, Origin = "http://LOCALHOST:" .. s.port })
      assert_failure(res, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.")
    end)
  end)

  describe("path and name", function()
    it("answers a bad percent escape with 400 INVALID_PATH", function()
      for _, target in ipairs({ "/actions/%zz", "/actions/echo%2", "/actions/%FF" }) do
        local res = post(s.port, target, '{"text":"x"}')
        assert_failure(res, 400, "INVALID_PATH", "The action path is not valid URL encoding.")
      end
    end)

    it("decodes the name", function()
      assert_ok(post(s.port, "/actions/%65cho", '{"text":"x"}'), '{"tags":[],"text":"x"}')
    end)

    it("answers an unknown or empty name with 404 NOT_FOUND `Action not found.`", function()
      for _, target in ipairs({ "/actions/nope", "/actions/", "/actions/echo+x" }) do
        assert_failure(post(s.port, target, '{"text":"x"}'), 404, "NOT_FOUND", "Action not found.")
      end
    end)

    it("ignores the query string", function()
      assert_ok(post(s.port, "/actions/echo?x=1", '{"text":"x"}'), '{"tags":[],"text":"x"}')
    end)
  end)

  describe("confirmation", function()
    it("answers 428 without confirmation", function()
      local res = post(s.port, "/actions/notes.delete", '{"id":"n1"}')
      assert_failure(res, 428, "CONFIRMATION_REQUIRED", "This action requires explicit confirmation.")
      res = post(s.port, "/actions/notes.delete", '{"id":"n1"}', { ["X-Clank-Confirmation"] = "yes" })
      assert_failure(res, 428, "CONFIRMATION_REQUIRED", "This action requires explicit confirmation.")
    end)

    it("answers 428 before the body is read (the body never comes)", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("POST", "/actions/notes.delete",
        { ["Content-Type"] = "text/plain", ["Content-Length"] = "100" })))
      local t0 = socket.gettime()
      local res = assert(conn:read_response({ timeout = 2 }))
      assert.is_true(socket.gettime() - t0 < 1.5)
      assert_failure(res, 428, "CONFIRMATION_REQUIRED", "This action requires explicit confirmation.")
      conn:close()
    end)

    it("keeps the connection after a 428 whose body was sent", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("POST", "/actions/notes.delete", { ["Content-Type"] = "application/json" },
        '{"id":"n1"}') .. http.build("GET", "/manifest")))
      local list = assert(conn:read_responses(2))
      assert_failure(list[1], 428, "CONFIRMATION_REQUIRED", "This action requires explicit confirmation.")
      assert.are.equal(200, list[2].status)
      assert.are.equal(MANIFEST, list[2].body)
      conn:close()
    end)

    it("answers a repeated x-clank-confirmation (joined as `confirmed, confirmed`) with 428", function()
      local res = assert(http.request(s.port, "POST", "/actions/notes.delete",
        { { "Content-Type", "application/json" }, { "X-Clank-Confirmation", "confirmed" },
          { "X-Clank-Confirmation", "confirmed" } }, '{"id":"n1"}'))
      assert_failure(res, 428, "CONFIRMATION_REQUIRED", "This action requires explicit confirmation.")
    end)

    it("answers 428 to Expect: 100-continue without a 100 Continue", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("POST", "/actions/notes.delete", {
        ["Content-Type"] = "application/json", ["Content-Length"] = "11", Expect = "100-continue",
      })))
      local res = assert(conn:read_response({ timeout = 2 }))
      assert_failure(res, 428, "CONFIRMATION_REQUIRED", "This action requires explicit confirmation.")
      conn:close()
    end)

    it("runs the action with x-clank-confirmation: confirmed, after a 100 Continue when asked", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("POST", "/actions/notes.delete", {
        ["Content-Type"] = "application/json", ["Content-Length"] = "11", Expect = "100-continue",
        ["X-Clank-Confirmation"] = "confirmed",
      })))
      local cont = assert(conn:read_response({ timeout = 2 }))
      assert.are.equal(100, cont.status)
      assert(conn:send('{"id":"n1"}'))
      assert_ok(assert(conn:read_response()), '{"deleted":"n1"}')
      conn:close()
    end)
  end)

  describe("body", function()
    it("answers a content type that is not JSON with 415", function()
      for _, ct in ipairs({ "text/plain", "application/x-www-form-urlencoded", "application/json-seq", false }) do
        local res = post(s.port, "/actions/echo", '{"text":"x"}', { ["Content-Type"] = ct })
        assert_failure(res, 415, "UNSUPPORTED_MEDIA_TYPE", "Expected an application/json request body.")
      end
    end)

    it("accepts charset parameters, any case and */*+json", function()
      for _, ct in ipairs({ "application/json; charset=utf-8", "Application/JSON;Charset=UTF-8",
                            "application/vnd.api+json", "application/merge-patch+json; charset=utf-8" }) do
        assert_ok(post(s.port, "/actions/echo", '{"text":"x"}', { ["Content-Type"] = ct }),
          '{"tags":[],"text":"x"}')
      end
    end)

    it("answers a POST without a body with 400 INVALID_JSON `A JSON request body is required.`", function()
      local res = post(s.port, "/actions/echo", nil)
      assert_failure(res, 400, "INVALID_JSON", "A JSON request body is required.")
    end)

    it("answers Content-Length: 0 with 400 INVALID_JSON", function()
      -- The SPEC leaves open whether an empty body is "no body" or "not JSON".
      local res = post(s.port, "/actions/echo", "")
      assert.are.equal(400, res.status)
      assert.is_true(res.body == failure_body("INVALID_JSON", "A JSON request body is required.")
        or res.body == failure_body("INVALID_JSON", "Request body is not valid JSON."), res.body)
    end)

    it("answers malformed JSON with 400 INVALID_JSON `Request body is not valid JSON.`", function()
      for _, body in ipairs({ '{"text":', "{text:1}", "[1,]", "NaN", '{"text":"x"} junk' }) do
        assert_failure(post(s.port, "/actions/echo", body), 400, "INVALID_JSON", "Request body is not valid JSON.")
      end
    end)

    it("answers invalid UTF-8 with 400 INVALID_ENCODING", function()
      assert_failure(post(s.port, "/actions/echo", '{"text":"\255\254"}'), 400, "INVALID_ENCODING",
        "Request body must be valid UTF-8.")
    end)

    it("accepts a body of exactly maxRequestBytes (1024)", function()
      local text = string.rep("x", 1024 - 11)
      local body = '{"text":"' .. text .. '"}'
      assert.are.equal(1024, #body)
      assert_ok(post(s.port, "/actions/echo", body), '{"tags":[],"text":"' .. text .. '"}')
    end)

    it("answers a body one byte over maxRequestBytes with 413", function()
      local body = '{"text":"' .. string.rep("x", 1024 - 10) .. '"}'
      assert_failure(post(s.port, "/actions/echo", body), 413, "PAYLOAD_TOO_LARGE",
        "Request body exceeds 1024 bytes.")
    end)

    it("answers a Content-Length over maxRequestBytes with 413 before the body is sent", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("POST", "/actions/echo",
        { ["Content-Type"] = "application/json", ["Content-Length"] = "5000" })))
      local res = assert(conn:read_response({ timeout = 2 }))
      assert_failure(res, 413, "PAYLOAD_TOO_LARGE", "Request body exceeds 1024 bytes.")
      conn:close()
    end)

    it("answers 415 and 413 to Expect: 100-continue without a 100 Continue", function()
      for _, case in ipairs({
        { { ["Content-Type"] = "text/plain", ["Content-Length"] = "12" }, 415 },
        { { ["Content-Type"] = "application/json", ["Content-Length"] = "5000" }, 413 },
      }) do
        local headers = case[1]
        headers.Expect = "100-continue"
        local conn = assert(http.connect(s.port))
        assert(conn:send(http.build("POST", "/actions/echo", headers)))
        local res = assert(conn:read_response({ timeout = 2 }))
        assert.are.equal(case[2], res.status)
        conn:close()
      end
    end)

    it("keeps the connection after a 413 by content-length when the body follows", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("POST", "/actions/echo",
        { ["Content-Type"] = "application/json", ["Content-Length"] = "5000" }) .. string.rep(" ", 5000)
        .. http.build("GET", "/manifest")))
      local list = assert(conn:read_responses(2))
      assert_failure(list[1], 413, "PAYLOAD_TOO_LARGE", "Request body exceeds 1024 bytes.")
      assert.are.equal(200, list[2].status)
      assert.are.equal(MANIFEST, list[2].body)
      conn:close()
    end)

    it("answers a 413 with more than 64 KiB of unread body with connection: close", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("POST", "/actions/echo",
        { ["Content-Type"] = "application/json", ["Content-Length"] = "100000" })))
      local res = assert(conn:read_response())
      assert_failure(res, 413, "PAYLOAD_TOO_LARGE", "Request body exceeds 1024 bytes.")
      assert.are.equal("close", (res.headers["connection"] or ""):lower())
      assert.is_true(conn:closed(3))
      conn:close()
    end)

    it("answers a chunked body that grows over maxRequestBytes with 413 while reading", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("POST", "/actions/echo",
        { ["Content-Type"] = "application/json", ["Transfer-Encoding"] = "chunked" })))
      local chunk = string.rep("x", 600)
      local piece = string.format("%x", #chunk) .. "\r\n" .. chunk .. "\r\n"
      assert(conn:send(piece))
      assert(conn:send(piece))
      local res = assert(conn:read_response({ timeout = 3 }))
      assert_failure(res, 413, "PAYLOAD_TOO_LARGE", "Request body exceeds 1024 bytes.")
      conn:close()
    end)

    it("accepts a small chunked body", function()
      local conn = assert(http.connect(s.port))
      local body = '{"text":"chunked"}'
      assert(conn:send(http.build("POST", "/actions/echo",
        { ["Content-Type"] = "application/json", ["Transfer-Encoding"] = "chunked" })
        .. string.format("%x", 9) .. "\r\n" .. body:sub(1, 9) .. "\r\n"
        .. string.format("%x", #body - 9) .. "\r\n" .. body:sub(10) .. "\r\n0\r\n\r\n"))
      assert_ok(assert(conn:read_response()), '{"tags":[],"text":"chunked"}')
      conn:close()
    end)
  end)

  describe("errors", function()
    it("answers [] for an object schema with 422 `value: Expected an object.`", function()
      assert_failure(post(s.port, "/actions/echo", "[]"), 422, "INVALID_INPUT", "value: Expected an object.",
        '[{"expected":"object","message":"Expected an object.","path":[]}]')
    end)

    it("answers 422 with 0-based paths in the message and the details", function()
      assert_failure(post(s.port, "/actions/echo", '{"text":"x","tags":[7]}'), 422, "INVALID_INPUT",
        "tags.0: Expected a string.",
        '[{"expected":"string","message":"Expected a string.","path":["tags",0]}]')
      assert_failure(post(s.port, "/actions/echo", '{"text":"","tags":["a",false],"more":1}'), 422,
        "INVALID_INPUT",
        "tags.1: Expected a string.; text: Must contain at least 1 character.; more: Unknown property.",
        '[{"expected":"string","message":"Expected a string.","path":["tags",1]},'
          .. '{"message":"Must contain at least 1 character.","path":["text"]},'
          .. '{"message":"Unknown property.","path":["more"]}]')
    end)

    it("never sends an input value back", function()
      local body = '{"user":"SECRET-USER-1","password":"SECRET-PASS","role":"SECRET-ROLE"}'
      local res = post(s.port, "/actions/login", body)
      assert_failure(res, 422, "INVALID_INPUT",
        "password: Must contain at least 20 characters.; role: Expected one of: admin, user.",
        '[{"message":"Must contain at least 20 characters.","path":["password"]},'
          .. '{"expected":"enum","message":"Expected one of: admin, user.","path":["role"]}]')
      for _, field in ipairs(res.fields) do
        assert.is_nil(field[2]:find("SECRET", 1, true), "header " .. field[1] .. ": " .. field[2])
      end
      assert.is_nil(res.body:find("SECRET", 1, true))
    end)

    it("answers a Lua error with 500 ACTION_FAILED, never its text, and logs it", function()
      local before = #s:stderr()
      local res = post(s.port, "/actions/boom", "{}")
      assert_failure(res, 500, "ACTION_FAILED", "The action failed.")
      assert.is_nil(res.body:find("SECRET", 1, true))
      local log
      for _ = 1, 100 do
        log = s:stderr():sub(before + 1)
        if log:find("SECRET-BOOM", 1, true) then break end
        http.sleep(0.02)
      end
      assert.truthy(log:find("bridge/app.lua:32: database password is SECRET-BOOM", 1, true), "stderr: " .. log)
    end)

    it("answers 500 without the text when context raises for an action, and logs it", function()
      local before = #s:stderr()
      local res = post(s.port, "/actions/echo", '{"text":"x"}', { ["X-Context-Boom"] = "1" })
      assert.are.equal(500, res.status)
      assert.is_nil(res.body:find("SECRET", 1, true), "error text leaked: " .. res.body)
      local log
      for _ = 1, 100 do
        log = s:stderr():sub(before + 1)
        if log:find("SECRET-CTX", 1, true) then break end
        http.sleep(0.02)
      end
      assert.truthy(log:find("bridge/app.lua:68: context failed with SECRET-CTX", 1, true), "stderr: " .. log)
      assert_ok(post(s.port, "/actions/echo", '{"text":"x"}'), '{"tags":[],"text":"x"}')
    end)

    it("answers a custom ActionError with its status, code, message and details", function()
      assert_failure(post(s.port, "/actions/conflict", "{}"), 409, "NOTE_EXISTS",
        "A note with this title exists.", '{"title":"dup"}')
    end)

    it("answers 504 TIMEOUT at the action timeout and aborts the signal with reason timeout", function()
      local t0 = socket.gettime()
      local res = post(s.port, "/actions/slow", '{"ms":1000}')
      local elapsed = socket.gettime() - t0
      assert_failure(res, 504, "TIMEOUT", "The action timed out.")
      assert.is_true(elapsed >= 0.15, "answered after " .. elapsed .. " s, before the 200 ms timeout")
      assert.is_true(elapsed < 0.9, "answered after " .. elapsed .. " s, not at the 200 ms timeout")
      local log = assert(http.get(s.port, "/abort-log")).body
      assert.truthy(log:find("timeout\n", 1, true), "abort log: " .. log)
    end)

    it("keeps serving after a timeout", function()
      assert_ok(post(s.port, "/actions/slow", '{"ms":10}'), '{"slept":10}')
    end)
  end)

  describe("success", function()
    it("answers {\"ok\":true,\"output\":...} byte for byte", function()
      local res = post(s.port, "/actions/echo", '{"tags":["b","a"],"text":"h\\u00e9llo"}')
      assert_ok(res, '{"tags":["b","a"],"text":"h\u{e9}llo"}')
    end)

    it("keeps the connection open for the next request", function()
      local conn = assert(http.connect(s.port))
      local h = { ["Content-Type"] = "application/json" }
      assert(conn:send(http.build("POST", "/actions/echo", h, '{"text":"1"}')
        .. http.build("POST", "/actions/echo", h, '{"text":"2"}')))
      local list = assert(conn:read_responses(2))
      assert_ok(list[1], '{"tags":[],"text":"1"}')
      assert_ok(list[2], '{"tags":[],"text":"2"}')
      conn:close()
    end)
  end)
end)

describe("clank.bridge in clank-run, context(request)", function()
  after_each(server.kill_all)

  it("is not evaluated for the manifest or an early 4xx, and once for an action call", function()
    local s = server.start(server.fixture("bridge"))
    assert.are.equal(200, assert(http.get(s.port, "/manifest")).status)
    assert.are.equal(200, assert(http.get(s.port, "/.well-known/clank")).status)
    assert.are.equal(304, assert(http.get(s.port, "/manifest", { ["If-None-Match"] = "*" })).status)
    assert.are.equal(404, assert(http.get(s.port, "/actions/echo")).status)
    assert.are.equal(204, assert(http.request(s.port, "OPTIONS", "/actions/echo", { Origin = FOREIGN })).status)
    assert.are.equal(403, post(s.port, "/actions/echo", "{}", { Origin = "http://evil.example" }).status)
    assert.are.equal(400, post(s.port, "/actions/%zz", "{}").status)
    assert.are.equal(404, post(s.port, "/actions/nope", "{}").status)
    assert.are.equal(428, post(s.port, "/actions/notes.delete", "{}").status)
    assert.are.equal(415, post(s.port, "/actions/echo", "{}", { ["Content-Type"] = "text/plain" }).status)
    assert.are.equal(400, post(s.port, "/actions/echo", nil).status)
    assert.are.equal(413, post(s.port, "/actions/echo", string.rep(" ", 2000)).status)
    assert.are.equal(400, post(s.port, "/actions/echo", "\255").status)
    assert.are.equal(400, post(s.port, "/actions/echo", "{").status)
    local res = post(s.port, "/actions/whoami", "{}")
    assert_ok(res, '{"aborted":false,"calls":1,"method":"POST","path":"/actions/whoami"}')
    local log = assert(http.get(s.port, "/context-log")).body
    assert.are.equal("POST /actions/whoami\nGET /context-log\n", log)
    assert.are.equal(0, s:stop())
  end)
end)

describe("clank.bridge in clank-run with requireOrigin and exposeErrors", function()
  local s = server.for_describe(server.fixture("bridge_strict"))

  it("answers a request without origin with 403 ORIGIN_MISMATCH", function()
    local res = post(s.port, "/actions/echo", '{"text":"x"}')
    assert_failure(res, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.")
  end)

  it("lets the server's own origin through", function()
    local host = "127.0.0.1:" .. s.port
    assert_ok(post(s.port, "/actions/echo", '{"text":"x"}', { Host = host, Origin = "http://" .. host }),
      '{"text":"x"}')
  end)

  it("still serves the manifest without origin", function()
    local res = assert(http.get(s.port, "/manifest"))
    assert.are.equal(200, res.status)
    assert.truthy(res.body:find('"name":"bridge_strict"', 1, true), res.body)
  end)

  it("exposes the real error's text with exposeErrors", function()
    local host = "127.0.0.1:" .. s.port
    local res = post(s.port, "/actions/boom", "{}", { Host = host, Origin = "http://" .. host })
    assert.are.equal(500, res.status)
    assert.are.equal("no-store", res.headers["cache-control"])
    assert.truthy(res.body:find('"code":"ACTION_FAILED"', 1, true), res.body)
    assert.truthy(res.body:find("exposed on purpose", 1, true), res.body)
  end)
end)
