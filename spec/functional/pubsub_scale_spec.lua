-- Topics beyond one process (issue 28): with --workers 2 a publish made on one worker reaches the
-- view sessions and subscribers of the other; several instances on one PostgreSQL hear each
-- other through LISTEN/NOTIFY (--pubsub). Which process answered is told by the fixture (its pid in
-- every answer and every render), so each case is seen to cross, not assumed to.
local server = require "helpers.server"
local http = require "helpers.http"
local ws = require "helpers.websocket"
local cjson = require "cjson"
local files = require "helpers.files"

local APP = server.fixture("pubsub_scale")

-- A view session mounted on a fresh connection: { live, pid } (the pid of the worker that owns it,
-- as its first render says).
local function mount(port)
  local page = assert(http.get(port, "/"))
  assert.are.equal(200, page.status, page.body)
  local id = assert(page.body:match('data%-clank%-session="([^"]+)"'))
  local origin = "127.0.0.1:" .. port
  local live = assert(ws.connect(port, "/__clank/sessions/" .. id .. "/live",
    { Host = origin, Origin = "http://" .. origin }))
  local first = assert(live:next_json())
  local pid, loads = first.html:match("pid (%d+) loads (%d+)")
  assert.truthy(pid, first.html)
  return { live = live, pid = pid, loads = tonumber(loads), id = id }
end

-- The next push of a session that shows one more load than before, with seq 0 (no event of its own).
local function sees_reload(session, timeout)
  local msg, err = session.live:next_json(function(m)
    return m.t == "html" and m.html:find("loads " .. (session.loads + 1), 1, true) ~= nil
  end, timeout)
  assert.truthy(msg, "session of pid " .. session.pid .. " (" .. (session.name or "?")
    .. ") saw no re-load after " .. session.loads .. " loads: " .. tostring(err))
  assert.are.equal(0, msg.seq)
  session.loads = session.loads + 1
end

local function publish(port, n)
  -- a connection the kernel queued on a worker just killed is reset unanswered: sent again
  local res, err
  for _ = 1, 3 do
    res, err = http.request(port, "POST", "/publish?n=" .. n, {}, "")
    if res then break end
  end
  assert.truthy(res, err)
  assert.are.equal(200, res.status, res.body)
  return res.body
end

describe("--pubsub", function()
  it("refuses a malformed URL from the option, CLANK_PUBSUB_URL or app.pubsub: exit 1, no start", function()
    for _, case in ipairs({
      { args = { "--pubsub", "nonsense" } },
      { args = { "--workers", "2", "--pubsub", "nonsense" } },
      { env = { CLANK_PUBSUB_URL = "nonsense" } },
      { env = { PUBSUB_SCALE_APP_PUBSUB = "nonsense" } },
      -- the option wins over the environment, which wins over the app
      { args = { "--pubsub", "nonsense" }, env = { CLANK_PUBSUB_URL = "postgres://[bad" } },
    }) do
      local args = { "--port", "0" }
      for _, a in ipairs(case.args or {}) do args[#args + 1] = a end
      args[#args + 1] = APP
      local code, stdout, stderr = server.run(args, { env = case.env })
      assert.are.equal(1, code, stderr)
      assert.are.equal("", stdout)
      local said = 'clank-run: --pubsub: invalid PostgreSQL URL: missing "=" after "nonsense"'
      assert.truthy(stderr:find(said, 1, true), stderr)
    end
    local code, _, stderr = server.run({ "--port", "0", "--pubsub", "postgres://ada:s3cret-pw@[::1", APP })
    assert.are.equal(1, code)
    assert.falsy(stderr:find("s3cret-pw", 1, true), "the password is not shown: " .. stderr)
  end)
end)

describe("topics across --workers 2", function()
  local s = server.for_describe(APP, { args = { "--workers", "2" } })

  it("reach the view sessions and subscribers of both workers, whichever worker published", function()
    -- one session owned by each worker (fresh connections are spread by the kernel)
    local by_pid, pids = {}, {}
    for _ = 1, 40 do
      local session = mount(s.port)
      if by_pid[session.pid] then
        session.live:close()
      else
        by_pid[session.pid] = session
        pids[#pids + 1] = session.pid
      end
      if #pids == 2 then break end
    end
    assert.are.equal(2, #pids, "sessions on two workers")
    -- publishes until each worker has published at least once; every one reaches both sessions
    local published_by, n = {}, 0
    while (not published_by[pids[1]] or not published_by[pids[2]]) and n < 40 do
      n = n + 1
      local from = publish(s.port, n)
      published_by[from] = true
      for _, pid in ipairs(pids) do
        local session = by_pid[pid]
        sees_reload(session)
        -- an agent reading the session's surface (from whichever worker) sees the re-render
        local surface = assert(http.get(s.port, "/__clank/sessions/" .. session.id .. "/surface"))
        assert.are.equal(200, surface.status, surface.body)
        assert.truthy(surface.body:find("loads " .. session.loads, 1, true), surface.body)
      end
      -- the other worker's subscriber got the payload as it was published
      local seen = {}
      for _ = 1, 40 do
        local res = assert(http.get(s.port, "/last"))
        local pid, last = res.body:match("^(%d+) %d+ (.*)$")
        assert.are.same({ n = n, from = from }, cjson.decode(last))
        seen[pid] = true
        if seen[pids[1]] and seen[pids[2]] then break end
      end
      assert.truthy(seen[pids[1]] and seen[pids[2]], "read /last on both workers")
    end
    assert.truthy(published_by[pids[1]] and published_by[pids[2]], "both workers published")
    for _, session in pairs(by_pid) do session.live:close() end
  end)

  it("shows an agent reading a session's surface what was published while nobody watched it", function()
    local page = assert(http.get(s.port, "/"))
    local id = assert(page.body:match('data%-clank%-session="([^"]+)"'))
    local function surface()
      local res = assert(http.get(s.port, "/__clank/sessions/" .. id .. "/surface"))
      assert.are.equal(200, res.status, res.body)
      return tonumber(res.body:match("loads (%d+)"))
    end
    assert.are.equal(1, surface())
    publish(s.port, 1)
    publish(s.port, 2)
    http.sleep(0.2)
    assert.are.equal(2, surface()) -- re-loaded once, for both, when asked
  end)

  it("keeps delivering on the other worker while one is killed and restarted", function()
    local a = mount(s.port)
    local b
    for _ = 1, 40 do
      b = mount(s.port)
      if b.pid ~= a.pid then break end
      b.live:close()
    end
    assert.are_not.equal(a.pid, b.pid, "sessions on two workers")
    assert(os.execute("kill -9 " .. a.pid))
    -- until it is dead, the kernel may still queue a connection on its socket
    local function dead()
      local f = io.open("/proc/" .. a.pid .. "/stat", "rb")
      local stat = f and f:read("a") or ""
      if f then f:close() end
      return stat == "" or stat:match("^%d+ %b() (%a)") == "Z"
    end
    local deadline = http.now() + 5
    while not dead() and http.now() < deadline do http.sleep(0.01) end
    assert.truthy(dead(), "worker " .. a.pid .. " died")
    b.name = "b"
    -- every publish now lands on b's worker or on a's restarted successor: b sees each one
    for n = 1, 6 do
      local from = publish(s.port, n)
      assert.are_not.equal(a.pid, from)
      sees_reload(b)
    end
    -- a session on the restarted worker gets what b's worker publishes, and the other way round
    local c
    for _ = 1, 80 do
      c = mount(s.port)
      if c.pid ~= a.pid and c.pid ~= b.pid then break end
      c.live:close()
      http.sleep(0.05)
    end
    assert.truthy(c.pid ~= a.pid and c.pid ~= b.pid, "a session on the restarted worker")
    c.name = "c"
    local published_by = {}
    for n = 7, 40 do
      published_by[publish(s.port, n)] = true
      sees_reload(b)
      sees_reload(c)
      if published_by[b.pid] and published_by[c.pid] then break end
    end
    assert.truthy(published_by[b.pid] and published_by[c.pid], "both workers published")
    b.live:close()
    c.live:close()
  end)
end)

-- Two instances on a PostgreSQL cluster of this spec's own (so it can be stopped and started
-- again without disturbing the other specs of the run).
local PG_PENDING = not os.getenv("CLANK_TEST_POSTGRES_URL")
  and "CLANK_TEST_POSTGRES_URL is not set (./dev test starts PostgreSQL and sets it)"
local postgres_sh = server.source_dir() .. "/spec/helpers/postgres.sh"
-- psql and pg_ctl run without the ASan runtime the sanitizer build preloads
local PLAIN = "env -u LD_PRELOAD "
local quote = files.quote
local slow = server.sanitized and 4 or 1
local function pg(cmd, dir)
  local p = assert(io.popen(PLAIN .. "bash " .. postgres_sh .. " " .. cmd .. " " .. dir))
  local out = p:read("a")
  assert(p:close(), "postgres.sh " .. cmd .. " failed")
  return (out:gsub("%s+$", ""))
end

local function health(port)
  local res = assert(http.get(port, "/__clank/health"))
  return res.status, cjson.decode(res.body)
end

local function listeners(port, state)
  local body = assert(http.get(port, "/__clank/metrics")).body
  return tonumber(body:match('\nclank_pubsub_listeners{state="' .. state .. '"} (%d+)'))
end

local function dropped_total(port)
  local body = assert(http.get(port, "/__clank/metrics")).body
  return tonumber(body:match("\nclank_pubsub_dropped_total (%d+)"))
end

local function eventually(what, fn)
  assert.truthy(files.eventually(15, fn), "not within 15 s: " .. what)
end

-- What the subscribers of an instance's `workers` processes got: pid → { how many, the last
-- payload }, asked on fresh connections until each process answered.
local function lasts(port, workers)
  local by_pid, n = {}, 0
  for _ = 1, 60 do
    local pid, got, payload = assert(http.get(port, "/last")).body:match("^(%d+) (%d+) (.*)$")
    if not by_pid[pid] then n = n + 1 end
    by_pid[pid] = { tonumber(got), cjson.decode(payload) }
    if n == workers then return by_pid end
  end
  error("not every worker answered /last")
end

local function each_got(port, workers, expected)
  for pid, got in pairs(lasts(port, workers)) do
    assert.are.same(expected, got, "the subscriber of pid " .. pid)
  end
end

local function count(text, pattern)
  local n = 0
  for _ in text:gmatch(pattern) do n = n + 1 end
  return n
end

describe("topics across instances on one PostgreSQL (--pubsub; a with --workers 2)", function()
  if PG_PENDING then
    pending(PG_PENDING)
    return
  end
  local dir, url, a, b

  setup(function()
    local p = assert(io.popen("mktemp -d /tmp/clank-pg.XXXXXX"))
    dir = p:read("l")
    p:close()
    url = pg("start", dir)
    a = server.start(APP, { args = { "--no-watch", "--workers", "2", "--pubsub", url } })
    b = server.start(APP, { args = { "--no-watch" }, env = { CLANK_PUBSUB_URL = url } })
  end)

  teardown(function()
    server.kill_all()
    if dir then pg("stop", dir) end
  end)

  it("carry a publish on one instance to the sessions and subscribers of the other, once", function()
    eventually("both listeners up", function()
      return listeners(a.port, "up") == 2 and listeners(b.port, "up") == 1
    end)
    local on_a, on_b = mount(a.port), mount(b.port)
    local from = publish(a.port, 1)
    sees_reload(on_b)
    sees_reload(on_a) -- its own instance's session: in process
    -- each subscriber got it once: b's through PostgreSQL, those of a's two workers in process
    -- and through the master, neither of them again through PostgreSQL
    each_got(b.port, 1, { 1, { n = 1, from = from } })
    each_got(a.port, 2, { 1, { n = 1, from = from } })
    from = publish(b.port, 2)
    sees_reload(on_a)
    sees_reload(on_b)
    each_got(a.port, 2, { 2, { n = 2, from = from } })
    each_got(b.port, 1, { 2, { n = 2, from = from } })
    -- once: a's own publish does not come back to it through PostgreSQL
    local extra = on_a.live:next_json(function(m) return m.t == "html" end, 0.5)
    assert.is_nil(extra, "a second push for one publish")
    on_a.live:close()
    on_b.live:close()
  end)

  -- What PostgreSQL carried, heard by psql LISTENing on the app's channel (an independent
  -- client): each notification's payload is the instance id and a line per publish.
  it("gather the publishes of many loop turns into few notifications, all of them in order", function()
    eventually("b's listener up", function() return listeners(b.port, "up") == 1 end)
    local psql = assert(io.popen(PLAIN .. "psql " .. quote(url) .. " -X -q -c 'LISTEN \"clank.pubsub_scale\"'"
      .. " -c 'SELECT pg_sleep(" .. 2 * slow .. ")' 2>&1"))
    http.sleep(1) -- psql is listening
    local res = assert(http.request(b.port, "POST", "/burst?n=40", {}, ""))
    assert.are.equal(200, res.status, res.body)
    local heard = psql:read("a")
    psql:close()
    local ns = {}
    for n in heard:gmatch('burst {"n":(%d+)}') do ns[#ns + 1] = tonumber(n) end
    local all = {}
    for i = 1, 40 do all[i] = i end
    assert.are.same(all, ns, heard)
    -- one notification per turn would be 40; one every 2 ms at most, after the first that goes
    -- at once, is fewer while a turn (a query's round trip) takes less than 2 ms
    local notifications = count(heard, "Asynchronous notification")
    assert.is_true(notifications >= 1 and notifications <= 30, notifications .. " notifications: " .. heard)
  end)

  it("go on locally while PostgreSQL is down, say so once, and re-load every session when it is back", function()
    eventually("both listeners up", function()
      return listeners(a.port, "up") == 2 and listeners(b.port, "up") == 1
    end)
    local on_a, on_b = mount(a.port), mount(b.port)
    pg("down", dir)
    eventually("b's health degraded", function()
      local _, h = health(b.port)
      return h.status == "degraded"
    end)
    local status, h = health(b.port)
    assert.are.equal(200, status) -- it serves its own clients as well as ever
    assert.truthy(h.reason:find("PostgreSQL listener of topics is down", 1, true), h.reason)
    assert.are.equal(1, listeners(b.port, "down"))
    -- local delivery goes on: a's publish reaches a's own session, not b's; each is counted
    -- as not sent on
    eventually("a's listeners down", function() return listeners(a.port, "down") == 2 end)
    local dropped = dropped_total(a.port)
    for n = 3, 5 do
      publish(a.port, n)
      sees_reload(on_a)
    end
    assert.are.equal(dropped + 3, dropped_total(a.port))
    http.sleep(1) -- a few retries of the listener
    pg("up", dir)
    -- back: every subscribed session re-loads once, without a publish, at the listener's next
    -- retry (they double from 100 ms to 5 s: the outage lasted long enough to reach 5 s)
    local back_within = http.timeout + 5
    sees_reload(on_b, back_within)
    sees_reload(on_a, back_within)
    eventually("health ok again", function()
      local _, ha = health(a.port)
      local _, hb = health(b.port)
      return ha.status == "ok" and hb.status == "ok"
    end)
    assert.are.equal(1, listeners(b.port, "up"))
    -- a's health is one worker's: the publish may land on the other, which must listen again too
    -- (until it does, its publishes stay local)
    eventually("both of a's listeners up again", function() return listeners(a.port, "up") == 2 end)
    publish(a.port, 6)
    sees_reload(on_b)
    -- per worker, one line for the outage and one for the return, however many retries and
    -- publishes
    for s, workers in pairs({ [a] = 2, [b] = 1 }) do
      local err = s:stderr()
      assert.are.equal(workers, count(err, "the PostgreSQL listener is down"), err)
      assert.are.equal(workers, count(err, "the PostgreSQL listener is back"), err)
    end
    on_a.live:close()
    on_b.live:close()
  end)
end)
