-- clank.mcp in process: handle(request, env) with a hand-made env, as clank-run calls it
-- (SPEC §6, with §5 for redaction). Expected statuses and bodies are written from the SPEC.
local clank = require "clank"
local json = require "clank.json"
local mcp = require "clank.mcp"
local elicit = require "clank.mcp.elicit"
local fixture = require "fixtures.apps.mcp.actions"
local expected_tools = require "fixtures.apps.mcp.expected_tools"
local rpc = require "helpers.mcp"

local s = clank.schema
local encode, decode = json.encode, json.decode

local HASH = "0123456789abcdef"
local SECRET = string.rep("\42", 32)

--------------------------------------------------------------------------------
-- Helpers

local function make_env(mode, overrides)
  local actions = {}
  for _, a in ipairs(fixture.list) do
    actions[a.manifest.name] = a
  end
  local env = {
    app = { name = "mcp-fixture", version = "2.1.0", allowedOrigins = { "http://localhost:5173" },
            mcp = mode and { confirmation = mode } or nil },
    actions = actions,
    contractHash = HASH,
    secret = SECRET,
    context = function() return { user = "ann" } end,
    maxRequestBytes = 65536,
  }
  for k, v in pairs(overrides or {}) do
    env[k] = v
  end
  return env
end

-- A recorder standing in for env.stream: its writer keeps what was written.
local function recorder(env)
  local rec = { writes = {}, closed = false, gone = false }
  env.stream = function(status, headers)
    rec.status, rec.headers = status, headers
    return {
      write = function(_, data)
        if rec.gone then
          return false
        end
        rec.writes[#rec.writes + 1] = data
        return true
      end,
      close = function() rec.closed = true end,
    }
  end
  return rec
end

local function request(method, body, headers)
  local h = { host = "127.0.0.1:8080", ["content-type"] = "application/json" }
  for k, v in pairs(headers or {}) do
    if v == false then h[k] = nil else h[k] = v end
  end
  return { method = method, url = "/__clank/mcp", path = "/__clank/mcp", query = {}, headers = h,
           body = body, scheme = "http" }
end

local function post(env, message, headers)
  local body = type(message) == "string" and message or encode(message)
  return mcp.handle(request("POST", body, headers), env)
end

local function initialize(env, version, capabilities)
  return rpc.initialize(post, env, version, capabilities)
end

local function call(env, sid, method, params, id, headers)
  local h = { ["mcp-session-id"] = sid }
  for k, v in pairs(headers or {}) do
    h[k] = v
  end
  return post(env, { jsonrpc = "2.0", id = id or 7, method = method, params = params }, h)
end

local rpc_error, result_body = rpc.rpc_error, rpc.result_body
local tool_result, tool_error, CONFIRM = rpc.tool_result, rpc.tool_error, rpc.CONFIRM

-- A runtime task, so that clank.sleep and the elicitation wait work from a spec.
local runner = clank.defineAction {
  name = "spec.run", description = "Runs ctx.fn in a task.", sideEffects = "none",
  input = s.unknown(), handler = function(_, ctx) return { ctx.fn() } end,
}
local function in_task(fn)
  return table.unpack(runner(nil, { fn = fn }))
end

local function assert_json(res)
  assert.are.equal("application/json", res.headers["content-type"])
end

--------------------------------------------------------------------------------

describe("clank.mcp initialize", function()
  it("echoes each supported version and reports tools, name and version+contract hash", function()
    for _, v in ipairs({ "2025-11-25", "2025-06-18", "2025-03-26" }) do
      local sid, res = initialize(make_env(), v)
      assert_json(res)
      assert.are.equal(result_body(1, '{"capabilities":{"logging":{},"tools":{"listChanged":false}},'
        .. '"protocolVersion":"' .. v .. '","serverInfo":{"name":"mcp-fixture",'
        .. '"version":"2.1.0+0123456789abcdef"}}'), res.body)
      assert.truthy(sid:find("^" .. v:gsub("%-", "%%-") .. "%.0%.%x+%.%x+$"), sid)
    end
  end)

  it("answers 2025-11-25 to an unsupported or missing version", function()
    local _, res = initialize(make_env(), "2024-11-05")
    assert.are.equal("2025-11-25", decode(res.body).result.protocolVersion)
    res = post(make_env(), { jsonrpc = "2.0", id = "a", method = "initialize" })
    assert.are.equal(200, res.status)
    assert.are.equal("2025-11-25", decode(res.body).result.protocolVersion)
    assert.are.equal("a", decode(res.body).id)
  end)

  it("records the elicitation capability in the session id", function()
    local env = make_env()
    assert.truthy(initialize(env, "2025-11-25", { elicitation = {} }):find("^2025%-11%-25%.1%."))
    assert.truthy(initialize(env, "2025-11-25", { elicitation = { form = {} } }):find("%.1%."))
    assert.truthy(initialize(env, "2025-11-25", { elicitation = { url = {} } }):find("%.0%."))
    assert.truthy(initialize(env, "2025-11-25", {}):find("%.0%."))
  end)

  it("gives each client its own session id", function()
    local env = make_env()
    assert.are_not.equal(initialize(env), initialize(env))
  end)
end)

describe("clank.mcp sessions", function()
  local env, sid
  before_each(function()
    env = make_env()
    sid = initialize(env)
  end)

  it("accepts its own id and answers ping with {}", function()
    local res = call(env, sid, "ping", nil, 3)
    assert.are.equal(200, res.status)
    assert.are.equal(result_body(3, "{}"), res.body)
  end)

  it("rejects a request without a session: 400 -32600 Missing Mcp-Session-Id.", function()
    local res = post(env, { jsonrpc = "2.0", id = 4, method = "tools/list" })
    assert.are.equal(400, res.status)
    assert.are.equal(rpc_error(4, -32600, "Missing Mcp-Session-Id."), res.body)
  end)

  it("answers 404 to a tampered, foreign or stale id", function()
    local tampered = sid:sub(1, -2) .. (sid:sub(-1) == "0" and "1" or "0")
    local flipped = sid:gsub("^(2025%-11%-25)%.0%.", "%1.1.")
    -- hex in the other case is another spelling of the same id: refused too (one spelling each)
    local version, flag, nonce, tag = sid:match("^(.-)%.(.)%.(%x+)%.(%x+)$")
    local upper_nonce = table.concat({ version, flag, nonce:upper(), tag }, ".")
    local upper_tag = table.concat({ version, flag, nonce, tag:upper() }, ".")
    for _, bad in ipairs({ tampered, flipped, "nonsense", sid .. "0", sid:upper(), upper_nonce, upper_tag }) do
      local res = call(env, bad, "tools/list", nil, 5)
      assert.are.equal(404, res.status, bad)
      assert.are.equal(rpc_error(5, -32001, "Session not found."), res.body)
    end
    -- another run's secret, and a reload that changed the contract
    assert.are.equal(404, call(make_env(nil, { secret = string.rep("x", 32) }), sid, "ping").status)
    assert.are.equal(404, call(make_env(nil, { contractHash = "fedcba9876543210" }), sid, "ping").status)
    -- the same contract after a reload keeps the session
    assert.are.equal(200, call(make_env(), sid, "ping").status)
  end)

  it("checks MCP-Protocol-Version after initialize: 400 when unsupported", function()
    local res = call(env, sid, "ping", nil, 6, { ["mcp-protocol-version"] = "2024-11-05" })
    assert.are.equal(400, res.status)
    assert.are.equal(rpc_error(6, -32600, "Unsupported MCP-Protocol-Version: 2024-11-05."), res.body)
    for _, v in ipairs({ "2025-11-25", "2025-06-18", "2025-03-26" }) do
      assert.are.equal(200, call(env, sid, "ping", nil, 6, { ["mcp-protocol-version"] = v }).status)
    end
    -- initialize itself does not look at it
    local init = post(env, { jsonrpc = "2.0", id = 1, method = "initialize",
                             params = { protocolVersion = "2025-06-18" } },
                      { ["mcp-protocol-version"] = "1999-01-01" })
    assert.are.equal(200, init.status)
  end)
end)

describe("clank.mcp JSON-RPC over HTTP", function()
  local env, sid
  before_each(function()
    env = make_env()
    sid = initialize(env)
  end)

  it("answers notifications and responses 202 without a body", function()
    local h = { ["mcp-session-id"] = sid }
    for _, m in ipairs({
      { jsonrpc = "2.0", method = "notifications/initialized" },
      { jsonrpc = "2.0", method = "notifications/cancelled", params = { requestId = 1 } },
      { jsonrpc = "2.0", id = "x", result = {} },
      { jsonrpc = "2.0", id = 9, error = { code = -1, message = "no" } },
    }) do
      local res = post(env, m, h)
      assert.are.equal(202, res.status)
      assert.are.equal("", res.body)
      assert.is_nil(res.headers["content-type"])
    end
    -- without a session too; with a bad one, 404
    assert.are.equal(202, post(env, { jsonrpc = "2.0", method = "notifications/initialized" }).status)
    assert.are.equal(404, post(env, { jsonrpc = "2.0", method = "notifications/initialized" },
                               { ["mcp-session-id"] = "bad" }).status)
  end)

  it("answers bad JSON 400 -32700", function()
    for _, body in ipairs({ "{", "", "nope", '{"a":1,}' }) do
      local res = post(env, body, { ["mcp-session-id"] = sid })
      assert.are.equal(400, res.status, body)
      local e = decode(res.body)
      assert.are.equal(-32700, e.error.code)
      assert.are.equal(json.null, e.id)
      assert.truthy(e.error.message:find("^Parse error"))
    end
  end)

  it("answers a batch 400 -32600", function()
    local res = post(env, '[{"jsonrpc":"2.0","id":1,"method":"ping"}]', { ["mcp-session-id"] = sid })
    assert.are.equal(400, res.status)
    assert.are.equal(rpc_error(nil, -32600, "Batch requests are not supported."), res.body)
  end)

  it("answers invalid requests 400 -32600", function()
    for _, body in ipairs({
      '{"id":1,"method":"ping"}', '{"jsonrpc":"1.0","id":1,"method":"ping"}',
      '{"jsonrpc":"2.0","id":1}', '{"jsonrpc":"2.0","id":1,"method":5}',
      '{"jsonrpc":"2.0","id":{},"method":"ping"}', '{"jsonrpc":"2.0","id":true,"method":"ping"}',
      '"ping"', "null", "3",
    }) do
      local res = post(env, body, { ["mcp-session-id"] = sid })
      assert.are.equal(400, res.status, body)
      assert.are.equal(-32600, decode(res.body).error.code, body)
    end
  end)

  it("answers an unknown method 400 -32601 before initialize and 200 after", function()
    local res = post(env, { jsonrpc = "2.0", id = 2, method = "resources/list" })
    assert.are.equal(400, res.status)
    assert.are.equal(rpc_error(2, -32601, "Method not found: resources/list"), res.body)
    res = call(env, sid, "resources/list", nil, 2)
    assert.are.equal(200, res.status)
    assert.are.equal(rpc_error(2, -32601, "Method not found: resources/list"), res.body)
  end)

  it("answers a non-JSON content type 415", function()
    for _, ct in ipairs({ "text/plain", "application/x-www-form-urlencoded", false }) do
      local res = post(env, { jsonrpc = "2.0", id = 1, method = "ping" },
                       { ["mcp-session-id"] = sid, ["content-type"] = ct })
      assert.are.equal(415, res.status)
      assert.are.equal(rpc_error(nil, -32000, "Expected an application/json request body."), res.body)
    end
    for _, ct in ipairs({ "Application/JSON; charset=utf-8", "application/vnd.api+json" }) do
      local res = post(env, { jsonrpc = "2.0", id = 1, method = "ping" },
                       { ["mcp-session-id"] = sid, ["content-type"] = ct })
      assert.are.equal(200, res.status, ct)
    end
  end)

  it("answers GET 405 and DELETE 204", function()
    local res = mcp.handle(request("GET", nil, { ["mcp-session-id"] = sid }), env)
    assert.are.equal(405, res.status)
    assert.are.equal("POST, DELETE", res.headers.allow)
    assert.are.equal(rpc_error(nil, -32000, "Method not allowed."), res.body)
    res = mcp.handle(request("DELETE", nil, { ["mcp-session-id"] = sid }), env)
    assert.are.equal(204, res.status)
    assert.are.equal("", res.body)
    assert.are.equal(405, mcp.handle(request("PUT", "{}"), env).status)
  end)

  it("rejects a foreign origin and cross-site fetches 403 with the JSON-RPC body", function()
    local body = '{"error":{"code":-32600,"message":"Cross-origin agent request rejected."},'
      .. '"id":null,"jsonrpc":"2.0"}'
    for _, h in ipairs({
      { origin = "http://evil.example" }, { origin = "https://127.0.0.1:8080" },
      { ["sec-fetch-site"] = "cross-site" },
      { origin = "http://localhost:5173", ["sec-fetch-site"] = "cross-site" },
    }) do
      h["mcp-session-id"] = sid
      local res = post(env, { jsonrpc = "2.0", id = 1, method = "ping" }, h)
      assert.are.equal(403, res.status)
      assert.are.equal(body, res.body)
      assert.are.equal(403, mcp.handle(request("GET", nil, h), env).status)
    end
  end)

  it("accepts its own origin, and an allowed one with CORS headers", function()
    local res = call(env, sid, "ping", nil, 1, { origin = "http://127.0.0.1:8080",
                                                ["sec-fetch-site"] = "same-origin" })
    assert.are.equal(200, res.status)
    assert.is_nil(res.headers["access-control-allow-origin"])
    res = call(env, sid, "ping", nil, 1, { origin = "http://localhost:5173" })
    assert.are.equal(200, res.status)
    assert.are.equal("http://localhost:5173", res.headers["access-control-allow-origin"])
    assert.are.equal("Origin", res.headers.vary)
    res = mcp.handle(request("OPTIONS", nil, { origin = "http://localhost:5173" }), env)
    assert.are.equal(204, res.status)
    assert.truthy(res.headers["access-control-allow-headers"]:find("mcp-session-id", 1, true))
  end)
end)

describe("clank.mcp tools/list", function()
  it("lists every action sorted by name with wrapped schemas and annotations", function()
    local env = make_env()
    local res = call(env, initialize(env), "tools/list", nil, 2)
    assert.are.equal(200, res.status)
    assert_json(res)
    assert.are.equal(result_body(2, expected_tools), res.body)
  end)
end)

describe("clank.mcp tools/call", function()
  local env, sid
  before_each(function()
    env = make_env()
    sid = initialize(env)
  end)

  local function tool(name, args, headers, e, id)
    local res = call(e or env, sid, "tools/call", { name = name, arguments = args }, id or 8, headers)
    assert.are.equal(200, res.status, res.body)
    return res.body
  end

  it("returns structuredContent and its canonical JSON as text", function()
    assert.are.equal(result_body(8, tool_result('{"sum":5}')), tool("calc_add", { a = 2, b = 3 }))
    assert.are.equal(result_body(8, tool_result('{"id":"n1","tags":[]}')),
                     tool("notes_write", { text = "x" }))
  end)

  it("unwraps a non-object input from arguments.value and wraps a non-object output", function()
    assert.are.equal(result_body(8, tool_result('{"value":"HEY"}')), tool("text_shout", { value = "hey" }))
  end)

  it("treats missing arguments as {}", function()
    local res = call(env, sid, "tools/call", { name = "ctx_whoami" }, 8)
    assert.are.equal(result_body(8, tool_result('{"path":"/__clank/mcp","signal":true,"user":"ann"}')),
                     res.body)
    assert.are.equal(result_body(8, tool_error("INVALID_INPUT",
      "a: Expected a finite number.; b: Expected a finite number.",
      '[{"expected":"number","message":"Expected a finite number.","path":["a"]},'
      .. '{"expected":"number","message":"Expected a finite number.","path":["b"]}]')),
      call(env, sid, "tools/call", { name = "calc_add" }, 8).body)
  end)

  it("reports invalid input as isError INVALID_INPUT with 0-based paths, no input values", function()
    local body = tool("notes_write", { text = "ok", tags = { "a", 7 } })
    assert.are.equal(result_body(8, tool_error("INVALID_INPUT", "tags.1: Expected a string.",
      '[{"expected":"string","message":"Expected a string.","path":["tags",1]}]')), body)
    assert.is_nil(body:find("structuredContent", 1, true))
  end)

  it("keeps the value prefix on the issues of a wrapped input", function()
    assert.are.equal(result_body(8, tool_error("INVALID_INPUT", "value: Expected a string.",
      '[{"expected":"string","message":"Expected a string.","path":["value"]}]')),
      tool("text_shout", { value = 5 }))
    assert.are.equal(result_body(8, tool_error("INVALID_INPUT", "value: Must contain at least 1 character.",
      '[{"message":"Must contain at least 1 character.","path":["value"]}]')),
      tool("text_shout", { value = "" }))
    assert.are.equal(result_body(8, tool_error("INVALID_INPUT", "value: Expected a string.",
      '[{"expected":"string","message":"Expected a string.","path":["value"]}]')),
      tool("text_shout", {}))
  end)

  it("reports an ActionError with its code, message and details", function()
    assert.are.equal(result_body(8, tool_error("NOTE_EXISTS", "A note with this title exists.",
      '{"title":"dup"}')), tool("fail_conflict", {}))
  end)

  it("redacts any other error as ACTION_FAILED and logs the real one", function()
    local tools = require "clank.mcp.tools"
    local log, logged = tools.log, {}
    tools.log = function(msg) logged[#logged + 1] = msg end
    local ok, body = pcall(tool, "fail_boom", {})
    tools.log = log
    assert.is_true(ok, body)
    assert.are.equal(result_body(8, tool_error("ACTION_FAILED", "The action failed.")), body)
    assert.is_nil(body:find("SECRET", 1, true))
    assert.are.equal(1, #logged)
    assert.truthy(logged[1]:find("fail.boom", 1, true))
    assert.truthy(logged[1]:find("SECRET-BOOM", 1, true))
  end)

  it("shows the real error with app.bridge.exposeErrors", function()
    local tools = require "clank.mcp.tools"
    local log = tools.log
    tools.log = function() end
    env.app.bridge = { exposeErrors = true }
    local ok, body = pcall(tool, "fail_boom", {})
    tools.log = log
    assert.is_true(ok, body)
    assert.truthy(decode(decode(body).result.content[1].text).error.message:find("SECRET-BOOM", 1, true))
  end)

  it("logs a failing tool through clank.core.log, at error, with its traceback", function()
    local core = require "clank.core"
    local log, logged = core.log, {}
    core.log = function(level, msg) logged[#logged + 1] = { level, msg } end
    local ok, body = pcall(tool, "fail_boom", {})
    core.log = log
    assert.is_true(ok, body)
    assert.are.equal(result_body(8, tool_error("ACTION_FAILED", "The action failed.")), body)
    assert.are.equal(1, #logged)
    assert.are.equal("error", logged[1][1])
    assert.truthy(logged[1][2]:find("fail.boom", 1, true), logged[1][2])
    assert.truthy(logged[1][2]:find("SECRET-BOOM", 1, true), logged[1][2])
    assert.truthy(logged[1][2]:find("stack traceback:", 1, true), logged[1][2])
  end)

  it("logs nothing for validation and action errors", function()
    local core = require "clank.core"
    local log, logged = core.log, {}
    core.log = function(level, msg) logged[#logged + 1] = { level, msg } end
    local ok, err = pcall(function()
      tool("calc_add", { a = "x" })
      tool("fail_conflict", {})
    end)
    core.log = log
    assert.is_true(ok, err)
    assert.are.equal(0, #logged)
  end)

  it("answers an unknown tool -32602", function()
    local res = call(env, sid, "tools/call", { name = "nope" }, 9)
    assert.are.equal(200, res.status)
    assert.are.equal(rpc_error(9, -32602, "Unknown tool: nope"), res.body)
    res = call(env, sid, "tools/call", {}, 9)
    assert.are.equal(200, res.status)
    assert.are.equal(-32602, decode(res.body).error.code)
  end)

  it("runs actions requiring confirmation at once in annotations mode (the default)", function()
    assert.are.equal(result_body(8, tool_result('{"deleted":"n1"}')), tool("notes_delete", { id = "n1" }))
  end)
end)

describe("clank.mcp confirmation = refuse", function()
  it("refuses actions requiring confirmation unless x-clank-confirmation: confirmed", function()
    local env = make_env("refuse")
    local sid = initialize(env)
    local function body(name, args, headers)
      return call(env, sid, "tools/call", { name = name, arguments = args }, 8, headers).body
    end
    assert.are.equal(result_body(8, CONFIRM), body("notes_delete", { id = "a" }))
    assert.are.equal(result_body(8, CONFIRM), body("notes_write", { text = "a" }))
    assert.are.equal(result_body(8, CONFIRM), body("notes_delete", { id = "a" },
                                                   { ["x-clank-confirmation"] = "yes" }))
    assert.are.equal(result_body(8, tool_result('{"deleted":"a"}')),
                     body("notes_delete", { id = "a" }, { ["x-clank-confirmation"] = "confirmed" }))
    assert.are.equal(result_body(8, tool_result('{"sum":2}')), body("calc_add", { a = 1, b = 1 }))
  end)

  it("fails closed on an unknown mode", function()
    local env = make_env("sometimes")
    local sid = initialize(env)
    local res = call(env, sid, "tools/call", { name = "notes_delete", arguments = { id = "a" } }, 8)
    assert.are.equal(result_body(8, CONFIRM), res.body)
  end)
end)

describe("clank.mcp confirmation = elicit", function()
  local env, rec
  before_each(function()
    env = make_env("elicit")
    rec = recorder(env)
  end)
  after_each(function()
    elicit.limit_ms, elicit.keepalive_ms = 300000, 15000
    assert.are.equal(0, elicit.pending())
  end)

  local function events()
    local list = {}
    for _, w in ipairs(rec.writes) do
      local data = w:match("^event: message\ndata: (.-)\n\n$")
      if data then
        list[#list + 1] = data
      end
    end
    return list
  end

  -- Calls notes.delete and answers the elicitation with `answer` (a result table, or nil: none).
  local function run_with(sid, answer, args)
    local posted
    local ret = in_task(function()
      if answer then
        clank.spawn(function()
          while #rec.writes == 0 do
            clank.sleep(5)
          end
          local ask = decode(events()[1])
          posted = post(env, { jsonrpc = "2.0", id = ask.id, result = answer },
                        { ["mcp-session-id"] = sid })
        end)
      end
      return call(env, sid, "tools/call", { name = "notes_delete", arguments = args or { id = "n1" } }, 12)
    end)
    return ret, posted
  end

  it("answers CONFIRMATION_REQUIRED at once to a client without the capability", function()
    local sid = initialize(env, "2025-11-25", {})
    local res = call(env, sid, "tools/call", { name = "notes_delete", arguments = { id = "n1" } }, 12)
    assert.are.equal(result_body(12, CONFIRM), res.body)
    assert.is_nil(rec.status)
  end)

  it("asks by elicitation/create on an event stream and runs the action on accept", function()
    local sid = initialize(env, "2025-11-25", { elicitation = {} })
    local ret, posted = run_with(sid, { action = "accept", content = {} })
    assert.is_nil(ret)
    assert.are.equal(202, posted.status)
    assert.are.equal("", posted.body)
    assert.are.equal(200, rec.status)
    assert.are.equal("text/event-stream", rec.headers["content-type"])
    local list = events()
    assert.are.equal(2, #list)
    local ask = decode(list[1])
    assert.are.equal("elicitation/create", ask.method)
    assert.are.equal("2.0", ask.jsonrpc)
    assert.are.equal("string", type(ask.id))
    assert.are.equal("form", ask.params.mode)
    assert.are.equal('{"properties":{},"type":"object"}', encode(ask.params.requestedSchema))
    assert.truthy(ask.params.message:find("notes.delete", 1, true))
    assert.truthy(ask.params.message:find("destructive", 1, true))
    assert.are.equal(result_body(12, tool_result('{"deleted":"n1"}')), list[2])
    assert.is_true(rec.closed)
  end)

  it("leaves mode out for 2025-06-18 clients", function()
    local sid = initialize(env, "2025-06-18", { elicitation = {} })
    run_with(sid, { action = "accept" })
    assert.is_nil(decode(events()[1]).params.mode)
  end)

  it("answers CONFIRMATION_REQUIRED on decline and cancel", function()
    for _, action in ipairs({ "decline", "cancel" }) do
      rec = recorder(env)
      local sid = initialize(env, "2025-11-25", { elicitation = { form = {} } })
      local _, posted = run_with(sid, { action = action })
      assert.are.equal(202, posted.status)
      local list = events()
      assert.are.equal(2, #list)
      assert.are.equal(result_body(12, CONFIRM), list[2])
      assert.is_true(rec.closed)
    end
  end)

  -- issue 34: the person is asked about this call, in the action's own words for it.
  describe("for an action with its own confirm", function()
    local tools = require "clank.mcp.tools"
    local function archive(confirm)
      return clank.defineAction { name = "notes.archive", description = "Archive one note.",
        input = s.object { title = s.string { min = 1 } }, sideEffects = "destructive", confirm = confirm,
        handler = function(input) return { archived = input.title } end }
    end

    it("asks with confirm(input) for the call's input", function()
      env = make_env("elicit", { actions = { ["notes.archive"] = archive(function(input)
        return "Archive \u{201c}" .. input.title .. "\u{201d}?"
      end) } })
      rec = recorder(env)
      local sid = initialize(env, "2025-11-25", { elicitation = {} })
      in_task(function()
        clank.spawn(function()
          while #rec.writes == 0 do clank.sleep(5) end
          post(env, { jsonrpc = "2.0", id = decode(events()[1]).id, result = { action = "accept" } },
            { ["mcp-session-id"] = sid })
        end)
        return call(env, sid, "tools/call", { name = "notes_archive", arguments = { title = "Milk" } }, 12)
      end)
      local list = events()
      assert.are.equal("Archive \u{201c}Milk\u{201d}?", decode(list[1]).params.message)
      assert.are.equal(result_body(12, tool_result('{"archived":"Milk"}')), list[2])
    end)

    it("answers ACTION_FAILED without asking when confirm(input) raises, and logs it", function()
      env = make_env("elicit", { actions = { ["notes.archive"] = archive(function() error("no words", 0) end) } })
      rec = recorder(env)
      local log, logged = tools.log, {}
      tools.log = function(msg) logged[#logged + 1] = msg end
      local sid = initialize(env, "2025-11-25", { elicitation = {} })
      local res = call(env, sid, "tools/call", { name = "notes_archive", arguments = { title = "Milk" } }, 12)
      tools.log = log
      assert.are.equal(result_body(12, tool_error("ACTION_FAILED", "The action failed.")), res.body)
      assert.is_nil(rec.status)
      assert.are.equal(1, #logged)
      assert.truthy(logged[1]:find("no words", 1, true), logged[1])
    end)
  end)

  it("checks the input before asking", function()
    local sid = initialize(env, "2025-11-25", { elicitation = {} })
    local res = call(env, sid, "tools/call", { name = "notes_delete", arguments = { id = 1 } }, 12)
    assert.are.equal(result_body(12, tool_error("INVALID_INPUT", "id: Expected a string.",
      '[{"expected":"string","message":"Expected a string.","path":["id"]}]')), res.body)
    assert.is_nil(rec.status)
  end)

  it("runs actions that need no confirmation without asking", function()
    local sid = initialize(env, "2025-11-25", { elicitation = {} })
    local res = call(env, sid, "tools/call", { name = "calc_add", arguments = { a = 1, b = 2 } }, 12)
    assert.are.equal(result_body(12, tool_result('{"sum":3}')), res.body)
    assert.is_nil(rec.status)
  end)

  it("gives up after its time limit with CONFIRMATION_REQUIRED", function()
    elicit.limit_ms = 50
    local sid = initialize(env, "2025-11-25", { elicitation = {} })
    run_with(sid, nil)
    local list = events()
    assert.are.equal(2, #list)
    assert.are.equal(result_body(12, CONFIRM), list[2])
  end)

  it("stops quietly when the client has gone", function()
    elicit.keepalive_ms = 20
    local sid = initialize(env, "2025-11-25", { elicitation = {} })
    in_task(function()
      clank.spawn(function()
        clank.sleep(5)
        rec.gone = true
      end)
      return call(env, sid, "tools/call", { name = "notes_delete", arguments = { id = "n1" } }, 12)
    end)
    assert.are.equal(1, #events())
    assert.is_true(rec.closed)
  end)

  it("stops waiting when the client cancels the call", function()
    local sid = initialize(env, "2025-11-25", { elicitation = {} })
    local posted
    in_task(function()
      clank.spawn(function()
        while #rec.writes == 0 do
          clank.sleep(5)
        end
        posted = post(env, { jsonrpc = "2.0", method = "notifications/cancelled",
                             params = { requestId = 12, reason = "timeout" } },
                      { ["mcp-session-id"] = sid })
      end)
      return call(env, sid, "tools/call", { name = "notes_delete", arguments = { id = "n1" } }, 12)
    end)
    assert.are.equal(202, posted.status)
    assert.are.equal(1, #events())
    assert.is_true(rec.closed)
  end)

  it("ignores an answer from another session", function()
    elicit.limit_ms = 100
    local sid = initialize(env, "2025-11-25", { elicitation = {} })
    local other = initialize(env, "2025-11-25", { elicitation = {} })
    local posted
    in_task(function()
      clank.spawn(function()
        while #rec.writes == 0 do
          clank.sleep(5)
        end
        posted = post(env, { jsonrpc = "2.0", id = decode(events()[1]).id,
                             result = { action = "accept" } }, { ["mcp-session-id"] = other })
      end)
      return call(env, sid, "tools/call", { name = "notes_delete", arguments = { id = "n1" } }, 12)
    end)
    assert.are.equal(202, posted.status)
    assert.are.equal(result_body(12, CONFIRM), events()[2])
  end)
end)
