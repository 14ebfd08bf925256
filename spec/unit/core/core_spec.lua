-- clank.core.log and the one protected call (SPEC §13 Logs: every line goes through the logger,
-- a traceback is part of its line). In plain lua5.4 the logger writes to stderr, so these specs
-- run a child lua5.4 (with the same LUA_PATH and LUA_CPATH) and read what it wrote.
local core = require "clank.core"

local LUA = "lua5.4"

-- Runs code in a child lua5.4 and returns what it wrote to stderr.
local function stderr_of(code)
  local script = os.tmpname()
  local out = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(code)
  f:close()
  local ok = os.execute("CLANK_DEBUG=1 " .. LUA .. " " .. script .. " 2>" .. out .. " >/dev/null")
  f = assert(io.open(out))
  local text = f:read("a")
  f:close()
  os.remove(script)
  os.remove(out)
  assert.is_true(ok, text)
  return text
end

describe("clank.core.log", function()
  it("writes one line at the level given", function()
    local text = stderr_of([[require("clank.core").log("warn", "hello from the spec")]])
    local _, lines = text:gsub("\n", "")
    assert.are.equal(1, lines, text)
    assert.truthy(text:find("warn", 1, true), text)
    assert.truthy(text:find("hello from the spec", 1, true), text)
  end)

  it("takes the levels debug, info, warn and error", function()
    local text = stderr_of([[
      local log = require("clank.core").log
      for _, level in ipairs({ "debug", "info", "warn", "error" }) do log(level, "at " .. level) end
    ]])
    for _, level in ipairs({ "debug", "info", "warn", "error" }) do
      assert.truthy(text:find("at " .. level, 1, true), text)
    end
  end)

  it("refuses an unknown level and a missing message", function()
    local ok, err = pcall(core.log, "loud", "x")
    assert.is_false(ok)
    assert.matches("invalid option 'loud'", err, 1, true)
    ok = pcall(core.log, "info")
    assert.is_false(ok)
  end)
end)

describe("clank protected calls", function()
  it("log a failing spawned task with its traceback", function()
    local text = stderr_of([[
      local clank = require "clank"
      local function inner() error("spawned boom") end
      clank.spawn(function() inner() end)
    ]])
    assert.truthy(text:find("spawned task failed", 1, true), text)
    assert.truthy(text:find("spawned boom", 1, true), text)
    assert.truthy(text:find("stack traceback:", 1, true), text)
    assert.truthy(text:find("inner", 1, true), text)
  end)

  it("log a failing onAbort listener with its traceback, and go on", function()
    local text = stderr_of([[
      local clank = require "clank"
      local s = clank.schema
      local later = false
      local slow = clank.defineAction {
        name = "spec.slow", description = "Waits past the timeout.", sideEffects = "none",
        input = s.object {},
        handler = function(_, ctx)
          ctx.signal:onAbort(function() error("listener boom") end)
          ctx.signal:onAbort(function() later = true end)
          clank.sleep(200)
        end,
      }
      local b = clank.createAgentBridge({ slow }, { actionTimeout = 20 })
      local res = b:handle({ method = "POST", path = "/actions/spec.slow", scheme = "http",
        headers = { host = "h", ["content-type"] = "application/json" }, body = "{}" })
      assert(res.status == 504, res.status)
      assert(later, "the next listener did not run")
    ]])
    assert.truthy(text:find("an onAbort listener failed", 1, true), text)
    assert.truthy(text:find("listener boom", 1, true), text)
    assert.truthy(text:find("stack traceback:", 1, true), text)
  end)

  it("log an effect that fails while a runner writes, with a traceback", function()
    local text = stderr_of([[
      local clank = require "clank"
      local s = clank.schema
      local S = clank.signal
      local act = clank.defineAction {
        name = "spec.ok", description = "Succeeds.", sideEffects = "none", input = s.object {},
        handler = function() return 1 end,
      }
      local r = clank.actionRunner(act)
      local dispose = S.effect(function()
        if r.pending.value then error("effect boom") end
      end)
      r:run({})
      dispose()
    ]])
    assert.truthy(text:find("an effect failed", 1, true), text)
    assert.truthy(text:find("effect boom", 1, true), text)
    assert.truthy(text:find("stack traceback:", 1, true), text)
  end)

  it("log an action's failure in the bridge with the handler's traceback", function()
    local text = stderr_of([[
      local clank = require "clank"
      local s = clank.schema
      local function deep() error("handler boom") end
      local failing = clank.defineAction {
        name = "spec.fail", description = "Fails.", sideEffects = "none", input = s.object {},
        handler = function() deep() end,
      }
      local b = clank.createAgentBridge({ failing })
      local res = b:handle({ method = "POST", path = "/actions/spec.fail", scheme = "http",
        headers = { host = "h", ["content-type"] = "application/json" }, body = "{}" })
      assert(res.status == 500, res.status)
    ]])
    assert.truthy(text:find("action failed", 1, true), text)
    assert.truthy(text:find("handler boom", 1, true), text)
    assert.truthy(text:find("stack traceback:", 1, true), text)
    assert.truthy(text:find("deep", 1, true), text)
  end)
end)
