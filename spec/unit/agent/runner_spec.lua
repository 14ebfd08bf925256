-- clank.actionRunner: an action's call state as signals, with revisions (SPEC §7).
-- Every expected state below is written from SPEC §7: run takes rev =
-- revision + 1 and sets pending = true, error = nil in one batch; only the
-- latest run writes its outcome; run never raises; reset bumps the revision.
local clank = require "clank"
local S = require "clank.signal"
local s = clank.schema

-- input { ms, value, fail? }: sleeps ms, then returns { value } or raises
-- ActionError("FAILED", value, 409) when fail is set.
local function slow_action(name)
  return clank.defineAction {
    name = name or "test.slow", description = "Waits, then answers.", sideEffects = "read",
    input = s.object { ms = s.number(), value = s.string(), fail = s.optional(s.boolean()) },
    handler = function(input)
      clank.sleep(input.ms)
      if input.fail then error(clank.ActionError("FAILED", input.value, 409)) end
      return { value = input.value }
    end,
  }
end

-- Runs fn inside a runtime task (an action's handler, called from top-level
-- code, drives the loop until fn returns) and returns what fn returns.
local function in_task(fn)
  local driver = clank.defineAction {
    name = "test.driver", description = "Drives tasks.", input = s.object {}, sideEffects = "read",
    handler = function() return { result = fn() } end,
  }
  return driver({}, {}).result
end

-- The runner's state as one table.
local function state(r)
  return {
    pending = r.pending.value, data = r.data.value, error = r.error.value, canRun = r.canRun.value,
  }
end

describe("clank.actionRunner", function()
  it("is reachable as clank.actionRunner and clank.runner", function()
    assert.are.equal(require("clank.runner").actionRunner, clank.actionRunner)
    assert.are.equal(S, clank.signal)
  end)

  it("starts idle: pending false, no data, no error, canRun true", function()
    local r = clank.actionRunner(slow_action())
    assert.are.same({ pending = false, canRun = true }, state(r))
    assert.is_true(S.isSignal(r.pending))
    assert.is_true(S.isSignal(r.data))
    assert.is_true(S.isSignal(r.error))
    assert.is_true(S.isSignal(r.canRun))
  end)

  it("refuses what is not an action and unknown options", function()
    assert.has_error(function() clank.actionRunner(42) end)
    local ok, err = pcall(clank.actionRunner, slow_action(), { contxt = {} })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("unknown option 'contxt'", 1, true), tostring(err))
    ok, err = pcall(clank.actionRunner, slow_action(), { context = 1 })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("'context' must be a table or a function", 1, true), tostring(err))
  end)

  it("names its action", function()
    assert.are.equal("clank.ActionRunner(test.slow)", tostring(clank.actionRunner(slow_action())))
  end)

  describe("run", function()
    it("from top-level code runs the loop until the action ends and returns its output", function()
      local r = clank.actionRunner(slow_action())
      local out = r:run({ ms = 5, value = "a" })
      assert.are.same({ value = "a" }, out)
      assert.are.same({ pending = false, data = { value = "a" }, canRun = true }, state(r))
      assert.are.equal(out, r.data.value)
    end)

    it("accepts a dot call", function()
      local r = clank.actionRunner(slow_action())
      assert.are.same({ value = "dot" }, r.run({ ms = 0, value = "dot" }))
      assert.are.same({ value = "dot" }, r.data.value)
      r.reset()
      assert.is_nil(r.data.value)
    end)

    it("stores an ActionError as raised, keeps data, and returns nil without raising", function()
      local r = clank.actionRunner(slow_action())
      r:run({ ms = 0, value = "first" })
      local out = r:run({ ms = 0, value = "no luck", fail = true })
      assert.is_nil(out)
      local err = r.error.value
      assert.is_true(clank.isActionError(err))
      assert.are.equal("FAILED", err.code)
      assert.are.equal("no luck", err.message)
      assert.are.equal(409, err.status)
      assert.is_false(r.pending.value)
      assert.are.same({ value = "first" }, r.data.value) -- data stays
    end)

    it("keeps the identity of a table error and stores a string error as is", function()
      local raised = { reason = "mine" }
      local mode = "table"
      local action = clank.defineAction {
        name = "test.fail", description = "Fails.", input = s.object {}, sideEffects = "read",
        handler = function()
          if mode == "table" then error(raised) end
          error("plain failure", 0)
        end,
      }
      local r = clank.actionRunner(action)
      assert.is_nil(r:run({}))
      assert.are.equal(raised, r.error.value)
      mode = "string"
      assert.is_nil(r:run({}))
      assert.are.equal("plain failure", r.error.value)
    end)

    it("never raises for invalid input: error holds the ValidationError", function()
      local r = clank.actionRunner(slow_action())
      local ok, out = pcall(r.run, r, { ms = "soon", value = 1 })
      assert.is_true(ok, tostring(out))
      assert.is_nil(out)
      assert.is_true(s.isValidationError(r.error.value))
      assert.are.equal(2, #r.error.value.issues)
      assert.is_false(r.pending.value)
      assert.is_true(r.canRun.value)
    end)

    it("clears the error when the next run starts, in one batch with pending", function()
      local r = clank.actionRunner(slow_action())
      r:run({ ms = 0, value = "x", fail = true })
      assert.is_not_nil(r.error.value)
      local seen = {}
      local dispose = S.effect(function()
        seen[#seen + 1] = { pending = r.pending.value, error = r.error.value ~= nil }
      end)
      r:run({ ms = 5, value = "ok" })
      dispose()
      assert.are.same({
        { pending = false, error = true },
        { pending = true, error = false },
        { pending = false, error = false },
      }, seen)
    end)

    it("lets effects observe pending and data transitions in order", function()
      local r = clank.actionRunner(slow_action())
      local log = {}
      local dispose = S.effect(function()
        local d, e = r.data.value, r.error.value
        log[#log + 1] = string.format("pending=%s data=%s error=%s canRun=%s", r.pending.value,
          d and d.value or "nil", e and e.code or "nil", r.canRun.value)
      end)
      r:run({ ms = 5, value = "one" })
      r:run({ ms = 5, value = "two", fail = true })
      r:reset()
      dispose()
      assert.are.same({
        "pending=false data=nil error=nil canRun=true",
        "pending=true data=nil error=nil canRun=false",
        "pending=false data=one error=nil canRun=true",
        "pending=true data=one error=nil canRun=false",
        "pending=false data=one error=FAILED canRun=true",
        "pending=false data=nil error=nil canRun=true",
      }, log)
    end)

    it("shows pending while the action waits, inside a task", function()
      local r = clank.actionRunner(slow_action())
      local seen = in_task(function()
        local during
        clank.spawn(function()
          clank.sleep(10)
          during = state(r)
        end)
        local out = r:run({ ms = 60, value = "late" })
        return { during = during, out = out, after = state(r) }
      end)
      assert.are.same({ pending = true, canRun = false }, seen.during)
      assert.are.same({ value = "late" }, seen.out)
      assert.are.same({ pending = false, data = { value = "late" }, canRun = true }, seen.after)
    end)

    it("makes canRun track pending", function()
      local r = clank.actionRunner(slow_action())
      local seen = {}
      local dispose = S.effect(function() seen[#seen + 1] = r.canRun.value end)
      r:run({ ms = 5, value = "x" })
      r:run({ ms = 5, value = "y", fail = true })
      dispose()
      assert.are.same({ true, false, true, false, true }, seen)
    end)
  end)

  describe("revisions", function()
    it("keeps a slow run overtaken by a fast one from touching state, but returns its output", function()
      local r = clank.actionRunner(slow_action())
      local seen = in_task(function()
        local res = {}
        clank.spawn(function() res.slow = r:run({ ms = 120, value = "slow" }) end)
        clank.spawn(function() res.fast = r:run({ ms = 10, value = "fast" }) end)
        clank.sleep(60)
        res.middle = state(r) -- the fast (newest) run is done, the slow one still waits
        res.slow_done_early = res.slow ~= nil
        clank.sleep(150)
        res.after = state(r)
        return res
      end)
      assert.is_false(seen.slow_done_early)
      assert.are.same({ pending = false, data = { value = "fast" }, canRun = true }, seen.middle)
      assert.are.same({ value = "fast" }, seen.fast)
      assert.are.same({ value = "slow" }, seen.slow) -- returned even though stale
      assert.are.same({ pending = false, data = { value = "fast" }, canRun = true }, seen.after)
    end)

    it("leaves pending to the newest run when an older one finishes first", function()
      local r = clank.actionRunner(slow_action())
      local seen = in_task(function()
        local res = {}
        clank.spawn(function() res.first = r:run({ ms = 10, value = "first" }) end)
        clank.sleep(1) -- the first run waits
        clank.spawn(function() res.second = r:run({ ms = 120, value = "second" }) end)
        clank.sleep(60)
        res.middle = state(r) -- first is done but stale: pending belongs to second
        clank.sleep(150)
        res.after = state(r)
        return res
      end)
      assert.are.same({ value = "first" }, seen.first)
      assert.are.same({ pending = true, canRun = false }, seen.middle)
      assert.are.same({ value = "second" }, seen.second)
      assert.are.same({ pending = false, data = { value = "second" }, canRun = true }, seen.after)
    end)

    it("ignores the failure of a stale run", function()
      local r = clank.actionRunner(slow_action())
      local seen = in_task(function()
        local res = {}
        clank.spawn(function() res.slow = r:run({ ms = 120, value = "too late", fail = true }) end)
        clank.spawn(function() res.fast = r:run({ ms = 10, value = "fast" }) end)
        clank.sleep(200)
        res.after = state(r)
        return res
      end)
      assert.is_nil(seen.slow)
      assert.are.same({ value = "fast" }, seen.fast)
      assert.are.same({ pending = false, data = { value = "fast" }, canRun = true }, seen.after)
    end)

    it("ignores the success of a run that a reset overtook", function()
      local r = clank.actionRunner(slow_action())
      r:run({ ms = 0, value = "before" })
      local seen = in_task(function()
        local res = {}
        clank.spawn(function() res.out = r:run({ ms = 60, value = "after reset" }) end)
        clank.sleep(10)
        res.before_reset = state(r)
        r:reset()
        res.after_reset = state(r)
        clank.sleep(120)
        res.after = state(r)
        return res
      end)
      assert.are.same({ pending = true, data = { value = "before" }, canRun = false }, seen.before_reset)
      assert.are.same({ pending = false, canRun = true }, seen.after_reset)
      assert.are.same({ value = "after reset" }, seen.out) -- still returned to its caller
      assert.are.same({ pending = false, canRun = true }, seen.after)
    end)

    it("ignores the failure of a run that a reset overtook", function()
      local r = clank.actionRunner(slow_action())
      local seen = in_task(function()
        local res = {}
        clank.spawn(function() res.out = r:run({ ms = 60, value = "x", fail = true }) end)
        clank.sleep(10)
        r:reset()
        clank.sleep(120)
        res.after = state(r)
        return res
      end)
      assert.is_nil(seen.out)
      assert.are.same({ pending = false, canRun = true }, seen.after)
    end)

    it("lets a run after a reset write its outcome", function()
      local r = clank.actionRunner(slow_action())
      r:run({ ms = 0, value = "one" })
      r:reset()
      assert.are.same({ value = "two" }, r:run({ ms = 0, value = "two" }))
      assert.are.same({ pending = false, data = { value = "two" }, canRun = true }, state(r))
    end)
  end)

  describe("context", function()
    local function ctx_action()
      return clank.defineAction {
        name = "test.ctx", description = "Echoes ctx.user.", input = s.object {}, sideEffects = "read",
        handler = function(_, ctx) return { user = ctx.user or "none" } end,
      }
    end

    it("passes an empty ctx without a context", function()
      local r = clank.actionRunner(ctx_action())
      assert.are.same({ user = "none" }, r:run({}))
    end)

    it("passes the context table", function()
      local r = clank.actionRunner(ctx_action(), { context = { user = "ada" } })
      assert.are.same({ user = "ada" }, r:run({}))
    end)

    it("calls a context function on each run", function()
      local calls = 0
      local r = clank.actionRunner(ctx_action(), {
        context = function()
          calls = calls + 1
          return { user = "user" .. calls }
        end,
      })
      assert.are.same({ user = "user1" }, r:run({}))
      assert.are.same({ user = "user2" }, r:run({}))
    end)

    it("lets a context function wait inside a task", function()
      local r = clank.actionRunner(ctx_action(), {
        context = function()
          clank.sleep(5)
          return { user = "waited" }
        end,
      })
      assert.are.same({ user = "waited" }, in_task(function() return r:run({}) end))
    end)

    it("prefers the ctx given to run", function()
      local r = clank.actionRunner(ctx_action(), { context = { user = "ada" } })
      assert.are.same({ user = "grace" }, r:run({}, { user = "grace" }))
    end)

    it("turns an error of the context function into the run's error", function()
      local boom = { why = "no session" }
      local r = clank.actionRunner(ctx_action(), { context = function() error(boom) end })
      assert.is_nil(r:run({}))
      assert.are.equal(boom, r.error.value)
      assert.is_false(r.pending.value)
    end)
  end)

  describe("effects", function()
    it("logs, never raises, an effect that fails while the runner writes", function()
      local r = clank.actionRunner(slow_action())
      local dispose = S.effect(function()
        if r.pending.value then error("effect failed on purpose") end
      end)
      local ok, out = pcall(r.run, r, { ms = 0, value = "fine" })
      dispose()
      assert.is_true(ok, tostring(out))
      assert.are.same({ value = "fine" }, out)
      assert.are.same({ pending = false, data = { value = "fine" }, canRun = true }, state(r))
    end)
  end)
end)

-- A run in a request bound with bindRequest(co, ctx, ask) (a live event), for an action that
-- requires confirmation (issue 34): the input is checked first; then ask(text) says whether the
-- person confirmed, text being the action's confirmText(input); without ask, or for a ctx with
-- confirmed = false, it fails with CONFIRMATION_REQUIRED, but still only after the input check.
describe("clank.actionRunner in a request that was not confirmed", function()
  local runner = require "clank.runner"
  local ran
  local archive = clank.defineAction {
    name = "test.archive", description = "Archive one task.", sideEffects = "destructive",
    input = s.object { title = s.string { min = 1 } },
    confirm = function(input) return "Archive \u{201c}" .. input.title .. "\u{201d}?" end,
    handler = function(input) ran[#ran + 1] = input.title return { archived = input.title } end,
  }

  -- Runs runner:run(input) in a task bound to an unconfirmed request with ask (nil: none);
  -- returns the output, the runner's state after it and the texts asked (each with pending then).
  local function run_bound(input, ask_answer, ctx)
    ran = {}
    local r = clank.actionRunner(archive)
    local asked = {}
    local ask = ask_answer ~= nil and function(text)
      asked[#asked + 1] = { text = text, pending = r.pending.value }
      clank.sleep(5) -- the person takes their time
      if type(ask_answer) == "string" then error(ask_answer, 0) end
      return ask_answer
    end or nil
    local out = in_task(function()
      local co = coroutine.running()
      runner.bindRequest(co, ctx or { confirmed = false }, ask)
      local got = r:run(input)
      runner.bindRequest(co, nil)
      return got
    end)
    return out, state(r), asked
  end

  it("asks with the action's words for this input, before the run is pending, and runs on yes", function()
    local out, st, asked = run_bound({ title = "Milk" }, true)
    assert.are.same({ archived = "Milk" }, out)
    assert.are.same({ { text = "Archive \u{201c}Milk\u{201d}?", pending = false } }, asked)
    assert.are.same({ "Milk" }, ran)
    assert.are.same({ pending = false, data = { archived = "Milk" }, error = nil, canRun = true }, st)
  end)

  it("runs nothing on no, and fails with CONFIRMATION_REQUIRED 'The action was not confirmed.'", function()
    local out, st, asked = run_bound({ title = "Milk" }, false)
    assert.is_nil(out)
    assert.are.equal(1, #asked)
    assert.are.same({}, ran)
    assert.is_true(clank.isActionError(st.error))
    assert.are.same({ "CONFIRMATION_REQUIRED", "The action was not confirmed.", 428 },
      { st.error.code, st.error.message, st.error.status })
    assert.is_false(st.pending)
  end)

  it("asks nothing about an invalid input: its ValidationError is the run's error", function()
    local out, st, asked = run_bound({ title = "" }, true)
    assert.is_nil(out)
    assert.are.same({}, asked)
    assert.are.same({}, ran)
    assert.are.equal("title: Must contain at least 1 character.", tostring(st.error))
  end)

  it("fails the run with the ask's own error", function()
    local out, st = run_bound({ title = "Milk" }, "the page went away")
    assert.is_nil(out)
    assert.are.same({}, ran)
    assert.are.equal("the page went away", st.error)
  end)

  it("without ask, checks the input first, then fails with CONFIRMATION_REQUIRED", function()
    local _, st = run_bound({ title = "" })
    assert.are.equal("title: Must contain at least 1 character.", tostring(st.error))
    _, st = run_bound({ title = "Milk" })
    assert.are.same({ "CONFIRMATION_REQUIRED", "This action requires explicit confirmation." },
      { st.error.code, st.error.message })
    assert.are.same({}, ran)
  end)

  it("asks nothing in a confirmed request", function()
    local out, _, asked = run_bound({ title = "Milk" }, false, { confirmed = true })
    assert.are.same({ archived = "Milk" }, out)
    assert.are.same({}, asked)
  end)

  it("asks nothing for an action that needs no confirmation", function()
    local r = clank.actionRunner(slow_action())
    local asked = 0
    local out = in_task(function()
      local co = coroutine.running()
      runner.bindRequest(co, { confirmed = false }, function() asked = asked + 1 return false end)
      local got = r:run({ ms = 1, value = "v" })
      runner.bindRequest(co, nil)
      return got
    end)
    assert.are.same({ value = "v" }, out)
    assert.are.equal(0, asked)
  end)
end)
