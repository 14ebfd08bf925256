-- clank.db (SPEC §12) through the real clank-run, on an SQLite file and on PostgreSQL (when
-- CLANK_TEST_POSTGRES_URL is set, as in ./dev test): a query past the action timeout answers
-- 504 TIMEOUT at once and the server serves on; a stalled database (a PostgreSQL backend stopped
-- with SIGSTOP, an SQLite write lock held by another process) never delays GET /manifest; a
-- database that is down fails each call fast, with its message and without the password, and
-- works again once it is back; a reload opens no new connections. The fixture app is
-- spec/fixtures/apps/db/app.lua.
local server = require "helpers.server"
local http = require "helpers.http"
local storage = require "helpers.storage"
local socket = require "socket"
local cjson = require "cjson"

local APP = server.fixture("db")
local pg_url = storage.postgres_url
local PG_PENDING = "CLANK_TEST_POSTGRES_URL is not set (./dev test starts a throwaway cluster and sets it)"

-- Bounds: sanitizers slow everything down.
local slow = server.sanitized and 4 or 1
-- GET /manifest while the database stalls: each answers in < 20 ms. A loop that waited for the
-- database would hold every request for the whole stall (seconds); on a machine shared with
-- other specs (ctest -j, Chromium) a process is now and then descheduled for tens of ms, so up
-- to 1% of the requests may take longer, none 100 ms or more.
local MANIFEST_MS = 20 * slow
local MANIFEST_WORST_MS = 100 * slow
-- the fixture's action timeout in the timeout tests, which db.ping's call right after a timeout
-- has too: a sanitized server under a full test run took over 200 ms for it once
local TIMEOUT_MS = 200 * slow
local FAIL_FAST_MS = 500 * slow -- a call to a database that is down

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function now_ms()
  return socket.gettime() * 1000
end

-- A name no other run or spec uses, for application_name: pg_stat_activity rows of one server.
local function unique_name(what)
  return (storage.unique_user("clank-db-" .. what):gsub("[^%w-]", "-"))
end

-- pg_url with more query parameters.
local function pg_with(params)
  return pg_url .. (pg_url:find("?", 1, true) and "&" or "?") .. params
end

-- The tools below (psql, sqlite3, ln) run without the ASan runtime the sanitizer build preloads
-- into lua5.4: psql hangs at exit under it.
local PLAIN = "env -u LD_PRELOAD "

-- Runs SQL through psql against the test database; returns its output, trimmed.
local function psql(sql)
  return require("helpers.psql")(pg_url, sql)
end

-- Connections (rows of pg_stat_activity) of the server whose application_name is `name`;
-- `where` narrows them.
local function backends(name, where)
  return tonumber(psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = '"
    .. name .. "'" .. (where and (" AND " .. where) or "")))
end

local function fresh_sqlite()
  local path = os.tmpname()
  os.remove(path)
  return path .. ".db"
end

-- POSTs input (a table) to /actions/<name>; returns the response and the decoded body.
local function post(port, name, input)
  local res = assert(http.request(port, "POST", "/actions/" .. name,
    { { "content-type", "application/json" } }, cjson.encode(input)))
  local ok, decoded = pcall(cjson.decode, res.body)
  assert(ok, "the body is not JSON: " .. res.body)
  return res, decoded
end

local function call(port, name, input)
  local res, decoded = post(port, name, input or {})
  assert.are.equal(200, res.status, res.body)
  return decoded.output
end

-- Sends a POST on its own connection without reading the answer; read it with :read_response().
local function send(port, name, input)
  local conn = assert(http.connect(port))
  assert(conn:send(http.build("POST", "/actions/" .. name,
    { { "content-type", "application/json" } }, cjson.encode(input))))
  return conn
end

local function answer(conn, timeout)
  local res = assert(conn:read_response({ timeout = timeout }))
  conn:close()
  return res, cjson.decode(res.body)
end

-- GET /manifest every 10 ms for `seconds`; returns the number of requests, the slowest (ms) and
-- the list of those over `bound` ms (see MANIFEST_MS).
local function probe_manifest(port, seconds, bound)
  local n, worst, late = 0, 0, {}
  local stop = socket.gettime() + seconds
  while socket.gettime() < stop do
    local t0 = now_ms()
    local res = assert(http.get(port, "/manifest"))
    local ms = now_ms() - t0
    assert.are.equal(200, res.status)
    n = n + 1
    if ms > worst then
      worst = ms
    end
    if ms >= bound then
      late[#late + 1] = string.format("%.1f", ms)
    end
    local rest = t0 + 10 - now_ms()
    if rest > 0 then
      socket.sleep(rest / 1000)
    end
  end
  return n, worst, late
end

local function assert_served(n, worst, late, seconds)
  assert.is_true(n >= seconds * 33, "only " .. n .. " requests in " .. seconds .. " s")
  local what = string.format("%d of %d requests took %s ms or more: %s (slowest %.1f ms)", #late, n,
    MANIFEST_MS, table.concat(late, ", "), worst)
  assert.is_true(#late <= n / 100, what)
  assert.is_true(worst < MANIFEST_WORST_MS, what)
end

-- Waits until fn() is truthy (at most `seconds`); returns its value.
local function eventually(fn, seconds, what)
  local deadline = socket.gettime() + (seconds or 5) * slow
  while true do
    local v = fn()
    if v then
      return v
    end
    assert(socket.gettime() < deadline, "timed out waiting for " .. (what or "a condition"))
    socket.sleep(0.01)
  end
end

local function start(env, args)
  return server.start(APP, { args = args or { "--no-watch" }, env = env })
end

--------------------------------------------------------------------------------

describe("clank.db in clank-run", function()
  after_each(function()
    server.kill_all()
  end)

  for _, backend in ipairs({ "SQLite", "PostgreSQL" }) do
    local pending_reason = backend == "PostgreSQL" and not pg_url and PG_PENDING or nil

    describe("on " .. backend, function()
      local target, cleanup, name

      before_each(function()
        if pending_reason then
          return
        end
        if backend == "SQLite" then
          local path = fresh_sqlite()
          target, cleanup = path, function() storage.remove_db(path) end
        else
          name = unique_name("timeout")
          target, cleanup = pg_with("application_name=" .. name), nil
        end
      end)

      after_each(function()
        if cleanup then
          cleanup()
          cleanup = nil
        end
      end)

      it("answers a query past the action timeout with 504 TIMEOUT at once, and serves on", function()
        if pending_reason then
          pending(pending_reason)
          return
        end
        local s = start({ CLANK_DB_TARGET = target, CLANK_DB_TIMEOUT = TIMEOUT_MS })
        assert.are.same({ one = 1 }, call(s.port, "db.ping"))
        for _ = 1, 3 do
          local t0 = now_ms()
          local res, body = post(s.port, "db.sleep", { ms = 10000 })
          local took = now_ms() - t0
          assert.are.equal(504, res.status, res.body)
          assert.are.same({ ok = false, error = { code = "TIMEOUT", message = "The action timed out." } },
            body)
          assert.is_true(took < TIMEOUT_MS + 100 * slow, "answered after " .. took .. " ms")
          if backend == "PostgreSQL" then
            -- cancelled, not left running: nothing of this server is active right after
            assert.are.equal(0, backends(name, "state = 'active'"))
          end
          -- the connection serves the next query, and the server the next request
          assert.are.same({ one = 1 }, call(s.port, "db.ping"))
          assert.are.equal(200, assert(http.get(s.port, "/manifest")).status)
        end
        assert.are.equal(0, s:stop())
      end)
    end)
  end

  describe("while the database stalls, GET /manifest answers in < 20 ms (99%, none in 100 ms)", function()
    it("on PostgreSQL: the backend serving a query is stopped (SIGSTOP) for 3 s", function()
      if not pg_url then
        pending(PG_PENDING)
        return
      end
      local s = start({ CLANK_DB_TARGET = pg_with("application_name=" .. unique_name("stall")) })
      assert.are.same({ one = 1 }, call(s.port, "db.ping"))
      local conn = send(s.port, "db.stall", { ms = 500 })
      local pid = tonumber(eventually(function()
        local body = assert(http.get(s.port, "/stall")).body
        return body ~= "" and body
      end, 5, "the stall action's backend pid"))
      assert(os.execute("kill -STOP " .. pid))
      local ok, n, worst, late = pcall(probe_manifest, s.port, 3, MANIFEST_MS)
      os.execute("kill -CONT " .. pid)
      assert(ok, n)
      assert_served(n, worst, late, 3)
      -- the query resumes with its backend and the action finishes
      local res, body = answer(conn, 10 * slow)
      assert.are.equal(200, res.status, res.body)
      assert.are.equal(pid, body.output.pid)
      assert.are.same({ one = 1 }, call(s.port, "db.ping"))
      assert.are.equal(0, s:stop())
    end)

    it("on SQLite: another process holds a write transaction while writes wait on it", function()
      local path = fresh_sqlite()
      local s = start({ CLANK_DB_TARGET = path })
      local ok, problem = pcall(function()
        call(s.port, "db.setup")
        assert.are.same({ changes = 1 }, call(s.port, "db.write", { body = "before" }))
        -- the sqlite3 shell takes the write lock, says so, keeps it 3 s, and lets go
        local flag = path .. ".locked"
        assert(os.execute(PLAIN .. "sh -c " .. quote("(printf \"BEGIN EXCLUSIVE;\\nSELECT 'locked';\\n\"; "
          .. "sleep 3; printf 'ROLLBACK;\\n') | sqlite3 " .. quote(path) .. " >" .. quote(flag) .. " 2>&1")
          .. " &"))
        eventually(function()
          local f = io.open(flag, "r")
          local text = f and f:read("a") or ""
          if f then
            f:close()
          end
          return text:find("locked", 1, true)
        end, 5, "the sqlite3 shell to take the lock")
        local t0 = now_ms()
        local writers = {}
        for i = 1, 4 do
          writers[i] = send(s.port, "db.write", { body = "while locked " .. i })
        end
        local n, worst, late = probe_manifest(s.port, 2.5, MANIFEST_MS)
        assert_served(n, worst, late, 2.5)
        -- the writes waited for the lock (busy timeout 5 s), then went through
        for i = 1, 4 do
          local res, body = answer(writers[i], 10 * slow)
          assert.are.equal(200, res.status, res.body)
          assert.are.same({ changes = 1 }, body.output)
        end
        assert.is_true(now_ms() - t0 > 2000, "the writes did not wait for the lock")
        os.remove(flag)
      end)
      local code = s:stop()
      storage.remove_db(path)
      assert(ok, problem)
      assert.are.equal(0, code)
    end)
  end)

  describe("PostgreSQL down", function()
    local SECRET = "hunter2-db-secret"

    -- The password in the URL: libpq ignores it under the test cluster's trust authentication.
    local function with_password(url)
      return (url:gsub("^(postgres[a-z]*://)([^@/]*@)?", "%1" .. "clank:" .. SECRET .. "@"))
    end

    it("fails each call fast with the driver's message and no password; a reload to a good URL works",
      function()
        if not pg_url then
          pending(PG_PENDING)
          return
        end
        local file = os.tmpname()
        local function point_at(url)
          local f = assert(io.open(file, "w"))
          f:write(url, "\n")
          f:close()
        end
        -- a port nothing listens on: its unix socket does not exist
        point_at(with_password(pg_with("port=1")))
        local s = start({ CLANK_DB_TARGET_FILE = file })
        local ok, problem = pcall(function()
          for _ = 1, 3 do
            local t0 = now_ms()
            local res, body = post(s.port, "db.ping", {})
            local took = now_ms() - t0
            assert.are.equal(500, res.status, res.body)
            assert.are.equal("DB_ERROR", body.error.code, res.body)
            assert.is_true(#body.error.message > 20, res.body)
            assert.falsy(res.body:find(SECRET, 1, true), res.body)
            assert.is_true(took < FAIL_FAST_MS, "failed after " .. took .. " ms")
          end
          assert.are.equal(200, assert(http.get(s.port, "/manifest")).status)
          -- back: the right URL, taken by a reload
          local before = assert(http.get(s.port, "/generation")).body
          point_at(pg_url)
          s:signal("HUP")
          eventually(function() return assert(http.get(s.port, "/generation")).body ~= before end,
            10, "the reload")
          assert.are.same({ one = 1 }, call(s.port, "db.ping"))
          assert.falsy(s:stderr():find(SECRET, 1, true), s:stderr())
        end)
        local code = s:stop()
        os.remove(file)
        assert(ok, problem)
        assert.are.equal(0, code)
      end)

    it("fails fast while the server is gone, and the next call after it is back reconnects", function()
      if not pg_url then
        pending(PG_PENDING)
        return
      end
      -- The cluster is reached through a symbolic link to its socket folder: removing the link
      -- (and ending this server's backends) takes the database away, putting it back returns it.
      local socket_dir = assert(pg_url:match("[?&]host=([^&]+)"), "the test URL names no socket folder")
      local link = os.tmpname()
      os.remove(link)
      assert(os.execute(PLAIN .. "ln -s " .. quote(socket_dir) .. " " .. quote(link)))
      local name = unique_name("down")
      local url = with_password(pg_url:gsub("([?&]host=)[^&]+", "%1" .. link:gsub("%%", "%%%%")))
        .. "&application_name=" .. name
      local s = start({ CLANK_DB_TARGET = url })
      local ok, problem = pcall(function()
        assert.are.same({ one = 1 }, call(s.port, "db.ping"))
        os.remove(link)
        psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '"
          .. name .. "'")
        eventually(function() return backends(name) == 0 end, 5, "the backends to end")
        for _ = 1, 3 do
          local t0 = now_ms()
          local res, body = post(s.port, "db.ping", {})
          local took = now_ms() - t0
          assert.are.equal(500, res.status, res.body)
          assert.are.equal("DB_ERROR", body.error.code, res.body)
          assert.falsy(res.body:find(SECRET, 1, true), res.body)
          assert.is_true(took < FAIL_FAST_MS, "failed after " .. took .. " ms")
        end
        assert(os.execute(PLAIN .. "ln -s " .. quote(socket_dir) .. " " .. quote(link)))
        assert.are.same({ one = 1 }, call(s.port, "db.ping"))
        assert.are.equal(1, backends(name))
        assert.falsy(s:stderr():find(SECRET, 1, true), s:stderr())
      end)
      local code = s:stop()
      os.remove(link)
      assert(ok, problem)
      assert.are.equal(0, code)
    end)
  end)

  describe("a reload", function()
    it("opens no new PostgreSQL connections: the new generation uses the same pool", function()
      if not pg_url then
        pending(PG_PENDING)
        return
      end
      local name = unique_name("reload")
      local s = start({ CLANK_DB_TARGET = pg_with("application_name=" .. name), CLANK_DB_POOL = 3 })
      -- three queries at once: the pool opens its three connections
      local function three_at_once()
        local conns = {}
        for i = 1, 3 do
          conns[i] = send(s.port, "db.sleep", { ms = 200 })
        end
        for i = 1, 3 do
          assert.are.equal(200, (answer(conns[i], 10 * slow)).status)
        end
      end
      three_at_once()
      local opened = backends(name)
      assert.are.equal(3, opened)
      local pids = psql("SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity"
        .. " WHERE application_name = '" .. name .. "'")
      for round = 1, 2 do
        local before = assert(http.get(s.port, "/generation")).body
        s:signal("HUP")
        eventually(function() return assert(http.get(s.port, "/generation")).body ~= before end,
          10, "reload " .. round)
        three_at_once()
        assert.are.equal(opened, backends(name))
        assert.are.equal(pids, psql("SELECT string_agg(pid::text, ',' ORDER BY pid) FROM"
          .. " pg_stat_activity WHERE application_name = '" .. name .. "'"))
      end
      assert.are.equal(0, s:stop())
    end)
  end)

  describe("a route's query", function()
    it("is aborted when its client goes away (the request's signal, made at its first wait)", function()
      local path = fresh_sqlite()
      local s = start({ CLANK_DB_TARGET = path })
      local conn = assert(http.connect(s.port))
      assert(conn:send(http.build("GET", "/forever")))
      socket.sleep(0.3)
      conn:reset() -- gone: a reset, not a half-close
      eventually(function()
        return s:stderr():find("The query was aborted (disconnected)", 1, true) ~= nil
      end, 5, "the query's abort in the log")
      assert.are.equal(200, assert(http.get(s.port, "/generation")).status)
      assert.are.equal(0, s:stop())
      os.remove(path)
    end)
  end)
end)
