-- clank.sleep, clank.timeout and clank.spawn in process (SPEC §1, §4, §12).
-- An action called from top-level code runs the loop until it finishes, so
-- the actions below are the runtime coroutines these run in.
local clank = require "clank"
local socket = require "socket"
local s = clank.schema

local NOT_IN_COROUTINE = "clank.sleep: cannot wait here (not in a handler coroutine)"

-- Runs fn(ctx) as an action's handler and returns what it returns.
local function in_handler(fn, ctx)
  local action = clank.defineAction {
    name = "run", description = "Runs a function.", input = s.object {}, sideEffects = "read",
    handler = function(_, c) return { value = fn(c) } end,
  }
  return action({}, ctx or {}).value
end

describe("clank.sleep", function()
  it("waits at least ms in a handler", function()
    local t0 = socket.gettime()
    in_handler(function() clank.sleep(40) end)
    local elapsed = socket.gettime() - t0
    assert.is_true(elapsed >= 0.035, "waited " .. elapsed .. " s")
    assert.is_true(elapsed < 1, "waited " .. elapsed .. " s")
  end)

  it("waits ms even when the loop sat idle before the call", function()
    in_handler(function() clank.sleep(1) end)
    socket.sleep(0.2) -- the loop's cached time goes stale meanwhile
    local t0 = socket.gettime()
    in_handler(function() clank.sleep(40) end)
    local elapsed = socket.gettime() - t0
    assert.is_true(elapsed >= 0.035, "waited " .. elapsed .. " s for clank.sleep(40)")
  end)

  it("waits 0 ms and resumes", function()
    assert.are.equal("after", in_handler(function()
      clank.sleep(0)
      return "after"
    end))
  end)

  it("waits several times in one handler", function()
    assert.are.equal(3, in_handler(function()
      local n = 0
      for _ = 1, 3 do
        clank.sleep(5)
        n = n + 1
      end
      return n
    end))
  end)

  it("raises the SPEC message in top-level code", function()
    local ok, err = pcall(clank.sleep, 1)
    assert.is_false(ok)
    assert.truthy(tostring(err):find(NOT_IN_COROUTINE, 1, true), tostring(err))
  end)

  it("raises the SPEC message in a coroutine the runtime does not drive", function()
    local ok, err = pcall(coroutine.wrap(function() clank.sleep(1) end))
    assert.is_false(ok)
    assert.truthy(tostring(err):find(NOT_IN_COROUTINE, 1, true), tostring(err))
  end)
end)

describe("clank.timeout", function()
  it("returns a signal that aborts after ms with reason timeout", function()
    local seen = in_handler(function()
      local signal = clank.timeout(20)
      local r = { before = signal.aborted, calls = 0 }
      signal:onAbort(function() r.calls = r.calls + 1 end)
      clank.sleep(80)
      r.after = signal.aborted
      r.reason = signal.reason
      return r
    end)
    assert.is_false(seen.before)
    assert.is_true(seen.after)
    assert.are.equal("timeout", seen.reason)
    assert.are.equal(1, seen.calls)
  end)

  it("has not aborted before ms", function()
    assert.is_false(in_handler(function()
      local signal = clank.timeout(500)
      clank.sleep(10)
      return signal.aborted
    end))
  end)
end)

describe("clank.spawn", function()
  it("runs a function in another coroutine that may wait", function()
    local seen = in_handler(function()
      local r = { flag = false }
      clank.spawn(function()
        clank.sleep(10)
        r.flag = true
      end)
      r.right_after = r.flag
      clank.sleep(80)
      return r
    end)
    assert.is_false(seen.right_after)
    assert.is_true(seen.flag)
  end)

  it("keeps an error in the spawned coroutine away from the caller", function()
    assert.are.equal("fine", in_handler(function()
      clank.spawn(function()
        clank.sleep(1)
        error("spawned failure on purpose")
      end)
      clank.sleep(30)
      return "fine"
    end))
  end)
end)

describe("ctx.signal in the bridge", function()
  it("is not aborted while the action runs in time", function()
    local action = clank.defineAction {
      name = "probe", description = "Reports its signal.", input = s.object {}, sideEffects = "read",
      handler = function(_, ctx)
        clank.sleep(5)
        return { aborted = ctx.signal.aborted, reason = ctx.signal.reason or "none" }
      end,
    }
    local bridge = clank.createAgentBridge({ action })
    local res = bridge:handle({
      method = "POST", url = "/actions/probe", path = "/actions/probe", query = {},
      headers = { host = "127.0.0.1:8080", ["content-type"] = "application/json", ["content-length"] = "2" },
      body = "{}", scheme = "http",
    })
    assert.are.equal('{"ok":true,"output":{"aborted":false,"reason":"none"}}', res.body)
  end)
end)
