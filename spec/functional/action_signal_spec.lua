-- An action's ctx.signal over HTTP (SPEC §4 "ctx.signal", §5 step 8, §12): the signal is the
-- same object however it is reached (ctx.signal, the runtime's waits), is aborted with reason
-- "timeout" at the action timeout (300 ms in the fixture) and "disconnected" when the client
-- goes away (a reset, or a write that fails), whether the action read it before or only after
-- that moment. A client that only half-closes its side (a FIN after its request) is not gone: it
-- still reads its answer.
local server = require "helpers.server"
local http = require "helpers.http"

local function post(port, name, body)
  return assert(http.request(port, "POST", "/actions/" .. name,
    { { "Content-Type", "application/json" } }, body))
end

local output = require("helpers.bridge").output
local rpc = require "helpers.mcp"
local json = require "clank.json"

-- An MCP tools/call (SPEC §6: the action run as the bridge runs it) on a fresh session; returns
-- the decoded JSON-RPC answer.
local function mcp_call(port, tool, args)
  local function send(_, message, headers)
    local h = { ["content-type"] = "application/json" }
    for k, v in pairs(headers or {}) do h[k] = v end
    return assert(http.request(port, "POST", "/__clank/mcp", h, json.encode(message)))
  end
  local sid = rpc.initialize(send, port)
  local res = send(port, { jsonrpc = "2.0", id = 2, method = "tools/call",
    params = { name = tool, arguments = args } },
    { ["mcp-session-id"] = sid, ["mcp-protocol-version"] = "2025-11-25" })
  assert.are.equal(200, res.status, res.body)
  return json.decode(res.body)
end

-- Polls GET /seen?tag=tag until it says something else than `unless`, for up to 3 s.
local function seen(port, tag, unless)
  local deadline, body = http.now() + 3
  repeat
    body = assert(http.get(port, "/seen?tag=" .. tag)).body
    if body ~= unless then return body end
    http.sleep(0.02)
  until http.now() > deadline
  return body
end

describe("an action's ctx.signal", function()
  local s = server.for_describe(server.fixture("action_signal"))

  it("is not aborted in a run within its time, is kept, and is the one the waits take", function()
    assert.are.same({ state = "aborted=false reason=nil", kept = true, same = true, bounded = true },
      output(post(s.port, "signal.now", "{}")))
  end)

  it("is the one a wait took before the action read it", function()
    assert.are.same({ same = true, state = "aborted=false reason=nil" },
      output(post(s.port, "signal.wait_first", "{}")))
  end)

  it("read from a task the action spawned is the same signal", function()
    assert.are.same({ found = true, same = true, state = "aborted=false reason=nil" },
      output(post(s.port, "signal.spawned", "{}")))
  end)

  it("read after a wait within its time is not aborted", function()
    assert.are.same({ state = "aborted=false reason=nil" },
      output(post(s.port, "signal.late", '{"ms":10,"tag":"quick"}')))
  end)

  it("read at once is aborted with reason timeout at the action timeout", function()
    local res = post(s.port, "signal.early", '{"ms":600,"tag":"early"}')
    assert.are.equal(504, res.status)
    assert.are.equal("heard=timeout", seen(s.port, "early", "heard=none"))
  end)

  it("read first after the action timeout is born aborted with reason timeout", function()
    local res = post(s.port, "signal.late", '{"ms":500,"tag":"after"}')
    assert.are.equal(504, res.status)
    assert.are.equal("aborted=true reason=timeout", seen(s.port, "after", "none"))
  end)

  it("read first after the client went away is aborted with reason disconnected", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("POST", "/actions/signal.late",
      { ["Content-Type"] = "application/json" }, '{"ms":150,"tag":"gone"}')))
    http.sleep(0.03)
    conn:reset() -- gone: a reset, not a half-close
    assert.are.equal("aborted=true reason=disconnected", seen(s.port, "gone", "none"))
    -- and the server goes on serving
    assert.are.same({ state = "aborted=false reason=nil" },
      output(post(s.port, "signal.late", '{"ms":1,"tag":"next"}')))
  end)

  -- The request sent, then shutdown(SHUT_WR): the answer, `connection: close`, then the close.
  local function half_closed(name, body)
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("POST", "/actions/" .. name,
      { ["Content-Type"] = "application/json" }, body)))
    http.sleep(0.03)
    assert(conn:shutdown())
    local res = assert(conn:read_response())
    assert.are.equal("close", res.headers.connection)
    assert.is_true(conn:closed(2))
    conn:close()
    return res
  end

  it("read first after the client half-closed is not aborted, and the answer still comes", function()
    assert.are.same({ state = "aborted=false reason=nil" },
      output(half_closed("signal.late", '{"ms":150,"tag":"half"}')))
    assert.are.equal("aborted=false reason=nil", seen(s.port, "half", "none"))
  end)

  it("read at once is not aborted when the client half-closes while the action waits", function()
    assert.are.same({ state = "aborted=false reason=nil" },
      output(half_closed("signal.early", '{"ms":150,"tag":"half.early"}')))
    assert.are.equal("heard=none", seen(s.port, "half.early", "none"))
  end)

  it("read first by a spawned task after its request ended well is not aborted", function()
    assert.are.same({}, output(post(s.port, "signal.spawned_late", '{"ms":0,"after":50,"tag":"sl.ok"}')))
    assert.are.equal("aborted=false reason=nil", seen(s.port, "sl.ok", "none"))
  end)

  it("read first by a spawned task after the action timeout is aborted with reason timeout", function()
    local res = post(s.port, "signal.spawned_late", '{"ms":600,"after":400,"tag":"sl.timeout"}')
    assert.are.equal(504, res.status)
    assert.are.equal("aborted=true reason=timeout", seen(s.port, "sl.timeout", "none"))
  end)

  it("read first by a spawned task after the client went away is aborted with reason disconnected", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("POST", "/actions/signal.spawned_late",
      { ["Content-Type"] = "application/json" }, '{"ms":200,"after":100,"tag":"sl.gone"}')))
    http.sleep(0.03)
    conn:reset() -- gone: a reset, not a half-close
    assert.are.equal("aborted=true reason=disconnected", seen(s.port, "sl.gone", "none"))
  end)

  it("taken by a spawned task is aborted with its request: timeout", function()
    local res = post(s.port, "signal.fanout", '{"ms":600,"tag":"fo.timeout"}')
    assert.are.equal(504, res.status)
    assert.are.equal("heard=timeout", seen(s.port, "fo.timeout", "heard=none"))
  end)

  it("taken by a spawned task is aborted with its request: the client went away", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("POST", "/actions/signal.fanout",
      { ["Content-Type"] = "application/json" }, '{"ms":200,"tag":"fo.gone"}')))
    http.sleep(0.05)
    conn:reset() -- gone: a reset, not a half-close
    assert.are.equal("heard=disconnected", seen(s.port, "fo.gone", "heard=none"))
  end)

  it("taken by a spawned task of a request that ended well is never aborted", function()
    assert.are.same({}, output(post(s.port, "signal.fanout", '{"ms":1,"tag":"fo.ok"}')))
    http.sleep(0.4) -- past the action timeout
    assert.are.equal("heard=none", assert(http.get(s.port, "/seen?tag=fo.ok")).body)
  end)

  it("taken by a wait first is the one ctx.signal gives after the timeout, aborted", function()
    local res = post(s.port, "signal.current_late", '{"tag":"cl"}')
    assert.are.equal(504, res.status)
    assert.are.equal("same=true aborted=true reason=timeout", seen(s.port, "cl", "none"))
  end)

  it("is a field the handler may write over, and clear", function()
    assert.are.same({ first = true, cleared = "nil", mine = "mine" },
      output(post(s.port, "signal.written", "{}")))
  end)

  for _, id in ipairs({ "00ff00ff00ff00ff", "0123456789abcdef", "0123456789ABCDEF", "0123456789abcdef0",
                        "trace.42", false }) do
    it("gives ctx.requestId " .. (id and "the client's " .. id or "a made-up one") .. ", log and progress", function()
      local headers = { { "Content-Type", "application/json" } }
      if id then headers[2] = { "X-Request-Id", id } end
      local res = assert(http.request(s.port, "POST", "/actions/ctx.fields", headers, "{}"))
      local expected = id or res.headers["x-request-id"]
      assert.are.equal(id or expected, res.headers["x-request-id"])
      assert.are.same({ id = expected, again = expected, cleared = "nil", log = true, progress = true,
        other = "nil", method = "POST" }, output(res))
    end)
  end

  it("lists requestId, log, progress and signal to pairs, and no key of the runtime's own", function()
    assert.are.same({ keys = "log:function progress:function requestId:string signal:userdata" },
      output(post(s.port, "ctx.keys", "{}")))
  end)

  describe("of a handler that can never see a ctx (none is made for it)", function()
    it("is the one its waits take, aborted with reason timeout at the action timeout", function()
      local res = post(s.port, "bare.early", '{"ms":600,"tag":"bare.early"}')
      assert.are.equal(504, res.status)
      assert.are.equal("heard=timeout", seen(s.port, "bare.early", "heard=none"))
    end)

    it("taken first after a wait within its time is not aborted, and has the action's deadline", function()
      assert.are.same({ state = "aborted=false reason=nil bounded=true" },
        output(post(s.port, "bare.late", '{"ms":10,"tag":"bare.quick"}')))
    end)

    it("taken first after the action timeout is born aborted with reason timeout", function()
      local res = post(s.port, "bare.late", '{"ms":500,"tag":"bare.after"}')
      assert.are.equal(504, res.status)
      assert.are.equal("aborted=true reason=timeout bounded=true", seen(s.port, "bare.after", "none"))
    end)

    it("taken first after the client went away is aborted with reason disconnected", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("POST", "/actions/bare.late",
        { ["Content-Type"] = "application/json" }, '{"ms":150,"tag":"bare.gone"}')))
      http.sleep(0.03)
      conn:reset() -- gone: a reset, not a half-close
      assert.are.equal("aborted=true reason=disconnected bounded=true", seen(s.port, "bare.gone", "none"))
    end)

    it("with no parameter at all answers as any action, its output checked", function()
      local res = post(s.port, "bare.none", '{"n":1}')
      assert.are.equal(200, res.status, res.body)
      assert.are.equal('{"ok":true,"output":{"ok":true}}', res.body)
      assert.are.equal(422, post(s.port, "bare.none", '{"n":"one"}').status)
    end)
  end)

  it("is given, with the request and its id, to a handler that takes any number of arguments", function()
    local res = assert(http.request(s.port, "POST", "/actions/ctx.vararg",
      { { "Content-Type", "application/json" }, { "X-Request-Id", "va.1" } }, '{"n":7}'))
    assert.are.same({ count = 2, n = 7, method = "POST", id = "va.1" }, output(res))
  end)

  it("called over MCP is the run's signal, kept, the one the waits take", function()
    local answer = mcp_call(s.port, "signal_now", {})
    assert.are.same({ state = "aborted=false reason=nil", kept = true, same = true, bounded = true },
      answer.result.structuredContent)
  end)

  it("called over MCP and read first after the action timeout is aborted with reason timeout", function()
    local answer = mcp_call(s.port, "signal_late", { ms = 500, tag = "mcp.after" })
    assert.is_true(answer.result.isError)
    assert.are.equal("aborted=true reason=timeout", seen(s.port, "mcp.after", "none"))
  end)
end)
