-- The action timeout over HTTP (SPEC §5 step 8, §12, §13): an action that waits past it is
-- answered 504 TIMEOUT at the deadline, its signal aborted with reason "timeout", its later
-- result dropped and a later failure logged; the connection goes on with its next request
-- meanwhile. One that waits within its time, or runs without waiting, is answered as usual.
-- Expected bodies and headers are written from the SPEC.
local server = require "helpers.server"
local http = require "helpers.http"
local socket = require "socket"

local FOREIGN = "http://localhost:5173" -- in the fixture's allowedOrigins
local TIMEOUT_BODY = '{"error":{"code":"TIMEOUT","message":"The action timed out."},"ok":false}'
local JSON = { ["Content-Type"] = "application/json" }

local function post(name, body, headers)
  return http.build("POST", "/actions/" .. name, headers or JSON, body)
end

-- The 504 exactly: status, body, and the headers the bridge gives a failure.
local function assert_timeout(res, origin)
  assert.are.equal(504, res.status, "body: " .. tostring(res.body))
  assert.are.equal(TIMEOUT_BODY, res.body)
  assert.are.equal("application/json", res.headers["content-type"])
  assert.are.equal("no-store", res.headers["cache-control"])
  assert.are.equal("nosniff", res.headers["x-content-type-options"])
  assert.are.equal(origin, res.headers["access-control-allow-origin"])
  assert.are.equal(origin and "Origin" or nil, res.headers.vary)
end

local function log_of(s)
  return assert(http.get(s.port, "/log")).body
end

-- Waits until the app's log holds text (the handler goes on after its 504).
local function await_log(s, text)
  local deadline = socket.gettime() + 3
  repeat
    local log = log_of(s)
    if log:find(text, 1, true) then return log end
    socket.sleep(0.02)
  until socket.gettime() > deadline
  error("the log never held " .. text .. ":\n" .. log_of(s))
end

describe("the action timeout in clank-run", function()
  local s = server.for_describe(server.fixture("action_timeout"))

  it("answers an action that waits within its time with its output", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(post("wait", '{"ms":30}')))
    local res = assert(conn:read_response())
    assert.are.equal(200, res.status)
    assert.are.equal('{"ok":true,"output":{"waited":30}}', res.body)
    assert.are.equal("application/json", res.headers["content-type"])
    conn:close()
    assert.truthy(log_of(s):find("woke 30 false nil true\n", 1, true))
  end)

  it("answers 504 at the deadline, then the next pipelined request, in order", function()
    local conn = assert(http.connect(s.port))
    local t0 = socket.gettime()
    assert(conn:send(post("wait", '{"ms":700}') .. post("echo", '{"text":"next"}')
      .. post("wait", '{"ms":10}')))
    local list = assert(conn:read_responses(3))
    local elapsed = socket.gettime() - t0
    assert_timeout(list[1], nil)
    assert.are.equal(200, list[2].status)
    assert.are.equal('{"ok":true,"output":{"text":"next"}}', list[2].body)
    assert.are.equal(200, list[3].status)
    assert.are.equal('{"ok":true,"output":{"waited":10}}', list[3].body)
    assert.is_true(elapsed >= 0.18, "answered after " .. elapsed .. " s, before the 200 ms timeout")
    assert.is_true(elapsed < 0.6, "answered after " .. elapsed .. " s, not at the 200 ms timeout")
    assert.is_true(conn:stays_open(0.05))
    conn:close()
    -- the handler went on: its signal aborted with reason timeout, its result dropped
    local log = await_log(s, "woke 700 ")
    assert.truthy(log:find("abort timeout\n", 1, true), log)
    assert.truthy(log:find("woke 700 true timeout true\n", 1, true), log)
  end)

  it("gives the 504 an allowed foreign origin's CORS headers", function()
    local h = { ["Content-Type"] = "application/json", Origin = FOREIGN }
    local res = assert(http.request(s.port, "POST", "/actions/wait", h, '{"ms":500}'))
    assert_timeout(res, FOREIGN)
  end)

  it("logs a failure that comes after the timeout, and keeps serving", function()
    local from = #s:stderr()
    local conn = assert(http.connect(s.port))
    assert(conn:send(post("wait", '{"ms":450,"fail":true}') .. post("echo", '{"text":"x"}')))
    local list = assert(conn:read_responses(2))
    assert_timeout(list[1], nil)
    assert.are.equal('{"ok":true,"output":{"text":"x"}}', list[2].body)
    conn:close()
    await_log(s, "woke 450 ")
    local deadline = socket.gettime() + 2
    local line
    repeat
      line = s:stderr():sub(from + 1):match("[^\n]*an action that timed out failed later[^\n]*")
      if not line then socket.sleep(0.02) end
    until line or socket.gettime() > deadline
    assert.truthy(line, s:stderr():sub(from + 1))
    assert.truthy(line:find("failed after 450 ms", 1, true), line)
    assert.truthy(line:find("error", 1, true), line)
  end)

  it("gives a signal first read after the timeout as aborted with reason timeout", function()
    local res = assert(http.request(s.port, "POST", "/actions/lateSignal", JSON, '{"ms":400}'))
    assert_timeout(res, nil)
    assert.truthy(await_log(s, "late "):find("late true timeout\n", 1, true))
  end)

  it("answers Lua that runs without waiting within its time", function()
    local res = assert(http.request(s.port, "POST", "/actions/busy", JSON, '{"ms":40}'))
    assert.are.equal(200, res.status)
    assert.are.equal('{"ok":true,"output":{"ran":40}}', res.body)
  end)

  it("times out Lua that runs past the timeout, preempted, from its first preemption", function()
    local t0 = socket.gettime()
    local res = assert(http.request(s.port, "POST", "/actions/busy", JSON, '{"ms":600}'))
    local elapsed = socket.gettime() - t0
    assert_timeout(res, nil)
    assert.is_true(elapsed >= 0.18 and elapsed < 0.55, "answered after " .. elapsed .. " s")
  end)

  -- SPEC §5 step 9: an unexpected error is 500 ACTION_FAILED, its text logged, not shown.
  -- The second's log line is the same text, which the log folds into a repeat count.
  for i, ms in ipairs { 20, 0 } do
    it("answers a bare coroutine.yield in a handler as a failed action (after waiting "
      .. ms .. " ms)", function()
      local from = #s:stderr()
      local conn = assert(http.connect(s.port))
      local h = { ["Content-Type"] = "application/json", Origin = FOREIGN }
      assert(conn:send(post("strayYield", '{"ms":' .. ms .. "}", h) .. post("echo", '{"text":"on"}')))
      local list = assert(conn:read_responses(2))
      local res = list[1]
      assert.are.equal(500, res.status, res.body)
      assert.are.equal('{"error":{"code":"ACTION_FAILED","message":"The action failed."},"ok":false}',
        res.body)
      assert.are.equal("application/json", res.headers["content-type"])
      assert.are.equal("no-store", res.headers["cache-control"])
      assert.are.equal(FOREIGN, res.headers["access-control-allow-origin"])
      assert.are.equal("Origin", res.headers.vary)
      assert.are.equal('{"ok":true,"output":{"text":"on"}}', list[2].body)
      assert.is_true(conn:stays_open(0.05))
      conn:close()
      local err = s:stderr():sub(from + 1)
      if i == 1 then
        local line = err:match("[^\n]*action failed:[^\n]*")
        assert.truthy(line, err)
        assert.truthy(line:find("coroutine.yield in a handler", 1, true), line)
      end
      assert.is_nil(err:find("route POST", 1, true), err)
      local log = log_of(s)
      assert.truthy(log:find("yielding " .. ms .. "\n", 1, true), log)
      assert.is_nil(log:find("resumed " .. ms, 1, true), log)
    end)
  end

  it("reloads (SIGHUP) while handlers that timed out still wait, and goes on serving", function()
    local conns = {}
    for i = 1, 4 do
      conns[i] = assert(http.connect(s.port))
      assert(conns[i]:send(post("wait", '{"ms":' .. (600 + i) .. "}")))
    end
    for i = 1, 4 do
      assert_timeout(assert(conns[i]:read_response()), nil)
      conns[i]:close()
    end
    local from = #s:stderr()
    s:signal("HUP") -- the old generation goes while its handlers still sleep
    local deadline = socket.gettime() + 3
    repeat
      socket.sleep(0.05)
    until s:stderr():sub(from + 1):find("reload", 1, true) or socket.gettime() > deadline
    socket.sleep(0.6) -- past the handlers' wake-up
    local res = assert(http.request(s.port, "POST", "/actions/echo", JSON, '{"text":"after"}'))
    assert.are.equal('{"ok":true,"output":{"text":"after"}}', res.body)
    assert.is_nil(s:stderr():sub(from + 1):find("failed later", 1, true), s:stderr():sub(from + 1))
  end)

  it("holds no more memory or registry entries after 200 timed-out requests", function()
    local function batch(n)
      local conns = {}
      for i = 1, 10 do
        conns[i] = assert(http.connect(s.port))
        local bytes = {}
        for j = 1, n do
          bytes[j] = post("wait", '{"ms":' .. (230 + (j % 3)) .. "}") .. post("echo", '{"text":"k"}')
        end
        assert(conns[i]:send(table.concat(bytes)))
      end
      for i = 1, 10 do
        local list = assert(conns[i]:read_responses(2 * n, nil, { timeout = 30 }))
        for j = 1, 2 * n, 2 do
          assert_timeout(list[j], nil)
          assert.are.equal('{"ok":true,"output":{"text":"k"}}', list[j + 1].body)
        end
        conns[i]:close()
      end
      socket.sleep(0.15) -- the last handlers end
    end
    local function memory()
      local kb, refs = assert(http.get(s.port, "/memory")).body:match("^(%d+) (%d+)$")
      return tonumber(kb), tonumber(refs)
    end
    batch(5)
    local kb1, refs1 = memory()
    batch(10)
    batch(5)
    local kb2, refs2 = memory()
    assert.is_true(refs2 <= refs1 + 4, "registry entries " .. refs1 .. " -> " .. refs2)
    assert.is_true(kb2 <= kb1 + 64, "Lua memory " .. kb1 .. " KiB -> " .. kb2 .. " KiB")
  end)
end)
