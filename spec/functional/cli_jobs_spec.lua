-- clank-run jobs ls | retry | cancel (issue 32): an app's jobs from a shell, on the database the
-- app's jobs use, while the app serves. Exit status: 0 done, 1 no such job or not retryable or
-- cancellable (or no app, no jobs), 2 bad usage. Every expected line is written from the
-- fixture's jobs and the retry rules, never read back from an earlier answer.
local server = require "helpers.server"
local http = require "helpers.http"
local files = require "helpers.files"
local jobs = require "helpers.jobs"

local HEAD = "ID\tSTATE\tQUEUE\tNAME\tATTEMPTS\tLAST ERROR"

-- The line of the fixture's boom job that raises, so its error's place is known beforehand.
local function boom_line()
  local n = 0
  for line in io.lines(jobs.APP) do
    n = n + 1
    if line:find('error("boom")', 1, true) then return n end
  end
  error("the fixture has no boom job")
end

local function lines(text)
  local out = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do out[#out + 1] = line end
  if out[#out] == "" then out[#out] = nil end
  return out
end

local runs = jobs.runs

describe("clank-run jobs", function()
  local db, s

  before_each(function()
    db = jobs.database()
    s = server.start(jobs.APP, { env = { JOBS_DB = db } })
  end)

  after_each(function()
    if s then assert.are.equal(0, s:stop()) end
    s = nil
    server.kill_all()
    jobs.remove(db)
  end)

  -- clank-run jobs ARGS... --app <the fixture's folder> → code, stdout, stderr
  local function run(args, opts)
    local argv = { "jobs" }
    for _, a in ipairs(args) do argv[#argv + 1] = a end
    if not (opts and opts.noApp) then
      argv[#argv + 1] = "--app"
      argv[#argv + 1] = jobs.DIR
    end
    return server.run(argv, { env = { JOBS_DB = db }, cwd = opts and opts.cwd })
  end

  it("lists the jobs newest first with their state, queue, name, attempts and error, then the counts", function()
    local boom = jobs.enqueue(s.port, { job = "boom" })[1]
    jobs.wait(s.port, boom, { dead = true })
    local record = jobs.enqueue(s.port, { job = "record" })[1]
    jobs.wait(s.port, record, { done = true })
    local later = jobs.enqueue(s.port, { job = "record", delay = 600000 })[1]
    -- default: 1 available (the delayed one), 0 running, 1 done, 1 dead, 0 cancelled
    local counts = "queue default: available 1, running 0, done 1, dead 1, cancelled 0"
    local code, out, err = run { "ls" }
    assert.are.equal(0, code, err)
    local got = lines(out)
    assert.are.equal(6, #got, out)
    assert.are.equal(HEAD, got[1])
    assert.are.equal(later .. "\tavailable\tdefault\trecord\t0/5\t", got[2])
    assert.are.equal(record .. "\tdone\tdefault\trecord\t1/5\t", got[3])
    -- boom (retry.max 2) died at its second attempt, with the error its handler raised
    assert.truthy(got[4]:find("^" .. boom .. "\tdead\tdefault\tboom\t2/2\t[^\t]*app%.lua:" .. boom_line()
      .. ": boom$"), got[4])
    assert.are.equal("", got[5])
    assert.are.equal(counts, got[6])

    code, out = run { "ls", "--state", "dead" }
    assert.are.equal(0, code)
    got = lines(out)
    assert.are.same({ HEAD, got[2], "", counts }, got)
    assert.truthy(got[2]:find("^" .. boom .. "\tdead\t"), got[2])

    code, out = run { "ls", "--limit", "1" }
    assert.are.equal(0, code)
    assert.are.same({ HEAD, later .. "\tavailable\tdefault\trecord\t0/5\t", "", counts }, lines(out))

    code, out = run { "ls", "--state", "cancelled" }
    assert.are.equal(0, code)
    assert.are.same({ "no cancelled jobs", "", counts }, lines(out))

    -- from the app's own folder, --app may be left out
    code, out = run({ "ls", "--state", "done" }, { noApp = true, cwd = jobs.DIR })
    assert.are.equal(0, code)
    assert.are.same({ HEAD, record .. "\tdone\tdefault\trecord\t1/5\t", "", counts }, lines(out))
  end)

  it("retries an ended job, which the server then runs again", function()
    local boom = jobs.enqueue(s.port, { job = "boom" })[1]
    jobs.wait(s.port, boom, { dead = true })
    assert.are.equal(2, runs(s.port)) -- its two attempts
    local code, out, err = run { "retry", tostring(boom) }
    assert.are.equal(0, code, err)
    assert.are.equal("job " .. boom .. " will run again\n", out)
    -- its attempts counted afresh: the server's runner finds it due, two more runs, dead at 2/2
    jobs.eventually(function() return runs(s.port) >= 4 end, "the retried job's runs")
    local row = jobs.wait(s.port, boom, { dead = true })
    assert.are.equal(2, row.attempt)
    assert.are.equal(4, runs(s.port))
  end)

  it("exits 1 for a job that is not there or cannot be retried or cancelled", function()
    local later = jobs.enqueue(s.port, { job = "record", delay = 600000 })[1]
    local code, out, err = run { "retry", tostring(later) }
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("clank-run jobs: job " .. later .. " is available: only a done, dead or cancelled job can be "
      .. "retried\n", err)
    code, out, err = run { "retry", "999999" }
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("clank-run jobs: no job 999999\n", err)
    code, out, err = run { "cancel", "999999" }
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("clank-run jobs: no job 999999\n", err)
    assert.are.equal("available", jobs.get(s.port, later).state)
  end)

  it("cancels a waiting job, once", function()
    local later = jobs.enqueue(s.port, { job = "record", delay = 600000 })[1]
    local code, out, err = run { "cancel", tostring(later) }
    assert.are.equal(0, code, err)
    assert.are.equal("job " .. later .. " is cancelled\n", out)
    assert.are.equal("cancelled", jobs.get(s.port, later).state)
    code, out, err = run { "cancel", tostring(later) }
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("clank-run jobs: job " .. later .. " is cancelled: only an available or running job can be "
      .. "cancelled\n", err)
    -- and a cancelled job can be retried: due at once, so the server's runner may have taken
    -- it by the time it is read; it runs to the end
    code = run { "retry", tostring(later) }
    assert.are.equal(0, code)
    assert.are_not.equal("cancelled", jobs.get(s.port, later).state)
    jobs.wait(s.port, later, { done = true })
  end)

  it("exits 2 on bad usage, printing the usage", function()
    for _, args in ipairs {
      {}, { "frob" }, { "ls", "extra" }, { "ls", "--state", "waiting" }, { "ls", "--limit", "0" },
      { "ls", "--limit", "1001" }, { "ls", "--limit", "ten" }, { "ls", "--limit" }, { "ls", "--bogus" },
      { "retry" }, { "retry", "abc" }, { "retry", "-1" }, { "retry", "1", "2" }, { "cancel", "1.5" },
      { "retry", "1", "--state", "dead" },
    } do
      local code, out, err = run(args)
      assert.are.equal(2, code, table.concat(args, " "))
      assert.are.equal("", out)
      assert.truthy(err:find("^clank%-run jobs: "), err)
      assert.truthy(err:find("usage: clank-run jobs ls [--state STATE] [--limit N] [--app DIR]", 1, true), err)
    end
  end)
end)

describe("clank-run jobs, an app's own database", function()
  local dir, other, s

  before_each(function()
    -- without the sanitizer build's LD_PRELOAD: a leak report fails a tool run under it
    local p = assert(io.popen("env -u LD_PRELOAD sh -c 'mktemp -d; mktemp -d'"))
    dir, other = p:read("l"), p:read("l")
    p:close()
  end)

  after_each(function()
    if s then assert.are.equal(0, s:stop()) end
    s = nil
    server.kill_all()
    os.execute("rm -rf " .. files.quote(dir) .. " " .. files.quote(other))
  end)

  it("finds .clank/jobs.sqlite next to the app from any folder", function()
    -- no jobsDb and no database of its own: its jobs are in DIR/.clank/jobs.sqlite
    files.write(dir .. "/app.lua", [[
local clank = require "clank"
local s = clank.schema
local Hello = clank.defineJob { name = "hello", input = s.object {}, handler = function() end }
local Later = clank.defineAction {
  name = "later", description = "Enqueues hello for in ten minutes.", input = s.object {},
  sideEffects = "write", confirmation = "never",
  handler = function() Hello:enqueue({}, { delay = 600000 }) end,
}
return clank.app { name = "plain", actions = { Later }, jobs = { Hello } }
]])
    s = server.start(dir .. "/app.lua")
    local res = assert(http.request(s.port, "POST", "/actions/later", { ["content-type"] = "application/json" }, "{}"))
    assert.are.equal(200, res.status, res.body)
    local code, out, err = server.run({ "jobs", "ls", "--app", dir .. "/" }, { cwd = other })
    assert.are.equal(0, code, err)
    assert.are.same({ HEAD, "1\tavailable\tdefault\thello\t0/5\t", "",
      "queue default: available 1, running 0, done 0, dead 0, cancelled 0" }, lines(out))
    assert.is_nil(files.read(other .. "/.clank/jobs.sqlite")) -- nothing made where it ran
  end)

  it("exits 1 for a folder without app.lua and for an app without jobs", function()
    local code, _, err = server.run({ "jobs", "ls", "--app", dir })
    assert.are.equal(1, code)
    assert.are.equal("clank-run jobs: no app.lua in " .. dir .. "\n", err)
    code, _, err = server.run({ "jobs", "ls", "--app", server.fixture("basic", "") })
    assert.are.equal(1, code)
    assert.truthy(err:find("has no jobs", 1, true), err)
  end)

  it("is in clank-run --help", function()
    local code, out = server.run({ "--help" })
    assert.are.equal(0, code)
    assert.truthy(out:find("clank-run jobs ls [--state STATE] [--limit N] [--app DIR]", 1, true), out)
    assert.truthy(out:find("clank-run jobs retry|cancel ID [--app DIR]", 1, true), out)
  end)
end)
