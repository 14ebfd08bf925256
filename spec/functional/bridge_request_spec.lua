-- The bridge's action path in clank-run when the app has no context function (SPEC §2, §5
-- steps 3, 8, 9): ctx.request is the request of §2 whenever the action reads it (at once,
-- after a wait, after its request ended); origin rules on a repeated header; 422 with CORS.
-- Every expected value is written from the SPEC.
local server = require "helpers.server"
local answers = require "helpers.bridge"
local http = require "helpers.http"

local FOREIGN = "http://localhost:5173" -- in the fixture's allowedOrigins

local function post(port, target, body, headers)
  local h = { { "Content-Type", "application/json" } }
  for _, kv in ipairs(headers or {}) do h[#h + 1] = kv end
  return assert(http.request(port, "POST", target, h, body))
end

local output = answers.output

describe("the bridge's action path without a context function", function()
  local s = server.for_describe(server.fixture("bridge_request"))

  for _, name in ipairs({ "inspect", "inspect.later" }) do
    it("gives " .. name .. " ctx.request with method, url, path, query, headers, body, scheme", function()
      local body = '{"note":"n1"}'
      local out = output(post(s.port, "/actions/" .. name .. "?x=1&y=a+b%21", body,
        { { "X-Probe", "probe-" .. name } }))
      assert.are.same({
        method = "POST", url = "/actions/" .. name .. "?x=1&y=a+b%21",
        path = "/actions/" .. name, scheme = "http", body = body,
        query = { x = "1", y = "a b!" }, probe = "probe-" .. name,
      }, out)
    end)
  end

  it("keeps a ctx's request whole after its request ended, while others come and go", function()
    local first = '{"note":"the first"}'
    output(post(s.port, "/actions/keep?x=kept", first, { { "X-Probe", "one" } }))
    -- other requests reuse the connection buffers and the handler's coroutine
    for i = 1, 3 do output(post(s.port, "/actions/inspect", '{"note":"' .. i .. '"}')) end
    local out = output(post(s.port, "/actions/kept", "{}", { { "X-Probe", "two" } }))
    assert.are.same({
      method = "POST", url = "/actions/keep?x=kept", path = "/actions/keep", scheme = "http",
      body = first, query = { x = "kept" }, probe = "one",
    }, out)
  end)

  -- a request sent as raw bytes on a new connection: its answer's output
  local function raw_output(port, lines, body)
    local conn = assert(http.connect(port))
    assert(conn:send(table.concat(lines, "\r\n") .. "\r\nContent-Length: " .. #body .. "\r\n\r\n" .. body))
    local res = assert(conn:read_response())
    conn:close()
    return output(res)
  end

  it("gives ctx.request.headers every header: names lowercased, values trimmed, repeats joined", function()
    local body = '{"note":"h"}'
    local out = raw_output(s.port, {
      "POST /actions/headers HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json",
      "X-A: 1   ", "x-b: b\t", "X-A: 2", "Accept: */*", "X-Empty:",
    }, body)
    assert.are.same({
      body = body,
      headers = {
        host = "127.0.0.1", ["content-type"] = "application/json", ["content-length"] = tostring(#body),
        ["x-a"] = "1, 2", ["x-b"] = "b", accept = "*/*", ["x-empty"] = "",
      },
    }, out)
  end)

  it("gives ctx.request whole when its head is near the limits of SPEC §13", function()
    local body = '{"note":"long"}'
    local q = string.rep("q", 7000)
    local lines = { "POST /actions/headers?x=" .. q .. " HTTP/1.1", "Host: 127.0.0.1",
      "Content-Type: application/json" }
    for i = 1, 3 do lines[#lines + 1] = "X-Pad-" .. i .. ": " .. string.rep(string.char(96 + i), 4000) end
    lines[#lines + 1] = "X-Probe: last"
    local out = raw_output(s.port, lines, body)
    assert.are.same({
      body = body,
      headers = {
        host = "127.0.0.1", ["content-type"] = "application/json", ["content-length"] = tostring(#body),
        ["x-pad-1"] = string.rep("a", 4000), ["x-pad-2"] = string.rep("b", 4000),
        ["x-pad-3"] = string.rep("c", 4000), ["x-probe"] = "last",
      },
    }, out)
  end)

  it("keeps a ctx's request whole after 100 more requests on its connection", function()
    local conn = assert(http.connect(s.port))
    local function send(target, body, extra)
      local h = { ["Content-Type"] = "application/json" }
      for k, v in pairs(extra or {}) do h[k] = v end
      assert(conn:send(http.build("POST", target, h, body)))
      return output(assert(conn:read_response()))
    end
    local first = '{"note":"kept on one connection"}'
    send("/actions/keep?x=k1", first, { ["X-Probe"] = "one", ["X-Other"] = "o" })
    for i = 1, 100 do
      local b = '{"note":"' .. string.rep("n", i) .. '"}'
      assert.are.same({
        method = "POST", url = "/actions/inspect?y=" .. i, path = "/actions/inspect", scheme = "http",
        body = b, query = { y = tostring(i) }, probe = "p" .. i,
      }, send("/actions/inspect?y=" .. i, b, { ["X-Probe"] = "p" .. i }))
    end
    assert.are.same({
      method = "POST", url = "/actions/keep?x=k1", path = "/actions/keep", scheme = "http",
      body = first, query = { x = "k1" }, probe = "one",
    }, send("/actions/kept", "{}", { ["X-Probe"] = "two" }))
    local out = send("/actions/kept.headers", "{}")
    assert.are.equal(first, out.body)
    assert.are.equal("one", out.headers["x-probe"])
    assert.are.equal("o", out.headers["x-other"])
    assert.are.equal("application/json", out.headers["content-type"])
    assert.are.equal(tostring(#first), out.headers["content-length"])
    conn:close()
  end)

  it("joins a repeated header with \", \" in ctx.request.headers", function()
    local out = output(post(s.port, "/actions/inspect", "{}", { { "X-Probe", "a" }, { "X-Probe", "b" } }))
    assert.are.equal("a, b", out.probe)
  end)

  it("runs the action when a header the checks read repeats and passes them", function()
    -- "same-origin, same-origin" is not `cross-site` (SPEC §5 step 3)
    local out = output(post(s.port, "/actions/inspect?x=2", '{"note":"twice"}', {
      { "Sec-Fetch-Site", "same-origin" }, { "Sec-Fetch-Site", "same-origin" }, { "X-Probe", "p" },
    }))
    assert.are.same({
      method = "POST", url = "/actions/inspect?x=2", path = "/actions/inspect", scheme = "http",
      body = '{"note":"twice"}', query = { x = "2" }, probe = "p",
    }, out)
  end)

  it("reads a repeated origin header as one value joined by \", \": not an allowed origin (403)", function()
    local res = post(s.port, "/actions/inspect", "{}", { { "Origin", FOREIGN }, { "Origin", FOREIGN } })
    answers.assert_failure(res, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.")
  end)

  it("answers 422 INVALID_INPUT to an allowed origin with CORS, no-store and canonical JSON", function()
    local res = post(s.port, "/actions/create", '{"title":"","x":1}', { { "Origin", FOREIGN } })
    answers.assert_failure(res, 422, "INVALID_INPUT",
      "title: Must contain at least 1 character.; x: Unknown property.",
      '[{"message":"Must contain at least 1 character.","path":["title"]},'
        .. '{"message":"Unknown property.","path":["x"]}]')
    assert.are.equal(FOREIGN, res.headers["access-control-allow-origin"])
    assert.are.equal("Origin", res.headers["vary"])
  end)

  it("answers valid and invalid input in turn on one connection, each as its own", function()
    local conn = assert(http.connect(s.port))
    local bodies = { '{"title":"a"}', '{"title":""}', '{"title":"b"}', "[]" }
    for _, body in ipairs(bodies) do
      assert(conn:send(http.build("POST", "/actions/create", { ["Content-Type"] = "application/json" }, body)))
    end
    local want = {
      { 200, '{"ok":true,"output":{"title":"a"}}' },
      { 422, answers.failure_body("INVALID_INPUT", "title: Must contain at least 1 character.",
        '[{"message":"Must contain at least 1 character.","path":["title"]}]') },
      { 200, '{"ok":true,"output":{"title":"b"}}' },
      { 422, answers.failure_body("INVALID_INPUT", "value: Expected an object.",
        '[{"expected":"object","message":"Expected an object.","path":[]}]') },
    }
    for _, w in ipairs(want) do
      local res = assert(conn:read_response())
      assert.are.equal(w[1], res.status)
      assert.are.equal(w[2], res.body)
    end
    conn:close()
  end)
end)
