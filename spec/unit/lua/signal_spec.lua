-- clank.signal: signals, computed values, effects and batches (SPEC §7).
-- Expected values follow the SPEC: synchronous, glitch-free notification;
-- effects run now and after each change of what they read.
local S = require "clank.signal"
local signal, computed, effect, batch, untracked = S.signal, S.computed, S.effect, S.batch, S.untracked

local raised = require("helpers.errors").raised

-- Stops the running coroutine for good, as the runtime stops a task over its CPU or memory
-- budget (runtime/core/preempt.c): from the next instruction on each one raises again, so a
-- pcall that catches it fails at its next step, and the coroutine dies. No Lua code of it runs
-- again.
local STOPPED = "RESOURCE_LIMIT: the task used too much CPU"
local function stop_here()
  debug.sethook(function() error(STOPPED, 0) end, "", 1)
end

-- Runs fn in a coroutine that is then stopped for good (fn calls stop_here) → that coroutine.
local function stopped(fn)
  local co = coroutine.create(fn)
  local ok, err = coroutine.resume(co)
  assert.is_false(ok)
  assert.are.equal(STOPPED, err)
  assert.are.equal("dead", coroutine.status(co))
  return co
end

describe("clank.signal", function()
  describe("signal", function()
    it("reads and writes its value", function()
      local s = signal(1)
      assert.are.equal(1, s.value)
      s.value = 2
      assert.are.equal(2, s.value)
    end)

    it("holds nil, false and tables", function()
      local s = signal()
      assert.is_nil(s.value)
      s.value = false
      assert.is_false(s.value)
      local t = {}
      s.value = t
      assert.are.equal(t, s.value)
      s.value = nil
      assert.is_nil(s.value)
    end)

    it("notifies only when a write changes the value", function()
      local s, t = signal(1), {}
      local runs = 0
      effect(function()
        local _ = s.value
        runs = runs + 1
      end)
      s.value = 1
      assert.are.equal(1, runs)
      s.value = 2
      assert.are.equal(2, runs)
      s.value = t
      s.value = t
      assert.are.equal(3, runs)
      s.value = {} -- another table is another value
      assert.are.equal(4, runs)
      s.value = 0 / 0
      s.value = 0 / 0 -- NaN stays NaN
      assert.are.equal(5, runs)
      s.value = nil
      s.value = nil
      assert.are.equal(6, runs)
    end)

    it("peek reads without tracking", function()
      local s = signal(1)
      local runs = 0
      effect(function()
        runs = runs + 1
        return s:peek()
      end)
      s.value = 2
      assert.are.equal(1, runs)
      assert.are.equal(2, s:peek())
    end)

    it("refuses to set any other field", function()
      local s = signal(1)
      local err = raised(function() s.val = 2 end)
      assert.truthy(tostring(err):find("cannot set 'val'", 1, true), tostring(err))
    end)

    it("isSignal tells signals and computeds from other values", function()
      assert.is_true(S.isSignal(signal(1)))
      assert.is_true(S.isSignal(computed(function() return 1 end)))
      assert.is_false(S.isSignal({ value = 1 }))
      assert.is_false(S.isSignal(nil))
      assert.is_false(S.isSignal("value"))
      assert.is_false(S.isSignal(effect(function() end)))
    end)
  end)

  describe("computed", function()
    it("derives its value from what it reads", function()
      local a = signal(2)
      local double = computed(function() return a.value * 2 end)
      assert.are.equal(4, double.value)
      a.value = 5
      assert.are.equal(10, double.value)
    end)

    it("is lazy: nothing runs until it is read", function()
      local a = signal(1)
      local calls = 0
      local c = computed(function()
        calls = calls + 1
        return a.value
      end)
      assert.are.equal(0, calls)
      a.value = 2
      a.value = 3
      assert.are.equal(0, calls)
      assert.are.equal(3, c.value)
      assert.are.equal(1, calls)
    end)

    it("caches: reads without a change do not recompute", function()
      local a, other = signal(1), signal(1)
      local calls = 0
      local c = computed(function()
        calls = calls + 1
        return a.value + 1
      end)
      assert.are.equal(2, c.value)
      assert.are.equal(2, c.value)
      other.value = 2 -- not read by c
      assert.are.equal(2, c.value)
      assert.are.equal(1, calls)
      a.value = 10
      assert.are.equal(11, c.value)
      assert.are.equal(11, c.value)
      assert.are.equal(2, calls)
    end)

    it("recomputes once per change when an effect reads it", function()
      local a = signal(1)
      local calls = 0
      local c = computed(function()
        calls = calls + 1
        return a.value
      end)
      local seen = {}
      effect(function() seen[#seen + 1] = c.value end)
      a.value = 2
      a.value = 3
      assert.are.same({ 1, 2, 3 }, seen)
      assert.are.equal(3, calls)
      assert.are.equal(3, c.value)
      assert.are.equal(3, calls)
    end)

    it("does not re-run its dependents when its value stays the same", function()
      local n = signal(1)
      local parity = computed(function() return n.value % 2 end)
      local runs = 0
      effect(function()
        local _ = parity.value
        runs = runs + 1
      end)
      n.value = 3
      assert.are.equal(1, runs)
      n.value = 4
      assert.are.equal(2, runs)
    end)

    it("chains through other computeds", function()
      local a = signal(1)
      local b = computed(function() return a.value + 1 end)
      local c = computed(function() return b.value * 10 end)
      assert.are.equal(20, c.value)
      a.value = 2
      assert.are.equal(30, c.value)
    end)

    it("handles a chain 50 computeds deep", function()
      local a = signal(0)
      local last = a
      for _ = 1, 50 do
        local prev = last
        last = computed(function() return prev.value + 1 end)
      end
      local seen
      local dispose = effect(function() seen = last.value end)
      assert.are.equal(50, seen)
      a.value = 1
      assert.are.equal(51, seen)
      dispose()
    end)

    it("is read-only", function()
      local c = computed(function() return 1 end)
      local err = raised(function() c.value = 2 end)
      assert.truthy(tostring(err):find("read-only", 1, true), tostring(err))
      assert.are.equal(1, c.value)
    end)

    it("refuses to write signals from its function", function()
      local a = signal(1)
      local c = computed(function()
        a.value = 2
        return 1
      end)
      local err = raised(function() return c.value end)
      assert.truthy(tostring(err):find("a computed cannot write signals", 1, true), tostring(err))
      assert.are.equal(1, a.value)
    end)

    it("raises its function's error on each read until a source changes", function()
      local a = signal(0)
      local calls = 0
      local boom = { code = "BOOM" }
      local c = computed(function()
        calls = calls + 1
        if a.value == 0 then error(boom) end
        return a.value
      end)
      assert.are.equal(boom, raised(function() return c.value end))
      assert.are.equal(boom, raised(function() return c.value end))
      assert.are.equal(1, calls)
      a.value = 1
      assert.are.equal(1, c.value)
      assert.are.equal(2, calls)
    end)

    it("detects a computed that reads itself", function()
      local c
      c = computed(function() return c.value end)
      local err = raised(function() return c.value end)
      assert.truthy(tostring(err):find("cycle", 1, true), tostring(err))
    end)

    it("is freed when nothing holds it", function()
      local a = signal(1)
      local weak = setmetatable({}, { __mode = "v" })
      do
        local c = computed(function() return a.value end)
        local _ = c.value
        weak[1] = c
      end
      collectgarbage()
      collectgarbage()
      assert.is_nil(weak[1])
      a.value = 2
    end)

    it("stays alive while an effect reads it", function()
      local a = signal(1)
      local weak = setmetatable({}, { __mode = "v" })
      local seen
      local dispose
      do
        local c = computed(function() return a.value * 2 end)
        weak[1] = c
        dispose = effect(function() seen = c.value end)
      end
      collectgarbage()
      collectgarbage()
      assert.is_not_nil(weak[1])
      a.value = 5
      assert.are.equal(10, seen)
      dispose()
    end)
  end)

  describe("effect", function()
    it("runs at once and after each change of what it read", function()
      local a = signal("x")
      local seen = {}
      effect(function() seen[#seen + 1] = a.value end)
      assert.are.same({ "x" }, seen)
      a.value = "y"
      a.value = "z"
      assert.are.same({ "x", "y", "z" }, seen)
    end)

    it("does not run for signals it did not read", function()
      local a, b = signal(1), signal(1)
      local runs = 0
      effect(function()
        local _ = a.value
        runs = runs + 1
      end)
      b.value = 2
      assert.are.equal(1, runs)
    end)

    it("stops after its disposer is called", function()
      local a = signal(1)
      local runs = 0
      local dispose = effect(function()
        local _ = a.value
        runs = runs + 1
      end)
      dispose()
      dispose() -- twice is fine
      a.value = 2
      assert.are.equal(1, runs)
    end)

    it("may dispose itself while it runs", function()
      local a = signal(1)
      local runs, dispose = 0, nil
      dispose = effect(function()
        runs = runs + 1
        if a.value == 2 then dispose() end
      end)
      a.value = 2
      a.value = 3
      assert.are.equal(2, runs)
    end)

    it("runs a returned cleanup before the next run and on dispose", function()
      local a = signal(1)
      local log = {}
      local dispose = effect(function()
        local v = a.value
        log[#log + 1] = "run " .. v
        return function() log[#log + 1] = "cleanup " .. v end
      end)
      a.value = 2
      dispose()
      assert.are.same({ "run 1", "cleanup 1", "run 2", "cleanup 2" }, log)
    end)

    it("re-tracks dynamic dependencies on every run", function()
      local cond, x, y = signal(true), signal("x1"), signal("y1")
      local seen = {}
      effect(function() seen[#seen + 1] = cond.value and x.value or y.value end)
      y.value = "y2" -- not read yet
      assert.are.same({ "x1" }, seen)
      cond.value = false
      assert.are.same({ "x1", "y2" }, seen)
      x.value = "x2" -- no longer read
      assert.are.same({ "x1", "y2" }, seen)
      y.value = "y3"
      assert.are.same({ "x1", "y2", "y3" }, seen)
    end)

    it("re-tracks dynamic dependencies through computeds", function()
      local cond, x = signal(false), signal(1)
      local calls = 0
      local cx = computed(function()
        calls = calls + 1
        return x.value
      end)
      local seen = {}
      effect(function() seen[#seen + 1] = cond.value and cx.value or "off" end)
      x.value = 2
      assert.are.equal(0, calls) -- cx never read, never computed
      cond.value = true
      assert.are.same({ "off", 2 }, seen)
      x.value = 3
      assert.are.same({ "off", 2, 3 }, seen)
      cond.value = false
      x.value = 4
      assert.are.same({ "off", 2, 3, "off" }, seen)
      assert.are.equal(2, calls)
    end)

    it("runs effects queued by writes inside an effect", function()
      local a, b = signal(1), signal(0)
      effect(function() b.value = a.value * 10 end)
      local seen = {}
      effect(function() seen[#seen + 1] = b.value end)
      a.value = 2
      assert.are.same({ 10, 20 }, seen)
    end)

    it("untracked reads do not subscribe", function()
      local a, b = signal(1), signal(1)
      local runs = 0
      effect(function()
        local _ = a.value
        local v = untracked(function() return b.value end)
        runs = runs + 1
        return v
      end)
      b.value = 2
      assert.are.equal(1, runs)
      a.value = 2
      assert.are.equal(2, runs)
    end)

    it("raises on an effect that keeps changing what it reads, and recovers", function()
      local a = signal(0)
      local dispose
      local err = raised(function()
        dispose = effect(function() a.value = a.value + 1 end)
      end)
      assert.truthy(tostring(err):find("cycle detected", 1, true), tostring(err))
      if dispose then dispose() end
      local b = signal(1)
      local seen
      effect(function() seen = b.value end)
      b.value = 2
      assert.are.equal(2, seen)
    end)
  end)

  describe("batch", function()
    it("runs effects once, after the batch", function()
      local a, b = signal(1), signal(1)
      local seen = {}
      effect(function() seen[#seen + 1] = a.value + b.value end)
      batch(function()
        a.value = 2
        b.value = 3
        a.value = 4
        assert.are.same({ 2 }, seen) -- nothing ran yet
      end)
      assert.are.same({ 2, 7 }, seen)
    end)

    it("sees new values inside the batch", function()
      local a = signal(1)
      local double = computed(function() return a.value * 2 end)
      batch(function()
        a.value = 5
        assert.are.equal(5, a.value)
        assert.are.equal(10, double.value)
      end)
    end)

    it("runs effects only when the outermost batch ends", function()
      local a = signal(1)
      local seen = {}
      effect(function() seen[#seen + 1] = a.value end)
      batch(function()
        batch(function() a.value = 2 end)
        assert.are.same({ 1 }, seen)
        a.value = 3
      end)
      assert.are.same({ 1, 3 }, seen)
    end)

    it("runs an effect once when its source changed and changed back", function()
      -- changes are counted by version, not compared by value: a re-run
      local a = signal(1)
      local seen = {}
      effect(function() seen[#seen + 1] = a.value end)
      batch(function()
        a.value = 2
        a.value = 1
      end)
      assert.are.same({ 1, 1 }, seen)
    end)

    it("does not re-run what reads a computed whose value changed back", function()
      local a = signal(1)
      local c = computed(function() return a.value end)
      local runs = 0
      effect(function()
        local _ = c.value
        runs = runs + 1
      end)
      batch(function()
        a.value = 2
        a.value = 1
      end)
      assert.are.equal(1, runs)
    end)

    it("returns the function's results and passes its arguments", function()
      local x, y = batch(function(p, q) return q, p end, 1, 2)
      assert.are.equal(2, x)
      assert.are.equal(1, y)
    end)

    it("raises the function's error after running the effects", function()
      local a = signal(1)
      local seen = {}
      effect(function() seen[#seen + 1] = a.value end)
      local boom = {}
      local err = raised(batch, function()
        a.value = 2
        error(boom)
      end)
      assert.are.equal(boom, err)
      assert.are.same({ 1, 2 }, seen)
      a.value = 3 -- not stuck in a batch
      assert.are.same({ 1, 2, 3 }, seen)
    end)
  end)

  describe("batches of tasks that never finish", function()
    -- A task the runtime stops for good is a coroutine never resumed again, or one dead with the
    -- budget's error: nothing of it runs afterwards, neither a pcall's handler nor a batch's end.

    it("runs the effects of a write elsewhere while a suspended coroutine's batch is open", function()
      local a, b = signal(0), signal(0)
      local seen = {}
      effect(function() seen[#seen + 1] = a.value .. "/" .. b.value end)
      local co = coroutine.create(function()
        batch(function()
          a.value = 1
          coroutine.yield() -- preempted, or never resumed again
        end)
      end)
      assert(coroutine.resume(co))
      assert.are.same({ "0/0" }, seen)
      b.value = 2 -- runs what the open batch queued too
      assert.are.same({ "0/0", "1/2" }, seen)
      b.value = 3
      assert.are.same({ "0/0", "1/2", "1/3" }, seen)
    end)

    it("ends the batch of a coroutine resumed later as any batch", function()
      local a, b = signal(0), signal(0)
      local seen = {}
      effect(function() seen[#seen + 1] = a.value .. "/" .. b.value end)
      local co = coroutine.create(function()
        batch(function()
          a.value = 1
          coroutine.yield()
          a.value = 2
          b.value = 2
        end)
      end)
      assert(coroutine.resume(co))
      b.value = 1
      assert.are.same({ "0/0", "1/1" }, seen)
      assert(coroutine.resume(co))
      assert.are.equal("dead", coroutine.status(co))
      assert.are.same({ "0/0", "1/1", "2/2" }, seen)
    end)

    it("runs the effects of a write elsewhere after a task was stopped inside a batch", function()
      local a, b = signal(0), signal(0)
      local seen = {}
      effect(function() seen[#seen + 1] = a.value .. "/" .. b.value end)
      stopped(function()
        batch(function()
          a.value = 1
          stop_here()
          a.value = 99 -- never runs
        end)
      end)
      assert.are.same({ "0/0" }, seen)
      b.value = 2
      assert.are.same({ "0/0", "1/2" }, seen)
      a.value = 3
      assert.are.same({ "0/0", "1/2", "3/2" }, seen)
    end)

    it("still holds the effects of a coroutine resumed inside a batch until the batch ends", function()
      local a = signal(1)
      local seen = {}
      effect(function() seen[#seen + 1] = a.value end)
      batch(function()
        coroutine.wrap(function() a.value = 2 end)()
        assert.are.same({ 1 }, seen)
      end)
      assert.are.same({ 1, 2 }, seen)
    end)

    it("still runs the writes of a coroutine resumed inside an effect after it, in the same flush", function()
      local a, b = signal(1), signal(0)
      local seen = {}
      effect(function()
        local v = a.value
        coroutine.wrap(function() b.value = v * 10 end)()
        seen[#seen + 1] = "a " .. v
      end)
      effect(function() seen[#seen + 1] = "b " .. b.value end)
      a.value = 2
      assert.are.same({ "a 1", "b 10", "a 2", "b 20" }, seen)
    end)
  end)

  describe("tracked runs of tasks that never finish", function()
    it("runs the effects left queued by a task stopped in an effect at the next write", function()
      local a, other = signal(0), signal(0)
      local seen, stop = {}, false
      effect(function()
        local v = a.value
        if stop then
          stop = false
          stop_here()
        end
        seen[#seen + 1] = "first " .. v
      end)
      effect(function() seen[#seen + 1] = "second " .. a.value end)
      effect(function() seen[#seen + 1] = "third " .. a.value end)
      effect(function() seen[#seen + 1] = "other " .. other.value end)
      stop = true
      stopped(function() a.value = 1 end) -- stopped running the first effect
      assert.are.same({ "first 0", "second 0", "third 0", "other 0" }, seen)
      other.value = 1
      assert.are.same({ "first 0", "second 0", "third 0", "other 0", "second 1", "third 1", "other 1" },
        seen)
      a.value = 2 -- the first one runs again, as any effect
      assert.are.same({ "first 0", "second 0", "third 0", "other 0", "second 1", "third 1", "other 1",
        "first 2", "second 2", "third 2" }, seen)
    end)

    it("tracks nothing into an effect a stopped task was running", function()
      local a, x = signal(0), signal(0)
      local runs, stop = 0, false
      effect(function()
        local _ = a.value
        runs = runs + 1
        if stop then
          stop = false
          stop_here()
        end
      end)
      stop = true
      stopped(function() a.value = 1 end)
      assert.are.equal(2, runs)
      local _ = x.value -- read outside any effect
      x.value = 1
      assert.are.equal(2, runs)
      a.value = 2
      assert.are.equal(3, runs)
    end)

    it("recomputes a computed whose run a stopped task left, and lets signals be written", function()
      local a = signal(1)
      local stop = false
      local c = computed(function()
        local v = a.value * 10
        if stop then
          stop = false
          stop_here()
        end
        return v
      end)
      stop = true
      stopped(function() return c.value end)
      assert.are.equal(10, c.value) -- not "cycle detected", not nil
      a.value = 2 -- not "a computed cannot write signals"
      assert.are.equal(20, c.value)
      local seen = {}
      effect(function() seen[#seen + 1] = c.value end)
      a.value = 3
      assert.are.same({ 20, 30 }, seen)
    end)

    it("lets go of an effect whose first run a stopped task left", function()
      local a = signal(0)
      local held = setmetatable({}, { __mode = "v" })
      local runs = 0
      stopped(function()
        local fn = function()
          local _ = a.value
          runs = runs + 1
          stop_here()
        end
        held[1] = fn
        effect(fn)
      end)
      a.value = 1 -- it never returned a disposer: it is disposed, not run
      assert.are.equal(1, runs)
      collectgarbage()
      collectgarbage()
      assert.is_nil(held[1])
    end)
  end)

  describe("glitch-free notification", function()
    it("shows a computed over two signals changed in one batch once, with both new values", function()
      local first, last = signal("Ada"), signal("Lovelace")
      local calls = 0
      local full = computed(function()
        calls = calls + 1
        return first.value .. " " .. last.value
      end)
      local seen = {}
      effect(function() seen[#seen + 1] = full.value end)
      batch(function()
        first.value = "Grace"
        last.value = "Hopper"
      end)
      assert.are.same({ "Ada Lovelace", "Grace Hopper" }, seen)
      assert.are.equal(2, calls)
    end)

    it("runs a diamond's sink once per change", function()
      local a = signal(1)
      local b = computed(function() return a.value + 1 end)
      local c = computed(function() return a.value * 2 end)
      local dcalls = 0
      local d = computed(function()
        dcalls = dcalls + 1
        return b.value + c.value
      end)
      local seen = {}
      effect(function() seen[#seen + 1] = d.value end)
      a.value = 2
      a.value = 3
      assert.are.same({ 4, 7, 10 }, seen)
      assert.are.equal(3, dcalls)
    end)

    it("never shows an effect a half-updated graph", function()
      local a = signal(1)
      local b = computed(function() return a.value * 2 end)
      local c = computed(function() return b.value + a.value end) -- always 3 * a
      local seen = {}
      -- read in both orders: source first, and derived first
      effect(function() seen[#seen + 1] = { a.value, b.value, c.value } end)
      effect(function() seen[#seen + 1] = { c.value / 3, b.value / 2 * 1, a.value } end)
      for v = 2, 5 do a.value = v end
      assert.are.equal(10, #seen)
      for i = 1, 10, 2 do
        local x, y = seen[i], seen[i + 1]
        assert.are.same({ x[1], x[1] * 2, x[1] * 3 }, x)
        assert.are.same({ y[3], y[3], y[3] }, y)
      end
    end)

    it("runs an effect reading a signal and a computed over it once per change", function()
      local a = signal(1)
      local b = computed(function() return a.value + 100 end)
      local seen = {}
      effect(function() seen[#seen + 1] = a.value .. "/" .. b.value end)
      a.value = 2
      assert.are.same({ "1/101", "2/102" }, seen)
    end)
  end)

  describe("errors in effects", function()
    it("propagate to the writer, as raised", function()
      local a = signal(1)
      local boom = { code = "BOOM" }
      effect(function()
        if a.value == 2 then error(boom) end
      end)
      assert.are.equal(boom, raised(function() a.value = 2 end))
      assert.are.equal(2, a.value) -- the write itself happened
    end)

    it("let the other queued effects run and leave the graph consistent", function()
      local a = signal(1)
      local double = computed(function() return a.value * 2 end)
      local failing_runs, seen = 0, {}
      effect(function()
        failing_runs = failing_runs + 1
        if double.value == 4 then error("effect failed on purpose") end
      end)
      effect(function() seen[#seen + 1] = double.value end)
      local err = raised(function() a.value = 2 end)
      assert.truthy(tostring(err):find("effect failed on purpose", 1, true), tostring(err))
      assert.are.same({ 2, 4 }, seen)
      -- the failed effect stays subscribed; everything keeps working
      a.value = 3
      assert.are.same({ 2, 4, 6 }, seen)
      assert.are.equal(3, failing_runs)
    end)

    it("propagate from the end of a batch", function()
      local a = signal(1)
      effect(function()
        if a.value == 2 then error("batched failure") end
      end)
      local err = raised(batch, function() a.value = 2 end)
      assert.truthy(tostring(err):find("batched failure", 1, true), tostring(err))
    end)

    it("dispose an effect whose first run raises, and raise to its creator", function()
      local a = signal(1)
      local runs = 0
      local err = raised(effect, function()
        runs = runs + 1
        local _ = a.value
        error("first run fails")
      end)
      assert.truthy(tostring(err):find("first run fails", 1, true), tostring(err))
      a.value = 2
      assert.are.equal(1, runs)
    end)
  end)

  describe("cost", function()
    it("visits each subscriber once per write with many subscribers", function()
      local a = signal(0)
      local total = 0
      local disposers = {}
      for i = 1, 2000 do
        disposers[i] = effect(function() total = total + a.value end)
      end
      a.value = 1
      assert.are.equal(2000, total)
      for i = 1, 2000 do disposers[i]() end
      a.value = 2
      assert.are.equal(2000, total)
    end)

    -- (a list's render brings a hundred rows' computeds up to date, and the mount's effect
    -- subscribes to them as it reads them: its next render must not check each one again)
    it("does not check a computed again that an effect subscribed to as it read it", function()
      local a, b = signal(1), signal(0)
      local runs = 0
      local c = computed(function() runs = runs + 1; return a.value * 2 end)
      local seen
      local stop = effect(function() seen = c.value end)
      assert.are.same({ 2, 1 }, { seen, runs })
      b.value = 1 -- a change elsewhere: c's own sources did not change
      local checks = 0
      debug.sethook(function()
        local name = debug.getinfo(2, "n").name
        if name == "refresh" or name == "stale" or name == "moved" then checks = checks + 1 end
      end, "c")
      local value = c.value
      debug.sethook()
      assert.are.same({ 2, 1, 0 }, { value, runs, checks })
      a.value = 2 -- its own source: the effect sees the new value
      assert.are.same({ 4, 2 }, { seen, runs })
      stop()
    end)
  end)
end)

describe("clank.signal sources, changed and retrack", function()
  it("sources: the signals an effect read, through its computeds, each once", function()
    local a, b, c = S.signal(1), S.signal(2), S.signal(3)
    local sum = S.computed(function() return a.value + b.value end)
    local stop = S.effect(function() local _ = sum.value + a.value + c.value end)
    local got = {}
    for _, s in ipairs(S.sources(stop)) do got[#got + 1] = s.value end
    table.sort(got)
    assert.are.same({ 1, 2, 3 }, got)
    stop()
  end)

  it("changed: nil outside a run and on a first run; then what changed since the last", function()
    assert.is_nil(S.changed())
    local a, b = S.signal(1), S.signal(1)
    local double = S.computed(function() return b.value * 2 end)
    local seen = {}
    local stop = S.effect(function()
      local changed = S.changed()
      seen[#seen + 1] = changed and #changed or "first"
      if changed and #changed == 1 and changed[1] == double then
        S.retrack() -- what it read last time, tracked again without reading a
        local _ = double.value
        return
      end
      local _ = a.value + double.value
    end)
    b.value = 2 -- only the computed changed: retracked
    a.value = 5 -- a is still tracked: the effect runs
    assert.are.same({ "first", 1, 1 }, seen)
    b.value = 3
    assert.are.same({ "first", 1, 1, 1 }, seen)
    stop()
  end)
end)

describe("clank.signal: effects told what changed (hints) and runs kept by retrack", function()

  -- An effect over n computeds (each twice a signal of its own) and a signal t: a run where
  -- only computeds changed retracks and records them; any other run reads everything.
  local function rows(n)
    local src, comp = {}, {}
    for i = 1, n do
      src[i] = S.signal(i)
      comp[i] = S.computed(function() return src[i].value * 2 end)
    end
    local t = S.signal(0)
    local runs, swaps = 0, {}
    local stop = S.effect(function()
      runs = runs + 1
      local changed = S.changed()
      if changed and #changed > 0 and t:peek() == 0 then
        local names = {}
        for _, c in ipairs(changed) do
          for i = 1, n do if comp[i] == c then names[#names + 1] = i end end
        end
        swaps[#swaps + 1] = table.concat(names, ",")
        S.retrack()
        return
      end
      local _ = t.value
      for i = 1, n do local _ = comp[i].value end
    end)
    return src, t, stop, function() return runs end, swaps
  end

  it("names only the computeds whose sources changed, in the order they were read", function()
    local src, _, stop, runs, swaps = rows(100)
    src[57].value = 0
    src[3].value = 0
    S.batch(function() src[90].value = 1; src[12].value = 1 end)
    assert.are.same({ "57", "3", "12,90" }, swaps)
    assert.are.equal(4, runs())
    stop()
  end)

  it("keeps every source tracked across kept runs and after a run that reads again", function()
    local src, t, stop, runs, swaps = rows(50)
    for k = 1, 20 do src[k].value = -k end
    assert.are.equal(20, #swaps)
    t.value = 1 -- not a computed: the effect reads everything again
    assert.are.equal(22, runs())
    t.value = 0
    src[50].value = 7
    assert.are.same("50", swaps[#swaps])
    assert.are.equal(24, runs())
    stop()
    src[1].value = 99
    assert.are.equal(24, runs())
  end)

  it("sees every change when more sources notified it than it keeps hints for", function()
    local src, _, stop, runs, swaps = rows(100)
    S.batch(function() for k = 1, 40 do src[k * 2].value = 0 end end)
    local want = {}
    for k = 1, 40 do want[k] = tostring(k * 2) end
    assert.are.same(table.concat(want, ","), swaps[1])
    src[1].value = 0 -- hints again after that run
    assert.are.same("1", swaps[2])
    assert.are.equal(3, runs())
    stop()
  end)

  it("does not run for a computed that notified it but kept its value, and runs for the next change", function()
    local s = S.signal(1)
    local parity = S.computed(function() return s.value % 2 end)
    local runs = 0
    local stop = S.effect(function()
      runs = runs + 1
      local _ = parity.value
    end)
    s.value = 3
    s.value = 5
    assert.are.equal(1, runs)
    s.value = 6
    assert.are.equal(2, runs)
    stop()
  end)

  it("runs again after a kept run that changed a source it did not apply", function()
    local s1, x = S.signal(1), S.signal(0)
    local c1 = S.computed(function() return s1.value * 2 end)
    local seen = {}
    local stop = S.effect(function()
      local changed = S.changed()
      if changed and #changed == 1 and changed[1] == c1 then
        x.value = x:peek() + 1 -- changes x, which this kept run does not read
        S.retrack()
        return
      end
      seen[#seen + 1] = c1.value .. ":" .. x.value
    end)
    s1.value = 2
    assert.are.same({ "2:0", "4:1" }, seen)
    stop()
  end)

  it("tracks what a kept run reads that the last run did not", function()
    local a, extra = S.signal(1), S.signal(1)
    local double = S.computed(function() return a.value * 2 end)
    local runs = 0
    local stop = S.effect(function()
      runs = runs + 1
      local changed = S.changed()
      if changed and #changed == 1 and changed[1] == double then
        S.retrack()
        local _ = extra.value
        return
      end
      local _ = double.value
    end)
    a.value = 2 -- kept run, reads extra too
    assert.are.equal(2, runs)
    extra.value = 2
    assert.are.equal(3, runs)
    stop()
  end)
end)

-- A run that reads what the last run read, in the same order, tracks without new tables (the
-- last run's list is kept); these are the cases where it reads less, more, or something else.
describe("clank.signal: runs that read the last run's sources again", function()
  local function names(list, of)
    local out = {}
    for _, s in ipairs(list) do out[#out + 1] = of[s] end
    table.sort(out)
    return table.concat(out, ",")
  end

  it("stops being told of what a run no longer reads, at the end of the last run's list", function()
    local n, a, b, c = S.signal(3), S.signal(0), S.signal(0), S.signal(0)
    local of = { [n] = "n", [a] = "a", [b] = "b", [c] = "c" }
    local list, runs = { a, b, c }, 0
    local stop = S.effect(function()
      runs = runs + 1
      for i = 1, n.value do local _ = list[i].value end
    end)
    n.value = 2 -- reads n, a, b: the start of last time's list
    assert.are.equal(2, runs)
    assert.are.equal("a,b,n", names(S.sources(stop), of))
    c.value = 1
    assert.are.equal(2, runs)
    b.value = 1
    assert.are.equal(3, runs)
    n.value = 3 -- and more again
    c.value = 2
    assert.are.equal(5, runs)
    stop()
  end)

  it("lets go of a computed a run no longer reads at the end of the list: it can be collected", function()
    local n, a = S.signal(3), S.signal(1)
    local list = {}
    for i = 1, 3 do list[i] = S.computed(function() return a.value + i end) end
    local stop = S.effect(function()
      for i = 1, n.value do local _ = list[i].value end
    end)
    local gone = setmetatable({ list[3] }, { __mode = "v" })
    n.value = 2
    list[3] = nil
    collectgarbage()
    collectgarbage()
    assert.is_nil(gone[1])
    stop()
  end)

  it("tracks a source read twice once, whether read again at once or later", function()
    local a, b = S.signal(0), S.signal(0)
    local of = { [a] = "a", [b] = "b" }
    local runs = 0
    local stop = S.effect(function()
      runs = runs + 1
      local _ = a.value + a.value + b.value + a.value
    end)
    for i = 1, 3 do
      a.value = i
      assert.are.equal(i + 1, runs)
    end
    assert.are.same({ a, b }, S.sources(stop))
    assert.are.equal("a,b", names(S.sources(stop), of))
    stop()
  end)

  it("tracks from where a run leaves the last run's order: a source in place of another", function()
    local a, b, c, d, which = S.signal(0), S.signal(0), S.signal(0), S.signal(0), S.signal(false)
    local of = { [a] = "a", [b] = "b", [c] = "c", [d] = "d", [which] = "which" }
    local runs = 0
    local stop = S.effect(function()
      runs = runs + 1
      local _ = which.value
      _ = a.value
      _ = (which.value and d or b).value
      _ = c.value
    end)
    which.value = true -- which, a, d, c
    assert.are.equal(2, runs)
    assert.are.equal("a,c,d,which", names(S.sources(stop), of))
    b.value = 1
    assert.are.equal(2, runs)
    d.value = 1
    c.value = 1
    assert.are.equal(4, runs)
    stop()
  end)

  it("keeps what a run read before it raised, as any run that raises", function()
    local a, b, c = S.signal(0), S.signal(0), S.signal(0)
    local runs = 0
    local stop = S.effect(function()
      runs = runs + 1
      local _ = a.value
      if a.value == 1 then error("boom", 0) end
      local _ = b.value + c.value
    end)
    assert.are.equal("boom", raised(function() a.value = 1 end))
    assert.are.same({ a }, S.sources(stop))
    c.value = 1
    assert.are.equal(2, runs)
    a.value = 2
    assert.are.equal(3, runs)
    assert.are.same({ a, b, c }, S.sources(stop))
    stop()
  end)

  it("a computed nobody subscribes to drops what its run no longer reads from its checks", function()
    local n, a, b = S.signal(2), S.signal(1), S.signal(10)
    local runs = 0
    local sum = S.computed(function()
      runs = runs + 1
      local t = n.value
      if t >= 1 then t = t + a.value end
      if t >= 3 then t = t + b.value end
      return t
    end)
    assert.are.equal(13, sum.value)
    n.value = 0 -- reads n only
    assert.are.equal(0, sum.value)
    assert.are.equal(2, runs)
    b.value = 20
    a.value = 2
    assert.are.equal(0, sum.value)
    assert.are.equal(2, runs)
    n.value = 2
    assert.are.equal(24, sum.value)
  end)
end)

describe("clank.signal.invalidate", function()
  it("runs a computed's function again at its next read, once, though nothing it read changed", function()
    local a, runs = S.signal(1), 0
    local c = S.computed(function()
      runs = runs + 1
      return a.value * 2
    end)
    local seen = {}
    local stop = S.effect(function() seen[#seen + 1] = c.value end)
    assert.are.equal(1, runs)
    S.invalidate(c)
    assert.are.same({ 2 }, seen) -- its subscribers are not told
    assert.are.equal(2, c.value)
    assert.are.equal(2, runs)
    assert.are.equal(2, c.value)
    assert.are.equal(2, runs)
    a.value = 2
    assert.are.same({ 2, 4 }, seen)
    assert.are.equal(3, runs)
    stop()
  end)

  it("raises for anything but a computed", function()
    assert.matches("expected a computed", raised(function() S.invalidate(S.signal(1)) end))
    assert.matches("expected a computed", raised(function() S.invalidate({}) end))
  end)
end)

describe("clank.signal.computed with a host", function()
  it("makes the host the computed, and calls its function with it", function()
    local a = S.signal(2)
    local got
    local host = { factor = 10 }
    local c = S.computed(function(self)
      got = self
      return a.value * self.factor
    end, host)
    assert.are.equal(host, c)
    assert.is_true(S.isSignal(c))
    assert.are.equal(20, c.value)
    assert.are.equal(host, got)
    host.factor = 100 -- its own fields stay its own
    a.value = 3
    assert.are.equal(300, c.value)
    assert.matches("read%-only", raised(function() c.value = 1 end))
    assert.matches("cannot set 'other'", raised(function() c.other = 1 end))
  end)

  it("leaves the host its slots hostFirst to hostLast and after computedSlots, and its string keys", function()
    -- (memo keeps a component call's view, props and tree there: README, Live views)
    assert.is_true(S.hostFirst > 5 and S.hostLast >= S.hostFirst + 1) -- a signal's five before
    local after = S.hostFirst
    local slots = {}
    for i = 1, S.computedSlots do slots[i] = false end
    slots[after], slots[after + 1], slots.name = "view", "props", "row"
    slots[S.hostLast], slots[S.computedSlots + 1] = "last", "after"
    local a = S.signal(1)
    local c = S.computed(function(self) return self[after] .. a.value .. self.name end, slots)
    assert.are.equal("view1row", c.value)
    a.value = 2
    assert.are.equal("view2row", c.value)
    assert.are.equal("props", c[after + 1])
    c[after] = "other" -- its own slot: no error, and the next run reads it
    a.value = 3
    assert.are.equal("other3row", c.value)
    assert.are.equal("last", c[S.hostLast])
    assert.are.equal("after", c[S.computedSlots + 1])
    assert.matches("cannot set 'extra'", raised(function() c.extra = 1 end))
  end)

  it("calls a computed without a host with no argument", function()
    local n
    local c = S.computed(function(...) n = select("#", ...) return 1 end)
    local _ = c.value
    assert.are.equal(0, n)
  end)

  it("raises for a host that is not a table without a metatable", function()
    assert.matches("host must be a table", raised(function() S.computed(function() end, 1) end))
    assert.matches("host must be a table",
      raised(function() S.computed(function() end, setmetatable({}, {})) end))
  end)
end)
