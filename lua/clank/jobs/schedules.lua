-- app.schedules (issue 32): { { name, cron = "*/5 * * * *", tz = "Europe/Paris", job = Job,
-- input = {...} }, ... }. Each tick enqueues one job across every worker and instance: the row
-- of the schedule in clank_job_schedules holds the last tick run, and the worker that moves it
-- on (compare and set, in the transaction that enqueues the job) is the one that runs the tick.
-- A tick missed while nothing ran (downtime) runs once, not once per missed tick.
local core = require "clank.core"
local cron = require "clank.jobs.cron"
local tz = require "clank.jobs.tz"
local store = require "clank.jobs.store"
local jobs = require "clank.jobs"

local type, pairs, ipairs, error, tostring, pcall = type, pairs, ipairs, error, tostring, pcall
local format, min, max = string.format, math.min, math.max
local now_ms, sleep, log = core.nowMs, core.sleep, core.log

local M = {}

local fields = { name = true, cron = true, tz = true, job = true, input = true }

-- The schedules, checked (raises the first problem, naming the schedule).
function M.check(list, byName)
  local out, names = {}, {}
  for i, s in ipairs(list) do
    local what = format("schedules[%d]", i)
    if type(s) ~= "table" then error(what .. " must be a table", 0) end
    for k in pairs(s) do
      if not fields[k] then
        error(format("%s has an unknown field '%s' (name, cron, tz, job, input)", what, tostring(k)), 0)
      end
    end
    if type(s.name) ~= "string" or not s.name:find("^[%w_.:-]+$") or #s.name > 100 then
      error(what .. ": name must be a string of letters, digits and _ . : -", 0)
    end
    what = format("schedule '%s'", s.name)
    if names[s.name] then error(format("two schedules are named '%s'", s.name), 0) end
    names[s.name] = true
    if type(s.cron) ~= "string" then error(what .. ": cron must be a string", 0) end
    local spec, err = cron.parse(s.cron)
    if not spec then error(what .. ": " .. err, 0) end
    local zone = tz.load("UTC")
    if s.tz ~= nil then
      if type(s.tz) ~= "string" then error(what .. ": tz must be an IANA time zone name", 0) end
      zone, err = tz.load(s.tz)
      if not zone then error(what .. ": " .. err, 0) end
    end
    if not jobs.isJob(s.job) then error(what .. ": job must be made by clank.defineJob", 0) end
    if byName[s.job.name] ~= s.job then
      error(format("%s: its job '%s' is not in the app's jobs", what, s.job.name), 0)
    end
    local input = s.input
    if input == nil then input = {} end
    local parsed = s.job.input:safeParse(input)
    if not parsed.success then
      error(format("%s: input does not match job '%s': %s", what, s.job.name, tostring(parsed.error)), 0)
    end
    out[#out + 1] = { name = s.name, cron = spec, line = s.cron, zone = zone, job = s.job, input = parsed.data }
  end
  return out
end

-- Moves s on from last (the tick recorded) and enqueues its job, when this worker is the one.
local function fire(b, s, last, due, now)
  local sq = store.sql(b.db.kind)
  return b.db:transaction(function(tx)
    local res = tx:exec(sq.scheduleMove, now, s.name, last)
    if res.changes ~= 1 then return false end
    s.job:enqueue(s.input, { key = format("schedule:%s:%d", s.name, due) })
    return true
  end)
end

-- The ticker of one generation (a task of its own, dropped with the generation).
function M.run(b)
  local sq = store.sql(b.db.kind)
  jobs.ready(b)
  for _, s in ipairs(b.schedules) do
    b.db:exec(sq.scheduleAdd, s.name, now_ms())
  end
  local failing
  while true do
    local ok, wait = pcall(function()
      local now, soonest = now_ms(), nil
      for _, s in ipairs(b.schedules) do
        local row = b.db:one(sq.scheduleGet, s.name)
        local last = row and row.last_tick or now
        local due = cron.next(s.cron, s.zone, last)
        if due and due <= now then
          if fire(b, s, last, due, now) then
            log("info", format("jobs: schedule '%s' ran its tick of %d", s.name, due))
          end
          due = cron.next(s.cron, s.zone, now)
        end
        if due and (soonest == nil or due < soonest) then soonest = due end
      end
      -- at least once a minute: the clock may have moved, and another worker's tick with it
      return soonest and max(0, min(soonest - now_ms(), 60000)) or 60000
    end)
    if ok then
      if failing then
        failing = nil
        log("info", "jobs: schedules resumed")
      end
    else
      if not failing then
        failing = true
        log("error", "jobs: schedules paused, the database failed: " .. tostring(wait))
      end
      wait = 1000
    end
    sleep(wait)
  end
end

return M
