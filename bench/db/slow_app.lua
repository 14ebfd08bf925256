-- bench/db/slow_app.lua: one action, slow, that runs SELECT pg_sleep(0.2) on PostgreSQL, for
-- bench/db.sh's latency of GET /manifest while 20 of them run at once.
--   BENCH_DB_URL      the postgres:// URL
--   BENCH_DB_DRIVER   clank (clank.db, a pool of 20) or luasql (one LuaSQL connection, blocking)
local clank = require "clank"
local s = clank.schema

local url = assert(os.getenv("BENCH_DB_URL"), "BENCH_DB_URL is not set")
local driver = os.getenv("BENCH_DB_DRIVER") or "clank"

local sleep
if driver == "clank" then
  local db = clank.db.open(url, { pool = 20 })
  sleep = function()
    db:one("SELECT pg_sleep(0.2)")
  end
elseif driver == "luasql" then
  local conn
  sleep = function()
    if not conn then
      conn = assert(require("luasql.postgres").postgres():connect(url))
    end
    local cur = assert(conn:execute("SELECT pg_sleep(0.2)"))
    cur:close()
  end
else
  error("BENCH_DB_DRIVER must be clank or luasql, not " .. driver)
end

local slow = clank.defineAction {
  name = "slow", description = "Waits 200 ms in PostgreSQL.", sideEffects = "read",
  input = s.object {}, output = s.object { slept = s.boolean() },
  handler = function()
    sleep()
    return { slept = true }
  end,
}

return clank.app { name = "slow", description = "Slow queries", actions = { slow } }
