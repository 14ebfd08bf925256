-- clank.app's jobs fields (issue 32): jobs, jobsDb, jobConcurrency, jobLease, jobRetention,
-- jobQueues and schedules, checked when the app loads, and the runner clank-run starts.
local jobs = require "clank.jobs"
local dbmod = require "clank.db"
local core = require "clank.core"

local type, pairs, error, tostring, getmetatable, pcall = type, pairs, error, tostring, getmetatable, pcall
local format, math_type = string.format, math.type

local M = {}

local function is_db(x)
  local mt = getmetatable(x)
  return type(x) == "table" and mt ~= nil and mt.__name == "clank.Database"
end

-- The jobs' database: app.jobsDb (a clank.db database, or a target to open), else the app's
-- accounts database, else the first database the app opened, else .clank/jobs.sqlite next to
-- the app file.
local function database(def)
  local target = def.jobsDb
  if target ~= nil then
    if is_db(target) then return target end
    if type(target) ~= "string" then
      error("field 'jobsDb' must be a clank.db database or a target (a path or a postgres:// URL)", 0)
    end
    return dbmod.open(target)
  end
  if def.auth and is_db(def.auth.db) then return def.auth.db end
  if dbmod.first and not dbmod.first.closed then return dbmod.first end
  local dir = debug.getregistry()["clank.app_dir"] or "." -- clank-run's (runtime/host/generation.c)
  local ok, err = core.mkdir(dir .. "/.clank")
  if not ok then error("jobs: cannot make the folder for the jobs database: " .. tostring(err), 0) end
  return dbmod.open(dir .. "/.clank/jobs.sqlite")
end

local function ms_option(def, name, default, least)
  local v = def[name]
  if v == nil then return default end
  if not (math_type(v) == "integer" and v >= least) then
    error(format("field '%s' must be an integer of at least %d", name, least), 0)
  end
  return v
end

function M.bind(out, def)
  local list = def.jobs or {}
  local concurrency = ms_option(def, "jobConcurrency", 10, 1)
  local queues
  if def.jobQueues ~= nil then
    queues = {}
    for name, limit in pairs(def.jobQueues) do
      if type(name) ~= "string" or not (math_type(limit) == "integer" and limit >= 1) then
        error("field 'jobQueues' must map queue names to positive integers (jobs at once per worker)", 0)
      end
      queues[name] = limit
    end
  end
  local b = jobs.bind {
    jobs = list, concurrency = concurrency, queues = queues,
    lease = ms_option(def, "jobLease", 30000, 1000),
    retention = ms_option(def, "jobRetention", 86400000, 0),
  }
  if def.schedules then
    b.schedules = require("clank.jobs.schedules").check(def.schedules, b.byName)
  end
  b.db = database(def)
  -- The jobs' tables now, before the generation serves. Left to the first use, an enqueue inside
  -- the app's db:transaction would migrate on another connection of the pool, which on SQLite
  -- waits for that transaction's own lock until busyTimeout and fails the enqueue. A database
  -- that cannot be reached yet is no load failure: the first use migrates (clank.jobs.ready).
  pcall(jobs.ready, b)
  out.jobs = list
  -- the other instances hear of new jobs through the same PostgreSQL (LISTEN/NOTIFY), as topics
  -- do, unless the app carries its topics elsewhere
  if out.pubsub == nil and b.db.kind == "postgres" then out.pubsub = b.db.target end
  local runner = require("clank.jobs.runner").new(b)
  -- clank-run finds it there (runtime/host/jobs.c: CLANK_JOBS_KEY)
  debug.getregistry()["clank.jobs"] = {
    start = function() runner:start() end,
    stop = function(_, ms) runner:stop(ms) end,
  }
  return b
end

return M
