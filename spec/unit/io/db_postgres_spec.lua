-- clank.db.postgres, the PostgreSQL driver of clank.db, driven directly (SPEC §12; the
-- contract in runtime/io/db.h). Needs a server: CLANK_TEST_POSTGRES_URL, as
-- spec/helpers/postgres.sh start prints it; pending without one.
local clank = require "clank"
local socket = require "socket"
local s = clank.schema

local URL = os.getenv("CLANK_TEST_POSTGRES_URL")
local NOT_IN_COROUTINE = "clank.sleep: cannot wait here (not in a handler coroutine)"

-- Runs fn() as an action's handler (a runtime coroutine) and returns what it returns.
local function in_handler(fn)
  local action = clank.defineAction {
    name = "run", description = "Runs a function.", input = s.object {}, sideEffects = "read",
    handler = function() return { value = fn() } end,
  }
  return action({}, {}).value
end

-- In a handler: runs fn(i) for i = 1..n in tasks of their own, and waits for them all.
local function all_of(n, fn)
  local done, errors = 0, {}
  for i = 1, n do
    clank.spawn(function()
      local ok, err = pcall(fn, i)
      if not ok then errors[#errors + 1] = tostring(err) end
      done = done + 1
    end)
  end
  local t0 = socket.gettime()
  while done < n and socket.gettime() - t0 < 20 do clank.sleep(5) end
  assert(done == n, "only " .. done .. " of " .. n .. " tasks finished")
  assert(#errors == 0, table.concat(errors, "\n"))
end

local function new_pool(opts)
  -- a distinct target per pool (pools are shared per target): the size is in the key
  return require("clank.db.postgres").pool(URL, opts or { size = 4 })
end

-- One query on a connection of its own.
local function query(pool, sql, params, mode)
  local conn = assert(pool:acquire())
  local result, err = conn:run(sql, params or {}, mode or "rows")
  conn:release()
  return result, err
end

describe("clank.db.postgres", function()
  if not URL then
    it("needs CLANK_TEST_POSTGRES_URL (spec/helpers/postgres.sh start DIR)", function()
      pending("no PostgreSQL server: set CLANK_TEST_POSTGRES_URL")
    end)
    return
  end

  local pg = require "clank.db.postgres"

  it("opens no connection until the first acquire", function()
    local pool = pg.pool(URL, { size = 3 })
    assert.are.equal(0, pool:stats().open)
    in_handler(function()
      local conn = assert(pool:acquire())
      assert.are.equal(1, pool:stats().open)
      conn:release()
    end)
    assert.are.same({ size = 3, open = 1, idle = 1, waiting = 0 }, pool:stats())
    pool:close()
  end)

  it("shares a pool per target", function()
    local a, b = pg.pool(URL, { size = 5 }), pg.pool(URL, { size = 5 })
    in_handler(function() a:acquire():release() end)
    assert.are.equal(1, b:stats().open)
    a:close()
    b:close()
  end)

  it("maps Lua values to PostgreSQL types and back (SPEC §12)", function()
    local pool = new_pool()
    local big = 9007199254740993 -- 2^53 + 1: only an integer holds it
    local bytes = "a\0b\255\254"
    local row = in_handler(function()
      return query(pool, [[SELECT $1::int8 AS big, $2::float8 AS f, $3::text AS t, $4::bool AS yes,
        $5::bool AS no, $6::int4 AS nothing, 12.50::numeric AS n, $7::bytea AS bytes,
        42::int2 AS small, 7::int4 AS mid, 0.25::float4 AS f4, 'x'::varchar AS v,
        '2024-01-02'::date AS d, $8 AS untyped, -9223372036854775807 - 1 AS min]],
        { big, 1.5, "héllo wörld ✓", true, false, clank.null, bytes, "plain" })[1]
    end)
    assert.are.equal(big, row.big)
    assert.are.equal("integer", math.type(row.big))
    assert.are.equal(1.5, row.f)
    assert.are.equal("float", math.type(row.f))
    assert.are.equal("héllo wörld ✓", row.t)
    assert.is_true(row.yes)
    assert.is_false(row.no)
    assert.are.equal(clank.null, row.nothing)
    assert.are.equal("12.50", row.n) -- numeric stays a string
    assert.are.equal(bytes, row.bytes)
    assert.are.equal(42, row.small)
    assert.are.equal("integer", math.type(row.small))
    assert.are.equal(7, row.mid)
    assert.are.equal(0.25, row.f4)
    assert.are.equal("x", row.v)
    assert.are.equal("2024-01-02", row.d)
    assert.are.equal("plain", row.untyped)
    assert.are.equal(math.mininteger, row.min)
    pool:close()
  end)

  it("binds floats as their shortest text and integers as int8", function()
    local pool = new_pool()
    local row = in_handler(function()
      return query(pool, "SELECT $1 = 0.1::float8 AS tenth, pg_typeof($1)::text AS ft, " ..
        "pg_typeof($2)::text AS it, $2 + 1 AS next, $3::float8 AS huge",
        { 0.1, math.maxinteger - 1, 1e300 })[1]
    end)
    assert.is_true(row.tenth)
    assert.are.equal("double precision", row.ft)
    assert.are.equal("bigint", row.it)
    assert.are.equal(math.maxinteger, row.next)
    assert.are.equal(1e300, row.huge)
    pool:close()
  end)

  it("returns rows as a list marked as a JSON array, [] when empty", function()
    local pool = new_pool()
    local got = in_handler(function()
      return {
        three = query(pool, "SELECT g AS n FROM generate_series(1, 3) g ORDER BY g"),
        empty = query(pool, "SELECT 1 AS x WHERE false"),
      }
    end)
    assert.are.same({ { n = 1 }, { n = 2 }, { n = 3 } }, got.three)
    assert.are.equal("[{\"n\":1},{\"n\":2},{\"n\":3}]", clank.json.encode(got.three))
    assert.are.equal("[]", clank.json.encode(got.empty))
    pool:close()
  end)

  it("binds $n placeholders, params.n counting clank.null holes", function()
    local pool = new_pool()
    local row = in_handler(function()
      return query(pool, "SELECT $2::text || $1::text AS s, $3::int IS NULL AS null3",
        { "b", "a", clank.null, n = 3 })[1]
    end)
    assert.are.equal("ab", row.s)
    assert.is_true(row.null3)
    pool:close()
  end)

  it("raises naming the position of a parameter it cannot bind", function()
    local pool = new_pool()
    local errs = in_handler(function()
      local conn = assert(pool:acquire())
      local out = {}
      out[1] = select(2, pcall(conn.run, conn, "SELECT $1, $2, $3", { 1, "x", {} }, "rows"))
      out[2] = select(2, pcall(conn.run, conn, "SELECT $1, $2", { 1, nil, 3, n = 3 }, "rows"))
      out[3] = select(2, pcall(conn.run, conn, "SELECT $1", { print }, "rows"))
      -- the connection is still fine
      out[4] = conn:run("SELECT 1 AS one", {}, "rows")[1].one
      conn:release()
      return out
    end)
    assert.truthy(tostring(errs[1]):find("parameter $3: cannot bind a table", 1, true), errs[1])
    assert.truthy(tostring(errs[2]):find("parameter $2: cannot bind nil", 1, true), errs[2])
    assert.truthy(tostring(errs[3]):find("parameter $1: cannot bind a function", 1, true), errs[3])
    assert.are.equal(1, errs[4])
    pool:close()
  end)

  it("returns an SQL error with its SQLSTATE, and the connection goes on", function()
    local pool = new_pool({ size = 1 })
    local out = in_handler(function()
      local conn = assert(pool:acquire())
      local r1, e1 = conn:run("SELECT 1/0", {}, "rows")
      local r2, e2 = conn:run("SELEC nonsense", {}, "exec")
      local ok = conn:run("SELECT 2 AS two", {}, "rows")
      conn:release()
      return { r1 = r1, e1 = e1, r2 = r2, e2 = e2, two = ok[1].two }
    end)
    assert.is_nil(out.r1)
    assert.are.equal("22012", out.e1.code)
    assert.are.equal("division by zero", out.e1.message)
    assert.is_nil(out.r2)
    assert.are.equal("42601", out.e2.code)
    assert.truthy(out.e2.message:find("syntax error", 1, true), out.e2.message)
    assert.are.equal(2, out.two)
    pool:close()
  end)

  it("reports changes and lastId (RETURNING id) for exec", function()
    local pool = new_pool()
    local out = in_handler(function()
      local conn = assert(pool:acquire())
      assert(conn:run("DROP TABLE IF EXISTS pg_spec_items", {}, "exec"))
      assert(conn:run("CREATE TABLE pg_spec_items (id bigserial PRIMARY KEY, name text)", {}, "exec"))
      local a = conn:run("INSERT INTO pg_spec_items (name) VALUES ($1) RETURNING id", { "a" }, "exec")
      local b = conn:run("INSERT INTO pg_spec_items (name) VALUES ($1), ($2)", { "b", "c" }, "exec")
      local u = conn:run("UPDATE pg_spec_items SET name = name || '!'", {}, "exec")
      local d = conn:run("DELETE FROM pg_spec_items WHERE name = $1", { "zzz" }, "exec")
      conn:run("DROP TABLE pg_spec_items", {}, "exec")
      conn:release()
      return { a = a, b = b, u = u, d = d }
    end)
    assert.are.same({ changes = 1, lastId = 1 }, out.a)
    assert.are.same({ changes = 2 }, out.b)
    assert.are.same({ changes = 3 }, out.u)
    assert.are.same({ changes = 0 }, out.d)
    pool:close()
  end)

  it("serves 10 concurrent callers with a pool of 2, first come first served", function()
    local pool = new_pool({ size = 2 })
    local order, results, most = {}, {}, 0
    in_handler(function()
      all_of(10, function(i)
        local conn = assert(pool:acquire())
        order[#order + 1] = i
        most = math.max(most, pool:stats().open)
        results[i] = conn:run("SELECT $1::int * 10 AS v, pg_sleep(0.02)", { i }, "rows")[1].v
        conn:release()
      end)
    end)
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, order)
    for i = 1, 10 do assert.are.equal(i * 10, results[i]) end
    assert.are.equal(2, most)
    assert.are.same({ size = 2, open = 2, idle = 2, waiting = 0 }, pool:stats())
    pool:close()
  end)

  it("cancels a running query on abort, off the loop, and keeps the connection", function()
    local pool = new_pool()
    local out = in_handler(function()
      local conn = assert(pool:acquire())
      local pid = conn:backendPid()
      local signal = clank.timeout(200)
      local t0 = socket.gettime()
      local r, err = conn:run("SELECT pg_sleep(10)", {}, "rows", signal)
      local elapsed = socket.gettime() - t0
      local other = assert(pool:acquire())
      local running = other:run([[SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE pid = $1 AND state = 'active']], { pid }, "rows")[1].n
      other:release()
      local after = conn:run("SELECT 3 AS three", {}, "rows")
      local same = conn:backendPid() == pid
      conn:release()
      return { r = r, err = err, elapsed = elapsed, running = running, after = after, same = same }
    end)
    assert.is_nil(out.r)
    assert.are.equal("ABORTED", out.err.code)
    assert.are.equal("timeout", out.err.reason)
    assert.are.equal("aborted: timeout", out.err.message)
    assert.is_true(out.elapsed >= 0.19 and out.elapsed < 0.5, "returned after " .. out.elapsed .. " s")
    assert.are.equal(0, out.running)
    assert.are.equal(3, out.after[1].three)
    assert.is_true(out.same)
    pool:close()
  end)

  it("stops a query after timeoutMs with TIMEOUT", function()
    local pool = new_pool()
    local out = in_handler(function()
      local conn = assert(pool:acquire())
      local t0 = socket.gettime()
      local r, err = conn:run("SELECT pg_sleep(5)", {}, "rows", nil, 100)
      local elapsed = socket.gettime() - t0
      local ok = conn:run("SELECT 1 AS one", {}, "rows")
      conn:release()
      return { r = r, err = err, elapsed = elapsed, ok = ok }
    end)
    assert.is_nil(out.r)
    assert.are.same({ code = "TIMEOUT", message = "timeout", reason = "timeout" }, out.err)
    assert.is_true(out.elapsed < 0.4, "returned after " .. out.elapsed .. " s")
    assert.are.equal(1, out.ok[1].one)
    pool:close()
  end)

  it("returns ABORTED at once for a signal aborted before the call", function()
    local pool = new_pool()
    local out = in_handler(function()
      local signal = clank.timeout(0)
      clank.sleep(5)
      local c, e1 = pool:acquire(signal)
      local conn = assert(pool:acquire())
      local r, e2 = conn:run("SELECT 1", {}, "rows", signal)
      conn:release()
      return { c = c, e1 = e1, r = r, e2 = e2 }
    end)
    assert.is_nil(out.c)
    assert.are.same({ code = "ABORTED", message = "aborted: timeout", reason = "timeout" }, out.e1)
    assert.is_nil(out.r)
    assert.are.equal("ABORTED", out.e2.code)
    pool:close()
  end)

  it("stops waiting for a connection on abort", function()
    local pool = new_pool({ size = 1 })
    local out = in_handler(function()
      local held = assert(pool:acquire())
      local t0 = socket.gettime()
      local c, err = pool:acquire(clank.timeout(50))
      local elapsed = socket.gettime() - t0
      local c2, err2 = pool:acquire(nil, 30)
      held:release()
      local again = assert(pool:acquire())
      again:release()
      return { c = c, err = err, elapsed = elapsed, c2 = c2, err2 = err2 }
    end)
    assert.is_nil(out.c)
    assert.are.same({ code = "ABORTED", message = "aborted: timeout", reason = "timeout" }, out.err)
    assert.is_true(out.elapsed < 0.3, "waited " .. out.elapsed .. " s")
    assert.is_nil(out.c2)
    assert.are.equal("TIMEOUT", out.err2.code)
    assert.are.equal(0, pool:stats().waiting)
    pool:close()
  end)

  it("keeps the loop running during a query", function()
    local pool = new_pool()
    local ticks, during = 0, nil
    in_handler(function()
      local stop = false
      clank.spawn(function()
        while not stop do
          clank.sleep(10)
          ticks = ticks + 1
        end
      end)
      local conn = assert(pool:acquire())
      local before = ticks
      assert(conn:run("SELECT pg_sleep(0.5)", {}, "rows"))
      during = ticks - before
      conn:release()
      stop = true
      clank.sleep(20)
    end)
    assert.is_true(during >= 10, "the ticker ticked " .. tostring(during) .. " times in 0.5 s")
  end)

  it("rolls back a transaction left open before lending the connection again", function()
    local pool = new_pool({ size = 1 })
    local out = in_handler(function()
      local conn = assert(pool:acquire())
      assert(conn:run("CREATE TABLE IF NOT EXISTS pg_spec_rb (v int)", {}, "exec"))
      assert(conn:run("BEGIN", {}, "exec"))
      assert(conn:run("INSERT INTO pg_spec_rb VALUES (1)", {}, "exec"))
      conn:release()
      local again = assert(pool:acquire())
      local n = again:run("SELECT count(*)::int AS n FROM pg_spec_rb", {}, "rows")[1].n
      -- a failed transaction is rolled back too
      assert(again:run("BEGIN", {}, "exec"))
      local _, err = again:run("SELECT 1/0", {}, "rows")
      again:release()
      local third = assert(pool:acquire())
      local ok = third:run("SELECT 5 AS five", {}, "rows")
      third:run("DROP TABLE pg_spec_rb", {}, "exec")
      third:release()
      return { n = n, err = err, five = ok[1].five }
    end)
    assert.are.equal(0, out.n)
    assert.are.equal("22012", out.err.code)
    assert.are.equal(5, out.five)
    pool:close()
  end)

  it("replaces a connection the server closed", function()
    local pool = new_pool({ size = 1 })
    local admin = new_pool({ size = 2 })
    local out = in_handler(function()
      local conn = assert(pool:acquire())
      local pid = conn:backendPid()
      conn:release()
      query(admin, "SELECT pg_terminate_backend($1::int)", { pid })
      clank.sleep(100) -- the idle connection hears of it
      local fresh = assert(pool:acquire())
      local r = fresh:run("SELECT 1 AS one", {}, "rows")
      local newpid = fresh:backendPid()
      fresh:release()
      return { pid = pid, newpid = newpid, one = r[1].one }
    end)
    assert.are_not.equal(out.pid, out.newpid)
    assert.are.equal(1, out.one)
    pool:close()
    admin:close()
  end)

  it("closes a connection released as broken", function()
    local pool = new_pool({ size = 1 })
    local pids = in_handler(function()
      local conn = assert(pool:acquire())
      local a = conn:backendPid()
      conn:release(true)
      local again = assert(pool:acquire())
      local b = again:backendPid()
      again:release()
      return { a, b }
    end)
    assert.are_not.equal(pids[1], pids[2])
    pool:close()
  end)

  it("raises on a second release and on a run after release", function()
    local pool = new_pool()
    local errs = in_handler(function()
      local conn = assert(pool:acquire())
      conn:release()
      return { select(2, pcall(conn.release, conn)), select(2, pcall(conn.run, conn, "SELECT 1")) }
    end)
    assert.truthy(tostring(errs[1]):find("connection already released", 1, true), errs[1])
    assert.truthy(tostring(errs[2]):find("connection already released", 1, true), errs[2])
    pool:close()
  end)

  it("raises the SPEC message when it has to wait outside a handler", function()
    local pool = new_pool({ size = 1, connectTimeout = 1234 }) -- a pool of its own, no connection
    local ok, err = pcall(pool.acquire, pool)
    assert.is_false(ok)
    assert.truthy(tostring(err):find(NOT_IN_COROUTINE, 1, true), tostring(err))
    assert.are.equal(0, pool:stats().waiting)
    pool:close()
  end)

  it("reports a server that is down without the password", function()
    local targets = {
      "postgresql://clank:s3cretpass@/clank_test?host=/nonexistent/clank-pg",
      "postgresql://clank:s3cretpass@127.0.0.1:1/clank_test?connect_timeout=2",
      "postgresql://clank:s3cretpass@localhost:1/clank_test",
    }
    for _, target in ipairs(targets) do
      local pool = pg.pool(target, { size = 2 })
      local out = in_handler(function()
        local t0 = socket.gettime()
        local c, err = pool:acquire()
        local c2, err2 = pool:acquire()
        return { c = c, err = err, c2 = c2, err2 = err2, elapsed = socket.gettime() - t0 }
      end)
      assert.is_nil(out.c)
      assert.are.equal("CONNECT", out.err.code)
      assert.truthy(#out.err.message > 10, out.err.message)
      assert.is_nil(out.err.message:find("s3cretpass", 1, true), out.err.message)
      assert.is_nil(out.c2)
      assert.are.equal("CONNECT", out.err2.code)
      assert.is_true(out.elapsed < 5, "failed after " .. out.elapsed .. " s")
      assert.are.equal(0, pool:stats().open)
      pool:close()
    end
  end)

  it("raises for a URL libpq cannot read, without the password", function()
    local ok, err = pcall(pg.pool, "postgresql://clank:s3cretpass@h/db?nosuchoption=1")
    assert.is_false(ok)
    assert.truthy(tostring(err):find("invalid PostgreSQL URL", 1, true), tostring(err))
    assert.is_nil(tostring(err):find("s3cretpass", 1, true), tostring(err))
    local ok2, err2 = pcall(pg.pool, "postgresql://clank:s3cretpass@a,b/db")
    assert.is_false(ok2)
    assert.truthy(tostring(err2):find("several hosts", 1, true), tostring(err2))
  end)

  it("migrates through clank.db into the table { table = name } names, under a lock of its own",
    function()
      local db = clank.db.open(URL)
      local suffix = ("%d_%d"):format(os.time(), math.random(1, 1e9))
      local name, t = "spec_migrations_" .. suffix, "spec_migrated_" .. suffix
      local list = { "CREATE TABLE " .. t .. " (id INTEGER PRIMARY KEY)",
        "CREATE INDEX " .. t .. "_id ON " .. t .. " (id)" }
      local out = in_handler(function()
        local counts = {}
        all_of(2, function(i) counts[i] = db:migrate(list, { table = name }) end)
        local rows = db:query("SELECT position FROM " .. name .. " ORDER BY position")
        db:exec("DROP TABLE " .. t)
        db:exec("DROP TABLE " .. name)
        return { total = counts[1] + counts[2], rows = rows }
      end)
      assert.are.equal(2, out.total)
      assert.are.same({ { position = 1 }, { position = 2 } }, out.rows)
      db:close()
    end)

  it("migrates inside a transaction (tx:migrate): made and recorded with its writes, gone when it rolls back",
    function()
      local db = clank.db.open(URL)
      local suffix = ("%d_%d"):format(os.time(), math.random(1, 1e9))
      local name, t = "spec_tx_migrations_" .. suffix, "spec_tx_migrated_" .. suffix
      local list = { "CREATE TABLE " .. t .. " (id INTEGER PRIMARY KEY)" }
      local made = "SELECT count(*) AS n FROM pg_tables WHERE tablename IN ($1, $2)"
      local out = in_handler(function()
        local ok, err = pcall(db.transaction, db, function(tx)
          local n = tx:migrate(list, { table = name })
          tx:exec("INSERT INTO " .. t .. " (id) VALUES (1)")
          error("rolled back after " .. n, 0)
        end)
        local after_rollback = db:one(made, name, t).n
        local applied = db:transaction(function(tx) return tx:migrate(list, { table = name }) end)
        local again = db:migrate(list, { table = name })
        local tables = db:one(made, name, t).n
        db:exec("DROP TABLE " .. t)
        db:exec("DROP TABLE " .. name)
        return { ok = ok, err = err, after_rollback = after_rollback, applied = applied, again = again,
          tables = tables }
      end)
      assert.are.same({ ok = false, err = "rolled back after 1", after_rollback = 0, applied = 1, again = 0,
        tables = 2 }, out)
      db:close()
    end)

  it("returns CLOSED from a closed pool", function()
    local pool = new_pool()
    pool:close()
    local c, err = pool:acquire()
    assert.is_nil(c)
    assert.are.same({ code = "CLOSED", message = "the pool is closed" }, err)
  end)
end)
