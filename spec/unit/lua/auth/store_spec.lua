-- clank.auth's tables: made by the runtime's migrations, once, recorded in
-- clank_auth_migrations and not in the app's clank_migrations. On SQLite, and on PostgreSQL
-- when CLANK_TEST_POSTGRES_URL is set.
local auth = require "clank.auth"
local store = require "clank.auth.store"
local H = require "helpers.auth"

local it_runs, request = H.it_runs, H.request

local TABLES = { "clank_users", "clank_sessions", "clank_tokens", "clank_resets", "clank_attempts",
  "clank_oauth_clients", "clank_oauth_requests", "clank_oauth_grants", "clank_oauth_codes",
  "clank_oauth_tokens" }

teardown(H.removeAll)

describe("clank.auth store", function()
  H.each_backend(function(fresh)
    local db, cleanup
    before_each(function() db, cleanup = fresh() end)
    after_each(function() cleanup() end)

    local function has_table(name)
      if db.kind == "sqlite" then
        return db:one("SELECT name FROM sqlite_master WHERE type = 'table' AND name = $1", name) ~= nil
      end
      return db:one("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() " ..
        "AND table_name = $1", name) ~= nil
    end

    it_runs("makes its tables once, recorded in clank_auth_migrations", function()
      local a = auth { db = db, passwordParams = H.CHEAP }
      assert.are.equal(a, a:ready())
      a:ready()
      auth({ db = db, passwordParams = H.CHEAP }):ready() -- a second Auth: another worker
      for _, name in ipairs(TABLES) do assert.is_true(has_table(name), name) end
      local rows = db:query("SELECT position FROM clank_auth_migrations ORDER BY position")
      assert.are.equal(#store.MIGRATIONS[db.kind], #rows)
      assert.are.equal(19, #rows) -- 10 for accounts (issue 30), 9 for OAuth (issue 31)
      assert.are.equal(19, rows[19].position)
      assert.is_false(has_table("clank_migrations"))
      -- the app's own migrations start at 1 in their table
      assert.are.equal(1, db:migrate { "CREATE TABLE app_notes (id INTEGER PRIMARY KEY)" })
      assert.are.equal(1, db:one("SELECT count(*) AS n FROM clank_migrations").n)
      assert.are.equal(0, store.migrate(db))
    end)

    it_runs("migrates on first use, without ready", function()
      local a = auth { db = db, passwordParams = H.CHEAP }
      assert.is_nil(a:authenticate(request { cookie = ("A"):rep(43) }))
      assert.is_true(has_table("clank_sessions"))
    end)

    it_runs("adds the OAuth tables to a database made before them (issue 30's ten)", function()
      local before = {}
      for i = 1, 10 do before[i] = store.MIGRATIONS[db.kind][i] end
      assert.are.equal(10, db:migrate(before, { table = store.TABLE }))
      assert.is_false(has_table("clank_oauth_grants"))
      assert.are.equal(9, store.migrate(db))
      assert.is_true(has_table("clank_oauth_grants"))
    end)

    it_runs("has the same migrations, in number, on both databases", function()
      assert.are.equal(#store.MIGRATIONS.sqlite, #store.MIGRATIONS.postgres)
    end)

    it_runs("keeps emails unique", function()
      auth({ db = db, passwordParams = H.CHEAP }):ready()
      db:exec("INSERT INTO clank_users (email, password_hash, created_at) VALUES ($1, $2, $3)", "a@b.co", "x", 1)
      local ok, err = pcall(db.exec, db,
        "INSERT INTO clank_users (email, password_hash, created_at) VALUES ($1, $2, $3)", "a@b.co", "y", 2)
      assert.is_false(ok)
      assert.is_true(store.isUniqueViolation(err), tostring(err))
    end)
  end)
end)
