-- An action's ctx.signal over HTTP (SPEC §4 "ctx.signal", §5 step 8, §12): the signal is the
-- same object however it is reached (ctx.signal, the runtime's waits), is aborted with reason
-- "timeout" at the action timeout (300 ms in the fixture) and "disconnected" when the client
-- goes away, whether the action read it before or only after that moment.
local server = require "helpers.server"
local http = require "helpers.http"

local function post(port, name, body)
  return assert(http.request(port, "POST", "/actions/" .. name,
    { { "Content-Type", "application/json" } }, body))
end

local output = require("helpers.bridge").output

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
    conn:close()
    assert.are.equal("aborted=true reason=disconnected", seen(s.port, "gone", "none"))
    -- and the server goes on serving
    assert.are.same({ state = "aborted=false reason=nil" },
      output(post(s.port, "signal.late", '{"ms":1,"tag":"next"}')))
  end)
end)
