-- The turn budget (runtime/core/preempt.h): many short tasks woken at once share a budget of Lua
-- time between two polls of the loop, so what the loop answers itself (/__clank/health, in C)
-- waits for one turn, not for the whole burst. A correctness property (the loop polls between
-- the tasks), not a benchmark: the bounds are loose, and looser under the sanitizers.
local server = require "helpers.server"
local http = require "helpers.http"

local SCALE = server.sanitized and 3 or 1

-- One request on a kept-alive connection: its response and how long it took.
local function ask(conn, path)
  local t0 = http.now()
  assert(conn:send(http.build("GET", path)))
  local res = assert(conn:read_response({ timeout = 30 * SCALE }))
  assert.are.equal(200, res.status, res.body)
  return res, http.now() - t0
end

-- Starts a burst of n tasks of ms each, woken via `via`, and asks for health on a connection of
-- its own until every task is done: the slowest health answer, how many there were, the
-- burst's whole time, and its final count.
local function burst_under_health(s, n, ms, via)
  local health, control = assert(http.connect(s.port)), assert(http.connect(s.port))
  ask(health, "/__clank/health") -- connected before the burst
  local t0 = http.now()
  local started = ask(control, ("/burst?n=%d&ms=%d&via=%s"):format(n, ms, via))
  assert.are.equal("started " .. n, started.body)
  local slowest, answers, count = 0, 0
  repeat
    local _, took = ask(health, "/__clank/health")
    slowest, answers = math.max(slowest, took), answers + 1
    http.sleep(0.005)
    count = ask(control, "/burst/done").body
  until count:match("^(%d+)/") == tostring(n) or http.now() - t0 > 60 * SCALE
  local total = http.now() - t0
  health:close()
  control:close()
  return slowest, answers, total, count
end

describe("the turn budget in clank-run", function()
  local s = server.for_describe(server.fixture("turn_budget"))

  -- via=db: a pool of 8 delivers up to 8 results a poll, so the loop polls often even without the
  -- budget; what it shows is that a task put off resumes with the result it woke with.
  for _, via in ipairs({ "sleep", "db" }) do
    it("answers health within 150 ms while 300 tasks woken at once (" .. via ..
      ") work 2 ms each", function()
      local slowest, answers, total, count = burst_under_health(s, 300, 2, via)
      assert.are.equal("300/300 wrong 0", count, s:stderr())
      -- the burst is 600 ms of Lua: in one go it would hold every health answer that long
      assert.is_true(total > 0.4, ("the burst took %.3f s"):format(total))
      assert.is_true(slowest < 0.15 * SCALE,
        ("a health answer took %.3f s during a burst of %.3f s"):format(slowest, total))
      assert.is_true(answers >= 3, ("health answered only %d times during the burst"):format(answers))
    end)
  end
end)

-- bench/preempt.sh's baseline turns the watchdog off: then there is no turn either, and the
-- burst runs in one go, as it did before the budget.
describe("the turn budget in clank-run without preemption", function()
  local s = server.for_describe(server.fixture("turn_budget"),
    { env = { CLANK_TEST_LIMITS = "preempt=0" } })

  it("runs a burst woken at once in one go, health waiting behind it", function()
    local slowest, _, total, count = burst_under_health(s, 300, 2, "sleep")
    assert.are.equal("300/300 wrong 0", count, s:stderr())
    assert.is_true(slowest > 0.3, ("a health answer took %.3f s during a burst of %.3f s")
      :format(slowest, total))
  end)
end)
