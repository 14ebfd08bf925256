-- The jobs runner of one generation in one worker (issue 32). clank-run starts it when the
-- generation serves (runtime/host/jobs.c) and stops it when the process stops:
--
--   runner:start()    plain call: the claim loop and the schedules start as tasks of their own
--   runner:stop(ms)   plain call: no more claims; running jobs get ms to end, then their leases
--                     are given back so that they run again at once elsewhere or at the next start
--
-- A claimed job runs in a task of its own under the app's CPU and memory rules, with an abort
-- signal that fires at its timeout. Those tasks, and what records their ends, outlive a reload:
-- the retired generation is held open (core.hold) until they are done, while the new generation's
-- runner claims with the new code. Each running job holds a lease the runner renews; a runner that
-- dies or hangs loses them and its jobs run again elsewhere (at least once).
local core = require "clank.core"
local json = require "clank.json"
local jobs = require "clank.jobs"
local store = require "clank.jobs.store"
local pubsub = require "clank.pubsub"

local pairs, ipairs, pcall, xpcall, tostring, type, setmetatable = pairs, ipairs, pcall, xpcall, tostring, type,
  setmetatable
local format, concat, min, max = string.format, table.concat, math.min, math.max
local running = coroutine.running
local now_ms, sleep, log = core.nowMs, core.sleep, core.log

local M = {}

local POLL_MS = 1000         -- an idle runner looks for due jobs at least this often
local RESCUE_MS = 1000       -- and for runs whose lease ran out
local PRUNE_MS = 60000       -- ended jobs past their retention are deleted this often
local FLUSH_MS = 2           -- ends of successful runs are written together, at most this late
local FLUSH_MAX = 500
local GRACE_MS = 1000        -- a run past its timeout by this much is given up on
local WATCH_MS = 100         -- how often running jobs' timeouts are looked at
local WAKE_TOPIC = "clank.jobs.wake"
local DEAD_KEEP_MS = 7 * 86400000 -- dead jobs stay at least a week, for someone to look at them

local Runner = {}
Runner.__index = Runner

-- b: clank.jobs.bind's record (db, byName, concurrency, lease, retention, queues, schedules).
function M.new(b)
  local hex = core.randomBytes(8):gsub(".", function(c) return format("%02x", c:byte()) end)
  local self = setmetatable({
    b = b, db = b.db, kind = b.db.kind, sql = store.sql(b.db.kind), id = "w" .. hex,
    runs = {}, nrunning = 0, perQueue = {}, doneBatch = {}, stopping = false,
    nextDue = nil, -- the earliest run_at this runner knows of in the future
  }, Runner)
  b.runner = self
  return self
end

-- The queues this runner claims from, with their limits.
local function queues_of(self)
  if self._queues then return self._queues end
  -- only jobs this code knows: another version (a rolling deploy) or app on the same database
  -- leaves this one's alone, and the reverse
  local list, seen = {}, {}
  for _, job in ipairs(self.b.jobs) do
    local q = seen[job.queue]
    if not q then
      local limit = self.b.queues and self.b.queues[job.queue] or self.b.concurrency
      q = { name = job.queue, limit = min(limit, self.b.concurrency), jobNames = {} }
      seen[job.queue] = q
      list[#list + 1] = q
    end
    q.jobNames[#q.jobNames + 1] = job.name
  end
  for _, q in ipairs(list) do q.names = json.encode(q.jobNames) end
  self._queues = list
  return list
end

-- ---- waking the claim loop ----

function Runner:wake(runAt)
  if runAt and runAt > now_ms() + 1 then
    if self.nextDue == nil or runAt < self.nextDue then
      self.nextDue = runAt
      if self.loop then core.wake(self.loop) end -- to sleep less
    end
    return
  end
  self.woken = true
  if self.loop then core.wake(self.loop) end
end

-- ---- recording ends ----

local function release_hold(run)
  if run.held then
    run.held = false
    core.hold(-1)
  end
end

function Runner:forget(run)
  if self.runs[run.id] ~= run then return end
  self.runs[run.id] = nil
  self.nrunning = self.nrunning - 1
  self.perQueue[run.queue] = self.perQueue[run.queue] - 1
  self:wake()
end

-- The successful ends gathered since the last flush, in one statement.
function Runner:flush()
  while #self.doneBatch > 0 do
    local batch = self.doneBatch
    self.doneBatch = {}
    local ids = {}
    for i, run in ipairs(batch) do ids[i] = run.id end
    local ok, err = pcall(self.db.exec, self.db, self.sql.done, now_ms(), self.id, json.encode(ids))
    if not ok then
      -- its lease runs out and it runs again: at least once
      log("error", format("jobs: recording %d finished job(s) failed: %s", #ids, tostring(err)))
    end
    for _, run in ipairs(batch) do release_hold(run) end
  end
  self.flushing = false
end

-- A successful run frees its slot at once; its end is written with the others of the next
-- milliseconds (its lease, renewed meanwhile, covers it until then).
function Runner:succeeded(run)
  self:forget(run)
  local batch = self.doneBatch
  batch[#batch + 1] = run
  if #batch >= FLUSH_MAX then
    core.spawnKept(function() self:flush() end, function() end)
  elseif not self.flushing then
    self.flushing = true
    core.spawnKept(function()
      sleep(FLUSH_MS)
      self:flush()
    end, function() self.flushing = false end)
  end
end

-- A failed run: again later (backoff), or dead after its last attempt. message: the error's first
-- line (file:line), stored; trace: the whole of it for the log.
function Runner:failed(run, message, trace)
  core.requestId("job-" .. run.id)
  local job = self.b.byName[run.name]
  local retry = job and job.retry
  local now, state, finished = now_ms(), "available", core.null
  local runAt
  if run.attempt >= run.maxAttempts then
    state, runAt, finished = "dead", now, now
  else
    runAt = now + jobs.backoff(retry or { backoff = "constant", base = 1000, maxDelay = 1000 }, run.attempt)
  end
  if #message > 4000 then message = message:sub(1, 4000) .. "…" end
  local ok, res = pcall(self.db.exec, self.db, self.sql.failed, state, runAt, message, finished, run.id, self.id)
  if not ok then log("error", format("jobs: recording job %d's failure failed: %s", run.id, tostring(res))) end
  if ok and res.changes == 0 then
    -- cancelled meanwhile (or its lease lost): the row is no longer this run's to end
    log("info", format("jobs: job %d (%s) attempt %d ended (%s), but it was cancelled or taken over meanwhile",
      run.id, run.name, run.attempt, message))
    self:forget(run)
    release_hold(run)
    return
  end
  if state == "dead" then
    log("error", format("jobs: job %d (%s) is dead after %d attempt(s): %s", run.id, run.name, run.attempt,
      trace or message))
  else
    log("warn", format("jobs: job %d (%s) attempt %d failed, next at +%d ms: %s", run.id, run.name, run.attempt,
      runAt - now, trace or message))
    self:wake(runAt)
  end
  core.count("job", run.queue, state == "dead" and "dead" or "failed", (now - run.started) / 1000)
  self:forget(run)
  release_hold(run)
end

-- ---- running one job ----

-- The traceback of a handler's error, down to the handler: the runner's frames below it say
-- nothing to the app's author.
local function traceback(err)
  if type(err) ~= "string" then return err end
  local trace = debug.traceback(err, 2)
  local cut = trace:find("\n%s*%[C%]: in function 'xpcall'")
  return cut and trace:sub(1, cut - 1) or trace
end

-- file:line and the message: an error's first line.
local function headline(err)
  local text = tostring(err)
  return (text:match("^[^\n]*"))
end

function Runner:run(row)
  local job = self.b.byName[row.name]
  local run = {
    id = row.id, name = row.name, queue = row.queue, attempt = row.attempt, maxAttempts = row.max_attempts,
    started = now_ms(), held = true, timeout = job and job.timeout or jobs.DEFAULT_TIMEOUT,
  }
  self.runs[run.id] = run
  self.nrunning = self.nrunning + 1
  self.perQueue[run.queue] = (self.perQueue[run.queue] or 0) + 1
  local timeout = run.timeout
  core.hold(1, timeout + GRACE_MS)
  self:keepLeases()
  if not job then
    self:failed(run, format("no job named '%s' in this app", row.name))
    return
  end
  local signal = core.newSignal() -- aborted at the timeout by keepLeases' watch
  run.signal = signal
  local result = {}
  core.spawnKept(function()
    core.requestId("job-" .. run.id)
    local ok, input = pcall(json.decode, row.input)
    local parsed = ok and job.input:safeParse(input)
    if not (parsed and parsed.success) then
      result.err = "its stored input no longer matches the job's schema: " .. tostring(parsed and parsed.error)
      return
    end
    local ctx = { jobId = run.id, attempt = run.attempt, job = job.name, queue = job.queue, signal = signal,
      log = function(level, msg) log(level, tostring(msg)) end }
    local done, err = xpcall(job.handler, traceback, parsed.data, ctx)
    if done and job.publishes then
      done, err = pcall(pubsub.publishAction, job.publishes, parsed.data, nil, ctx)
    end
    result.ok, result.err = done, err
  end, function()
    core.requestId("job-" .. run.id) -- the log lines of its end carry its id too
    if run.given then return end -- given up on (its timeout) or given back (a stop)
    if result.ok then
      run.given = true
      self:succeeded(run)
      core.count("job", run.queue, "done", (now_ms() - run.started) / 1000)
      return
    end
    run.given = true
    local err = result.err
    if err == nil then
      err = "stopped: over its CPU or memory budget"
    elseif signal.aborted and signal.reason == "timeout" then
      err = format("timed out after %d ms (%s)", timeout, headline(err))
    end
    self:failed(run, headline(err), tostring(err))
  end, signal)
end

-- ---- leases ----

-- While this runner has jobs running: their leases are renewed a third of the way through; a
-- run past its timeout has its signal aborted, and one that still runs a second later (a
-- handler that ignores its signal, in a long clank.sleep) is given up on. One watch for all the
-- runs, not a timer each.
function Runner:keepLeases()
  if self.keeping then return end
  self.keeping = true
  local lease = self.b.lease
  core.spawnKept(function()
    local renewAt = now_ms() + lease // 3
    while self.nrunning > 0 do
      sleep(WATCH_MS)
      local now = now_ms()
      for _, run in pairs(self.runs) do
        local late = now - run.started - run.timeout
        if late >= 0 and run.signal and not run.signal.aborted then
          core.abort(run.signal, "timeout")
        end
        if late > GRACE_MS and not run.given then
          run.given = true
          self:failed(run, format("timed out after %d ms and did not stop", run.timeout))
        end
      end
      if self.nrunning > 0 and now >= renewAt then
        renewAt = now + lease // 3
        local ok, err = pcall(self.db.exec, self.db, self.sql.renew, now + lease, self.id)
        if not ok then log("warn", "jobs: renewing leases failed: " .. tostring(err)) end
      end
    end
  end, function() self.keeping = false end)
end

-- ---- claiming ----

function Runner:claim()
  local claimed = 0
  local free = self.b.concurrency - self.nrunning
  for _, q in ipairs(queues_of(self)) do
    if free <= 0 or self.stopping then break end
    local n = min(free, q.limit - (self.perQueue[q.name] or 0))
    if n > 0 then
      local now = now_ms()
      local rows = self.db:query(self.sql.claim, now + self.b.lease, self.id, q.name, now, n, q.names)
      for _, row in ipairs(rows) do self:run(row) end
      claimed = claimed + #rows
      free = free - #rows
    end
  end
  return claimed, free
end

function Runner:maintain(now)
  if now >= (self.rescueAt or 0) then
    self.rescueAt = now + RESCUE_MS
    local rescued = self.db:query(self.sql.rescue, now)
    for _, row in ipairs(rescued) do
      local dead = row.state == "dead"
      log(dead and "error" or "warn", format("jobs: job %d (%s): its worker stopped while it ran; %s", row.id,
        row.name, dead and "it is dead, that was its last attempt" or "it will run again"))
      core.count("job", row.queue, dead and "dead" or "failed", 0)
    end
    if #rescued > 0 then
      self.woken = true
    end
  end
  if now >= (self.pruneAt or 0) then
    local retention = self.b.retention
    self.pruneAt = now + max(1000, min(PRUNE_MS, retention))
    local pruned = self.db:exec(self.sql.prune, now - retention, now - max(retention, DEAD_KEEP_MS))
    if pruned.changes > 0 and self.kind == "postgres" then self:shrink() end
  end
end

-- After a prune emptied the table: its space back (PostgreSQL keeps a table's and its indexes'
-- pages at their high-water mark). Nothing waits for it: the lock is taken only if it is free.
function Runner:shrink()
  if self.db:one(self.sql.anyJob) then return end
  pcall(self.db.transaction, self.db, function(tx)
    tx:exec(self.sql.lockAll)
    if not tx:one(self.sql.anyJob) then tx:exec(self.sql.truncate) end
  end)
end

function Runner:loopBody()
  self.loop = running()
  local paused -- the database's error while claiming is paused, for one log line
  local delay = 100
  while not self.stopping do
    local ok, claimed, free = pcall(function()
      jobs.ready(self.b)
      self.woken = false
      local now = now_ms()
      if self.nextDue and self.nextDue <= now then self.nextDue = nil end
      self:maintain(now)
      return self:claim()
    end)
    if not ok then
      if not paused then
        paused = tostring(claimed)
        log("error", "jobs: claiming paused, the database failed: " .. paused)
      end
      sleep(delay)
      delay = min(delay * 2, 5000)
    else
      if paused then
        paused = nil
        log("info", "jobs: claiming resumed")
      end
      delay = 100
      -- full, or nothing more came: wait for a wake (an enqueue, an end), a due time or the poll
      if (free <= 0 or claimed == 0) and not self.woken and not self.stopping then
        local wait = POLL_MS
        if self.nextDue then wait = max(0, min(wait, self.nextDue - now_ms())) end
        if wait > 0 then sleep(wait) end
      end
    end
  end
end

-- ---- start and stop ----

function Runner:start()
  if self.started then return end
  self.started = true
  jobs.onEnqueued(function(runAt)
    self:wake(runAt)
    -- the other workers and instances: one publish per burst of enqueues
    if not self.telling then
      self.telling = true
      core.spawn(function()
        sleep(1)
        self.telling = false
        core.relay(WAKE_TOPIC)
      end)
    end
  end)
  pubsub.watch(WAKE_TOPIC, self, function() self:wake() end)
  core.spawn(function() self:loopBody() end)
  if #self.b.schedules > 0 then
    core.spawn(function() require("clank.jobs.schedules").run(self.b) end)
  end
end

function Runner:stop(ms)
  if self.stopping then return end
  self.stopping = true
  if self.loop then core.wake(self.loop) end
  core.hold(1) -- the process waits for the give-back below
  core.spawnKept(function()
    local deadline = now_ms() + ms -- by the clock: a loaded machine's sleeps run late
    while self.nrunning > 0 and now_ms() < deadline do
      sleep(min(20, max(1, deadline - now_ms())))
    end
    local left, ids = {}, {}
    for id, run in pairs(self.runs) do
      if not run.given then
        run.given = true
        left[#left + 1] = run
        ids[#ids + 1] = id
      end
    end
    if #ids > 0 then
      local ok, err = pcall(self.db.exec, self.db, self.sql.release, now_ms(), self.id, json.encode(ids))
      log(ok and "warn" or "error", format("jobs: stopping: %d running job(s) given back%s: %s", #ids,
        ok and " to run again" or " failed", ok and concat(ids, ", ") or tostring(err)))
      for _, run in ipairs(left) do
        if run.signal then core.abort(run.signal, "stopping") end
        self:forget(run)
        release_hold(run)
      end
    end
  end, function() core.hold(-1) end)
end

-- clank.jobs.cancel of a job running here: its signal aborts; its end is not recorded.
function Runner:cancelled(id)
  local run = self.runs[id]
  if not run or run.given then return end
  run.given = true
  if run.signal then core.abort(run.signal, "cancelled") end
  self:forget(run)
  release_hold(run)
end

return M
