-- clank.db on SQLite (SPEC §12), in process: real database files in a temp
-- folder, the waits run in action handlers (runtime coroutines) driven by
-- the loop, as in async_spec.
local clank = require "clank"
local socket = require "socket"
local s = clank.schema

local NOT_IN_COROUTINE = "clank.sleep: cannot wait here (not in a handler coroutine)"
local COUNT = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d) " ..
  "SELECT count(*) AS n FROM c"

-- Runs fn(ctx) as an action's handler and returns what it returns.
local function in_handler(fn)
  local action = clank.defineAction {
    name = "run", description = "Runs a function.", input = s.object {}, sideEffects = "read",
    handler = function(_, c) return { value = fn(c) } end,
  }
  return action({}, {}).value
end

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local serial = 0
local function new_path()
  serial = serial + 1
  return dir .. "/db" .. serial .. ".sqlite"
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- Spawns each function, waits at most 10 s for all of them, and returns
-- what each returned, or its error as text: a failed task must fail the
-- spec, not leave it waiting for CI's timeout.
local function spawn_all(fns)
  local out, left = {}, #fns
  for i, fn in ipairs(fns) do
    clank.spawn(function()
      local ok, value = pcall(fn)
      out[i] = ok and value or ("error: " .. tostring(type(value) == "table" and value.message or value))
      left = left - 1
    end)
  end
  for _ = 1, 2000 do
    if left == 0 then return out end
    clank.sleep(5)
  end
  error(left .. " spawned tasks never finished")
end

local function raised(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return err
end

teardown(function() os.execute("rm -rf " .. dir) end)

describe("clank.db", function()
  it("is reachable as clank.db and require 'clank.db'", function()
    assert.are.equal(require "clank.db", clank.db)
    assert.is_function(clank.db.open)
  end)

  it("opens lazily: no file until the first query", function()
    local path = new_path()
    local db = clank.db.open(path)
    assert.is_false(exists(path))
    in_handler(function() db:query("SELECT 1") end)
    assert.is_true(exists(path))
    db:close()
  end)

  it("accepts sqlite:PATH and names a bad target, password redacted", function()
    local path = new_path()
    local db = clank.db.open("sqlite:" .. path)
    assert.are.equal(1, in_handler(function() return db:one("SELECT 1 AS one").one end))
    db:close()
    local err = raised(clank.db.open, "mysql://root:hunter2@localhost/x")
    assert.truthy(err:find("mysql://root:***@localhost/x", 1, true), err)
    assert.is_nil(err:find("hunter2", 1, true))
    assert.truthy(raised(clank.db.open, ""):find("target", 1, true))
  end)

  it("raises the SPEC message when used outside a handler coroutine", function()
    local db = clank.db.open(new_path())
    local err = raised(db.query, db, "SELECT 1")
    assert.truthy(tostring(err):find(NOT_IN_COROUTINE, 1, true), tostring(err))
    db:close()
  end)

  describe("values", function()
    local db
    before_each(function() db = clank.db.open(new_path()) end)
    after_each(function() db:close() end)

    it("round-trips integers beyond 2^53, floats, NULL, booleans, blobs and UTF-8", function()
      local big = math.tointeger(2 ^ 62) + 1
      local blob = "a\0b\255\254"
      local text = "héllo ✓ 日本"
      local row = in_handler(function()
        db:exec("CREATE TABLE v (i INTEGER, f REAL, n TEXT, b INTEGER, x BLOB, t TEXT)")
        db:exec("INSERT INTO v VALUES ($1, $2, $3, $4, $5, $6)", big, 1.5, clank.null, true, blob, text)
        return db:one("SELECT i, f, n, b, x, t, typeof(x) AS tx, typeof(t) AS tt FROM v")
      end)
      assert.are.equal(big, row.i)
      assert.are.equal("integer", math.type(row.i))
      assert.are.equal(1.5, row.f)
      assert.are.equal("float", math.type(row.f))
      assert.are.equal(clank.null, row.n)
      assert.are.equal(1, row.b)
      assert.are.equal(blob, row.x)
      assert.are.equal("blob", row.tx)
      assert.are.equal(text, row.t)
      assert.are.equal("text", row.tt)
      assert.are.equal(math.mininteger, in_handler(function()
        return db:one("SELECT $1 AS v", math.mininteger).v
      end))
    end)

    it("binds $n by number, in any order and more than once", function()
      local row = in_handler(function()
        return db:one("SELECT $2 AS b, $1 AS a, $1 || $2 AS ab", "x", "y")
      end)
      assert.are.same({ a = "x", b = "y", ab = "xy" }, row)
    end)

    it("returns rows as a JSON array, and nil from one when there is none", function()
      local rows = in_handler(function()
        db:exec("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
        db:exec("INSERT INTO t (name) VALUES ('a'), ('b')")
        return { db:query("SELECT id, name FROM t ORDER BY id"), db:one("SELECT * FROM t WHERE id = 9") }
      end)
      assert.are.same({ { id = 1, name = "a" }, { id = 2, name = "b" } }, rows[1])
      assert.are.equal("[{\"id\":1,\"name\":\"a\"},{\"id\":2,\"name\":\"b\"}]",
        clank.json.encode(rows[1]))
      assert.is_nil(rows[2])
      assert.are.equal("[]", clank.json.encode(in_handler(function()
        return db:query("SELECT * FROM t WHERE id > 5")
      end)))
    end)

    it("exec returns changes and lastId", function()
      local r1, r2 = table.unpack(in_handler(function()
        db:exec("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
        local a = db:exec("INSERT INTO t (name) VALUES ($1)", "a")
        db:exec("INSERT INTO t (name) VALUES ($1)", "b")
        local b = db:exec("UPDATE t SET name = 'z'")
        return { a, b }
      end))
      assert.are.same({ changes = 1, lastId = 1 }, r1)
      assert.are.equal(2, r2.changes)
      assert.is_nil(r2.lastId)
    end)

    it("raises naming the position of a value it cannot bind", function()
      local err = in_handler(function()
        return select(2, pcall(db.query, db, "SELECT $1, $2, $3", 1, "a", {}))
      end)
      assert.truthy(tostring(err):find("parameter $3: cannot bind a table", 1, true), tostring(err))
      err = in_handler(function()
        return select(2, pcall(db.query, db, "SELECT $1, $2", nil, 2))
      end)
      assert.truthy(tostring(err):find("parameter $1: cannot bind nil", 1, true), tostring(err))
      err = in_handler(function()
        return select(2, pcall(db.exec, db, "SELECT $1", print))
      end)
      assert.truthy(tostring(err):find("parameter $1: cannot bind a function", 1, true), tostring(err))
    end)

    it("raises SQL errors with a code and the database's message", function()
      local dup, syntax = table.unpack(in_handler(function()
        db:exec("CREATE TABLE t (id INTEGER PRIMARY KEY)")
        db:exec("INSERT INTO t VALUES (1)")
        local _, e1 = pcall(db.exec, db, "INSERT INTO t VALUES (1)")
        local _, e2 = pcall(db.query, db, "SELEC nothing")
        return { e1, e2 }
      end))
      assert.are.equal("SQLITE_CONSTRAINT", dup.code)
      assert.truthy(dup.message:find("UNIQUE constraint failed", 1, true), dup.message)
      assert.are.equal("SQLITE_CONSTRAINT: " .. dup.message, tostring(dup))
      assert.is_true(clank.db.isError(dup))
      assert.are.equal("SQLITE_ERROR", syntax.code)
      assert.truthy(syntax.message:find("syntax error", 1, true), syntax.message)
    end)
  end)

  describe("transaction", function()
    local db
    before_each(function()
      db = clank.db.open(new_path(), { pool = 2 })
      in_handler(function() db:exec("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)") end)
    end)
    after_each(function() db:close() end)

    local function count()
      return in_handler(function() return db:one("SELECT count(*) AS n FROM t").n end)
    end

    it("commits when the function returns, and returns its results", function()
      local a, b = table.unpack(in_handler(function()
        return { db:transaction(function(tx)
          tx:exec("INSERT INTO t (name) VALUES ($1)", "a")
          tx:exec("INSERT INTO t (name) VALUES ($1)", "b")
          return tx:one("SELECT count(*) AS n FROM t").n, "done"
        end) }
      end))
      assert.are.equal(2, a)
      assert.are.equal("done", b)
      assert.are.equal(2, count())
    end)

    it("rolls back when the function raises, and raises the same error", function()
      local boom = { code = "BOOM" }
      local err = in_handler(function()
        local _, e = pcall(db.transaction, db, function(tx)
          tx:exec("INSERT INTO t (name) VALUES ('a')")
          error(boom)
        end)
        return e
      end)
      assert.are.equal(boom, err)
      assert.are.equal(0, count())
      -- the connection came back usable
      in_handler(function() db:exec("INSERT INTO t (name) VALUES ('ok')") end)
      assert.are.equal(1, count())
    end)

    it("rolls back when the signal aborts during a query", function()
      local t0 = socket.gettime()
      local err = in_handler(function()
        local view = db:withSignal(clank.timeout(80))
        local _, e = pcall(view.transaction, view, function(tx)
          tx:exec("INSERT INTO t (name) VALUES ('a')")
          tx:one(COUNT:format(1e9))
        end)
        return e
      end)
      assert.is_true(socket.gettime() - t0 < 1, "took " .. (socket.gettime() - t0) .. " s")
      assert.is_true(clank.isActionError(err))
      assert.are.equal("TIMEOUT", err.code)
      assert.are.equal(0, count())
    end)

    it("rolls back a connection that is collected unreleased", function()
      in_handler(function()
        local conn = db.pool:acquire()
        conn:run("BEGIN IMMEDIATE", {}, "exec")
        conn:run("INSERT INTO t (name) VALUES ('lost')", {}, "exec")
      end)
      collectgarbage()
      collectgarbage()
      assert.are.equal(0, count())
      in_handler(function() db:exec("INSERT INTO t (name) VALUES ('next')") end)
      assert.are.equal(1, count())
    end)
  end)

  describe("migrate", function()
    local A = "CREATE TABLE a (id INTEGER PRIMARY KEY)"
    local B = "CREATE TABLE b (id INTEGER PRIMARY KEY)"
    local C = "CREATE INDEX b_id ON b (id)"

    it("applies each migration once, in order, recorded by position with a checksum", function()
      local db = clank.db.open(new_path())
      local first, second, third, rows = table.unpack(in_handler(function()
        return { db:migrate { A, B }, db:migrate { A, B }, db:migrate { A, B, C },
          db:query("SELECT position, checksum FROM clank_migrations ORDER BY position") }
      end))
      assert.are.equal(2, first)
      assert.are.equal(0, second)
      assert.are.equal(1, third)
      assert.are.equal(3, #rows)
      local hex = require("clank.core").sha256(B):gsub(".", function(c)
        return ("%02x"):format(c:byte())
      end)
      assert.are.same({ position = 2, checksum = hex }, rows[2])
      db:close()
    end)

    it("raises naming a recorded migration whose text changed", function()
      local db = clank.db.open(new_path())
      local err = in_handler(function()
        db:migrate { A, B }
        local _, e = pcall(db.migrate, db, { A, B .. " -- changed" })
        return e
      end)
      assert.are.equal("MIGRATION_CHANGED", err.code)
      assert.truthy(err.message:find("migration 2", 1, true), err.message)
      db:close()
    end)

    it("keeps a list of its own in the table { table = name } names", function()
      local db = clank.db.open(new_path())
      local out = in_handler(function()
        local app = db:migrate { A }
        local own = db:migrate({ B, C }, { table = "clank_auth_migrations" })
        local again = db:migrate({ B, C }, { table = "clank_auth_migrations" })
        return { app = app, own = own, again = again,
          app_rows = db:one("SELECT count(*) AS n FROM clank_migrations").n,
          own_rows = db:query("SELECT position FROM clank_auth_migrations ORDER BY position") }
      end)
      assert.are.same({ app = 1, own = 2, again = 0, app_rows = 1,
        own_rows = { { position = 1 }, { position = 2 } } }, out)
      db:close()
    end)

    it("raises for a table name that is not letters, digits and _", function()
      local db = clank.db.open(new_path())
      for _, name in ipairs { "a b", "x; DROP TABLE t", "1abc", "", 7 } do
        local err = raised(db.migrate, db, { A }, { table = name })
        assert.truthy(tostring(err):find("migrate's table must be a name", 1, true), tostring(err))
      end
      assert.truthy(tostring(raised(db.migrate, db, { A }, "t")):find("options must be a table", 1, true))
      db:close()
    end)

    it("migrates inside a transaction (tx:migrate) without waiting for its own write lock: "
      .. "made and recorded with its writes, gone when it rolls back", function()
      local db = clank.db.open(new_path())
      local out = in_handler(function()
        local t0 = socket.gettime()
        local ok, err = pcall(db.transaction, db, function(tx)
          tx:exec("CREATE TABLE t (x INTEGER)")
          local n = tx:migrate { A, B }
          tx:exec("INSERT INTO a (id) VALUES (1)")
          error("rolled back after " .. n, 0)
        end)
        local made = "SELECT count(*) AS n FROM sqlite_master WHERE name IN ('t', 'a', 'b', 'clank_migrations')"
        local after_rollback = db:one(made).n
        local applied = db:transaction(function(tx) return tx:migrate { A, B } end)
        return { ok = ok, err = err, after_rollback = after_rollback, applied = applied,
          again = db:migrate { A, B, C }, rows = db:one("SELECT count(*) AS n FROM clank_migrations").n,
          fast = socket.gettime() - t0 < 2 } -- not the 5 s busy timeout
      end)
      assert.are.same({ ok = false, err = "rolled back after 2", after_rollback = 0, applied = 2, again = 1, rows = 3,
        fast = true }, out)
      db:close()
    end)

    it("applies each migration once when two run at the same time", function()
      local path = new_path()
      local db1, db2 = clank.db.open(path, { pool = 2 }), clank.db.open(path, { pool = 3 })
      local results = in_handler(function()
        local out = spawn_all {
          function() return db1:migrate { A, B, C } end,
          function() return db2:migrate { A, B, C } end,
        }
        out.n = db1:one("SELECT count(*) AS n FROM clank_migrations").n
        return out
      end)
      assert.is_number(results[1], results[1])
      assert.is_number(results[2], results[2])
      assert.are.equal(3, results[1] + results[2])
      assert.are.equal(3, results.n)
      db1:close()
      db2:close()
    end)
  end)

  describe("the pool", function()
    -- Making a new file WAL takes an exclusive lock without SQLite's busy
    -- handler; a first open racing another once failed SQLITE_BUSY.
    it("opens one new file from two pools at once, a hundred times over", function()
      local failures = in_handler(function()
        local failed = {}
        for n = 1, 100 do
          local path = new_path()
          local dbs = { clank.db.open(path), clank.db.open(path) }
          local create = "CREATE TABLE IF NOT EXISTS t (x)"
          local out = spawn_all {
            function() return dbs[1]:exec(create) end,
            function() return dbs[2]:exec(create) end,
          }
          for _, result in ipairs(out) do
            if type(result) == "string" then failed[#failed + 1] = n .. ": " .. result end
          end
          dbs[1]:close()
          dbs[2]:close()
        end
        return failed
      end)
      assert.are.same({}, failures)
    end)

    local function threads()
      local f = assert(io.open("/proc/self/stat"))
      local pid = f:read("a"):match("^(%d+)")
      f:close()
      local p = assert(io.popen("ls /proc/" .. pid .. "/task | wc -l"))
      local n = tonumber(p:read("a"))
      p:close()
      return n
    end

    it("is shared by every open of the same target, threads started lazily", function()
      local path = new_path()
      collectgarbage()
      in_handler(function() clank.sleep(20) end) -- pools of earlier tests finish stopping
      local before = threads()
      local db1 = clank.db.open(path, { pool = 1 })
      local db2 = clank.db.open(path, { pool = 1 })
      assert.are.equal(before, threads())
      in_handler(function() db1:query("SELECT 1") end)
      assert.are.equal(before + 1, threads())
      in_handler(function() db2:query("SELECT 1") end)
      assert.are.equal(before + 1, threads())
      db1:close()
      in_handler(function() db2:query("SELECT 1") end)
      db2:close()
      in_handler(function() clank.sleep(20) end) -- the pool's thread ends and is joined
      assert.are.equal(before, threads())
    end)

    it("serves 10 concurrent callers with 2 connections", function()
      local db = clank.db.open(new_path(), { pool = 2 })
      local got = in_handler(function()
        local fns = {}
        for i = 1, 10 do
          fns[i] = function() return db:one(COUNT:format(20000 + i)).n end
        end
        return spawn_all(fns)
      end)
      for i = 1, 10 do assert.are.equal(20000 + i, got[i]) end
      db:close()
    end)

    it("lends connections to waiters first come, first served", function()
      local pool = require("clank.db.sqlite").pool(new_path(), { size = 2 })
      local order = in_handler(function()
        local out, fns = {}, {}
        for i = 1, 6 do
          fns[i] = function()
            local conn = assert(pool:acquire())
            out[#out + 1] = i
            clank.sleep(10)
            conn:release()
          end
        end
        spawn_all(fns)
        return out
      end)
      assert.are.same({ 1, 2, 3, 4, 5, 6 }, order)
      pool:close()
    end)

    it("returns ABORTED to a waiter whose signal aborts, and TIMEOUT after timeoutMs", function()
      local pool = require("clank.db.sqlite").pool(new_path(), { size = 1 })
      local aborted, timed = table.unpack(in_handler(function()
        local held = assert(pool:acquire())
        local _, e1 = pool:acquire(clank.timeout(20))
        local _, e2 = pool:acquire(nil, 20)
        held:release()
        return { e1, e2 }
      end))
      assert.are.same({ code = "ABORTED", reason = "timeout", message = "aborted: timeout" }, aborted)
      assert.are.equal("TIMEOUT", timed.code)
      pool:close()
    end)
  end)

  describe("single queries (the pool's queue, pool:run)", function()
    it("answers a hundred concurrent callers on 2 connections, each with its own rows", function()
      local db = clank.db.open(new_path(), { pool = 2 })
      local got = in_handler(function()
        local fns = {}
        for i = 1, 100 do
          fns[i] = function() return db:one("SELECT $1 AS v, $2 AS w", i, "row " .. i) end
        end
        return spawn_all(fns)
      end)
      for i = 1, 100 do assert.are.same({ v = i, w = "row " .. i }, got[i]) end
      db:close()
    end)

    it("does not hold quick queries up behind a slow one", function()
      local db = clank.db.open(new_path(), { pool = 2 })
      local order = in_handler(function()
        local out = {}
        local fns = { function()
          db:one(COUNT:format(3e6))
          out[#out + 1] = "slow"
        end }
        for i = 1, 5 do
          fns[#fns + 1] = function()
            clank.sleep(5) -- the slow one runs by then
            db:one("SELECT 1 AS v")
            out[#out + 1] = "quick " .. i
          end
        end
        spawn_all(fns)
        return out
      end)
      assert.are.equal(6, #order)
      assert.are.equal("slow", order[6])
      db:close()
    end)

    it("returns ABORTED for a queued query whose signal aborts, which never runs", function()
      local path = new_path()
      local pool = require("clank.db.sqlite").pool(path, { size = 1 })
      local db = clank.db.open(path, { pool = 1 })
      local got = in_handler(function()
        local slow
        clank.spawn(function()
          local view = db:withSignal(clank.timeout(300))
          slow = select(2, pcall(view.one, view, COUNT:format(1e9)))
        end)
        clank.sleep(5)
        local t0 = socket.gettime()
        local res, err = pool:run("CREATE TABLE never (x)", {}, "exec", clank.timeout(20))
        local waited = socket.gettime() - t0
        while slow == nil do clank.sleep(10) end
        local tables = db:one("SELECT count(*) AS n FROM sqlite_master WHERE name = 'never'").n
        return { res, err, waited, slow, tables }
      end)
      local res, err, waited, slow, tables = table.unpack(got, 1, 5)
      assert.is_nil(res)
      assert.are.same({ code = "ABORTED", reason = "timeout", message = "aborted: timeout" }, err)
      assert.is_true(waited < 0.25, "waited " .. waited .. " s")
      assert.are.equal("TIMEOUT", slow.code)
      assert.are.equal(0, tables)
      pool:close()
      db:close()
    end)

    it("commits writes queued together, a failing one undone alone with its own error", function()
      local db = clank.db.open(new_path(), { pool = 2 })
      local got, rows = table.unpack(in_handler(function()
        db:exec("CREATE TABLE t (k TEXT UNIQUE NOT NULL, v INTEGER)")
        db:exec("INSERT INTO t (k, v) VALUES ('taken', 0)")
        local fns = {}
        for i = 1, 30 do
          fns[i] = function()
            local key = i == 17 and "taken" or ("k" .. i)
            local ok, res = pcall(db.exec, db, "INSERT INTO t (k, v) VALUES ($1, $2)", key, i)
            if ok then return res.changes end
            return res.code .. ": " .. res.message
          end
        end
        -- updates and deletes join the same groups
        fns[31] = function() return db:exec("UPDATE t SET v = -1 WHERE k = 'taken'").changes end
        fns[32] = function() return db:exec("DELETE FROM t WHERE k = 'nothing'").changes end
        local out = spawn_all(fns)
        return { out, db:query("SELECT k, v FROM t ORDER BY v") }
      end))
      for i = 1, 30 do
        if i == 17 then
          assert.are.equal("SQLITE_CONSTRAINT: UNIQUE constraint failed: t.k", got[i])
        else
          assert.are.equal(1, got[i], "insert " .. i)
        end
      end
      assert.are.equal(1, got[31])
      assert.are.equal(0, got[32])
      assert.are.equal(30, #rows)
      assert.are.same({ k = "taken", v = -1 }, rows[1])
      for _, row in ipairs(rows) do assert.are_not.equal(17, row.v) end
      db:close()
    end)

    it("leaves no transaction open after a bare BEGIN, as a released connection is rolled back", function()
      local path = new_path()
      local db = clank.db.open(path, { pool = 1 })
      local other = clank.db.open("sqlite:" .. path, { pool = 1 })
      local seen = in_handler(function()
        db:exec("CREATE TABLE t (a INTEGER)")
        db:exec("BEGIN")
        db:exec("INSERT INTO t (a) VALUES (1)")
        local n = other:one("SELECT count(*) AS n FROM t").n
        db:transaction(function(tx) tx:exec("INSERT INTO t (a) VALUES (2)") end)
        return { n, other:one("SELECT count(*) AS n FROM t").n }
      end)
      assert.are.same({ 1, 2 }, seen)
      db:close()
      other:close()
    end)

    it("does not group what is not one plain write", function()
      for sql, want in pairs({
        ["INSERT INTO t VALUES (1)"] = true,
        ["  update t SET a = 1;  "] = true,
        ["DELETE FROM t"] = true,
        ["REPLACE INTO t VALUES (1)"] = true,
        ["INSERT INTO t VALUES (1); DELETE FROM t"] = false,
        ["SELECT 1"] = false,
        ["BEGIN"] = false,
        ["COMMIT"] = false,
        ["PRAGMA user_version = 3"] = false,
        ["INSERTED"] = false,
        ["WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x"] = false,
      }) do
        assert.are.equal(want, require("clank.db.sqlite")._singleWrite(sql), sql)
      end
    end)

    it("returns TIMEOUT after timeoutMs, and raises outside a task", function()
      local pool = require("clank.db.sqlite").pool(new_path(), { size = 1 })
      local err = in_handler(function()
        return select(2, pool:run(COUNT:format(1e9), {}, "rows", nil, 30))
      end)
      assert.are.equal("TIMEOUT", err.code)
      assert.are.equal(NOT_IN_COROUTINE, raised(pool.run, pool, "SELECT 1", {}, "rows"))
      pool:close()
    end)
  end)

  describe("prepared statements kept per connection", function()
    it("see a column added after they were prepared", function()
      local db = clank.db.open(new_path(), { pool = 1 })
      local before, after = table.unpack(in_handler(function()
        db:exec("CREATE TABLE t (a INTEGER)")
        db:exec("INSERT INTO t (a) VALUES (1)")
        local first = db:one("SELECT * FROM t")
        db:exec("ALTER TABLE t ADD COLUMN b TEXT DEFAULT 'x'")
        return { first, db:one("SELECT * FROM t") }
      end))
      assert.are.same({ a = 1 }, before)
      assert.are.same({ a = 1, b = "x" }, after)
      db:close()
    end)

    it("bind each call's values and types, text then blob, under the same SQL", function()
      local db = clank.db.open(new_path(), { pool = 1 })
      local got = in_handler(function()
        local out = {}
        for _, v in ipairs({ "text", "\0blob", 7, 2.5, clank.null, "text again" }) do
          out[#out + 1] = db:one("SELECT typeof($1) AS t, $1 AS v", v)
        end
        return out
      end)
      assert.are.same({
        { t = "text", v = "text" }, { t = "blob", v = "\0blob" }, { t = "integer", v = 7 },
        { t = "real", v = 2.5 }, { t = "null", v = clank.null }, { t = "text", v = "text again" },
      }, got)
      db:close()
    end)

    it("still run every statement of a text of several, each time", function()
      local db = clank.db.open(new_path(), { pool = 1 })
      local counts = in_handler(function()
        db:exec("CREATE TABLE t (a INTEGER)")
        local out = {}
        for i = 1, 3 do
          db:exec("INSERT INTO t (a) VALUES (1); INSERT INTO t (a) VALUES (2);")
          out[i] = db:one("SELECT count(*) AS n FROM t").n
        end
        return out
      end)
      assert.are.same({ 2, 4, 6 }, counts)
      db:close()
    end)

    it("answer right past the number kept (40 distinct statements, three rounds)", function()
      local db = clank.db.open(new_path(), { pool = 1 })
      local wrong = in_handler(function()
        local bad = {}
        for round = 1, 3 do
          for i = 1, 40 do
            local v = db:one("SELECT " .. i .. " + $1 AS v", round).v
            if v ~= i + round then bad[#bad + 1] = ("%d/%d: %s"):format(round, i, tostring(v)) end
          end
        end
        return bad
      end)
      assert.are.same({}, wrong)
      db:close()
    end)

    it("leave no read transaction open: a rollback and a checkpoint follow", function()
      local path = new_path()
      local db = clank.db.open(path, { pool = 1 })
      local got = in_handler(function()
        db:exec("CREATE TABLE t (a INTEGER)")
        db:exec("INSERT INTO t (a) VALUES (1), (2), (3)")
        db:query("SELECT a FROM t") -- stepped to its end, then reset
        db:one("SELECT a FROM t")   -- only one row read of three: reset too
        local ck = db:one("PRAGMA wal_checkpoint(TRUNCATE)")
        return ck
      end)
      assert.are.same({ busy = 0, log = 0, checkpointed = 0 }, got)
      db:close()
    end)
  end)

  describe("waits", function()
    it("interrupts a long query when its time limit passes", function()
      local db = clank.db.open(new_path(), { timeout = 100 })
      local t0 = socket.gettime()
      local err = in_handler(function()
        local _, e = pcall(db.one, db, COUNT:format(1e9))
        return e
      end)
      local elapsed = socket.gettime() - t0
      assert.is_true(clank.isActionError(err), tostring(err))
      assert.are.equal("TIMEOUT", err.code)
      assert.are.equal(504, err.status)
      assert.is_true(elapsed < 0.4, "took " .. elapsed .. " s")
      -- the connection is usable again
      assert.are.equal(1, in_handler(function() return db:one("SELECT 1 AS v").v end))
      db:close()
    end)

    it("interrupts a long query when its signal aborts", function()
      local db = clank.db.open(new_path())
      local t0 = socket.gettime()
      local err = in_handler(function()
        local view = db:withSignal(clank.timeout(50))
        local _, e = pcall(view.one, view, COUNT:format(1e9))
        return e
      end)
      local elapsed = socket.gettime() - t0
      assert.are.equal("TIMEOUT", err.code)
      assert.is_true(elapsed < 0.3, "took " .. elapsed .. " s")
      db:close()
    end)

    it("does not block the loop while a query runs", function()
      local db = clank.db.open(new_path())
      local ticks = in_handler(function()
        local count, running = 0, true
        clank.spawn(function()
          while running do
            clank.sleep(10)
            count = count + 1
          end
        end)
        local t0 = socket.gettime()
        local r = db:one(COUNT:format(3e6))
        local ms = (socket.gettime() - t0) * 1000
        running = false
        return { count, r.n, ms }
      end)
      local count, rows, ms = ticks[1], ticks[2], ticks[3]
      assert.are.equal(3e6, rows)
      assert.is_true(count >= ms / 10 / 3, ("%d ticks during a %.0f ms query"):format(count, ms))
      db:close()
    end)
  end)
end)
