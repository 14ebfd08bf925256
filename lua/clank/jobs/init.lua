-- clank.defineJob and clank.jobs (issue 32): durable jobs on the app's own database.
--
--   Job = clank.defineJob { name, description?, input = schema, handler = function(input, ctx),
--                           retry = { max = 5, backoff = "exponential", base = 1000,
--                                     maxDelay = 3600000 }, timeout = 60000, queue = "default",
--                           priority = 0, unique = { key = function(input) → string,
--                           within = ms }?, publishes = { topic, ... } | function? }
--   Job:enqueue(input, { delay = ms | runAt = epoch ms, key = string }?) → id
--   clank.jobs.cancel(id) → true | false        clank.jobs.retry(id) → true | false
--   clank.jobs.get(id) → row | nil               clank.jobs.list{ state?, limit? } → rows
--   clank.jobs.counts() → { { queue, state, n }, ... }
--
-- A job's input is checked by its schema when it is enqueued; inside db:transaction on the jobs'
-- database the row is written in that transaction, so it exists exactly when the transaction's
-- writes do. The app binds its jobs to a database with clank.app { jobs = ..., jobsDb = ... }
-- (M.bind); clank-run's workers run them (clank.jobs.runner).
local core = require "clank.core"
local json = require "clank.json"
local schema = require "clank.schema"
local dbmod = require "clank.db"
local store = require "clank.jobs.store"

local type, pairs, ipairs, error, tostring, setmetatable, getmetatable, pcall = type, pairs, ipairs, error,
  tostring, setmetatable, getmetatable, pcall
local format, floor, random, math_type = string.format, math.floor, math.random, math.type

local M = {}

local DEFAULT_RETRY = { max = 5, backoff = "exponential", base = 1000, maxDelay = 3600000 }
local DEFAULT_TIMEOUT = 60000
local BACKOFFS = { exponential = true, linear = true, constant = true }
M.DEFAULT_TIMEOUT = DEFAULT_TIMEOUT

local Job = { __name = "clank.Job" }
Job.__index = Job

local function isJob(x)
  return getmetatable(x) == Job
end
M.isJob = isJob

local function positive_integer(v)
  return math_type(v) == "integer" and v > 0
end

local function check_retry(retry)
  if retry == nil then return DEFAULT_RETRY end
  if type(retry) ~= "table" then return nil, "retry must be a table" end
  local out = {}
  for k, v in pairs(retry) do
    if DEFAULT_RETRY[k] == nil then
      return nil, format("retry has an unknown field '%s' (max, backoff, base, maxDelay)", tostring(k))
    end
    out[k] = v
  end
  for k, v in pairs(DEFAULT_RETRY) do
    if out[k] == nil then out[k] = v end
  end
  if not positive_integer(out.max) then return nil, "retry.max must be a positive integer (attempts in all)" end
  if not BACKOFFS[out.backoff] then
    return nil, "retry.backoff must be \"exponential\", \"linear\" or \"constant\""
  end
  if not (math_type(out.base) == "integer" and out.base >= 0) then
    return nil, "retry.base must be an integer number of milliseconds"
  end
  if not (math_type(out.maxDelay) == "integer" and out.maxDelay >= out.base) then
    return nil, "retry.maxDelay must be an integer number of milliseconds, at least retry.base"
  end
  return out
end

local fields = { name = true, description = true, input = true, handler = true, retry = true, timeout = true,
  unique = true, queue = true, priority = true, publishes = true }

local NAME = "^[%a_][%w_.:-]*$"

function M.defineJob(def)
  if type(def) ~= "table" then error("clank.defineJob: expected a table, got " .. type(def), 2) end
  for k in pairs(def) do
    if not fields[k] then
      error(format("clank.defineJob: unknown field '%s'", tostring(k)), 2)
    end
  end
  local name = def.name
  if type(name) ~= "string" or #name > 100 or not name:find(NAME) then
    error("clank.defineJob: name must be a string of letters, digits and _ . : - (at most 100), "
      .. "not starting with a digit", 2)
  end
  local function fail(msg) error(format("clank.defineJob '%s': %s", name, msg), 3) end
  if not schema.isSchema(def.input) then fail("input must be a clank.schema") end
  if type(def.handler) ~= "function" then fail("handler must be a function") end
  if def.description ~= nil and type(def.description) ~= "string" then fail("description must be a string") end
  local retry, problem = check_retry(def.retry)
  if not retry then fail(problem) end
  local timeout = def.timeout or DEFAULT_TIMEOUT
  if not (positive_integer(timeout) and timeout <= 86400000) then
    fail("timeout must be an integer number of milliseconds from 1 to 86400000")
  end
  local queue = def.queue or "default"
  if type(queue) ~= "string" or not queue:find(NAME) or #queue > 100 then
    fail("queue must be a name of letters, digits and _ . : -")
  end
  local priority = def.priority or 0
  if not (math_type(priority) == "integer" and priority >= -1000 and priority <= 1000) then
    fail("priority must be an integer from -1000 to 1000 (lower runs first)")
  end
  local unique = def.unique
  if unique ~= nil then
    if type(unique) ~= "table" or type(unique.key) ~= "function" then
      fail("unique must be a table with key = function(input) returning a string")
    end
    -- `for` is a Lua keyword: unique = { key = ..., within = ms } (["for"] = ms is taken too)
    local within = unique.within or unique["for"]
    if within ~= nil and not positive_integer(within) then
      fail("unique.within must be a positive integer number of milliseconds")
    end
    unique = { key = unique.key, within = within }
  end
  local publishes = def.publishes
  if publishes ~= nil then
    if type(publishes) == "table" then
      require("clank.pubsub").checkTopics(publishes)
    elseif type(publishes) ~= "function" then
      fail("publishes must be a list of topics or a function")
    end
  end
  return setmetatable({
    name = name, description = def.description, input = def.input, handler = def.handler, retry = retry,
    timeout = timeout, queue = queue, priority = priority, unique = unique, publishes = publishes,
  }, Job)
end

-- The wait before attempt `attempt + 1`, after `attempt` failed: exponential (base · 2^(attempt-1)),
-- linear (base · attempt) or constant, capped at maxDelay, then jittered into [d/2, d] so that
-- jobs failing together do not come back together.
function M.backoff(retry, attempt, rand)
  local base, d = retry.base
  if retry.backoff == "exponential" then
    d = base * 2.0 ^ (attempt - 1)
  elseif retry.backoff == "linear" then
    d = base * attempt
  else
    d = base
  end
  if d > retry.maxDelay then d = retry.maxDelay end
  local half = d / 2
  return floor(half + (rand or random)() * (d - half))
end

-- ---- binding to an app ----

local bound -- this state's app jobs: { db, byName, queues, ..., runner }

function M.bound() return bound end

-- clank.app's jobs: checked, each job bound to the database. opts: { jobs, db, concurrency, lease,
-- retention, queues, schedules }. Raises a message for clank.app to report.
function M.bind(opts)
  local byName = {}
  for i, job in ipairs(opts.jobs) do
    if not isJob(job) then error(format("jobs[%d] must be made by clank.defineJob", i), 0) end
    if byName[job.name] then error(format("jobs: two jobs are named '%s'", job.name), 0) end
    byName[job.name] = job
  end
  bound = {
    db = opts.db, byName = byName, jobs = opts.jobs, concurrency = opts.concurrency, lease = opts.lease,
    retention = opts.retention, queues = opts.queues, schedules = opts.schedules or {},
  }
  for _, job in ipairs(opts.jobs) do job._bound = bound end
  return bound
end

-- ---- enqueue ----

local wake_hook -- runner.lua's: wake(runAt) once a job is stored (after its transaction commits)
function M.onEnqueued(fn) wake_hook = fn end

-- The jobs' tables made, once per generation. Inside a transaction on the jobs' database (an
-- enqueue in db:transaction) they are made by that transaction: on SQLite, which holds the write
-- lock, another connection would wait for it until its busy timeout.
local function ready(b)
  if b.migrated then return end
  local tx = dbmod.transactionOf(b.db)
  if tx then
    store.migrate(tx, b.db.kind)
    tx:afterCommit(function() b.migrated = true end) -- rolled back: made again next time
    return
  end
  store.migrate(b.db, b.db.kind)
  b.migrated = true
end
M.ready = ready

local enqueueOpts = { delay = true, runAt = true, key = true }

function Job:enqueue(input, opts)
  local b = self._bound
  if not b then
    error(format("clank.jobs: job '%s' is not in the jobs of the app (clank.app { jobs = { ... } })",
      self.name), 2)
  end
  local parsed = self.input:safeParse(input)
  if not parsed.success then
    error(format("clank.jobs: job '%s': invalid input: %s", self.name, tostring(parsed.error)), 2)
  end
  local now = core.nowMs()
  local runAt, key = now, nil
  if opts ~= nil then
    if type(opts) ~= "table" then error("clank.jobs: enqueue's options must be a table", 2) end
    for k in pairs(opts) do
      if not enqueueOpts[k] then error(format("clank.jobs: unknown enqueue option '%s' (delay, runAt, key)",
        tostring(k)), 2) end
    end
    if opts.delay ~= nil and opts.runAt ~= nil then error("clank.jobs: give delay or runAt, not both", 2) end
    if opts.delay ~= nil then
      if not (math_type(opts.delay) == "integer" and opts.delay >= 0) then
        error("clank.jobs: delay must be a non-negative integer number of milliseconds", 2)
      end
      runAt = now + opts.delay
    elseif opts.runAt ~= nil then
      if math_type(opts.runAt) ~= "integer" then
        error("clank.jobs: runAt must be an integer (milliseconds since the epoch)", 2)
      end
      runAt = opts.runAt
    end
    if opts.key ~= nil then
      if type(opts.key) ~= "string" or #opts.key == 0 or #opts.key > 200 then
        error("clank.jobs: key must be a string of 1 to 200 bytes", 2)
      end
      key = opts.key
    end
  end
  local unique = self.unique
  if key == nil and unique then
    local ok, k = pcall(unique.key, parsed.data)
    if not ok then error(format("clank.jobs: job '%s': unique.key failed: %s", self.name, tostring(k)), 2) end
    if type(k) ~= "string" or #k == 0 or #k > 200 then
      error(format("clank.jobs: job '%s': unique.key must return a string of 1 to 200 bytes", self.name), 2)
    end
    key = k
  end
  local row = {
    queue = self.queue, name = self.name, input = json.encode(parsed.data), priority = self.priority,
    maxAttempts = self.retry.max, runAt = runAt,
    key = key and (self.name .. ":" .. key), keyUntil = key and unique and unique.within and now + unique.within,
  }
  ready(b)
  local db = b.db
  local tx = dbmod.transactionOf(db)
  local id
  if tx then
    id = store.insert(tx, db.kind, row, now)
    if wake_hook then tx:afterCommit(function() wake_hook(runAt, self.queue) end) end
  else
    id = store.insert(db, db.kind, row, now)
    if wake_hook then wake_hook(runAt, self.queue) end
  end
  return id
end

-- ---- seen from code ----

local function db_of(who)
  if not bound then error(who .. ": the app has no jobs (clank.app { jobs = { ... } })", 3) end
  ready(bound)
  return bound.db
end

local function check_id(id, who)
  if math_type(id) ~= "integer" then error(who .. ": expected a job id (an integer)", 3) end
end

-- Cancels a job that has not ended: true, or false when it had (or there is none). A running one
-- is told through its signal only when it runs in this worker; elsewhere it finishes, and its
-- end is not recorded over the cancel.
function M.cancel(id)
  check_id(id, "clank.jobs.cancel")
  local db = db_of("clank.jobs.cancel")
  local row = db:query(store.sql(db.kind).cancel, id, core.nowMs())[1]
  if row and bound.runner then bound.runner:cancelled(id) end
  return row ~= nil
end

-- Runs an ended job (dead, cancelled or done) again now, with its attempts counted afresh.
function M.retry(id)
  check_id(id, "clank.jobs.retry")
  local db = db_of("clank.jobs.retry")
  local now = core.nowMs()
  local row = db:query(store.sql(db.kind).retry, id, now)[1]
  if row and wake_hook then wake_hook(now) end
  return row ~= nil
end

function M.get(id)
  check_id(id, "clank.jobs.get")
  local db = db_of("clank.jobs.get")
  return db:one(store.sql(db.kind).get, id)
end

local STATES = { available = true, running = true, done = true, dead = true, cancelled = true }

function M.list(opts)
  opts = opts or {}
  local db = db_of("clank.jobs.list")
  local limit = opts.limit or 100
  if not (math_type(limit) == "integer" and limit >= 1 and limit <= 1000) then
    error("clank.jobs.list: limit must be an integer from 1 to 1000", 2)
  end
  local s = store.sql(db.kind)
  if opts.state ~= nil then
    if not STATES[opts.state] then
      error("clank.jobs.list: state must be available, running, done, dead or cancelled", 2)
    end
    return db:query(s.recentIn, limit, opts.state)
  end
  return db:query(s.recent, limit)
end

function M.counts()
  local db = db_of("clank.jobs.counts")
  return db:query(store.sql(db.kind).counts)
end

return M
