-- --workers N (SPEC §13): a master checks the app and the port, forks N workers sharing the
-- port (SO_REUSEPORT), prints the one start-up line, forwards signals, restarts a worker that
-- dies, and /__clank/metrics sums every worker's counters.
--
-- The fixture's GET /pid answers "<pid of the process that answered> <VERSION>", so a spec
-- tells the workers apart (each request on a fresh connection: the kernel spreads connections,
-- not requests) and sees which version of the file each one runs.
local server = require "helpers.server"
local http = require "helpers.http"
local socket = require "socket"

local APP = server.fixture("workers")
local SLACK = server.sanitized and 3 or 1

local files = require "helpers.files"
local quote, read_file = files.quote, files.read

local function alive(pid)
  return read_file("/proc/" .. pid .. "/stat") ~= nil
end

-- The master's children, as the kernel lists them.
local function children(pid)
  local list = {}
  for child in (read_file("/proc/" .. pid .. "/task/" .. pid .. "/children") or ""):gmatch("%d+") do
    list[#list + 1] = child
  end
  return list
end

-- GET /pid on a fresh connection: pid, version.
local function whoami(port)
  local res, err = http.get(port, "/pid")
  if not res then
    return nil, err
  end
  assert(res.status == 200, "GET /pid answered " .. tostring(res.status) .. ": " .. tostring(res.body))
  return res.body:match("^(%d+) (%S+)$")
end

-- Asks until `want` distinct pids answered with a version for which accept(version) holds
-- (fresh connections each time); returns the set of pids, or fails after `seconds`.
local function distinct_pids(port, want, seconds, accept)
  local seen, count = {}, 0
  local deadline = socket.gettime() + seconds
  while socket.gettime() < deadline do
    local pid, version = whoami(port)
    if pid and (not accept or accept(version)) and not seen[pid] then
      seen[pid] = true
      count = count + 1
      if count >= want then
        return seen
      end
    end
  end
  error("only " .. count .. " distinct workers answered within " .. seconds .. " s")
end

local function wait_for(seconds, what, cond)
  local deadline = socket.gettime() + seconds
  while socket.gettime() < deadline do
    if cond() then
      return
    end
    socket.sleep(0.02)
  end
  error("timed out waiting for " .. what)
end

local function count_lines(text, pattern)
  local n = 0
  for _ in text:gmatch(pattern) do
    n = n + 1
  end
  return n
end

-- clank_requests_total{kind="route",status="200"} in a scrape (0 when absent).
local function route_200(port)
  local res = assert(http.get(port, "/__clank/metrics"))
  assert.are.equal(200, res.status)
  return tonumber(res.body:match('clank_requests_total{kind="route",status="200"} (%d+)')) or 0
end

describe("--workers 2", function()
  after_each(function()
    server.kill_all()
  end)

  it("prints one start-up line, serves from both workers, and SIGTERM ends them all with 0", function()
    local s = server.start(APP, { args = { "--workers", "2" } })
    assert.are.equal("clank-run: serving workers at http://127.0.0.1:" .. s.port .. "/", s.startup_line)
    local kids = children(s.pid)
    assert.are.equal(2, #kids)
    local pids = distinct_pids(s.port, 2, 5 * SLACK)
    for _, kid in ipairs(kids) do
      assert.truthy(pids[kid], "worker " .. kid .. " answered no request")
    end
    assert.are.equal(0, s:stop())
    assert.are.equal("clank-run: serving workers at http://127.0.0.1:" .. s.port .. "/\n", s:stdout())
    -- the announcements after the start-up line come once, not once per worker
    assert.are.equal(1, count_lines(s:stderr(), "manifest: http://"))
    -- SPEC §11: one warning that the workers' shared secret lasts this run only
    assert.are.equal(1, count_lines(s:stderr(), "CLANK_SECRET is not set"))
    for _, kid in ipairs(kids) do
      assert.is_false(alive(kid), "worker " .. kid .. " outlived the master")
    end
  end)

  it("names the worker in JSON log lines", function()
    local s = server.start(APP, { args = { "--workers", "2", "--log", "json" } })
    assert.are.equal(0, s:stop())
    local cjson = require "cjson"
    local stopping = {}
    for line in s:stderr():gmatch("[^\n]+") do
      local entry = cjson.decode(line)
      if entry.msg == "stopping: finishing requests in flight" then
        stopping[#stopping + 1] = entry.worker
      end
    end
    table.sort(stopping)
    assert.are.same({ 0, 1 }, stopping)
  end)

  it("sums every worker's counters in /__clank/metrics", function()
    local s = server.start(APP, { args = { "--workers", "2", "--quiet" } })
    local before = route_200(s.port)
    local pids = {}
    local K = 40
    for _ = 1, K do
      pids[assert(whoami(s.port))] = true
    end
    local n = 0
    for _ in pairs(pids) do
      n = n + 1
    end
    assert.are.equal(2, n, "40 connections all went to one worker")
    -- whichever worker takes the scrape, the total is the sum over both
    for _ = 1, 6 do
      assert.are.equal(before + K, route_200(s.port))
    end
    assert.are.equal(0, s:stop())
  end)

  it("restarts a worker killed with SIGKILL, logging it, and keeps answering", function()
    local s = server.start(APP, { args = { "--workers", "2" } })
    local kids = children(s.pid)
    assert.are.equal(2, #kids)
    for _ = 1, 10 do
      assert(whoami(s.port))
    end
    local counted = route_200(s.port)
    assert.is_true(counted >= 10)
    os.execute("kill -s KILL " .. kids[1])
    -- (connections the kernel queued on the dying worker's listener die with it)
    wait_for(2, "the worker to die", function()
      return not alive(kids[1])
    end)
    -- the survivor answers meanwhile
    for _ = 1, 10 do
      assert(whoami(s.port))
    end
    wait_for(5 * SLACK, "the restart", function()
      local now = children(s.pid)
      return #now == 2 and now[1] ~= kids[1] and now[2] ~= kids[1]
    end)
    wait_for(2, "the restart's log line", function()
      local line = "worker %d %(pid " .. kids[1] .. "%) was killed by signal 9; restarting it in %d+ ms"
      return s:stderr():find(line) ~= nil
    end)
    local now = children(s.pid)
    local pids = distinct_pids(s.port, 2, 5 * SLACK)
    for _, kid in ipairs(now) do
      assert.truthy(pids[kid], "worker " .. kid .. " answered no request")
    end
    -- the restarted worker counts on from its predecessor: the sum never goes down
    assert.is_true(route_200(s.port) >= counted + 10 + 2)
    assert.are.equal(0, s:stop())
  end)

  it("reloads every worker: on SIGHUP, and when the file changes", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. quote(dir)))
    local path = dir .. "/app.lua"
    local text = assert(read_file(APP))
    local f = assert(io.open(path, "wb"))
    f:write(text)
    f:close()
    local s = server.start(path, { args = { "--workers", "2" } })
    assert(s:signal("HUP"))
    wait_for(5 * SLACK, "both workers to reload on SIGHUP", function()
      return count_lines(s:stderr(), "reloaded in") == 2
    end)
    f = assert(io.open(path .. ".saving", "wb"))
    f:write((text:gsub('local VERSION = "v1"', 'local VERSION = "v2"')))
    f:close()
    assert(os.rename(path .. ".saving", path))
    distinct_pids(s.port, 2, 5 * SLACK, function(v)
      return v == "v2"
    end)
    -- and none still answers v1
    for _ = 1, 20 do
      local _, version = assert(whoami(s.port))
      assert.are.equal("v2", version)
    end
    assert.are.equal(0, s:stop())
    os.execute("rm -rf " .. quote(dir))
  end)

  it("takes its workers with it when the master is killed outright", function()
    local s = server.start(APP, { args = { "--workers", "2" } })
    local kids = children(s.pid)
    assert.are.equal(2, #kids)
    s:kill()
    wait_for(5 * SLACK, "the workers to stop", function()
      return not alive(kids[1]) and not alive(kids[2])
    end)
  end)

  it("exits 1 at once on a second signal, taking its workers with it", function()
    local s = server.start(APP, { args = { "--workers", "2" } })
    local kids = children(s.pid)
    -- a request still running keeps the first stop waiting (up to 10 s)
    local conn = assert(http.connect(s.port))
    assert(conn:send("GET /sleep?ms=8000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
    socket.sleep(0.2)
    assert(s:signal("INT"))
    socket.sleep(0.2)
    assert.is_nil(s:poll(), "the first signal did not wait for the request in flight")
    local t0 = socket.gettime()
    assert(s:signal("INT"))
    assert.are.equal(1, s:wait_exit(5 * SLACK))
    assert.is_true(socket.gettime() - t0 < 2 * SLACK)
    conn:close()
    wait_for(2, "the workers to be gone", function()
      return not alive(kids[1]) and not alive(kids[2])
    end)
  end)
end)

-- Stage 2 of SPEC §13: each session lives on worker hash(ID) mod N; a request for it that lands
-- on another worker is handed over (socket and bytes) through the master. Session state is per
-- process, so "state kept across many fresh connections" shows every one reached the owner.
describe("--workers 2: sessions", function()
  local cjson = require "cjson"
  local ws = require "helpers.websocket"

  after_each(function()
    server.kill_all()
  end)

  local function origin(port)
    return { host = "127.0.0.1:" .. port, origin = "http://127.0.0.1:" .. port,
      ["content-type"] = "application/json" }
  end

  local function activate(port, id, target)
    local res = assert(http.request(port, "POST", "/__clank/sessions/" .. id .. "/surface/activate",
      origin(port), cjson.encode({ id = target })))
    assert.are.equal(200, res.status, res.body)
    return res.body
  end

  local function count_of(port, id)
    local res = assert(http.request(port, "GET", "/__clank/sessions/" .. id .. "/surface", origin(port)))
    assert.are.equal(200, res.status, res.body)
    return tonumber(res.body:match('"label":"Count: (%d+)"'))
  end

  it("keeps a view session's state over fresh connections, wherever they land", function()
    local s = server.start(server.fixture("live"), { args = { "--workers", "2", "--quiet" } })
    -- made by POST on whichever worker took it (an ID that worker owns) ...
    local res = assert(http.request(s.port, "POST", "/__clank/views/counter/sessions", origin(s.port),
      cjson.encode({ start = 5 })))
    assert.are.equal(201, res.status, res.body)
    local created = cjson.decode(res.body).id
    -- ... and a page's token, which any worker signs and the owner mounts on first use
    local page = assert(http.get(s.port, "/"))
    local token = assert(page.body:match('data%-clank%-session="([^"]+)"'))
    for _, case in ipairs({ { created, 5 }, { token, 0 } }) do
      local id, start = case[1], case[2]
      for i = 1, 16 do
        assert.truthy(activate(s.port, id, "inc"):find('"label":"Count: ' .. (start + i) .. '"', 1, true))
      end
      assert.are.equal(start + 16, count_of(s.port, id))
    end
    assert.are.equal(0, s:stop())
  end)

  it("hands a connection over after the answers pipelined before it", function()
    local s = server.start(APP, { args = { "--workers", "2", "--quiet" } })
    local res = assert(http.request(s.port, "POST", "/__clank/views/counter/sessions", origin(s.port), "{}"))
    local id = cjson.decode(res.body).id
    activate(s.port, id, "inc")
    local host = "Host: 127.0.0.1:" .. s.port .. "\r\nOrigin: http://127.0.0.1:" .. s.port .. "\r\n"
    for _ = 1, 8 do
      local conn = assert(http.connect(s.port))
      assert(conn:send("GET /sleep?ms=20 HTTP/1.1\r\n" .. host .. "\r\n"
        .. "GET /__clank/sessions/" .. id .. "/surface HTTP/1.1\r\n" .. host .. "\r\n"
        .. "GET /pid HTTP/1.1\r\n" .. host .. "\r\n"))
      local first = assert(conn:read_response())
      assert.are.equal("slept", first.body)
      local second = assert(conn:read_response())
      assert.are.equal(200, second.status, second.body)
      assert.truthy(second.body:find('"label":"Count: 1"', 1, true), second.body)
      assert.are.equal(200, assert(conn:read_response()).status)
      conn:close()
    end
    assert.are.equal(0, s:stop())
  end)

  it("takes the live channel to the worker that owns the session", function()
    local s = server.start(server.fixture("live"), { args = { "--workers", "2", "--quiet" } })
    local page = assert(http.get(s.port, "/"))
    local token = assert(page.body:match('data%-clank%-session="([^"]+)"'))
    activate(s.port, token, "inc")
    activate(s.port, token, "inc")
    local headers = { Host = "127.0.0.1:" .. s.port, Origin = "http://127.0.0.1:" .. s.port }
    for _ = 1, 6 do -- fresh connections: some land on the owner, the others are handed to it
      local live = assert(ws.connect(s.port, "/__clank/sessions/" .. token .. "/live", headers))
      local first = assert(live:next_json())
      assert.are.equal("html", first.t)
      assert.truthy(first.html:find("Count: 2", 1, true), first.html)
      live:close()
    end
    -- events over the channel and surface calls over HTTP see one session
    local live = assert(ws.connect(s.port, "/__clank/sessions/" .. token .. "/live", headers))
    local first = assert(live:next_json())
    live:send_json({ t = "event", seq = 1, v = first.v, key = assert(first.html:match(
      'data%-clank%-key="([^"]+)"[^>]*>Add one')), type = "click" })
    local msg
    repeat
      msg = assert(live:next_json())
    until msg.seq == 1
    assert.truthy(msg.html:find("Count: 3", 1, true), msg.html)
    live:close()
    assert.are.equal(3, count_of(s.port, token))
    assert.are.equal(0, s:stop())
  end)

  it("answers 503 with retry-after: 1 for the sessions of a worker that is restarting", function()
    local marker = os.tmpname()
    os.remove(marker)
    local s = server.start(APP, { args = { "--workers", "2", "--quiet" },
                                  env = { WORKERS_SLOW_LOAD = marker } })
    local res = assert(http.request(s.port, "POST", "/__clank/views/counter/sessions", origin(s.port), "{}",
      { keep = true }))
    assert.are.equal(201, res.status, res.body)
    local id = cjson.decode(res.body).id
    -- the same connection asks which worker made it: that one owns the ID
    assert(res.conn:send("GET /pid HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
    local owner = assert(res.conn:read_response()).body:match("^(%d+)")
    res.conn:close()
    activate(s.port, id, "inc")
    assert.are.equal(1, count_of(s.port, id))
    local f = assert(io.open(marker, "wb")) -- its restart now loads for 1.5 s
    f:close()
    os.execute("kill -s KILL " .. owner)
    wait_for(2, "the owner to die", function()
      return not alive(owner)
    end)
    socket.sleep(0.05)
    for _ = 1, 4 do -- only the other worker listens now: none of these is served locally
      local down = assert(http.request(s.port, "GET", "/__clank/sessions/" .. id .. "/surface", origin(s.port)))
      assert.are.equal(503, down.status, down.body)
      assert.are.equal("1", down.headers["retry-after"])
    end
    -- and its live channel opens only to close with 1013 (try again later), never a local mount
    local live = assert(ws.connect(s.port, "/__clank/sessions/" .. id .. "/live",
      { Host = "127.0.0.1:" .. s.port, Origin = "http://127.0.0.1:" .. s.port }))
    assert.are.equal(1013, live:close_code(5))
    live:close()
    os.remove(marker)
    wait_for(5 * SLACK, "the restarted owner", function()
      local ok, n = pcall(count_of, s.port, id)
      return ok and n == 0 -- mounted afresh from its token by the new process
    end)
    assert.are.equal(0, s:stop())
  end)

  it("keeps an MCP session's log level on every connection", function()
    local s = server.start(server.fixture("mcp_notify"), { args = { "--workers", "2", "--quiet" } })
    local function post(message, sid)
      local h = { ["content-type"] = "application/json", accept = "application/json, text/event-stream" }
      if sid then
        h["mcp-session-id"] = sid
        h["mcp-protocol-version"] = "2025-11-25"
      end
      local res = assert(http.request(s.port, "POST", "/__clank/mcp", h, cjson.encode(message)))
      assert.are.equal(200, res.status, res.body)
      return res
    end
    local sid = post({ jsonrpc = "2.0", id = 1, method = "initialize", params = {
      protocolVersion = "2025-11-25", capabilities = {}, clientInfo = { name = "spec", version = "0" } } })
      .headers["mcp-session-id"]
    assert.truthy(sid)
    local function logged()
      local body = post({ jsonrpc = "2.0", id = 2, method = "tools/call",
        params = { name = "notify_logs", arguments = {} } }, sid).body
      return count_lines(body, "notifications/message")
    end
    assert.are.equal(3, logged()) -- info, warning, error: the default level is info
    post({ jsonrpc = "2.0", id = 3, method = "logging/setLevel", params = { level = "error" } }, sid)
    for _ = 1, 12 do
      assert.are.equal(1, logged())
    end
    assert.are.equal(0, s:stop())
  end)
end)

describe("--workers: refusals", function()
  it("exits 1 naming file:line when the app does not load, before any worker starts", function()
    local code, stdout, stderr = server.run({ "--workers", "2", "--port", "0", server.fixture("broken") })
    assert.are.equal(1, code)
    assert.are.equal("", stdout)
    assert.truthy(stderr:find("broken/app.lua:3:", 1, true), "stderr: " .. stderr)
    -- loaded once, by the master's check: a worker would have printed it again
    assert.are.equal(1, count_lines(stderr, "broken/app.lua:3:"))
  end)

  it("exits 1 with the hint when the port is in use", function()
    local holder = assert(socket.bind("127.0.0.1", 0))
    local _, port = holder:getsockname()
    local code, stdout, stderr = server.run({ "--workers", "2", "--port", tostring(port), APP })
    holder:close()
    assert.are.equal(1, code)
    assert.are.equal("", stdout)
    assert.truthy(stderr:find("cannot listen on 127.0.0.1:" .. port .. ": address already in use", 1, true),
      "stderr: " .. stderr)
    assert.truthy(stderr:find("--port 0", 1, true), "stderr: " .. stderr)
  end)

  for _, bad in ipairs({ "0", "65", "x", "-1", "2x" }) do
    it("exits 2 on --workers " .. bad, function()
      local code, stdout, stderr = server.run({ "--workers", bad, APP })
      assert.are.equal(2, code)
      assert.are.equal("", stdout)
      assert.truthy(stderr:find("--workers needs a number from 1 to 64 or auto, got " .. bad, 1, true),
        "stderr: " .. stderr)
    end)
  end

  it("serves with --workers auto: one worker per core", function()
    local p = assert(io.popen("nproc"))
    local cores = math.min(64, tonumber(p:read("l")))
    p:close()
    local s = server.start(APP, { args = { "--workers", "auto" } })
    assert.are.equal(cores, #children(s.pid))
    assert(whoami(s.port))
    assert.are.equal(0, s:stop())
  end)
end)
