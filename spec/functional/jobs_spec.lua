-- Durable jobs (issue 32) through the real clank-run, on an SQLite file and on PostgreSQL (a
-- database of its own in the test cluster, when CLANK_TEST_POSTGRES_URL is set): each job runs
-- once across workers; a failing one is retried, then dead; a spinning, hogging or hanging one
-- too, and the server lives; a job enqueued in a transaction that rolls back never runs; a worker
-- killed mid-job loses its lease and the job runs again elsewhere; a reload lets a running job
-- finish on the old code; a stop gives a running job back; the database going away pauses
-- claiming and nothing is lost. The fixture is spec/fixtures/apps/jobs/app.lua: every run of a
-- job is a row in its table `runs`.
local server = require "helpers.server"
local http = require "helpers.http"
local storage = require "helpers.storage"
local files = require "helpers.files"
local cjson = require "cjson"
local socket = require "socket"

local APP = server.fixture("jobs")
local slow = server.sanitized and 4 or 1
local pg_url = storage.postgres_url

-- cjson decodes every number as a float: ids back to integers
local function integers(v)
  if type(v) == "table" then
    for k, x in pairs(v) do v[k] = integers(x) end
  elseif type(v) == "number" and math.tointeger(v) then
    return math.tointeger(v)
  end
  return v
end

local function call(s, action, input)
  local res = http.request(s.port, "POST", "/actions/" .. action, { ["content-type"] = "application/json" },
    cjson.encode(input or {}))
  assert.are.equal(200, res.status, res.body)
  return integers(cjson.decode(res.body).output)
end

local function report(s)
  return call(s, "report")
end

-- Polls check() (which returns a value when done) for up to `seconds` (longer under the
-- sanitizers); fails naming `what` after that.
local function eventually(seconds, check, what)
  return files.within(seconds * slow, check, what)
end

local function job_of(r, id)
  for _, j in ipairs(r.jobs) do
    if j.id == id then return j end
  end
end

local function runs_of(r, id)
  local list = {}
  for _, run in ipairs(r.runs) do
    if run.job == id then list[#list + 1] = run end
  end
  return list
end

local function state_is(s, id, state)
  return function()
    local r = report(s)
    local j = job_of(r, id)
    return j and j.state == state and r
  end
end

local function count(text, plain)
  local n, at = 0, 1
  while true do
    local i = text:find(plain, at, true)
    if not i then return n end
    n, at = n + 1, i + #plain
  end
end

-- A PostgreSQL database of its own: other specs' apps share the test cluster's database, and a
-- runner claims only the jobs it knows, but the counts here must be this spec's alone.
local pg_dbs = 0
local function fresh_pg()
  pg_dbs = pg_dbs + 1
  local name = ("jobs_%d_%d_%d"):format(os.time(), math.random(1, 1e6), pg_dbs)
  local psql = require "helpers.psql"
  psql(pg_url, "CREATE DATABASE " .. name)
  local url = pg_url:gsub("^(postgres[%w]*://[^/]*/)([^?]*)", "%1" .. name)
  return url, function()
    psql(pg_url, "DROP DATABASE IF EXISTS " .. name .. " WITH (FORCE)")
  end, name
end

local backends = {
  { name = "SQLite", fresh = storage.backends[1].fresh },
  { name = "PostgreSQL", pending = storage.backends[2].pending, fresh = fresh_pg },
}

for _, backend in ipairs(backends) do
  local describe_it = backend.pending and pending or describe
  describe_it("jobs on " .. backend.name, function()
    local target, drop
    before_each(function()
      target, drop = backend.fresh()
    end)
    after_each(function()
      server.kill_all()
      if drop then drop() end
    end)

    local function start(env, args)
      env = env or {}
      env.JOBS_DB = target
      return server.start(APP, { env = env, args = args })
    end

    it("runs each job once across two workers, and a delayed one not before its time", function()
      local s = start({}, { "--workers", "2" })
      local ids = call(s, "enqueue", { job = "record", n = 200 }).ids
      assert.are.equal(200, #ids)
      local r = eventually(10, function()
        local r = report(s)
        local done = 0
        for _, j in ipairs(r.jobs) do if j.state == "done" then done = done + 1 end end
        return done == 200 and r
      end, "200 jobs done")
      assert.are.equal(200, #r.runs) -- once each: no job ran twice
      local seen = {}
      for _, run in ipairs(r.runs) do
        assert.is_nil(seen[run.job], "job " .. run.job .. " ran twice")
        seen[run.job] = true
        assert.are.equal(1, run.attempt)
      end
      local t0 = socket.gettime()
      local id = call(s, "enqueue", { job = "record", delay = 800 }).ids[1]
      local done = eventually(5, state_is(s, id, "done"), "the delayed job done")
      assert.is_true(socket.gettime() - t0 >= 0.8, "ran before its delay")
      local run = runs_of(done, id)[1]
      assert.is_true(run.at - job_of(done, id).created_at >= 800)
      assert.are.equal(0, s:stop())
    end)

    it("retries a failing job with backoff, then marks one that keeps failing dead with its error", function()
      local s = start({}, { "--cpu-limit", "200" })
      local flaky = call(s, "enqueue", { job = "flaky", input = { okAt = 2 } }).ids[1]
      local boom = call(s, "enqueue", { job = "boom" }).ids[1]
      local spin = call(s, "enqueue", { job = "spin" }).ids[1]
      local hog = call(s, "enqueue", { job = "hog" }).ids[1]
      local hang = call(s, "enqueue", { job = "sleepy", input = { ms = 60000, ignore = true } }).ids[1]
      local r = eventually(15, function()
        local r = report(s)
        for _, id in ipairs { flaky, boom, spin, hog, hang } do
          local j = job_of(r, id)
          if not (j.state == "done" or j.state == "dead") then return nil end
        end
        return r
      end, "every job ended")
      local j = job_of(r, flaky)
      assert.are.equal("done", j.state)
      assert.are.equal(2, j.attempt)
      assert.are.equal(2, #runs_of(r, flaky))
      -- its retry waited its backoff: base 50 ms, first retry in [25, 50] ms
      local runs = runs_of(r, flaky)
      assert.is_true(runs[2].at - runs[1].at >= 25, "retried before its backoff")
      j = job_of(r, boom)
      assert.are.equal("dead", j.state)
      assert.are.equal(2, j.attempt) -- retry.max = 2: attempts in all
      assert.are.equal(2, #runs_of(r, boom))
      assert.matches("/jobs/app%.lua:%d+: boom$", j.last_error)
      for _, id in ipairs { spin, hog, hang } do
        j = job_of(r, id)
        assert.are.equal("dead", j.state, "job " .. id)
        assert.are.equal(2, #runs_of(r, id), "job " .. id)
      end
      assert.matches("budget", job_of(r, spin).last_error)
      assert.matches("budget", job_of(r, hog).last_error)
      assert.matches("timed out after 1000 ms", job_of(r, hang).last_error)
      -- the worker lives, and its log names each job's id and its traceback
      assert.are.equal(200, http.get(s.port, "/manifest").status)
      local log = s:stderr()
      assert.matches("%[job%-" .. boom .. "%] jobs: job " .. boom .. " %(boom%) is dead after 2 attempt%(s%): "
        .. "[^ ]*/jobs/app%.lua:%d+: boom\\nstack traceback:", log)
      assert.are.equal(0, s:stop())
    end)

    it("never runs a job enqueued in a transaction that rolled back", function()
      local s = start()
      local ids = call(s, "enqueue", { job = "record", n = 10000, rollback = true }).ids
      assert.are.equal(10000, #ids)
      local id = call(s, "enqueue", { job = "record" }).ids[1]
      eventually(5, state_is(s, id, "done"), "the committed job done")
      socket.sleep(0.3)
      local r = report(s)
      assert.are.equal(1, #r.jobs)
      assert.are.equal(1, #r.runs)
      assert.are.equal(id, r.runs[1].job)
      assert.are.equal(0, s:stop())
    end)

    it("keeps one job per unique key within its window", function()
      local s = start()
      local a = call(s, "enqueue", { job = "unique", input = { user = "ann" } }).ids[1]
      local b = call(s, "enqueue", { job = "unique", input = { user = "ann" } }).ids[1]
      local c = call(s, "enqueue", { job = "unique", input = { user = "bob" } }).ids[1]
      assert.are.equal(a, b)
      assert.are_not.equal(a, c)
      eventually(5, state_is(s, a, "done"), "ann's job done")
      -- done, but still inside its 60 s window: the same job again
      assert.are.equal(a, call(s, "enqueue", { job = "unique", input = { user = "ann" } }).ids[1])
      assert.are.equal(0, s:stop())
    end)

    it("publishes a job's topics after its run, as an action's", function()
      local s = start()
      local id = call(s, "enqueue", { job = "announce" }).ids[1]
      local r = eventually(5, function()
        local r = report(s)
        return #runs_of(r, 0) == 1 and r
      end, "the subscriber heard it")
      assert.are.equal("heard jobs.announced", runs_of(r, 0)[1].note)
      assert.are.equal("announce", runs_of(r, id)[1].note)
      assert.are.equal(0, s:stop())
    end)

    it("cancels a waiting job and retries a dead one from code", function()
      local s = start()
      local later = call(s, "enqueue", { job = "record", delay = 60000 }).ids[1]
      assert.is_true(call(s, "control", { op = "cancel", id = later }).ok)
      assert.is_false(call(s, "control", { op = "cancel", id = later }).ok)
      local boom = call(s, "enqueue", { job = "boom" }).ids[1]
      eventually(5, state_is(s, boom, "dead"), "boom dead")
      assert.is_true(call(s, "control", { op = "retry", id = boom }).ok)
      local r = eventually(5, function()
        local r = report(s)
        return #runs_of(r, boom) == 4 and job_of(r, boom).state == "dead" and r
      end, "boom ran twice more")
      assert.are.equal("cancelled", job_of(r, later).state)
      assert.are.equal(0, #runs_of(r, later))
      assert.are.equal(0, s:stop())
    end)

    it("runs a job again elsewhere when its worker is killed mid-job, within the lease", function()
      local env = { JOBS_LEASE = "2000" }
      local a = start(env)
      local id = call(a, "enqueue", { job = "slow", input = { ms = 1500 } }).ids[1]
      eventually(5, function() return #runs_of(report(a), id) == 1 end, "the job started")
      a:kill()
      local killed = socket.gettime()
      local b = start(env)
      local r = eventually(10, state_is(b, id, "done"), "the job done on the other server")
      local ran = socket.gettime() - killed
      local runs = runs_of(r, id)
      assert.are.equal(3, #runs) -- start (killed), start, end
      assert.are.equal(2, runs[2].attempt)
      assert.are.equal("end v1", runs[3].note)
      assert.are_not.equal(runs[1].pid, runs[2].pid)
      -- the lease (2 s) plus the rescue's second and the job's own 1.5 s
      assert.is_true(ran < 2 + 1 + 1.5 + 1.5 * slow, ("took %.1f s"):format(ran))
      assert.matches("its worker stopped", job_of(r, id).last_error)
      assert.are.equal(0, b:stop())
    end)

    it("lets a running job finish on the old code through a reload, new ones run the new", function()
      local version = os.tmpname()
      files.write(version, "v1\n")
      local s = start({ JOBS_VERSION_FILE = version })
      local old = call(s, "enqueue", { job = "slow", input = { ms = 1500 } }).ids[1]
      eventually(5, function() return #runs_of(report(s), old) == 1 end, "the job started")
      files.write(version, "v2\n")
      assert.is_true(s:signal("HUP"))
      eventually(5, function() return s:stderr():find("reloaded in", 1, true) end, "the reload")
      local new = call(s, "enqueue", { job = "record" }).ids[1]
      eventually(5, state_is(s, old, "done"), "the old job done")
      local r = eventually(5, state_is(s, new, "done"), "the new job done")
      assert.are.equal("end v1", runs_of(r, old)[2].note)
      assert.are.equal("v2", runs_of(r, new)[1].note)
      assert.are.equal(1, job_of(r, old).attempt)
      -- the old generation closed once its job ended
      eventually(5, function() return s:stderr():find("generation closed", 1, true) end, "the old generation closed")
      assert.are.equal(0, s:stop())
      os.remove(version)
    end)

    it("runs a 6-field schedule's tick once across two workers of two instances, a missed one once", function()
      local env = { JOBS_SCHEDULE = "*/2 * * * * *" }
      local a = start(env, { "--workers", "2" })
      local b = start(env, { "--workers", "2" })
      local t0 = socket.gettime()
      socket.sleep(7)
      assert.are.equal(0, a:stop())
      local ticks = {}
      for _, run in ipairs(report(b).runs) do
        if run.note == "tick" then ticks[#ticks + 1] = run end
      end
      assert.are.equal(0, b:stop())
      local elapsed = socket.gettime() - t0
      -- one tick every even second: 3 or 4 in 7 s, each run once, none two for one tick
      assert.is_true(#ticks >= math.floor(elapsed / 2) - 1 and #ticks <= math.floor(elapsed / 2) + 1,
        #ticks .. " ticks in " .. elapsed .. " s")
      local seen = {}
      for i, run in ipairs(ticks) do
        assert.is_nil(seen[run.job], "job " .. run.job .. " ran twice")
        seen[run.job] = true
        assert.are.equal(1, run.attempt)
        if i > 1 then
          assert.is_true(run.at - ticks[i - 1].at >= 1000, "two runs for one tick")
        end
      end
      -- down for three ticks: the next start runs one of them, not three
      socket.sleep(6.5)
      local c = start(env)
      local started = socket.gettime() * 1000
      socket.sleep(1.5)
      local since = 0
      for _, run in ipairs(report(c).runs) do
        if run.note == "tick" and run.at >= started - 200 then since = since + 1 end
      end
      -- the missed one, and at most one regular tick in those 1.5 s
      assert.is_true(since >= 1 and since <= 2, since .. " ticks after the restart")
      assert.are.equal(0, c:stop())
    end)

    it("gives a running job back when stopped, so it runs again at once at the next start", function()
      local env = { CLANK_TEST_LIMITS = "stop_ms=3000" }
      local s = start(env)
      local id = call(s, "enqueue", { job = "slow", input = { ms = 30000 } }).ids[1]
      local quick = call(s, "enqueue", { job = "slow", input = { ms = 500 } }).ids[1]
      eventually(5, function() return #runs_of(report(s), id) == 1 end, "the job started")
      local t0 = socket.gettime()
      assert.is_true(s:signal("TERM"))
      assert.are.equal(0, s:wait_exit(10 * slow))
      local took = socket.gettime() - t0
      -- it waited for the jobs up to the stop limit less a second, then gave the slow one back
      assert.is_true(took >= 1.9 and took < 3 + slow, ("stopped in %.1f s"):format(took))
      assert.matches(("1 running job%%(s%%) given back to run again: %d\n"):format(id), s:stderr())
      local again = start(env)
      -- (the report reads the jobs, then the runs: a claim may land between the two reads)
      local r = eventually(5, function()
        local r = report(again)
        return #runs_of(r, id) == 2 and job_of(r, id).state == "running" and r
      end, "the job started again")
      local j = job_of(r, id)
      assert.are.equal("running", j.state)
      assert.are.equal(1, j.attempt) -- giving back is not an attempt
      assert.are.equal("done", job_of(r, quick).state) -- the quick one finished before the stop
      again:kill()
    end)
  end)
end

describe("jobs when the database goes away", function()
  local run = pg_url and it or pending
  run("pause claiming with one log line and resume without losing a job", function()
    local target, drop, name = fresh_pg()
    local psql = require "helpers.psql"
    local s = server.start(APP, { env = { JOBS_DB = target } })
    local id = call(s, "enqueue", { job = "record", delay = 1500 }).ids[1]
    psql(pg_url, "ALTER DATABASE " .. name .. " WITH ALLOW_CONNECTIONS false")
    psql(pg_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" .. name .. "'")
    eventually(5, function() return s:stderr():find("jobs: claiming paused", 1, true) end, "claiming paused")
    socket.sleep(2) -- the job came due meanwhile, and claiming kept failing
    assert.are.equal(1, count(s:stderr(), "jobs: claiming paused"))
    assert.are.equal(200, http.get(s.port, "/manifest").status)
    psql(pg_url, "ALTER DATABASE " .. name .. " WITH ALLOW_CONNECTIONS true")
    eventually(10, function() return s:stderr():find("jobs: claiming resumed", 1, true) end, "claiming resumed")
    local r = eventually(5, state_is(s, id, "done"), "the job done")
    assert.are.equal(1, #runs_of(r, id))
    assert.are.equal(0, s:stop())
    server.kill_all()
    drop()
  end)
end)

describe("an app whose jobs are wrong", function()
  local cases = {
    twice = "jobs: two jobs are named 'record'",
    unknown = "schedule 'bad': its job 'other' is not in the app's jobs",
    four = "schedule 'bad': cron \"* * * *\": expected 5 fields",
    seven = "schedule 'bad': cron \"* * * * * * *\": expected 5 fields",
    range = "schedule 'bad': cron \"61 * * * *\": minute 61 is out of range 0-59",
    tz = "schedule 'bad': unknown time zone 'Mars/Olympus'",
  }
  for bad, message in pairs(cases) do
    it("fails to load, naming the problem: " .. bad, function()
      local db = os.tmpname()
      local code, _, stderr = server.run({ "--check", APP }, { env = { JOBS_DB = db, JOBS_BAD = bad } })
      storage.remove_db(db)
      assert.are_not.equal(0, code)
      assert.truthy(stderr:find(message, 1, true), stderr)
      assert.matches("app%.lua:%d+", stderr) -- the line
    end)
  end
end)
