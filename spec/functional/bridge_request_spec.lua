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
      "title: Must contain at least 1 characters.; x: Unknown property.",
      '[{"message":"Must contain at least 1 characters.","path":["title"]},'
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
      { 422, answers.failure_body("INVALID_INPUT", "title: Must contain at least 1 characters.",
        '[{"message":"Must contain at least 1 characters.","path":["title"]}]') },
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
