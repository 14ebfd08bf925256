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

  it("tells an empty value from NULL, of every type (libpq gives both as an empty value)", function()
    local pool = new_pool()
    local row = in_handler(function()
      return query(pool, [[SELECT ''::text AS text, NULL::text AS null_text, ''::bytea AS bytes,
        NULL::bytea AS null_bytes, ''::varchar AS v, NULL::int4 AS null_int,
        NULL::bool AS null_bool, NULL::float8 AS null_float, $1::text AS bound,
        $2::text AS null_bound]], { "", clank.null, n = 2 })[1]
    end)
    assert.are.same({
      text = "", null_text = clank.null, bytes = "", null_bytes = clank.null, v = "",
      null_int = clank.null, null_bool = clank.null, null_float = clank.null, bound = "",
      null_bound = clank.null,
    }, row)
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

  it("reads integers and floats exactly as PostgreSQL writes them", function()
    local pool = new_pool()
    local row = in_handler(function()
      return query(pool, [[SELECT '-32768'::int2 AS i2, '-2147483648'::int4 AS i4min, 2147483647::int4 AS i4,
        9223372036854775807::int8 AS i8, 4294967295::oid AS o, 0::int8 AS zero,
        3::float8 AS whole, -42::float8 AS negwhole, '-0'::float8 AS negzero,
        123456789012345::float8 AS f15, 1234567890123456::float8 AS f16,
        9007199254740993::float8 AS rounded, 1e-7::float8 AS small, 2.5::float4 AS f4,
        'NaN'::float8 AS nan, 'Infinity'::float8 AS inf, '-Infinity'::float8 AS ninf]])[1]
    end)
    assert.are.equal(-32768, row.i2)
    assert.are.equal(-2147483648, row.i4min)
    assert.are.equal(2147483647, row.i4)
    assert.are.equal(math.maxinteger, row.i8)
    assert.are.equal(4294967295, row.o)
    assert.are.equal("integer", math.type(row.o))
    assert.are.equal(0, row.zero)
    for _, k in ipairs { "whole", "negwhole", "negzero", "f15", "f16", "rounded", "small", "f4" } do
      assert.are.equal("float", math.type(row[k]), k)
    end
    assert.are.equal(3.0, row.whole)
    assert.are.equal(-42.0, row.negwhole)
    assert.are.equal(-math.huge, 1 / row.negzero) -- -0, not 0
    assert.are.equal(123456789012345.0, row.f15)
    assert.are.equal(1234567890123456.0, row.f16)
    assert.are.equal(9007199254740992.0, row.rounded)
    assert.are.equal(1e-7, row.small)
    assert.are.equal(2.5, row.f4)
    assert.is_true(row.nan ~= row.nan)
    assert.are.equal(math.huge, row.inf)
    assert.are.equal(-math.huge, row.ninf)
    pool:close()
  end)

  it("keys rows by column name: the last of two same names wins, no columns give empty rows", function()
    local pool = new_pool()
    local columns = {}
    for i = 1, 40 do columns[i] = "1 AS c" .. i end
    local out = in_handler(function()
      return {
        twice = query(pool, "SELECT 1 AS a, 'x' AS b, 2 AS a"),
        none = query(pool, "SELECT FROM generate_series(1, 2)"),
        wide = query(pool, "SELECT " .. table.concat(columns, ", ") .. ", 2 AS last")[1],
      }
    end)
    assert.are.same({ { a = 2, b = "x" } }, out.twice)
    assert.are.same({ {}, {} }, out.none)
    local want = { last = 2 }
    for i = 1, 40 do want["c" .. i] = 1 end
    assert.are.same(want, out.wide)
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

  it("keeps a cancel that comes after its query ended from stopping the next query", function()
    -- timeouts around the query's 20 ms: some fire while it runs, some as it ends
    local pool = new_pool({ size = 1, connectTimeout = 9004 })
    local out = in_handler(function()
      local conn = assert(pool:acquire())
      local got = {}
      for i = 1, 30 do
        local r, e = conn:run("SELECT pg_sleep(0.02) AS s, 1 AS one", {}, "rows", nil, 15 + i % 10)
        local r2, e2 = conn:run("SELECT pg_sleep(0.05) AS s, 2 AS two", {}, "rows")
        got[i] = { first = r and r[1].one or e.code, next = r2 and r2[1].two or e2.code }
      end
      conn:release()
      return got
    end)
    pool:close()
    for i = 1, 30 do
      assert.is_true(out[i].first == 1 or out[i].first == "TIMEOUT", "run " .. i .. ": " .. tostring(out[i].first))
      assert.are.equal(2, out[i].next, "run " .. i .. ": the next query answered " .. tostring(out[i].next))
    end
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

  describe("pool:run (one query, the connection given back when its result is in)", function()
    it("answers a hundred concurrent callers on 6 connections, each with its own rows", function()
      -- a size no other spec uses: a pool of its own (pools are shared per target and size), so
      -- no connection another spec left lent shows in its stats
      local pool = new_pool { size = 6 }
      local got = {}
      in_handler(function()
        all_of(100, function(i)
          local rows = assert(pool:run("SELECT $1::int AS v, $2::text AS w", { i, "row " .. i }, "rows"))
          got[i] = rows[1]
        end)
        -- a caller resumes with its rows as the connection finishes reading the reply's end:
        -- the last ones are back within moments (a slow build, the sanitizer's, shows it)
        local t0 = socket.gettime()
        while pool:stats().idle < pool:stats().open and socket.gettime() - t0 < 5 do clank.sleep(5) end
      end)
      for i = 1, 100 do assert.are.same({ v = i, w = "row " .. i }, got[i]) end
      local stats = pool:stats()
      assert.are.equal(0, stats.waiting)
      assert.are.equal(stats.open, stats.idle) -- every connection is back
      assert.is_true(stats.open >= 1 and stats.open <= 6, "open: " .. stats.open)
      pool:close()
    end)

    it("returns ABORTED for a queued query whose signal aborts, which never runs", function()
      local pool = new_pool { size = 1 }
      local table_name = "run_never_" .. math.random(1e9)
      local res, err, waited, exists
      in_handler(function()
        local slow_done = false
        clank.spawn(function()
          pool:run("SELECT pg_sleep(0.3)", {}, "rows")
          slow_done = true
        end)
        clank.sleep(20)
        local t0 = socket.gettime()
        res, err = pool:run("CREATE TABLE " .. table_name .. " (x int)", {}, "exec", clank.timeout(20))
        waited = socket.gettime() - t0
        while not slow_done do clank.sleep(10) end
        exists = pool:run("SELECT to_regclass($1) IS NOT NULL AS e", { table_name }, "rows")[1].e
      end)
      assert.is_nil(res)
      assert.are.same({ code = "ABORTED", reason = "timeout", message = "aborted: timeout" }, err)
      assert.is_true(waited < 0.25, "waited " .. waited .. " s")
      assert.is_false(exists)
      pool:close()
    end)

    it("cancels a running query at its time limit, and the connection answers next", function()
      local pool = new_pool { size = 1 }
      local err, after
      in_handler(function()
        err = select(2, pool:run("SELECT pg_sleep(5)", {}, "rows", nil, 50))
        after = pool:run("SELECT 7 AS v", {}, "rows")
      end)
      assert.are.equal("TIMEOUT", err.code)
      assert.are.same({ { v = 7 } }, after)
      pool:close()
    end)

    it("answers the database's error, and raises outside a task", function()
      local pool = new_pool { size = 1 }
      local err = in_handler(function() return select(2, pool:run("SELECT 1/0", {}, "rows")) end)
      assert.are.equal("22012", err.code)
      assert.are.equal(NOT_IN_COROUTINE, select(2, pcall(pool.run, pool, "SELECT 1", {}, "rows")))
      pool:close()
    end)
  end)

  describe("prepared statements (a cache per connection)", function()
    -- How many statements of this text the connection's session holds prepared.
    local function prepared(conn, sql)
      return conn:run("SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement = $1",
        { sql }, "rows")[1].n
    end

    -- Runs fn(conn) on the one connection of a pool of its own, in a handler.
    local function on_one_conn(fn)
      local pool = new_pool({ size = 1, connectTimeout = 9001 })
      local out = in_handler(function()
        local conn = assert(pool:acquire())
        local ok, res = pcall(fn, conn)
        conn:release()
        assert(ok, res)
        return res
      end)
      pool:close()
      return out
    end

    local function must(r, err)
      assert(r ~= nil, err and (tostring(err.code) .. ": " .. tostring(err.message)))
      return r
    end

    it("answers the same rows every time the same SQL runs, prepared from its second run", function()
      local sql = "SELECT id, name FROM pg_spec_same WHERE id >= $1 ORDER BY id"
      local out = on_one_conn(function(conn)
        must(conn:run("CREATE TEMP TABLE pg_spec_same (id int, name text)", {}, "exec"))
        must(conn:run("INSERT INTO pg_spec_same VALUES (1, 'a'), (2, 'b'), (3, 'c')", {}, "exec"))
        local runs = {}
        for i = 1, 12 do runs[i] = must(conn:run(sql, { 2 }, "rows")) end
        local other = must(conn:run(sql, { 3 }, "rows"))
        return { runs = runs, other = other, prepared = prepared(conn, sql) }
      end)
      for i = 1, 12 do
        assert.are.same({ { id = 2, name = "b" }, { id = 3, name = "c" } }, out.runs[i])
      end
      assert.are.same({ { id = 3, name = "c" } }, out.other)
      assert.are.equal(1, out.prepared)
    end)

    it("reports changes and lastId from a prepared INSERT ... RETURNING", function()
      local insert = "INSERT INTO pg_spec_ids (name) VALUES ($1) RETURNING id"
      local out = on_one_conn(function(conn)
        must(conn:run("CREATE TEMP TABLE pg_spec_ids (id bigserial PRIMARY KEY, name text)", {}, "exec"))
        local got = {}
        for i = 1, 4 do got[i] = must(conn:run(insert, { "n" .. i }, "exec")) end
        local update = "UPDATE pg_spec_ids SET name = name || '!' WHERE id <= $1"
        got[5] = must(conn:run(update, { 2 }, "exec"))
        got[6] = must(conn:run(update, { 3 }, "exec"))
        return got
      end)
      assert.are.same({ { changes = 1, lastId = 1 }, { changes = 1, lastId = 2 },
        { changes = 1, lastId = 3 }, { changes = 1, lastId = 4 }, { changes = 2 }, { changes = 3 } }, out)
    end)

    it("answers right after ALTER TABLE changes a statement's result or parameter types (outside a transaction)",
      function()
        local star = "SELECT * FROM pg_spec_alter ORDER BY a"
        local by_a = "SELECT b FROM pg_spec_alter WHERE a = $1"
        local out = on_one_conn(function(conn)
          must(conn:run("CREATE TEMP TABLE pg_spec_alter (a int)", {}, "exec"))
          must(conn:run("INSERT INTO pg_spec_alter VALUES (1)", {}, "exec"))
          local before = {}
          for i = 1, 3 do before[i] = must(conn:run(star, {}, "rows")) end
          must(conn:run("ALTER TABLE pg_spec_alter ADD COLUMN b text DEFAULT 'x'", {}, "exec"))
          local added = must(conn:run(star, {}, "rows"))
          for _ = 1, 3 do must(conn:run(by_a, { "1" }, "rows")) end -- $1 taken as int
          must(conn:run("ALTER TABLE pg_spec_alter ALTER COLUMN a TYPE text", {}, "exec"))
          must(conn:run("INSERT INTO pg_spec_alter VALUES ('one', 'y')", {}, "exec"))
          local retyped = must(conn:run(star, {}, "rows"))
          local by_text = must(conn:run(by_a, { "one" }, "rows")) -- $1 now text
          local again = must(conn:run(star, {}, "rows"))
          return { before = before, added = added, retyped = retyped, by_text = by_text, again = again }
        end)
        for i = 1, 3 do assert.are.same({ { a = 1 } }, out.before[i]) end
        assert.are.same({ { a = 1, b = "x" } }, out.added)
        assert.are.same({ { a = "1", b = "x" }, { a = "one", b = "y" } }, out.retyped)
        assert.are.same({ { b = "y" } }, out.by_text)
        assert.are.same(out.retyped, out.again)
      end)

    it("never runs a statement again for an error a function it called raised", function()
      local call = "SELECT pg_temp.pg_spec_boom() AS v"
      local out = on_one_conn(function(conn)
        must(conn:run("CREATE TEMP SEQUENCE pg_spec_calls", {}, "exec"))
        must(conn:run([[CREATE FUNCTION pg_temp.pg_spec_boom() RETURNS int LANGUAGE plpgsql AS $$
          BEGIN PERFORM nextval('pg_spec_calls'); RAISE EXCEPTION 'refused' USING ERRCODE = '42501'; END $$]],
          {}, "exec"))
        local errs = {}
        for i = 1, 4 do errs[i] = select(2, conn:run(call, {}, "rows")) end
        return { errs = errs, next = must(conn:run("SELECT nextval('pg_spec_calls')::int AS n", {}, "rows"))[1].n }
      end)
      for i = 1, 4 do
        assert.are.equal("42501", out.errs[i].code)
        assert.are.equal("refused", out.errs[i].message)
      end
      assert.are.equal(5, out.next) -- four calls, each run once
    end)

    it("lets a stale statement's error stand inside a transaction, and prepares it afresh after", function()
      local star = "SELECT * FROM pg_spec_stale"
      local out = on_one_conn(function(conn)
        must(conn:run("CREATE TEMP TABLE pg_spec_stale (a int)", {}, "exec"))
        must(conn:run("INSERT INTO pg_spec_stale VALUES (7)", {}, "exec"))
        for _ = 1, 3 do must(conn:run(star, {}, "rows")) end
        must(conn:run("BEGIN", {}, "exec"))
        must(conn:run("ALTER TABLE pg_spec_stale ADD COLUMN b int DEFAULT 8", {}, "exec"))
        local r, err = conn:run(star, {}, "rows")
        must(conn:run("ROLLBACK", {}, "exec"))
        local after = must(conn:run(star, {}, "rows"))
        must(conn:run("BEGIN", {}, "exec"))
        local inside = must(conn:run(star, {}, "rows"))
        must(conn:run("COMMIT", {}, "exec"))
        return { r = r, err = err, after = after, inside = inside }
      end)
      assert.is_nil(out.r)
      assert.are.equal("0A000", out.err.code)
      assert.are.equal("cached plan must not change result type", out.err.message)
      assert.are.same({ { a = 7 } }, out.after)
      assert.are.same({ { a = 7 } }, out.inside)
    end)

    it("forgets a statement whose PREPARE failed inside a transaction", function()
      local sql = "SELECT v FROM pg_spec_gone ORDER BY v"
      local out = on_one_conn(function(conn)
        must(conn:run("CREATE TEMP TABLE pg_spec_gone (v int)", {}, "exec"))
        must(conn:run("INSERT INTO pg_spec_gone VALUES (5)", {}, "exec"))
        local first = must(conn:run(sql, {}, "rows")) -- run once: the next run prepares it
        must(conn:run("BEGIN", {}, "exec"))
        must(conn:run("DROP TABLE pg_spec_gone", {}, "exec"))
        local r, err = conn:run(sql, {}, "rows") -- its PREPARE fails
        must(conn:run("ROLLBACK", {}, "exec")) -- the table is back
        local after = {}
        for i = 1, 3 do after[i] = must(conn:run(sql, {}, "rows")) end
        return { first = first, r = r, err = err, after = after }
      end)
      assert.are.same({ { v = 5 } }, out.first)
      assert.is_nil(out.r)
      assert.are.equal("42P01", out.err.code)
      for i = 1, 3 do assert.are.same({ { v = 5 } }, out.after[i]) end
    end)

    it("keeps a statement prepared inside a transaction that rolled back", function()
      local sql = "SELECT $1::int * 2 AS v"
      local out = on_one_conn(function(conn)
        must(conn:run("BEGIN", {}, "exec"))
        local a = must(conn:run(sql, { 1 }, "rows"))
        local b = must(conn:run(sql, { 2 }, "rows"))
        must(conn:run("ROLLBACK", {}, "exec"))
        local inside = prepared(conn, sql)
        local c = must(conn:run(sql, { 3 }, "rows"))
        must(conn:run("BEGIN", {}, "exec"))
        local d = must(conn:run(sql, { 4 }, "rows"))
        must(conn:run("COMMIT", {}, "exec"))
        return { a = a, b = b, c = c, d = d, inside = inside, prepared = prepared(conn, sql) }
      end)
      assert.are.same({ { v = 2 } }, out.a)
      assert.are.same({ { v = 4 } }, out.b)
      assert.are.same({ { v = 6 } }, out.c)
      assert.are.same({ { v = 8 } }, out.d)
      assert.are.equal(1, out.inside)
      assert.are.equal(1, out.prepared)
    end)

    it("answers a text of several commands as before (42601), and prepares nothing of it", function()
      local multi = "SELECT 1 AS a; SELECT 2 AS b"
      local out = on_one_conn(function(conn)
        local errs = {}
        for i = 1, 3 do errs[i] = select(2, conn:run(multi, {}, "rows")) end
        local one = must(conn:run("SELECT 1 AS one", {}, "rows"))
        return { errs = errs, one = one, prepared = prepared(conn, multi) }
      end)
      for i = 1, 3 do
        assert.are.equal("42601", out.errs[i].code)
        assert.are.equal("cannot insert multiple commands into a prepared statement", out.errs[i].message)
      end
      assert.are.same({ { one = 1 } }, out.one)
      assert.are.equal(0, out.prepared)
    end)

    it("keeps a statement per parameter type signature of the same SQL text", function()
      -- a statement prepared for one type would coerce another: "x" into bigint fails, 6 through
      -- double precision comes back a float, bytes through text are refused
      local sql = "SELECT $1 AS v"
      local isnull = "SELECT $1::int8 IS NULL AS isnull"
      local out = on_one_conn(function(conn)
        local got = {}
        local values = { 5, "x", 1.5, true, "\0\1", 6, "y", clank.null }
        for round = 1, 3 do
          for i, v in ipairs(values) do
            local row = must(conn:run(sql, { v }, "rows"))[1]
            got[#got + 1] = { round, i, { v = row.v, t = math.type(row.v) or type(row.v) } }
          end
          got[#got + 1] = { round, "null", must(conn:run(isnull, { clank.null }, "rows"))[1] }
          got[#got + 1] = { round, "int", must(conn:run(isnull, { 3 }, "rows"))[1] }
        end
        return got
      end)
      local want = {
        { v = 5, t = "integer" }, { v = "x", t = "string" }, { v = 1.5, t = "float" },
        { v = true, t = "boolean" }, { v = "\0\1", t = "string" }, { v = 6, t = "integer" },
        { v = "y", t = "string" }, { v = clank.null, t = "userdata" },
      }
      local k = 0
      for round = 1, 3 do
        for i = 1, #want do
          k = k + 1
          assert.are.same({ round, i, want[i] }, out[k])
        end
        k = k + 1
        assert.are.same({ round, "null", { isnull = true } }, out[k])
        k = k + 1
        assert.are.same({ round, "int", { isnull = false } }, out[k])
      end
    end)

    it("runs a prepared statement right after a cancelled one, on the same connection", function()
      local sleep = "SELECT pg_sleep($1::float8) AS slept, $2::int AS n"
      local out = on_one_conn(function(conn)
        local pid = conn:backendPid()
        local first = must(conn:run(sleep, { 0, 1 }, "rows")) -- seen: the next run prepares it
        local r1, e1 = conn:run(sleep, { 10, 2 }, "rows", nil, 150) -- prepared, then cancelled
        local second = must(conn:run(sleep, { 0, 3 }, "rows"))
        local r2, e2 = conn:run(sleep, { 10, 4 }, "rows", clank.timeout(150)) -- cancelled again
        local third = must(conn:run(sleep, { 0, 5 }, "rows"))
        return { first = first, r1 = r1, e1 = e1, second = second, r2 = r2, e2 = e2, third = third,
          prepared = prepared(conn, sleep), same = conn:backendPid() == pid }
      end)
      assert.are.same({ { slept = "", n = 1 } }, out.first)
      assert.is_nil(out.r1)
      assert.are.same({ code = "TIMEOUT", message = "timeout", reason = "timeout" }, out.e1)
      assert.are.same({ { slept = "", n = 3 } }, out.second)
      assert.is_nil(out.r2)
      assert.are.equal("ABORTED", out.e2.code)
      assert.are.same({ { slept = "", n = 5 } }, out.third)
      assert.are.equal(1, out.prepared)
      assert.is_true(out.same)
    end)

    it("prepares again after DEALLOCATE ALL or DISCARD ALL from the app, seen or not", function()
      local sql = "SELECT $1::int + 1 AS v"
      local out = on_one_conn(function(conn)
        local got = {}
        local function run(v) got[#got + 1] = must(conn:run(sql, { v }, "rows"))[1].v end
        for v = 1, 3 do run(v) end
        must(conn:run("DEALLOCATE ALL", {}, "exec"))
        for v = 10, 12 do run(v) end
        must(conn:run("DISCARD ALL", {}, "exec"))
        for v = 20, 22 do run(v) end
        must(conn:run("BEGIN", {}, "exec"))
        must(conn:run("DEALLOCATE ALL", {}, "exec"))
        run(30)
        must(conn:run("COMMIT", {}, "exec"))
        -- a deallocation the driver cannot see: the statement is prepared afresh
        must(conn:run("DO $$ BEGIN EXECUTE 'DEALLOCATE ALL'; END $$", {}, "exec"))
        for v = 40, 42 do run(v) end
        return { got = got, prepared = prepared(conn, sql) }
      end)
      assert.are.same({ 2, 3, 4, 11, 12, 13, 21, 22, 23, 31, 41, 42, 43 }, out.got)
      assert.are.equal(1, out.prepared)
    end)

    it("starts afresh on a new connection when the server closed the old one", function()
      local sql = "SELECT $1::text || '!' AS v"
      local pool = new_pool({ size = 1, connectTimeout = 9002 })
      local admin = new_pool({ size = 1, connectTimeout = 9003 })
      local out = in_handler(function()
        local conn = assert(pool:acquire())
        local a = {}
        for i = 1, 3 do a[i] = must(conn:run(sql, { "a" .. i }, "rows"))[1].v end
        local pid = conn:backendPid()
        conn:release()
        query(admin, "SELECT pg_terminate_backend($1::int)", { pid })
        clank.sleep(100)
        local fresh = assert(pool:acquire())
        local b = {}
        for i = 1, 3 do b[i] = must(fresh:run(sql, { "b" .. i }, "rows"))[1].v end
        local newpid = fresh:backendPid()
        fresh:release()
        return { a = a, b = b, changed = newpid ~= pid }
      end)
      pool:close()
      admin:close()
      assert.are.same({ "a1!", "a2!", "a3!" }, out.a)
      assert.are.same({ "b1!", "b2!", "b3!" }, out.b)
      assert.is_true(out.changed)
    end)

    it("stays within its bound when more distinct statements run than it keeps, all answering right",
      function()
        local n = 150
        local out = on_one_conn(function(conn)
          local got = {}
          for round = 1, 3 do
            for i = 1, n do
              local sql = ("SELECT $1::int + %d AS v"):format(i)
              got[#got + 1] = must(conn:run(sql, { round * 1000 }, "rows"))[1].v
            end
          end
          local held = conn:run([[SELECT count(*)::int AS n FROM pg_prepared_statements
            WHERE name LIKE 'clank_s%']], {}, "rows")[1].n
          -- the first statements were evicted long ago: they answer all the same
          local again = must(conn:run("SELECT $1::int + 1 AS v", { 7 }, "rows"))[1].v
          return { got = got, held = held, again = again }
        end)
        local k = 0
        for round = 1, 3 do
          for i = 1, n do
            k = k + 1
            assert.are.equal(round * 1000 + i, out.got[k])
          end
        end
        assert.is_true(out.held > 0 and out.held <= 64 + 16, "the server holds " .. out.held .. " statements")
        assert.are.equal(8, out.again)
      end)
  end)

  it("returns CLOSED from a closed pool", function()
    local pool = new_pool()
    pool:close()
    local c, err = pool:acquire()
    assert.is_nil(c)
    assert.are.same({ code = "CLOSED", message = "the pool is closed" }, err)
  end)
end)
