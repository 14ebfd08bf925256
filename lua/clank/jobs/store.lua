-- The jobs' tables and every statement on them (issue 32), for SQLite and PostgreSQL. Times are
-- integer milliseconds since the epoch, from the worker's clock. A job's row moves through the
-- states available (due at run_at) → running (claimed: locked_by a runner, its lease until
-- lease_until) → done | dead | cancelled; a failed run goes back to available at a later run_at.
-- Lists of ids travel as one JSON text parameter (json_each / json_array_elements_text), so a
-- batch is one statement whatever its size.
local null = require("clank.core").null

local M = {}

local function migrations(kind)
  local id = kind == "postgres" and "BIGSERIAL PRIMARY KEY" or "INTEGER PRIMARY KEY AUTOINCREMENT"
  return {
    "CREATE TABLE clank_jobs (id " .. id .. ", queue TEXT NOT NULL, name TEXT NOT NULL, "
      .. "input TEXT NOT NULL, state TEXT NOT NULL, priority INTEGER NOT NULL, "
      .. "attempt INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL, run_at BIGINT NOT NULL, "
      .. "lease_until BIGINT, locked_by TEXT, unique_key TEXT, unique_until BIGINT, last_error TEXT, "
      .. "created_at BIGINT NOT NULL, finished_at BIGINT)",
    "CREATE INDEX clank_jobs_due ON clank_jobs (queue, priority, run_at, id) WHERE state = 'available'",
    "CREATE INDEX clank_jobs_leases ON clank_jobs (lease_until) WHERE state = 'running'",
    "CREATE INDEX clank_jobs_finished ON clank_jobs (finished_at) WHERE finished_at IS NOT NULL",
    "CREATE UNIQUE INDEX clank_jobs_unique ON clank_jobs (unique_key)",
    "CREATE TABLE clank_job_schedules (name TEXT PRIMARY KEY, last_tick BIGINT NOT NULL)",
  }
end

-- On a database, or in an open transaction of one (kind: its database's).
function M.migrate(q, kind)
  q:migrate(migrations(kind), { table = "clank_jobs_migrations" })
end

local function ids(kind)
  return kind == "postgres" and "SELECT json_array_elements_text($%d::json)::bigint"
    or "SELECT value FROM json_each($%d)"
end

local COLUMNS = "id, queue, name, input, attempt, max_attempts"

-- The statements of one database kind, made once.
local statements = {}

local function sql(kind)
  local made = statements[kind]
  if made then return made end
  local pg = kind == "postgres"
  made = {
    insert = "INSERT INTO clank_jobs (queue, name, input, state, priority, max_attempts, run_at, "
      .. "unique_key, unique_until, created_at) VALUES ($1, $2, $3, 'available', $4, $5, $6, $7, $8, $9) "
      .. "ON CONFLICT (unique_key) DO NOTHING RETURNING id",
    -- a key whose window passed (or whose job ended, when it has none) is free again
    freeKey = "UPDATE clank_jobs SET unique_key = NULL WHERE unique_key = $1 AND "
      .. "((unique_until IS NOT NULL AND unique_until <= $2) OR "
      .. "(unique_until IS NULL AND state IN ('done', 'dead', 'cancelled')))",
    byKey = "SELECT id FROM clank_jobs WHERE unique_key = $1",
    claim = "UPDATE clank_jobs SET state = 'running', attempt = attempt + 1, lease_until = $1, "
      .. "locked_by = $2 WHERE id IN (SELECT id FROM clank_jobs WHERE state = 'available' AND "
      .. "queue = $3 AND run_at <= $4 AND name IN (" .. ids(kind):gsub("::bigint", ""):format(6) .. ") "
      .. "ORDER BY priority, run_at, id LIMIT $5"
      .. (pg and " FOR UPDATE SKIP LOCKED" or "") .. ") RETURNING " .. COLUMNS,
    done = "UPDATE clank_jobs SET state = 'done', finished_at = $1, lease_until = NULL, "
      .. "locked_by = NULL WHERE locked_by = $2 AND id IN (" .. ids(kind):format(3) .. ")",
    failed = "UPDATE clank_jobs SET state = $1, run_at = $2, last_error = $3, finished_at = $4, "
      .. "lease_until = NULL, locked_by = NULL WHERE id = $5 AND locked_by = $6",
    renew = "UPDATE clank_jobs SET lease_until = $1 WHERE locked_by = $2 AND state = 'running'",
    -- runs whose runner stopped without a word: their attempt counted, as a failed one
    rescue = "UPDATE clank_jobs SET state = CASE WHEN attempt >= max_attempts THEN 'dead' "
      .. "ELSE 'available' END, finished_at = CASE WHEN attempt >= max_attempts THEN $1 END, "
      .. "run_at = $1, last_error = 'its worker stopped while it ran (the lease ran out)', "
      .. "lease_until = NULL, locked_by = NULL WHERE state = 'running' AND lease_until < $1 "
      .. "RETURNING id, name, queue, state",
    -- a stopping runner gives back what it could not finish: not an attempt, ready at once
    release = "UPDATE clank_jobs SET state = 'available', attempt = attempt - 1, run_at = $1, "
      .. "lease_until = NULL, locked_by = NULL WHERE locked_by = $2 AND state = 'running' AND id IN ("
      .. ids(kind):format(3) .. ")",
    prune = "DELETE FROM clank_jobs WHERE (state IN ('done', 'cancelled') AND finished_at < $1) "
      .. "OR (state = 'dead' AND finished_at < $2)",
    anyJob = "SELECT 1 AS x FROM clank_jobs LIMIT 1",
    -- PostgreSQL keeps a table's pages (and its indexes') at their high-water mark: an empty table
    -- is truncated, under a lock taken only if nobody is using the table
    lockAll = "LOCK TABLE clank_jobs IN ACCESS EXCLUSIVE MODE NOWAIT",
    truncate = "TRUNCATE clank_jobs",
    cancel = "UPDATE clank_jobs SET state = 'cancelled', finished_at = $2, lease_until = NULL, "
      .. "locked_by = NULL WHERE id = $1 AND state IN ('available', 'running') RETURNING state",
    retry = "UPDATE clank_jobs SET state = 'available', run_at = $2, attempt = 0, finished_at = NULL, "
      .. "last_error = NULL WHERE id = $1 AND state IN ('dead', 'cancelled', 'done') RETURNING state",
    get = "SELECT id, queue, name, input, state, priority, attempt, max_attempts, run_at, lease_until, "
      .. "locked_by, last_error, created_at, finished_at FROM clank_jobs WHERE id = $1",
    recent = "SELECT id, queue, name, input, state, priority, attempt, max_attempts, run_at, "
      .. "last_error, created_at, finished_at FROM clank_jobs ORDER BY id DESC LIMIT $1",
    recentIn = "SELECT id, queue, name, input, state, priority, attempt, max_attempts, run_at, "
      .. "last_error, created_at, finished_at FROM clank_jobs WHERE state = $2 ORDER BY id DESC LIMIT $1",
    counts = "SELECT queue, state, count(*) AS n FROM clank_jobs GROUP BY queue, state ORDER BY queue, state",
    scheduleAdd = "INSERT INTO clank_job_schedules (name, last_tick) VALUES ($1, $2) "
      .. "ON CONFLICT (name) DO NOTHING",
    scheduleGet = "SELECT last_tick FROM clank_job_schedules WHERE name = $1",
    -- compare and set: of the workers that saw the same tick due, one moves it on
    scheduleMove = "UPDATE clank_job_schedules SET last_tick = $1 WHERE name = $2 AND last_tick = $3",
  }
  statements[kind] = made
  return made
end

M.sql = sql

-- Inserts a job (on db or an open transaction) → its id; with a unique key held by another job
-- (see freeKey), that job's id and true.
function M.insert(q, kind, job, now)
  local s = sql(kind)
  if job.key then q:exec(s.freeKey, job.key, now) end
  local row = q:query(s.insert, job.queue, job.name, job.input, job.priority, job.maxAttempts,
    job.runAt, job.key or null, job.keyUntil or null, now)[1]
  if row then return row.id end
  row = q:one(s.byKey, job.key)
  if row then return row.id, true end
  error("clank.jobs: the job with key " .. job.key .. " ended as it was enqueued; enqueue it again", 0)
end

return M
