-- clank.defineJob, its checks and the retry backoff (issue 32). Running jobs is
-- spec/functional/jobs_spec.lua's.
local clank = require "clank"
local core = require "clank.core"
local jobs = require "clank.jobs"
local s = clank.schema

local function job(def)
  def.name = def.name or "j"
  def.input = def.input or s.object {}
  def.handler = def.handler or function() end
  return clank.defineJob(def)
end

describe("clank.defineJob", function()
  it("is clank.jobs.defineJob, with the documented defaults", function()
    assert.are.equal(jobs.defineJob, clank.defineJob)
    local j = job {}
    assert.are.same({ max = 5, backoff = "exponential", base = 1000, maxDelay = 3600000 }, j.retry)
    assert.are.equal(60000, j.timeout)
    assert.are.equal("default", j.queue)
    assert.are.equal(0, j.priority)
  end)

  it("fills a partial retry from the defaults", function()
    assert.are.same({ max = 2, backoff = "linear", base = 1000, maxDelay = 3600000 },
      job { retry = { max = 2, backoff = "linear" } }.retry)
  end)

  local bad = {
    { { name = "1st" }, "name must be a string" },
    { { name = "has space" }, "name must be a string" },
    { { input = {} }, "clank.defineJob 'j': input must be a clank.schema" },
    { { handler = 42 }, "clank.defineJob 'j': handler must be a function" },
    { { retry = { max = 0 } }, "retry.max must be a positive integer" },
    { { retry = { tries = 3 } }, "retry has an unknown field 'tries'" },
    { { retry = { backoff = "fibonacci" } }, "retry.backoff must be" },
    { { retry = { base = 5000, maxDelay = 1000 } }, "retry.maxDelay must be" },
    { { timeout = 0 }, "timeout must be an integer" },
    { { timeout = 1.5 }, "timeout must be an integer" },
    { { queue = "a b" }, "queue must be a name" },
    { { priority = 1001 }, "priority must be an integer from -1000 to 1000" },
    { { unique = { within = 10 } }, "unique must be a table with key" },
    { { unique = { key = function() end, within = -1 } }, "unique.within must be a positive integer" },
    { { publishes = { "bad topic" } }, "'publishes' item 1 must be a topic" },
    { { color = "red" }, "unknown field 'color'" },
  }
  for _, case in ipairs(bad) do
    it("refuses " .. case[2], function()
      local ok, err = pcall(job, case[1])
      assert.is_false(ok)
      assert.truthy(tostring(err):find(case[2], 1, true), tostring(err))
    end)
  end

  it("takes unique['for'] as unique.within (for is a Lua keyword)", function()
    assert.are.equal(5000, job { unique = { key = function() return "k" end, ["for"] = 5000 } }.unique.within)
  end)

  it("refuses to enqueue a job that is in no app, and a bad input before anything else", function()
    local j = job { input = s.object { n = s.number() } }
    local ok, err = pcall(j.enqueue, j, { n = 1 })
    assert.is_false(ok)
    assert.matches("job 'j' is not in the jobs of the app", err)
    jobs.bind { jobs = { j }, concurrency = 1, lease = 1000, retention = 0 }
    ok, err = pcall(j.enqueue, j, { n = "one" })
    assert.is_false(ok)
    assert.matches("job 'j': invalid input: n: Expected a finite number%.", err)
    ok, err = pcall(j.enqueue, j, { n = 1 }, { delay = 1, runAt = 2 })
    assert.is_false(ok)
    assert.matches("give delay or runAt, not both", err)
    ok, err = pcall(j.enqueue, j, { n = 1 }, { later = true })
    assert.is_false(ok)
    assert.matches("unknown enqueue option 'later'", err)
  end)

  -- SQLite's write lock is the transaction's: the jobs' tables are made on it, not on another
  -- connection, which would wait for the lock until its busy timeout (5 s) and fail.
  it("makes the jobs' tables in the transaction of the first enqueue, and again after a rollback", function()
    local path = os.tmpname()
    os.remove(path)
    path = path .. ".sqlite"
    local j = job { name = "in-tx" }
    local b = jobs.bind { jobs = { j }, concurrency = 1, lease = 1000, retention = 0 }
    local db = clank.db.open(path)
    b.db = db
    local run = clank.defineAction {
      name = "run", description = "Runs the enqueues.", input = s.object {}, sideEffects = "write",
      handler = function()
        local t0 = core.nowMs()
        local ok, err = pcall(db.transaction, db, function()
          j:enqueue({})
          error("rolled back", 0)
        end)
        local made = db:one("SELECT count(*) AS n FROM sqlite_master WHERE name = 'clank_jobs'").n
        local id = db:transaction(function() return j:enqueue({}, { delay = 60000 }) end)
        return { ok = ok, err = err, made = made, id = id, ms = core.nowMs() - t0,
          rows = db:query("SELECT id, name, state FROM clank_jobs") }
      end,
    }
    local out = run({}, {})
    db:close()
    for _, suffix in ipairs { "", "-wal", "-shm" } do os.remove(path .. suffix) end
    assert.is_false(out.ok)
    assert.are.equal("rolled back", out.err)
    assert.are.equal(0, out.made)
    assert.is_true(out.ms < 2000, out.ms .. " ms")
    assert.are.same({ { id = out.id, name = "in-tx", state = "available" } }, out.rows)
  end)

  it("refuses two jobs of one name in an app", function()
    local ok, err = pcall(jobs.bind, { jobs = { job { name = "x" }, job { name = "x" } } })
    assert.is_false(ok)
    assert.matches("two jobs are named 'x'", err)
  end)
end)

describe("the retry backoff", function()
  local retry = { backoff = "exponential", base = 1000, maxDelay = 3600000 }
  local function low() return 0 end
  local function high() return 1 end

  it("doubles from base, jittered into the upper half: [d/2, d]", function()
    -- attempt n failed: d = 1000 · 2^(n-1)
    for n, d in ipairs { 1000, 2000, 4000, 8000, 16000 } do
      assert.are.equal(d / 2, jobs.backoff(retry, n, low))
      assert.are.equal(d, jobs.backoff(retry, n, high))
    end
  end)

  it("never exceeds maxDelay", function()
    assert.are.equal(3600000, jobs.backoff(retry, 40, high))
    assert.are.equal(1800000, jobs.backoff(retry, 40, low))
    for _ = 1, 200 do
      local d = jobs.backoff(retry, 13) -- 4,096,000 before the cap
      assert.is_true(d >= 1800000 and d <= 3600000)
    end
  end)

  it("grows linearly, or stays constant, when asked", function()
    assert.are.equal(3000, jobs.backoff({ backoff = "linear", base = 1000, maxDelay = 10000 }, 3, high))
    assert.are.equal(10000, jobs.backoff({ backoff = "linear", base = 1000, maxDelay = 10000 }, 30, high))
    assert.are.equal(500, jobs.backoff({ backoff = "constant", base = 500, maxDelay = 500 }, 9, high))
    assert.are.equal(250, jobs.backoff({ backoff = "constant", base = 500, maxDelay = 500 }, 9, low))
  end)
end)
