-- The jobs fixture (spec/fixtures/apps/jobs) through the real clank-run, on an SQLite file of
-- the spec's own: what the metrics, inspector and CLI specs of jobs share.
--
--   local jobs = require "helpers.jobs"
--   local db = jobs.database()                    -- a fresh SQLite path (jobs.remove(db) after)
--   local s = server.start(jobs.APP, { env = { JOBS_DB = db } })
--   local id = jobs.enqueue(s.port, { job = "boom" })[1]
--   local row = jobs.wait(s.port, id, { dead = true })  -- bounded: fails after `seconds`
local assert = require "luassert"
local server = require "helpers.server"
local http = require "helpers.http"
local json = require "clank.json"

local M = {}

M.APP = server.fixture("jobs")
M.DIR = server.fixture("jobs", "")

-- Long enough for a job that fails twice with the fixture's 50 ms backoff, under sanitizers too.
M.WAIT = server.sanitized and 60 or 15

function M.database()
  local path = os.tmpname()
  os.remove(path) -- the app makes it
  return path
end

function M.remove(path)
  for _, suffix in ipairs { "", "-wal", "-shm", "-journal" } do os.remove(path .. suffix) end
end

local function call(port, action, input)
  local res = assert(http.request(port, "POST", "/actions/" .. action,
    { ["content-type"] = "application/json" }, json.encode(input)))
  assert.are.equal(200, res.status, res.body)
  return json.decode(res.body).output
end

-- The fixture's enqueue action: { job, input?, n?, delay?, key? } → the ids.
function M.enqueue(port, input)
  return call(port, "enqueue", input).ids
end

-- How many times the fixture's jobs have run so far (its stats action).
function M.runs(port)
  return call(port, "stats", {}).runs
end

-- clank.jobs.get through the fixture's control action: the row, or nil.
function M.get(port, id)
  local out = call(port, "control", { op = "get", id = id })
  return out.ok and out.job or nil
end

-- Waits until job id is in one of the states (a set), and returns its row.
function M.wait(port, id, states, seconds)
  local deadline = http.now() + (seconds or M.WAIT)
  local row
  repeat
    row = M.get(port, id)
    if row and states[row.state] then return row end
    http.sleep(0.02)
  until http.now() > deadline
  error(("job %d never reached a state wanted; it is %s"):format(id, row and row.state or "gone"), 2)
end

-- Waits until fn() is true (polled every 20 ms), failing with `what` after `seconds`.
function M.eventually(fn, what, seconds)
  local deadline = http.now() + (seconds or M.WAIT)
  repeat
    if fn() then return end
    http.sleep(0.02)
  until http.now() > deadline
  error("timed out waiting for " .. what, 2)
end

return M
