-- The databases the tasks app's specs run against, in process (spec/unit/apps/tasks_store_spec)
-- and through clank-run (spec/functional/tasks_spec): a fresh SQLite file each time, and
-- PostgreSQL when CLANK_TEST_POSTGRES_URL is set (./dev test starts a throwaway cluster).
local storage = {}

local pg_url = os.getenv("CLANK_TEST_POSTGRES_URL")
if pg_url == "" then
  pg_url = nil
end
storage.postgres_url = pg_url

-- Removes an SQLite database and the files SQLite keeps beside it.
function storage.remove_db(path)
  for _, suffix in ipairs({ "", "-wal", "-shm", "-journal" }) do
    os.remove(path .. suffix)
  end
end

-- Each backend: name, pending (the reason it is skipped, or nil) and fresh(), which returns
-- the database to use and a function that removes it.
storage.backends = {
  {
    name = "SQLite",
    fresh = function()
      local path = os.tmpname()
      os.remove(path) -- let SQLite create it
      path = path .. ".db"
      return path, function() storage.remove_db(path) end
    end,
  },
  {
    name = "PostgreSQL",
    pending = not pg_url and "CLANK_TEST_POSTGRES_URL is not set (./dev test starts a "
      .. "throwaway cluster and sets it)",
    fresh = function()
      return pg_url, function() end
    end,
  },
}

-- A user name no other test, run of a spec or other spec uses (the PostgreSQL table is
-- shared): "<name>-<run>-<n>", name "spec" by default.
local run_id = string.format("%d-%d", os.time(), math.random(1, 1e9))
local users = 0
function storage.unique_user(name)
  users = users + 1
  return string.format("%s-%s-%d", name or "spec", run_id, users)
end

return storage
