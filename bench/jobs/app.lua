-- bench/jobs.sh's Clank app: one trivial durable job and the routes the bench drives it through
-- (issue 32). Run as `clank-run --workers 1 bench/jobs/app.lua`; one worker, so the counters
-- below see every job.
--   POST /enqueue   {"n": N, "t": bool} → {"enqueued": N}: N noop jobs enqueued in one
--                   db:transaction on the jobs database; with t, each job's input t is
--                   core.nowMs() when it is enqueued, else 0
--   GET /latencies  → [ms, ...]: for each job run with t > 0 since the last call, core.nowMs()
--                   at its run minus its t (pickup + run, on the wall clock); emptied
--   GET /done       → {"done": N, "lastMs": T}: the jobs whose handler ran in this process, and
--                   core.nowMs() when the last one ran (0 before any)
-- Environment:
--   BENCH_JOBS_DB           the jobs database, a SQLite path or a postgres:// URL (required)
--   BENCH_JOBS_CONCURRENCY  jobConcurrency (default 10, the runtime's default)
--   BENCH_JOBS_RETENTION    jobRetention in ms (unset: the runtime's default, a day)
--   BENCH_JOBS_POOL         clank.db's pool for the database (unset: its default, 4)
local clank = require "clank"
local core = require "clank.core"
local s = clank.schema

local nowMs, tointeger, tonumber = core.nowMs, math.tointeger, tonumber

local function env_integer(name)
  local value = os.getenv(name)
  if value == nil or value == "" then return nil end
  return tointeger(tonumber(value)) or error(name .. " must be an integer, not " .. value)
end

local target = os.getenv("BENCH_JOBS_DB")
assert(target and target ~= "", "BENCH_JOBS_DB is not set (a SQLite path or a postgres:// URL)")
local pool = env_integer("BENCH_JOBS_POOL")
local db = clank.db.open(target, pool and { pool = pool } or nil)

local done, lastMs = 0, 0
local latencies = clank.json.array()

local Noop = clank.defineJob {
  name = "noop",
  input = s.object { t = s.number { integer = true } },
  handler = function(input)
    local now = nowMs()
    done, lastMs = done + 1, now
    if input.t > 0 then latencies[#latencies + 1] = now - input.t end
  end,
}

local MAX_BATCH = 100000

local function bad(message)
  return { status = 400, body = message .. "\n" }
end

return clank.app {
  name = "jobs-bench",
  description = "bench/jobs.sh: durable jobs throughput and pickup latency",
  jobs = { Noop },
  jobsDb = db,
  jobConcurrency = env_integer("BENCH_JOBS_CONCURRENCY") or 10,
  jobRetention = env_integer("BENCH_JOBS_RETENTION"),
  routes = {
    ["POST /enqueue"] = function(request)
      local body = request:json()
      if type(body) ~= "table" then return bad('expected a JSON body {"n": N, "t": bool}') end
      local n = tointeger(body.n)
      if not n or n < 1 or n > MAX_BATCH then return bad("n must be an integer from 1 to " .. MAX_BATCH) end
      local timed = body.t == true
      db:transaction(function()
        for _ = 1, n do
          Noop:enqueue { t = timed and nowMs() or 0 }
        end
      end)
      return { status = 200, body = { enqueued = n } }
    end,
    ["GET /latencies"] = function()
      local out = latencies
      latencies = clank.json.array()
      return { status = 200, body = out }
    end,
    ["GET /done"] = function()
      return { status = 200, body = { done = done, lastMs = lastMs } }
    end,
  },
}
