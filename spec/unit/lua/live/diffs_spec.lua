-- clank.live diffs on the wire (README, Live views): a connection opened with ?diffs=1 gets its
-- first html in full, then {"t":"diff"} frames; {"t":"resync"} and stale events get the html in
-- full; a resync of any other shape is refused like any malformed message.
local clank = require "clank"
local live_mod = require "clank.live"
local token = require "clank.live.token"
local json = clank.json
local h = clank.h
local signal = clank.signal

local harness = require "helpers.live_socket"
local fake_socket, settle, apply = harness.fake_socket, harness.settle, harness.apply

local DIFFS = { method = "GET", url = "/?diffs=1", path = "/", query = { diffs = "1" }, headers = {} }
local PLAIN = { method = "GET", url = "/", path = "/", query = {}, headers = {} }

local function event(seq, v, key, type_)
  return json.encode { t = "event", seq = seq, v = v, key = key, type = type_ }
end

-- 100 rows, each with a Rename button; a counter above them.
local List = clank.defineView {
  name = "list",
  load = function()
    local titles = {}
    for i = 1, 100 do titles[i] = "Task number " .. i end
    return { state = signal.signal { titles = titles, n = 0 } }
  end,
  render = function(_, d)
    local rows, state = {}, d.state.value
    for i, title in ipairs(state.titles) do
      rows[i] = h.li({ key = i, class = "task" }, h.span(nil, title),
        h.button({ onClick = function()
          local t = table.move(state.titles, 1, 100, 1, {})
          t[i] = "Renamed " .. i
          d.state.value = { titles = t, n = state.n + 1 } -- one change: one version
        end }, "Rename"))
    end
    return h.div(nil, h.p(nil, "Renamed: ", state.n), h.ul({ key = "rows" }, rows))
  end,
}

local function new_live()
  return live_mod.new { app = clank.app { name = "t", views = { List } }, secret = "spec-secret" }
end

local function session_id() return token.sign("spec-secret", "list", {}, nil, os.time()) end

local ROW7 = "0.k:rows.k:7.1"

describe("clank.live diffs", function()
  it("answers a one-row change in a 100-row list with a diff under 2 KiB, after a full html", function()
    local live, sock, id = new_live(), fake_socket(), session_id()
    live:connect(id, DIFFS, sock)
    local first = sock:last()
    assert.are.same({ "html", 0, 1 }, { first.t, first.seq, first.v })
    assert.is_true(#first.html > 8000, #first.html)
    live:receive(id, event(1, 1, ROW7, "click"), sock)
    local f = sock:last()
    assert.are.same({ "diff", 1, 1, 2 }, { f.t, f.seq, f.base, f.v })
    assert.is_true(sock.sizes[#sock.frames] <= 2048, sock.sizes[#sock.frames])
    assert.are.equal(2, #f.splices) -- the counter and the row
    local applied = apply(first.html, f.splices)
    assert.truthy(applied:find("<p>Renamed: 1</p>", 1, true))
    assert.truthy(applied:find("<span>Renamed 7</span>", 1, true))
    assert.is_nil(applied:find("Task number 7<", 1, true))
    -- the html in full, asked for, is what the diff made
    live:receive(id, '{"t":"resync"}', sock)
    local full = sock:last()
    assert.are.same({ "html", 0, 2 }, { full.t, full.seq, full.v })
    assert.are.equal(full.html, applied)
    assert.is_nil(sock.closed)
  end)

  it("keeps the client's html right over many diffs, a reconnection and a hibernation", function()
    local live, sock, id = new_live(), fake_socket(), session_id()
    live:tick(0) -- the loop's clock: what a session's quiet time counts from
    live:connect(id, DIFFS, sock)
    local held, v = sock:last().html, 1
    local function click(seq, row)
      live:receive(id, event(seq, v, "0.k:rows.k:" .. row .. ".1", "click"), sock)
      local f = sock:last()
      assert.are.same({ "diff", seq, v }, { f.t, f.seq, f.base })
      held, v = apply(held, f.splices), f.v
    end
    for seq = 1, 30 do click(seq, (seq * 37) % 100 + 1) end
    live:receive(id, '{"t":"resync"}', sock)
    assert.are.equal(sock:last().html, held)
    -- a new connection starts from a whole html, then diffs from it
    local s = live.sessionsById[id]
    local sock2 = fake_socket()
    live:connect(id, DIFFS, sock2)
    sock = sock2
    held, v = sock:last().html, sock:last().v
    click(31, 5)
    -- a hibernation lets the session's html go; its next update is whole, then diffs again
    settle() -- the pushes the events scheduled find nothing to send, and end
    live:hibernate(1e9)
    assert.is_true(s.mounted:asleep())
    assert.is_nil(s.htmlA)
    live:receive(id, event(32, v, "0.k:rows.k:6.1", "click"), sock)
    local f = sock:last()
    assert.are.same({ "html", 32 }, { f.t, f.seq })
    held, v = f.html, f.v
    click(33, 7)
    live:receive(id, '{"t":"resync"}', sock)
    assert.are.equal(sock:last().html, held)
  end)

  it("sends a diff with no splices when nothing changed", function()
    local live, sock, id = new_live(), fake_socket(), session_id()
    live:connect(id, DIFFS, sock)
    live:sendHtml(live.sessionsById[id], 5)
    assert.are.same({ t = "diff", seq = 5, base = 1, v = 1, splices = {} }, sock:last())
    assert.is_true(json.isArray(sock:last().splices))
  end)

  it("sends html frames only to a connection that did not ask for diffs", function()
    local live, sock, id = new_live(), fake_socket(), session_id()
    live:connect(id, PLAIN, sock)
    live:receive(id, event(1, 1, ROW7, "click"), sock)
    assert.are.same({ "html", "html" }, { sock.frames[1].t, sock.frames[2].t })
  end)

  it("answers a resync with the html in full, whatever base the client holds", function()
    local live, sock, id = new_live(), fake_socket(), session_id()
    live:connect(id, DIFFS, sock)
    live:receive(id, event(1, 1, ROW7, "click"), sock)
    live:receive(id, event(2, 2, "0.k:rows.k:8.1", "click"), sock)
    assert.are.same({ "diff", 2, 3 }, { sock:last().t, sock:last().base, sock:last().v })
    live:receive(id, '{"t":"resync"}', sock)
    local f = sock:last()
    assert.are.same({ "html", 0, 3 }, { f.t, f.seq, f.v })
    assert.truthy(f.html:find("<p>Renamed: 2</p>", 1, true))
    -- and the next change is a diff from that html
    live:receive(id, event(3, 3, "0.k:rows.k:9.1", "click"), sock)
    assert.are.same({ "diff", 3, 3, 4 }, { sock:last().t, sock:last().seq, sock:last().base, sock:last().v })
  end)

  it("answers an event on a version the server never sent, or dropped, with the html in full", function()
    local live, sock, id = new_live(), fake_socket(), session_id()
    live:connect(id, DIFFS, sock)
    live:receive(id, event(1, 42, ROW7, "click"), sock) -- v 42 was never sent
    local f = sock:last()
    assert.are.same({ "html", 1, 1 }, { f.t, f.seq, f.v })
    assert.truthy(f.html:find("Task number 7<", 1, true)) -- not run
    live:receive(id, event(2, 1, ROW7, "click"), sock)
    assert.are.equal("diff", sock:last().t)
    live:receive(id, event(3, 2, "0.k:rows.k:8.1", "click"), sock) -- acks v 2: v 1 is dropped
    live:receive(id, event(4, 1, "0.k:rows.k:9.1", "click"), sock)
    f = sock:last()
    assert.are.same({ "html", 4, 3 }, { f.t, f.seq, f.v })
  end)

  for _, bad in ipairs {
    '{"t":"resync","seq":1}', '{"t":"resync","base":1}', '["resync"]', '{"t":"Resync"}',
    '{"t":"resync","v":null,"x":[]}',
  } do
    it("refuses a malformed resync with 1002: " .. bad, function()
      local live, sock, id = new_live(), fake_socket(), session_id()
      live:connect(id, DIFFS, sock)
      live:receive(id, bad, sock)
      assert.are.same({ code = 1002, reason = "unexpected message" }, sock.closed)
      assert.are.equal(1, #sock.frames)
    end)
  end
end)
