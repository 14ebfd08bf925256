-- Isolation (SPEC §13): no handler can stop the server. Preemption and the
-- CPU budget, the memory cap and the fresh load, signals while Lua runs,
-- request ids, the no-return envelope, and the logger (JSON lines,
-- tracebacks as a field, repeats collapsed).
local server = require "helpers.server"
local http = require "helpers.http"
local cjson = require "cjson"

local app = server.fixture("isolation")

local CPU = '{"error":{"code":"RESOURCE_LIMIT","message":"The request used too much CPU."},"ok":false}'
local MEMORY =
  '{"error":{"code":"RESOURCE_LIMIT","message":"The request used too much memory."},"ok":false}'

local function call(port, name, headers)
  local h = { ["Content-Type"] = "application/json" }
  for k, v in pairs(headers or {}) do
    h[k] = v
  end
  return assert(http.request(port, "POST", "/actions/" .. name, h, "{}"))
end

-- Sends a call and returns the open connection, to read its answer later.
local function start_call(port, name)
  local conn = assert(http.connect(port))
  assert(conn:send(http.build("POST", "/actions/" .. name, { ["Content-Type"] = "application/json" }, "{}")))
  return conn
end

local function rss_mib(pid)
  local f = assert(io.open("/proc/" .. pid .. "/status"))
  local kib = f:read("a"):match("VmRSS:%s*(%d+)")
  f:close()
  return tonumber(kib) / 1024
end

-- Waits until the server's stderr has a line matching pattern (the log is
-- written once per loop iteration).
local function wait_log(s, pattern)
  local deadline = http.now() + 5
  while http.now() < deadline do
    if s:stderr():find(pattern) then
      return true
    end
    http.sleep(0.02)
  end
  return false
end

describe("isolation", function()
  after_each(server.kill_all)

  it("stops a spinning action at its CPU budget with 503 RESOURCE_LIMIT, serving others meanwhile", function()
    local s = server.start(app, { args = { "--cpu-limit", "400" } })
    local t0 = http.now()
    local spinning = start_call(s.port, "spin")
    http.sleep(0.05)
    -- the loop still turns: each ping is answered long before the spin ends
    for _ = 1, 5 do
      local p0 = http.now()
      local res = assert(http.get(s.port, "/ping"))
      assert.are.equal(200, res.status)
      assert.is_true(http.now() - p0 < 0.3, "a ping waited " .. (http.now() - p0) .. " s")
    end
    local res = assert(spinning:read_response())
    spinning:close()
    assert.are.equal(503, res.status)
    assert.are.equal(CPU, res.body)
    local took = http.now() - t0
    assert.is_true(took >= 0.35 and took < 3, "the spin ended after " .. took .. " s")
    assert.are.equal(0, s:stop())
  end)

  it("stops a spinning route with a 503 text answer and one log line", function()
    local s = server.start(app, { args = { "--cpu-limit", "200" } })
    local res = assert(http.get(s.port, "/spin"))
    assert.are.equal(503, res.status)
    assert.are.equal("The request used too much CPU.", res.body)
    assert.is_true(wait_log(s, "route GET /spin stopped: The request used too much CPU%."))
    assert.are.equal(200, assert(http.get(s.port, "/ping")).status)
    assert.are.equal(0, s:stop())
  end)

  it("cannot be caught: a handler that pcalls its spin is stopped too", function()
    local s = server.start(app, { args = { "--cpu-limit", "200" } })
    local res = call(s.port, "stubborn")
    assert.are.equal(503, res.status)
    assert.are.equal(CPU, res.body)
    assert.are.equal(0, s:stop())
  end)

  it("stops a spin where the stack cannot yield (a table.sort comparator)", function()
    local s = server.start(app, { args = { "--cpu-limit", "200" } })
    local res = call(s.port, "sortSpin")
    assert.are.equal(503, res.status)
    assert.are.equal(CPU, res.body)
    assert.are.equal(200, assert(http.get(s.port, "/ping")).status)
    assert.are.equal(0, s:stop())
  end)

  it("lets work longer than a slice finish (preempted, not stopped)", function()
    local s = server.start(app)
    local res = call(s.port, "busy")
    assert.are.equal(200, res.status)
    assert.are.equal('{"ok":true,"output":{"n":1}}', res.body)
    assert.are.equal(0, s:stop())
  end)

  it("honours SIGTERM while a handler spins: exit 0 within the budget and a second", function()
    local s = server.start(app) -- the default budget, 1,000 ms
    local spinning = start_call(s.port, "spin")
    http.sleep(0.1)
    local t0 = http.now()
    s:signal("TERM")
    local res = assert(spinning:read_response())
    spinning:close()
    assert.are.equal(503, res.status)
    assert.are.equal(0, s:wait_exit(5))
    local took = http.now() - t0
    assert.is_true(took < (server.sanitized and 4 or 2), "exit took " .. took .. " s")
  end)

  it("stops a memory hog with 503, serves the next request and keeps RSS near the cap", function()
    -- a CPU budget that allocation under the sanitizers cannot reach first
    local s = server.start(app, { args = { "--memory-limit", "64", "--cpu-limit", "20000" } })
    local res = call(s.port, "hog")
    assert.are.equal(503, res.status)
    assert.are.equal(MEMORY, res.body)
    res = assert(http.get(s.port, "/hog"))
    assert.are.equal(503, res.status)
    assert.are.equal("The request used too much memory.", res.body)
    assert.are.equal('{"ok":true}', call(s.port, "nothing").body)
    -- 64 MiB of Lua, a reserve, and the process itself (more under ASan)
    local rss = rss_mib(s.pid)
    assert.is_true(rss < (server.sanitized and 600 or 200), "RSS " .. rss .. " MiB")
    assert.are.equal(0, s:stop())
  end)

  it("loads the app afresh when its memory stays over 90% of the cap after a collection", function()
    local s = server.start(app, { args = { "--memory-limit", "32", "--cpu-limit", "20000" } })
    local res = call(s.port, "hoard")
    assert.are.equal(503, res.status)
    assert.are.equal(MEMORY, res.body)
    assert.is_true(wait_log(s, "after a full collection: loading the app afresh"))
    assert.is_true(wait_log(s, "reloaded in"))
    local metrics = assert(http.get(s.port, "/__clank/metrics")).body
    assert.truthy(metrics:find('clank_reloads_total{result="ok"} 1', 1, true))
    local mem = tonumber(metrics:match("\nclank_lua_memory_bytes (%d+)"))
    assert.is_true(mem < 8 * 1024 * 1024, "the fresh generation holds " .. mem .. " bytes")
    assert.are.equal('{"ok":true}', call(s.port, "nothing").body)
    assert.are.equal(0, s:stop())
  end)

  it("answers {\"ok\":true} for a handler that returns nothing, with no output schema", function()
    local s = server.start(app)
    local res = call(s.port, "nothing")
    assert.are.equal(200, res.status)
    assert.are.equal("application/json", res.headers["content-type"])
    assert.are.equal('{"ok":true}', res.body)
    assert.are.equal(0, s:stop())
  end)

  it("gives handlers the request id as ctx.requestId, the client's or a made-up one", function()
    local s = server.start(app)
    local res = call(s.port, "whoami", { ["X-Request-Id"] = "trace.42_a-b" })
    assert.are.equal('{"ok":true,"output":{"id":"trace.42_a-b"}}', res.body)
    assert.are.equal("trace.42_a-b", res.headers["x-request-id"])
    -- not 1-64 of A-Za-z0-9._-: replaced
    res = call(s.port, "whoami", { ["X-Request-Id"] = "has space" })
    local made = res.headers["x-request-id"]
    assert.truthy(made:match("^[%w._-]+$"))
    assert.are_not.equal("has space", made)
    assert.are.equal('{"ok":true,"output":{"id":"' .. made .. '"}}', res.body)
    assert.are.equal(0, s:stop())
  end)

  it("writes only JSON lines with --log json, the request id and the traceback as fields", function()
    local s = server.start(app, { args = { "--log", "json", "--cpu-limit", "200" } })
    call(s.port, "fails", { ["X-Request-Id"] = "failing-1" })
    call(s.port, "spin")
    assert.are.equal(503, assert(http.get(s.port, "/spin")).status)
    call(s.port, "missing")
    assert(http.raw(s.port, "GET / HTTP/1.1\r\n\r\n")) -- no Host: 400
    assert.is_true(wait_log(s, '"status":400'))
    assert.are.equal(0, s:stop())
    local failure
    for line in s:stderr():gmatch("[^\n]+") do
      local ok, obj = pcall(cjson.decode, line)
      assert.is_true(ok and type(obj) == "table", "not a JSON line: " .. line)
      assert.is_string(obj.time)
      assert.is_string(obj.level)
      assert.is_string(obj.msg)
      if obj.level == "error" and obj.msg:find("the same failure", 1, true) then
        failure = obj
      end
    end
    assert.is_table(failure)
    assert.are.equal("failing-1", failure.requestId)
    assert.is_nil(failure.msg:find("stack traceback", 1, true))
    assert.truthy(failure.traceback:find("app.lua:", 1, true))
  end)

  it("logs a repeating error once, then counts it", function()
    local s = server.start(app)
    for i = 1, 6 do
      call(s.port, "fails", { ["X-Request-Id"] = "r" .. i })
    end
    assert.is_true(wait_log(s, "POST /actions/fails 500 %d+B [%d.]+ms r6"))
    assert.are.equal(0, s:stop())
    local _, lines = s:stderr():gsub("the same failure", "")
    assert.are.equal(1, lines)
    -- the access log still has every request, with its id
    for i = 1, 6 do
      assert.truthy(s:stderr():find("POST /actions/fails 500 %d+B [%d.]+ms r" .. i .. "\n"))
    end
  end)
end)

describe("loading off the loop", function()
  after_each(server.kill_all)

  it("keeps serving while a reload runs 400 ms of top-level code, then switches", function()
    local dbfile = os.tmpname()
    os.remove(dbfile)
    -- the CPU budget is a request's: 300 ms of top-level Lua still loads under 100
    local s = server.start(server.fixture("slow_load"),
      { env = { SLOW_LOAD_DB = dbfile }, args = { "--no-watch", "--cpu-limit", "100" } })
    assert.are.equal("1 spawned", assert(http.get(s.port, "/loads")).body)
    local conn = assert(http.connect(s.port))
    s:signal("HUP")
    local worst, pings = 0, 0
    local deadline = http.now() + 5
    repeat
      local p0 = http.now()
      assert(conn:send(http.build("GET", "/ping")))
      local res = assert(conn:read_response())
      assert.are.equal("pong", res.body)
      worst = math.max(worst, http.now() - p0)
      pings = pings + 1
      http.sleep(0.005)
    until s:stderr():find("reloaded in") or http.now() > deadline
    conn:close()
    assert.truthy(s:stderr():find("reloaded in"), "no reload within 5 s")
    assert.is_true(pings >= 10, "only " .. pings .. " pings during the reload")
    -- a load on the loop would hold a ping for its whole 400 ms
    assert.is_true(worst < 0.2, "a ping waited " .. worst .. " s during the reload")
    -- the new generation's top-level migration ran; its db works on the host's loop now
    assert.are.equal("2 spawned", assert(http.get(s.port, "/loads")).body)
    assert.are.equal(0, s:stop())
    os.remove(dbfile)
    os.remove(dbfile .. "-wal")
    os.remove(dbfile .. "-shm")
  end)
end)

describe("signals while Lua runs", function()
  after_each(server.kill_all)

  it("stops at SIGTERM within a second even where the spin cannot yield and the budget is long", function()
    local s = server.start(app, { args = { "--cpu-limit", "30000" } })
    local spinning = start_call(s.port, "sortSpin") -- inside a table.sort comparator
    http.sleep(0.2)
    local t0 = http.now()
    s:signal("TERM")
    local res = assert(spinning:read_response())
    spinning:close()
    assert.are.equal(503, res.status)
    assert.are.equal('{"error":{"code":"ABORTED","message":"The server is stopping."},"ok":false}', res.body)
    assert.are.equal(0, s:wait_exit(5))
    local took = http.now() - t0
    assert.is_true(took < (server.sanitized and 3 or 1), "exit took " .. took .. " s")
  end)

  it("lets a preemptible handler run on after SIGTERM (it is an in-flight request)", function()
    local s = server.start(app)
    local busy = start_call(s.port, "busy") -- 30 ms of Lua in slices
    s:signal("TERM")
    local res = assert(busy:read_response())
    busy:close()
    assert.are.equal('{"ok":true,"output":{"n":1}}', res.body)
    assert.are.equal(0, s:wait_exit(5))
  end)
end)
