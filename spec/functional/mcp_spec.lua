-- MCP at /__clank/mcp in the real clank-run, raw JSON-RPC over HTTP (SPEC §6, with §5 for
-- redaction and §13 for the Host check). Expected statuses and bodies are written from the SPEC.
local server = require "helpers.server"
local http = require "helpers.http"
local rpc = require "helpers.mcp"
local json = require "clank.json"
local socket = require "socket"
local expected_tools = require "fixtures.apps.mcp.expected_tools"

local encode, decode = json.encode, json.decode

local PATH = "/__clank/mcp"
local FORBIDDEN = '{"error":{"code":-32600,"message":"Cross-origin agent request rejected."},'
  .. '"id":null,"jsonrpc":"2.0"}'

--------------------------------------------------------------------------------
-- Helpers

local rpc_error, result_body = rpc.rpc_error, rpc.result_body
local tool_result, tool_error, CONFIRM = rpc.tool_result, rpc.tool_error, rpc.CONFIRM

-- POSTs a message (a table, or raw text) with JSON content type unless headers say otherwise.
local function post(port, message, headers)
  local h = { ["content-type"] = "application/json" }
  for k, v in pairs(headers or {}) do
    h[k] = v or nil
  end
  local body = type(message) == "string" and message or encode(message)
  return assert(http.request(port, "POST", PATH, h, body))
end

local function initialize(port, version, capabilities)
  return rpc.initialize(post, port, version, capabilities)
end

local function call(port, sid, method, params, id, headers)
  local h = { ["mcp-session-id"] = sid, ["mcp-protocol-version"] = "2025-11-25" }
  for k, v in pairs(headers or {}) do
    h[k] = v
  end
  return post(port, { jsonrpc = "2.0", id = id or 7, method = method, params = params }, h)
end

local function contract_hash(port)
  local res = assert(http.get(port, "/manifest"))
  return assert(res.headers.etag:match('^"(%x+)"$'))
end

-- Reads a streamed (chunked) answer piece by piece: head first, then one SSE event at a time.
local Stream = {}
Stream.__index = Stream

local function open_stream(port, message, headers)
  local conn = assert(http.connect(port))
  local body = encode(message)
  local h = { ["content-type"] = "application/json" }
  for k, v in pairs(headers) do
    h[k] = v
  end
  assert(conn:send(http.build("POST", PATH, h, body)))
  local deadline = socket.gettime() + http.timeout
  local line = assert(conn:receive("*l", deadline))
  local status = tonumber(line:match("^HTTP/1%.1 (%d+)"))
  local hdrs = {}
  while true do
    line = assert(conn:receive("*l", deadline))
    if line == "" then
      break
    end
    local name, value = line:match("^([^:]+):%s*(.-)%s*$")
    hdrs[name:lower()] = value
  end
  return setmetatable({ conn = conn, status = status, headers = hdrs, buffer = "" }, Stream)
end

-- The next `data:` payload, or nil at the end of the stream.
function Stream:event()
  local deadline = socket.gettime() + http.timeout
  while true do
    local event, rest = self.buffer:match("^(.-)\n\n(.*)$")
    if event then
      self.buffer = rest
      local data = event:match("^event: message\ndata: (.*)$") or event:match("^data: (.*)$")
      if data then
        return data
      end
    else
      local size_line = assert(self.conn:receive("*l", deadline))
      local size = tonumber(size_line, 16)
      if size == 0 then
        assert(self.conn:receive("*l", deadline))
        return nil
      end
      self.buffer = self.buffer .. assert(self.conn:receive(size, deadline))
      assert(self.conn:receive("*l", deadline))
    end
  end
end

--------------------------------------------------------------------------------

describe("/__clank/mcp (annotations mode)", function()
  local s = server.for_describe(server.fixture("mcp"), { args = { "--no-watch" } })
  local port
  setup(function()
    port = s.port
  end)

  describe("initialize", function()
    it("echoes the version, and names the app with its version and contract hash", function()
      for _, v in ipairs({ "2025-11-25", "2025-06-18", "2025-03-26" }) do
        local sid, res = initialize(port, v)
        assert.truthy(res.headers["content-type"]:find("^application/json"))
        assert.are.equal(result_body(1, '{"capabilities":{"logging":{},"tools":{"listChanged":false}},'
          .. '"protocolVersion":"' .. v .. '","serverInfo":{"name":"mcp-fixture","version":"2.1.0+'
          .. contract_hash(port) .. '"}}'), res.body)
        assert.truthy(sid and sid:find("^[\33-\126]+$"), tostring(sid))
      end
    end)

    it("answers 2025-11-25 to an unsupported version", function()
      local _, res = initialize(port, "2024-11-05")
      assert.are.equal("2025-11-25", decode(res.body).result.protocolVersion)
    end)
  end)

  describe("sessions", function()
    it("verifies the id: a good one works, a tampered one is 404", function()
      local sid = initialize(port)
      assert.are.equal(result_body(3, "{}"), call(port, sid, "ping", nil, 3).body)
      local last = sid:sub(-1)
      local tampered = sid:sub(1, -2) .. (last == "a" and "b" or "a")
      local res = call(port, tampered, "ping", nil, 3)
      assert.are.equal(404, res.status)
      assert.are.equal(rpc_error(3, -32001, "Session not found."), res.body)
    end)

    it("answers a request without a session 400 -32600 Missing Mcp-Session-Id.", function()
      local res = post(port, { jsonrpc = "2.0", id = 4, method = "tools/list" })
      assert.are.equal(400, res.status)
      assert.are.equal(rpc_error(4, -32600, "Missing Mcp-Session-Id."), res.body)
    end)

    it("answers an unknown method 400 -32601 before initialize, 200 -32601 after", function()
      local res = post(port, { jsonrpc = "2.0", id = 5, method = "prompts/list" })
      assert.are.equal(400, res.status)
      assert.are.equal(rpc_error(5, -32601, "Method not found: prompts/list"), res.body)
      res = call(port, initialize(port), "prompts/list", nil, 5)
      assert.are.equal(200, res.status)
      assert.are.equal(rpc_error(5, -32601, "Method not found: prompts/list"), res.body)
    end)

    it("answers an unsupported MCP-Protocol-Version 400", function()
      local sid = initialize(port)
      local res = call(port, sid, "ping", nil, 6, { ["mcp-protocol-version"] = "2099-01-01" })
      assert.are.equal(400, res.status)
      assert.are.equal(rpc_error(6, -32600, "Unsupported MCP-Protocol-Version: 2099-01-01."), res.body)
      assert.are.equal(200, call(port, sid, "ping", nil, 6,
                                 { ["mcp-protocol-version"] = "2025-03-26" }).status)
    end)
  end)

  describe("HTTP", function()
    local sid
    before_each(function()
      sid = sid or initialize(port)
    end)

    it("answers notifications and responses 202 without a body", function()
      for _, m in ipairs({
        { jsonrpc = "2.0", method = "notifications/initialized" },
        { jsonrpc = "2.0", id = "e1", result = { action = "accept" } },
      }) do
        local res = post(port, m, { ["mcp-session-id"] = sid })
        assert.are.equal(202, res.status)
        assert.are.equal("", res.body)
      end
    end)

    it("answers GET 405 and DELETE 204", function()
      local res = assert(http.request(port, "GET", PATH, { ["mcp-session-id"] = sid }))
      assert.are.equal(405, res.status)
      assert.are.equal(rpc_error(nil, -32000, "Method not allowed."), res.body)
      res = assert(http.request(port, "DELETE", PATH, { ["mcp-session-id"] = sid }))
      assert.are.equal(204, res.status)
      assert.are.equal("", res.body)
    end)

    it("answers bad JSON 400 -32700 and a batch 400 -32600", function()
      local res = post(port, '{"jsonrpc":', { ["mcp-session-id"] = sid })
      assert.are.equal(400, res.status)
      assert.are.equal(-32700, decode(res.body).error.code)
      res = post(port, '[{"jsonrpc":"2.0","id":1,"method":"ping"}]', { ["mcp-session-id"] = sid })
      assert.are.equal(400, res.status)
      assert.are.equal(rpc_error(nil, -32600, "Batch requests are not supported."), res.body)
      res = post(port, '{"jsonrpc":"2.0","id":1}', { ["mcp-session-id"] = sid })
      assert.are.equal(400, res.status)
      assert.are.equal(rpc_error(1, -32600, "Invalid Request."), res.body)
    end)

    it("answers a non-JSON content type 415", function()
      local res = post(port, { jsonrpc = "2.0", id = 1, method = "ping" },
                       { ["mcp-session-id"] = sid, ["content-type"] = "text/plain" })
      assert.are.equal(415, res.status)
      assert.are.equal(rpc_error(nil, -32000, "Expected an application/json request body."), res.body)
    end)

    it("answers a body over maxRequestBytes 413", function()
      local big = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"'
        .. string.rep("x", 65536) .. '"}}'
      local res = post(port, big, { ["mcp-session-id"] = sid })
      assert.are.equal(413, res.status)
    end)

    it("rejects a foreign Origin, a cross-site fetch and a foreign Host 403", function()
      for _, h in ipairs({
        { origin = "http://evil.example" },
        { ["sec-fetch-site"] = "cross-site" },
        { host = "evil.example" },
      }) do
        h["mcp-session-id"] = sid
        local res = post(port, { jsonrpc = "2.0", id = 1, method = "ping" }, h)
        assert.are.equal(403, res.status)
        assert.are.equal(FORBIDDEN, res.body)
      end
    end)

    it("accepts its own origin and an allowed one", function()
      local res = call(port, sid, "ping", nil, 1, { origin = "http://127.0.0.1" })
      assert.are.equal(200, res.status)
      res = call(port, sid, "ping", nil, 1, { origin = "http://localhost:5173" })
      assert.are.equal(200, res.status)
      assert.are.equal("http://localhost:5173", res.headers["access-control-allow-origin"])
    end)
  end)

  describe("tools", function()
    local sid
    before_each(function()
      sid = sid or initialize(port)
    end)

    local function tool(name, args, id)
      local res = call(port, sid, "tools/call", { name = name, arguments = args }, id or 8)
      assert.are.equal(200, res.status, res.body)
      return res.body
    end

    it("lists every action with wrapped schemas and annotations", function()
      local res = call(port, sid, "tools/list", nil, 2)
      assert.are.equal(200, res.status)
      assert.are.equal(result_body(2, expected_tools), res.body)
    end)

    it("calls a tool: structuredContent and its JSON as text", function()
      assert.are.equal(result_body(8, tool_result('{"sum":5}')), tool("calc_add", { a = 2, b = 3 }))
      assert.are.equal(result_body(8, tool_result('{"value":"HEY"}')), tool("text_shout", { value = "hey" }))
      assert.are.equal(result_body(8, tool_result('{"deleted":"n1"}')), tool("notes_delete", { id = "n1" }))
      assert.are.equal(result_body(8, tool_result('{"path":"/__clank/mcp","signal":true,"user":"ann"}')),
                       call(port, sid, "tools/call", { name = "ctx_whoami" }, 8).body)
    end)

    it("reports errors as isError results without structuredContent", function()
      assert.are.equal(result_body(8, tool_error("INVALID_INPUT", "tags.0: Expected a string.",
        '[{"expected":"string","message":"Expected a string.","path":["tags",0]}]')),
        tool("notes_write", { text = "t", tags = { 1 } }))
      assert.are.equal(result_body(8, tool_error("INVALID_INPUT", "value: Expected a string.",
        '[{"expected":"string","message":"Expected a string.","path":["value"]}]')),
        tool("text_shout", { value = false }))
      assert.are.equal(result_body(8, tool_error("NOTE_EXISTS", "A note with this title exists.",
        '{"title":"dup"}')), tool("fail_conflict", {}))
      local body = tool("fail_boom", {})
      assert.are.equal(result_body(8, tool_error("ACTION_FAILED", "The action failed.")), body)
      assert.is_nil(body:find("SECRET", 1, true))
    end)

    it("answers an unknown tool -32602", function()
      local res = call(port, sid, "tools/call", { name = "missing" }, 9)
      assert.are.equal(200, res.status)
      assert.are.equal(rpc_error(9, -32602, "Unknown tool: missing"), res.body)
    end)
  end)
end)

describe("/__clank/mcp sessions across runs", function()
  after_each(server.kill_all)

  it("answers 404 to a session from an earlier run (another secret)", function()
    local s1 = server.start(server.fixture("mcp"), { args = { "--no-watch" } })
    local sid = initialize(s1.port)
    s1:stop()
    local s2 = server.start(server.fixture("mcp"), { args = { "--no-watch" } })
    assert.are.equal(404, call(s2.port, sid, "ping").status)
    assert.are.equal(200, call(s2.port, initialize(s2.port), "ping").status)
    s2:stop()
  end)

  -- A one-action app in a temporary folder, whose description we can change.
  local function write_app(dir, description)
    local f = assert(io.open(dir .. "/app.lua", "wb"))
    f:write('local clank = require "clank"\n'
      .. 'return clank.app { name = "reloading", version = "1.0.0", actions = {\n'
      .. '  clank.defineAction { name = "hello", description = ' .. string.format("%q", description)
      .. ', sideEffects = "none", input = clank.schema.object {},\n'
      .. '    handler = function() return { hi = true } end } } }\n')
    f:close()
  end

  local function wait_for_hash(port, old)
    local deadline = socket.gettime() + server.start_timeout
    while socket.gettime() < deadline do
      local hash = contract_hash(port)
      if hash ~= old then
        return hash
      end
      socket.sleep(0.02)
    end
    error("the contract did not change after SIGHUP")
  end

  it("keeps sessions over a reload that keeps the contract and 404s them when it changes", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    write_app(dir, "Say hello.")
    local s1 = server.start(dir .. "/app.lua", { args = { "--no-watch" } })
    local sid = initialize(s1.port)
    local before = contract_hash(s1.port)
    -- the same contract: the session lives on
    s1:signal("HUP")
    socket.sleep(0.3)
    assert.are.equal(before, contract_hash(s1.port))
    assert.are.equal(200, call(s1.port, sid, "ping").status)
    -- a changed contract: the old session is stale, a new one works
    write_app(dir, "Say hello, changed.")
    s1:signal("HUP")
    local after = wait_for_hash(s1.port, before)
    local res = call(s1.port, sid, "tools/list", nil, 3)
    assert.are.equal(404, res.status)
    assert.are.equal(rpc_error(3, -32001, "Session not found."), res.body)
    local fresh, init = initialize(s1.port)
    assert.are.equal("1.0.0+" .. after, decode(init.body).result.serverInfo.version)
    res = call(s1.port, fresh, "tools/list", nil, 3)
    assert.are.equal("Say hello, changed.", decode(res.body).result.tools[1].description)
    s1:stop()
    os.remove(dir .. "/app.lua")
    os.remove(dir)
  end)
end)

describe("/__clank/mcp confirmation = refuse", function()
  local s = server.for_describe(server.fixture("mcp_refuse"), { args = { "--no-watch" } })
  local sid
  setup(function()
    sid = initialize(s.port)
  end)

  it("refuses without x-clank-confirmation: confirmed and runs with it", function()
    local args = { name = "notes_delete", arguments = { id = "n2" } }
    assert.are.equal(result_body(8, CONFIRM), call(s.port, sid, "tools/call", args, 8).body)
    assert.are.equal(result_body(8, tool_result('{"deleted":"n2"}')),
      call(s.port, sid, "tools/call", args, 8, { ["x-clank-confirmation"] = "confirmed" }).body)
    assert.are.equal(result_body(8, tool_result('{"sum":3}')),
      call(s.port, sid, "tools/call", { name = "calc_add", arguments = { a = 1, b = 2 } }, 8).body)
  end)
end)

describe("/__clank/mcp confirmation = elicit", function()
  local s = server.for_describe(server.fixture("mcp_elicit"), { args = { "--no-watch" } })

  local function start_call(sid)
    return open_stream(s.port, { jsonrpc = "2.0", id = 12, method = "tools/call",
                                 params = { name = "notes_delete", arguments = { id = "n3" } } },
                       { ["mcp-session-id"] = sid, ["mcp-protocol-version"] = "2025-11-25" })
  end

  local function answer(sid, id, action)
    return post(s.port, { jsonrpc = "2.0", id = id, result = { action = action, content = {} } },
                { ["mcp-session-id"] = sid })
  end

  it("streams elicitation/create, then the result once the client accepts", function()
    local sid = initialize(s.port, "2025-11-25", { elicitation = {} })
    local st = start_call(sid)
    assert.are.equal(200, st.status)
    assert.are.equal("text/event-stream", st.headers["content-type"])
    assert.are.equal("chunked", st.headers["transfer-encoding"])
    local ask = decode(assert(st:event()))
    assert.are.equal("elicitation/create", ask.method)
    assert.are.equal("form", ask.params.mode)
    assert.are.equal(202, answer(sid, ask.id, "accept").status)
    assert.are.equal(result_body(12, tool_result('{"deleted":"n3"}')), st:event())
    assert.is_nil(st:event())
    st.conn:close()
  end)

  it("answers CONFIRMATION_REQUIRED when the client declines", function()
    local sid = initialize(s.port, "2025-11-25", { elicitation = { form = {} } })
    local st = start_call(sid)
    local ask = decode(assert(st:event()))
    assert.are.equal(202, answer(sid, ask.id, "decline").status)
    assert.are.equal(result_body(12, CONFIRM), st:event())
    st.conn:close()
  end)

  it("answers CONFIRMATION_REQUIRED at once without the elicitation capability", function()
    local sid = initialize(s.port, "2025-11-25", {})
    local res = call(s.port, sid, "tools/call", { name = "notes_delete", arguments = { id = "n3" } }, 12)
    assert.are.equal(200, res.status)
    assert.truthy(res.headers["content-type"]:find("^application/json"))
    assert.are.equal(result_body(12, CONFIRM), res.body)
  end)
end)
