-- Sessions that hibernate (issue 29, README "Live views"): a session with no event and no push
-- for live_hibernate_ms lets its tree go, and whatever reaches it next (an event, a change of a
-- signal its render read, a publish, the surface) renders it again: an event's answer is the
-- whole html (the base of diffs went too), the next ones diffs again, pushes keep coming, and
-- the surface answers. Against the
-- real clank-run serving spec/fixtures/apps/hibernate, over its live channel with ?diffs=1.
local server = require "helpers.server"
local http = require "helpers.http"
local ws = require "helpers.websocket"
local socket = require "socket"

local function wait_until(what, fn, seconds)
  local deadline = socket.gettime() + (seconds or 10)
  while true do
    local v = fn()
    if v then return v end
    assert(socket.gettime() < deadline, "timed out waiting for " .. what)
    socket.sleep(0.05)
  end
end

local function counter(s, name) return http.metric(s.port, name) end

-- The splices of a diff applied to the html held (the fixture's text is ASCII: UTF-16 units
-- are bytes).
local function apply(html, splices)
  local out, from = {}, 0
  for _, sp in ipairs(splices) do
    local at, del, ins = sp[1], sp[2], sp[3]
    assert(at >= from and at + del <= #html, "a splice out of order or range")
    out[#out + 1] = html:sub(from + 1, at)
    out[#out + 1] = ins
    from = at + del
  end
  out[#out + 1] = html:sub(from + 1)
  return table.concat(out)
end

-- A live session of the list: its first html, then what each frame makes of it.
local function open(s)
  local page = assert(http.get(s.port, "/"))
  assert.are.equal(200, page.status)
  local id = assert(page.body:match('data%-clank%-session="([^"]+)"'))
  local origin = "127.0.0.1:" .. s.port
  local live = assert(ws.connect(s.port, "/__clank/sessions/" .. id .. "/live?diffs=1",
    { Host = origin, Origin = "http://" .. origin }))
  local first = assert(live:next_json())
  assert.are.equal("html", first.t)
  return { ws = live, id = id, html = first.html, v = first.v }
end

-- The next frame answering seq (0: a push), applied to what the session holds.
local function next_frame(session, seq)
  local m = assert(session.ws:next_json(function(m) return m.seq == seq end, 10))
  if m.t == "diff" then
    assert.are.equal(session.v, m.base, "a diff from the version the client holds")
    session.html = apply(session.html, m.splices)
  else
    assert.are.equal("html", m.t)
    session.html = m.html
  end
  session.v = m.v
  return m
end

local function hibernated(s, n)
  wait_until(n .. " hibernations", function() return counter(s, "clank_live_hibernations_total") >= n end)
end

describe("live sessions that hibernate", function()
  local s = server.for_describe(server.fixture("hibernate"),
    { env = { CLANK_TEST_LIMITS = "live_hibernate_ms=100" } })

  it("answer an event after hibernating with the whole html, and the next with a diff", function()
    local session = open(s)
    assert.matches("row 2: open", session.html)
    hibernated(s, 1)
    local before = counter(s, "clank_live_wakes_total")
    local key = assert(session.html:match('data%-clank%-key="([^"]+)"[^>]*>toggle</button></li><li[^>]*>row 3'))
    session.ws:send_json({ t = "event", seq = 1, v = session.v, key = key, type = "click" })
    local m = next_frame(session, 1)
    assert.are.equal("html", m.t)
    assert.matches("row 2: done", session.html)
    assert.matches("row 1: open", session.html)
    assert.is_true(counter(s, "clank_live_wakes_total") > before)
    session.ws:send_json({ t = "event", seq = 2, v = session.v, key = key, type = "click" })
    m = next_frame(session, 2)
    assert.are.equal("diff", m.t)
    assert.matches("row 2: open", session.html)
    session.ws:close()
  end)

  it("push a change of a signal the render read, and a publish, after hibernating", function()
    local session = open(s)
    local n = counter(s, "clank_live_hibernations_total")
    hibernated(s, n + 1)
    assert.are.equal(200, assert(http.request(s.port, "POST", "/banner?text=hello", {}, "")).status)
    next_frame(session, 0)
    assert.matches("banner: hello", session.html)
    hibernated(s, n + 2)
    assert.are.equal(200, assert(http.request(s.port, "POST", "/title?text=second", {}, "")).status)
    next_frame(session, 0)
    assert.matches(">second</h1>", session.html)
    session.ws:close()
  end)

  it("answer the surface after hibernating", function()
    local session = open(s)
    local n = counter(s, "clank_live_hibernations_total")
    hibernated(s, n + 1)
    local res = assert(http.get(s.port, "/__clank/sessions/" .. session.id .. "/surface"))
    assert.are.equal(200, res.status, res.body)
    assert.matches('"toggle%-4"', res.body)
    session.ws:close()
  end)
end)

-- Lua collects as it allocates: the trees quiet sessions let go would stay in a quiet server's
-- heap, counted by the memory cap, until something allocated. A cycle runs in slices once
-- sessions hibernated (runtime/host/idle_gc.c), with no request asking for it.
describe("a quiet server whose sessions hibernated", function()
  local s = server.for_describe(server.fixture("hibernate_memory"),
    { env = { CLANK_TEST_LIMITS = "live_hibernate_ms=300" } })

  it("collects the trees they let go, without a request to make it", function()
    local before = counter(s, "clank_lua_memory_bytes")
    local sessions = {}
    for i = 1, 10 do sessions[i] = open(s) end
    local open_bytes = counter(s, "clank_lua_memory_bytes")
    assert.is_true(open_bytes - before > 8 * 1024 * 1024,
      ("ten sessions of 400 rows hold %d bytes"):format(open_bytes - before))
    hibernated(s, 10)
    -- polled every 2 s: each poll allocates a little, far from what a cycle over the heap needs
    local low = before + (open_bytes - before) * 0.3
    local deadline, now = socket.gettime() + 30
    repeat
      socket.sleep(2)
      now = counter(s, "clank_lua_memory_bytes")
    until now < low or socket.gettime() > deadline
    assert.is_true(now < low, ("the heap holds %d bytes, %d with the sessions open, %d before")
      :format(now, open_bytes, before))
    assert.is_true(counter(s, "clank_lua_idle_collections_total") >= 1)
    -- and the sessions still answer
    local key = assert(sessions[1].html:match('data%-clank%-key="([^"]+)"[^>]*>toggle</button>'))
    sessions[1].ws:send_json({ t = "event", seq = 1, v = sessions[1].v, key = key, type = "click" })
    assert.are.equal("html", next_frame(sessions[1], 1).t)
    for _, session in ipairs(sessions) do session.ws:close() end
  end)
end)
