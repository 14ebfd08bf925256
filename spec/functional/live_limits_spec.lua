-- The live channel's input and the memory cap under attack (SPEC §11, §13): a session's queue is
-- bounded (its socket is no longer read while full, and nothing is lost), an event's value is
-- limited before any handler runs, a handler stopped over its budget does not stall its session,
-- new live sessions are refused with 1013 past 80 % of the cap, every 503 on an agent path keeps
-- its JSON envelope, and health says degraded until the app is loaded afresh. After each attack
-- the page, an action and MCP answer again, and the Lua memory is back under the cap.
local server = require "helpers.server"
local http = require "helpers.http"
local ws = require "helpers.websocket"
local cjson = require "cjson"
local socket = require "socket"

local MiB = 1024 * 1024
-- The view's elements, by their positional keys (SPEC §11): the top div's children.
local SLOW, COUNT, SHORT, SPIN, HOG = "0.0", "0.1", "0.2", "0.3", "0.4"

local function wait_until(what, fn, seconds)
  local deadline = socket.gettime() + (seconds or 30)
  while true do
    local v = fn()
    if v then return v end
    assert(socket.gettime() < deadline, "timed out waiting for " .. what)
    socket.sleep(0.02)
  end
end

local function open_live(s)
  local page = assert(http.get(s.port, "/"))
  assert.are.equal(200, page.status)
  local id = assert(page.body:match('data%-clank%-session="([^"]+)"'))
  local origin = "127.0.0.1:" .. s.port
  local live = assert(ws.connect(s.port, "/__clank/sessions/" .. id .. "/live",
    { Host = origin, Origin = "http://" .. origin }))
  return live, id
end

-- A masked client frame whose mask is zero (any key is valid), so a large one is built fast.
local function text_frame(text)
  local n = #text
  local head
  if n < 126 then
    head = string.char(0x81, 0x80 | n)
  elseif n < 65536 then
    head = string.char(0x81, 0x80 | 126) .. string.pack(">I2", n)
  else
    head = string.char(0x81, 0x80 | 127) .. string.pack(">I8", n)
  end
  return head .. "\0\0\0\0" .. text
end

local function event(seq, v, key, type_, extra)
  local m = { t = "event", seq = seq, v = v, key = key, type = type_ }
  for k, x in pairs(extra or {}) do m[k] = x end
  return cjson.encode(m)
end

local function handled(s) return tonumber(assert(http.get(s.port, "/handled")).body) end

local function lua_memory(s) return http.metric(s.port, "clank_lua_memory_bytes") end

local function post_json(s, path, body, headers)
  local h = { ["content-type"] = "application/json" }
  for k, v in pairs(headers or {}) do h[k] = v end
  return assert(http.request(s.port, "POST", path, h, body))
end

local INITIALIZE = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
  .. '"2025-11-25","capabilities":{},"clientInfo":{"name":"spec","version":"0"}}}'

-- The page, an action and MCP all answer 200 within a second, and health is ok.
local function serves(s, cap)
  local deadline = socket.gettime() + 1
  local page = assert(http.get(s.port, "/"))
  assert.are.equal(200, page.status, page.body)
  local action = post_json(s, "/actions/ping", "{}")
  assert.are.equal(200, action.status, action.body)
  assert.are.equal('{"ok":true,"output":{"pong":true}}', action.body)
  local mcp = post_json(s, "/__clank/mcp", INITIALIZE, { accept = "application/json, text/event-stream" })
  assert.are.equal(200, mcp.status, mcp.body)
  assert.is_true(socket.gettime() <= deadline + (server.sanitized and 2 or 0))
  local health = assert(http.get(s.port, "/__clank/health"))
  assert.are.equal(200, health.status, health.body)
  assert.are.equal("ok", cjson.decode(health.body).status)
  if cap then -- garbage the attack left is collected by the runtime's memory check (every 2 s)
    wait_until("Lua memory under the cap", function() return lua_memory(s) < cap end, 5)
  end
end

describe("the live channel under a flood", function()
  after_each(server.kill_all)

  it("holds a flooding connection back and handles every one of its events", function()
    -- 600 events of 60 KB (36 MB) on one connection, against a 16 MiB cap: queued without
    -- bound they would fill the cap and its reserve before the slow handler got through them
    local s = server.start(server.fixture("live_limits"), { args = { "--memory-limit", "16" } })
    local live = open_live(s)
    local first = assert(live:next_json())
    local frame = text_frame(event(1, first.v, SLOW, "click", { value = ("v"):rep(60000) }))
    local burst = frame:rep(50)
    for _ = 1, 12 do assert(live.conn:send(burst, 120)) end
    wait_until("600 events handled", function() return handled(s) == 600 end, 120)
    live:close()
    serves(s, 16 * MiB)
    assert.are.equal(0, s:stop())
  end)

  it("drops an event whose value is over 64 KiB, or over its element's maxlength, before its handler", function()
    local s = server.start(server.fixture("live_limits"))
    local live = open_live(s)
    local v = assert(live:next_json()).v
    local function answers(seq)
      local err = assert(live:next_json())
      assert.are.same({ t = "error", message = "The input is too large." }, err)
      local html = assert(live:next_json())
      assert.are.same({ "html", seq }, { html.t, html.seq })
    end
    live:send_text(event(1, v, COUNT, "click", { value = ("a"):rep(65537) }))
    answers(1)
    live:send_text(event(2, v, COUNT, "click", { values = { a = ("b"):rep(40000), b = ("c"):rep(30000) } }))
    answers(2)
    live:send_text(event(3, v, SHORT, "input", { value = "123456789" }))
    answers(3)
    assert.are.equal(0, handled(s))
    -- at the limits: 65,536 bytes, and 8 characters of 2 bytes each for maxlength 8
    live:send_text(event(4, v, COUNT, "click", { value = ("a"):rep(65536) }))
    assert.are.equal(4, assert(live:next_json()).seq)
    live:send_text(event(5, v, SHORT, "input", { value = ("é"):rep(8) }))
    assert.are.equal(5, assert(live:next_json()).seq)
    assert.are.equal(2, handled(s))
    live:close()
    assert.are.equal(0, s:stop())
  end)

  it("goes on with the next event after a handler stopped over its CPU budget", function()
    local s = server.start(server.fixture("live_limits"), { args = { "--cpu-limit", "100" } })
    local live = open_live(s)
    local v = assert(live:next_json()).v
    live:send_text(event(1, v, SPIN, "click"))
    local err = assert(live:next_json(function(m) return m.t == "error" end, 10))
    assert.are.equal("Something went wrong. Please try again.", err.message)
    live:send_text(event(2, v, COUNT, "click"))
    local html = assert(live:next_json(function(m) return m.t == "html" and m.seq == 2 end, 10))
    assert.are.equal(v, html.v)
    assert.are.equal(1, handled(s))
    live:close()
    serves(s)
    assert.are.equal(0, s:stop())
  end)

  it("goes on with the next event after a handler stopped over its memory", function()
    local s = server.start(server.fixture("live_limits"), { args = { "--memory-limit", "32" } })
    local live = open_live(s)
    local v = assert(live:next_json()).v
    live:send_text(event(1, v, HOG, "click"))
    local err = assert(live:next_json(function(m) return m.t == "error" end, 20))
    assert.are.equal("Something went wrong. Please try again.", err.message)
    live:send_text(event(2, v, COUNT, "click"))
    assert(live:next_json(function(m) return m.t == "html" and m.seq == 2 end, 10))
    assert.are.equal(1, handled(s))
    live:close()
    wait_until("health ok", function()
      local h = http.get(s.port, "/__clank/health")
      return h and h.status == 200
    end, 10)
    serves(s, 32 * MiB)
    assert.are.equal(0, s:stop())
  end)
end)

describe("live sessions and the memory cap", function()
  after_each(server.kill_all)

  it("refuses new live sessions with 1013 past 80 % of the cap while pages still render", function()
    -- 4 × 13 MiB held by the app: over 80 % (51.2 MiB) of a 64 MiB cap, under 90 %
    local s = server.start(server.fixture("live_limits"), { args = { "--memory-limit", "64" } })
    local early = open_live(s)
    assert.are.equal("html", assert(early:next_json()).t)
    for _ = 1, 4 do assert.are.equal(200, assert(http.get(s.port, "/hold?mib=13")).status) end
    local live = open_live(s) -- the page renders
    assert.are.equal(1013, live:close_code(10))
    local created = post_json(s, "/__clank/views/flood/sessions", "{}")
    assert.are.equal(503, created.status)
    assert.are.equal('{"error":{"code":"RESOURCE_LIMIT","message":"The server is at its memory limit: '
      .. 'try again later."},"ok":false}', created.body)
    assert.are.equal("1", created.headers["retry-after"])
    -- a session mounted before goes on
    early:send_text(event(1, 1, COUNT, "click"))
    assert.are.equal(1, assert(early:next_json()).seq)
    early:close()
    assert.are.equal(200, assert(http.get(s.port, "/release")).status)
    local again = open_live(s)
    assert.are.equal("html", assert(again:next_json()).t)
    again:close()
    serves(s, 64 * MiB)
    assert.are.equal(0, s:stop())
  end)

  it("answers a request stopped over its budget in its path's own format", function()
    -- the app's context function spins for requests with x-spin: each is stopped at 100 ms
    local s = server.start(server.fixture("live_limits"), { args = { "--cpu-limit", "100" } })
    local spin = { ["x-spin"] = "1" }
    local route = assert(http.get(s.port, "/handled", spin))
    assert.are.equal(503, route.status)
    assert.are.equal("text/plain; charset=utf-8", route.headers["content-type"])
    assert.are.equal("The request used too much CPU.", route.body)
    local action = post_json(s, "/actions/ping", "{}", spin)
    assert.are.equal(503, action.status)
    assert.are.equal("application/json", action.headers["content-type"])
    assert.are.equal('{"error":{"code":"RESOURCE_LIMIT","message":"The request used too much CPU."},'
      .. '"ok":false}', action.body)
    local page = assert(http.get(s.port, "/"))
    local id = assert(page.body:match('data%-clank%-session="([^"]+)"'))
    -- a session's mount and a surface call's handler run in tasks of their own: stopped there,
    -- the answer is a 503 too, and the session can be mounted again
    local surface = assert(http.get(s.port, "/__clank/sessions/" .. id .. "/surface", spin))
    assert.are.equal(503, surface.status)
    assert.are.equal("application/json", surface.headers["content-type"])
    assert.are.equal('{"error":{"code":"RESOURCE_LIMIT","message":"The request used too much CPU or '
      .. 'memory."},"ok":false}', surface.body)
    local activated = post_json(s, "/__clank/sessions/" .. id .. "/surface/activate", '{"id":"spin"}')
    assert.are.equal(503, activated.status)
    assert.are.equal('{"error":{"code":"RESOURCE_LIMIT","message":"The request used too much CPU or '
      .. 'memory."},"ok":false}', activated.body)
    local init = post_json(s, "/__clank/mcp", INITIALIZE, { accept = "application/json, text/event-stream" })
    assert.are.equal(200, init.status, init.body)
    local call = post_json(s, "/__clank/mcp",
      '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ping","arguments":{}}}',
      { accept = "application/json, text/event-stream", ["x-spin"] = "1",
        ["mcp-session-id"] = init.headers["mcp-session-id"], ["mcp-protocol-version"] = "2025-11-25" })
    assert.are.equal(503, call.status, call.body)
    assert.are.equal('{"error":{"code":-32603,"message":"The request used too much CPU."},'
      .. '"id":null,"jsonrpc":"2.0"}', call.body)
    serves(s)
    assert.are.equal(0, s:stop())
  end)

  it("says degraded while the memory stays over 90 % of the cap, and ok once loaded afresh", function()
    -- a fresh load takes 1.5 s, so the degraded state lasts at least that long
    local s = server.start(server.fixture("live_limits"), { args = { "--memory-limit", "16" },
      env = { LIVE_LIMITS_LOAD_MS = "1500" } })
    local degraded = wait_until("health degraded", function()
      local res = assert(http.get(s.port, "/__clank/health"))
      if res.status == 503 then return cjson.decode(res.body) end
      assert.are.equal(503, assert(http.get(s.port, "/fill")).status) -- each holds up to its share
    end, 60)
    assert.are.equal("degraded", degraded.status)
    assert.are.equal("The app's Lua memory stays over 90 % of its 16 MiB cap: requests are refused "
      .. "until it is loaded afresh.", degraded.reason)
    wait_until("health ok on a fresh generation", function()
      local res = assert(http.get(s.port, "/__clank/health"))
      local body = res.status == 200 and cjson.decode(res.body)
      return body and body.status == "ok" and body.generation >= 2
    end, 30)
    serves(s, 16 * MiB)
    assert.are.equal(0, s:stop())
  end)
end)
