-- clank.live sessions over a fake socket (SPEC §11): the live channel's messages, the event
-- queue, confirmation, pushes and idle limits. Waiting code runs in runtime tasks; settle(ms)
-- runs the loop meanwhile, as clank-run would.
local clank = require "clank"
local live_mod = require "clank.live"
local token = require "clank.live.token"
local json = clank.json
local h, s = clank.h, clank.schema
local signal = clank.signal

local harness = require "helpers.live_socket"
local settle, fake_socket = harness.settle, harness.fake_socket

local REQUEST = { method = "GET", url = "/", path = "/", query = {}, headers = {} }

local function event(seq, v, key, type_, extra)
  local m = { t = "event", seq = seq, v = v, key = key, type = type_ }
  for k, x in pairs(extra or {}) do m[k] = x end
  return json.encode(m)
end

-- A counter whose state lives in the session (made by load).
local Counter = clank.defineView {
  name = "counter",
  load = function() return { n = signal.signal(0) } end,
  render = function(_, data)
    return h.div(nil,
      h.output({ id = "n" }, data.n.value),
      h.button({ agentId = "inc", onClick = function() data.n.value = data.n.value + 1 end }, "Add"),
      h.button({ agentId = "boom", onClick = function() error("boom on purpose") end }, "Fail"),
      h.input({ agentId = "text", value = "", onInput = function(e) data.n.value = #e.value end }))
  end,
}

local function new_live(views, fields, opts)
  local def = { name = "t", views = views or { Counter } }
  for k, v in pairs(fields or {}) do def[k] = v end
  local o = { app = clank.app(def), secret = "spec-secret" }
  for k, v in pairs(opts or {}) do o[k] = v end
  return live_mod.new(o)
end

local function session_id(view_name, props)
  return token.sign("spec-secret", view_name or "counter", props or {}, nil, os.time())
end

local function html_of(frame) return frame and frame.html or "" end

describe("clank.live connections", function()
  it("sends the html with seq 0 first", function()
    local live = new_live()
    local sock = fake_socket()
    live:connect(session_id(), REQUEST, sock)
    assert.are.equal(1, #sock.frames)
    local f = sock.frames[1]
    assert.are.equal("html", f.t)
    assert.are.equal(0, f.seq)
    assert.are.equal(1, f.v)
    assert.truthy(html_of(f):find('<output id="n">0</output>', 1, true), html_of(f))
    assert.truthy(html_of(f):find('<button data-clank-id="inc" data-clank-key="0.1" data-clank-on="click">', 1, true))
    assert.are.equal(1, live:sessions())
  end)

  it("closes with 4404 for an unknown session", function()
    local live = new_live()
    local sock = fake_socket()
    live:connect("bogus", REQUEST, sock)
    assert.are.same({ code = 4404, reason = "unknown session" }, sock.closed)
    local other = fake_socket()
    live:connect(session_id("gone"), REQUEST, other)
    assert.are.equal(4404, other.closed.code)
    assert.are.equal(0, live:sessions())
  end)

  it("answers an event with its seq and the new render counter", function()
    local live = new_live()
    local sock = fake_socket()
    local id = session_id()
    live:connect(id, REQUEST, sock)
    live:receive(id, event(1, 1, "0.1", "click"), sock)
    local f = sock:last()
    assert.are.same({ "html", 1, 2 }, { f.t, f.seq, f.v })
    assert.truthy(html_of(f):find('<output id="n">1</output>', 1, true))
    live:receive(id, event(2, 2, "0.3", "input", { value = "abc" }), sock)
    assert.are.same({ "html", 2, 3 }, { sock:last().t, sock:last().seq, sock:last().v })
    assert.truthy(html_of(sock:last()):find('<output id="n">3</output>', 1, true))
  end)

  it("runs an event sent from the DOM of v 1 before the answer that made v 2 arrived", function()
    local live = new_live()
    local sock = fake_socket()
    local id = session_id()
    live:connect(id, REQUEST, sock)
    live:receive(id, event(1, 1, "0.1", "click"), sock)
    live:receive(id, event(2, 1, "0.1", "click"), sock) -- typed ahead: still the DOM of v 1
    local f = sock:last()
    assert.are.same({ "html", 2, 3 }, { f.t, f.seq, f.v })
    assert.truthy(html_of(f):find('<output id="n">2</output>', 1, true))
  end)

  it("runs every event sent from the DOM of v 1 while the answers made twenty newer versions", function()
    local live = new_live()
    local sock = fake_socket()
    local id = session_id()
    live:connect(id, REQUEST, sock)
    for i = 1, 20 do -- a browser typing faster than the answers arrive
      live:receive(id, event(i, 1, "0.1", "click"), sock)
    end
    local f = sock:last()
    assert.are.same({ "html", 20, 21 }, { f.t, f.seq, f.v })
    assert.truthy(html_of(f):find('<output id="n">20</output>', 1, true), html_of(f))
  end)

  it("runs an event from a version the browser received while fifteen newer ones were made", function()
    local live = new_live()
    local sock = fake_socket()
    local id = session_id()
    live:connect(id, REQUEST, sock)
    for i = 1, 15 do -- typed on v 1: makes v 2 to v 16
      live:receive(id, event(i, 1, "0.1", "click"), sock)
    end
    live:receive(id, event(16, 3, "0.1", "click"), sock) -- the browser patched to v 3 meanwhile
    local f = sock:last()
    assert.are.same({ "html", 16, 17 }, { f.t, f.seq, f.v })
    assert.truthy(html_of(f):find('<output id="n">16</output>', 1, true), html_of(f))
  end)

  it("drops an event with a stale v (older than a DOM the browser used) and answers with the current html",
    function()
    local live = new_live()
    local sock = fake_socket()
    local id = session_id()
    live:connect(id, REQUEST, sock)
    live:receive(id, event(1, 1, "0.1", "click"), sock) -- makes v 2
    live:receive(id, event(2, 2, "0.1", "click"), sock) -- from v 2: the browser has it; makes v 3
    live:receive(id, event(3, 1, "0.1", "click"), sock) -- from v 1: stale
    local f = sock:last()
    assert.are.same({ "html", 3, 3 }, { f.t, f.seq, f.v })
    assert.truthy(html_of(f):find('<output id="n">2</output>', 1, true)) -- not run
  end)

  it("drops an event whose v was never sent", function()
    local live = new_live()
    local sock = fake_socket()
    local id = session_id()
    live:connect(id, REQUEST, sock)
    live:receive(id, event(1, 7, "0.1", "click"), sock)
    local f = sock:last()
    assert.are.same({ "html", 1, 1 }, { f.t, f.seq, f.v })
    assert.truthy(html_of(f):find('<output id="n">0</output>', 1, true))
  end)

  it("ignores an event for a key without a handler", function()
    local live = new_live()
    local sock = fake_socket()
    local id = session_id()
    live:connect(id, REQUEST, sock)
    live:receive(id, event(1, 1, "0.0", "click"), sock)
    live:receive(id, event(2, 1, "9.9", "click"), sock)
    live:receive(id, event(3, 1, "0.1", "submit"), sock)
    assert.are.equal(1, #sock.frames)
    assert.is_nil(sock.closed)
  end)

  it("closes with 1007 on malformed JSON", function()
    local live = new_live()
    local sock = fake_socket()
    local id = session_id()
    live:connect(id, REQUEST, sock)
    live:receive(id, "{not json", sock)
    assert.are.equal(1007, sock.closed.code)
  end)

  local bad_shapes = {
    { "an array", "[]" },
    { "another message type", '{"t":"hello"}' },
    { "a missing seq", '{"t":"event","v":1,"key":"0","type":"click"}' },
    { "a fractional v", '{"t":"event","seq":1,"v":1.5,"key":"0","type":"click"}' },
    { "an unknown event type", '{"t":"event","seq":1,"v":1,"key":"0","type":"keydown"}' },
    { "a malformed key", '{"t":"event","seq":1,"v":1,"key":"a.b","type":"click"}' },
    { "a number value", '{"t":"event","seq":1,"v":1,"key":"0","type":"input","value":3}' },
    { "a string checked", '{"t":"event","seq":1,"v":1,"key":"0","type":"change","checked":"yes"}' },
    { "values as a list", '{"t":"event","seq":1,"v":1,"key":"0","type":"submit","values":["a"]}' },
    { "an unknown field", '{"t":"event","seq":1,"v":1,"key":"0","type":"click","x":1}' },
  }
  for _, case in ipairs(bad_shapes) do
    it("closes with 1002 on " .. case[1], function()
      local live = new_live()
      local sock = fake_socket()
      local id = session_id()
      live:connect(id, REQUEST, sock)
      live:receive(id, case[2], sock)
      assert.are.equal(1002, sock.closed and sock.closed.code)
    end)
  end

  it("closes the first connection with 4409 when a second one opens", function()
    local live = new_live()
    local id = session_id()
    local first, second = fake_socket(), fake_socket()
    live:connect(id, REQUEST, first)
    live:receive(id, event(1, 1, "0.1", "click"), first)
    live:connect(id, REQUEST, second)
    assert.are.equal(4409, first.closed.code)
    assert.are.equal(2, second.frames[1].v) -- the same session
    live:disconnect(id, first) -- the host reports the first one's close
    live:receive(id, event(1, 2, "0.1", "click"), second)
    assert.are.equal(3, second:last().v)
    assert.are.equal(1, live:sessions())
  end)

  it("answers a handler error with an error message and keeps the session", function()
    local live = new_live()
    local sock = fake_socket()
    local id = session_id()
    live:connect(id, REQUEST, sock)
    live:receive(id, event(1, 1, "0.2", "click"), sock)
    local f = sock:last()
    assert.are.equal("error", f.t)
    assert.is_string(f.message)
    assert.is_nil(f.message:find("boom", 1, true)) -- generic: the real error goes to the log
    assert.are.equal(2, #sock.frames) -- nothing new to show
    live:receive(id, event(2, 1, "0.1", "click"), sock)
    assert.are.same({ "html", 2, 2 }, { sock:last().t, sock:last().seq, sock:last().v })
  end)

  it("runs one handler at a time, in order, collapsing queued input events per key", function()
    local seen = {}
    local View = clank.defineView { name = "q", render = function()
      return h.div(nil,
        h.button({ onClick = function() seen[#seen + 1] = "click"; clank.sleep(30) end }, "Slow"),
        h.input({ onInput = function(e) seen[#seen + 1] = e.value end }),
        h.input({ onInput = function(e) seen[#seen + 1] = "other " .. e.value end }))
    end }
    local live = new_live { View }
    local sock = fake_socket()
    local id = session_id("q")
    live:connect(id, REQUEST, sock)
    live:receive(id, event(1, 1, "0.0", "click"), sock)
    live:receive(id, event(2, 1, "0.1", "input", { value = "a" }), sock)
    live:receive(id, event(3, 1, "0.1", "input", { value = "ab" }), sock)
    live:receive(id, event(4, 1, "0.2", "input", { value = "x" }), sock)
    live:receive(id, event(5, 1, "0.1", "input", { value = "abc" }), sock)
    assert.are.same({ "click" }, seen)
    settle(80)
    assert.are.same({ "click", "other x", "abc" }, seen) -- "a" and "ab" collapsed into "abc"
    local seqs = {}
    for _, f in ipairs(sock.frames) do seqs[#seqs + 1] = f.seq end
    assert.are.same({ 0, 1, 4, 5 }, seqs)
  end)

  it("gives the handler the event table and a request ctx", function()
    local got
    local View = clank.defineView { name = "ev", render = function()
      return h.form({ id = "f", onSubmit = function(e, ctx) got = { e = e, ctx = ctx } end },
        h.input({ name = "t" }))
    end }
    local live = new_live({ View }, { context = function(r) return { user = r.headers.user } end })
    local sock = fake_socket()
    local id = session_id("ev")
    local req = { method = "GET", url = "/", path = "/", query = {}, headers = { user = "u1" } }
    live:connect(id, req, sock)
    live:receive(id, event(1, 1, "0", "submit", { values = { t = "hi" } }), sock)
    assert.are.same({ type = "submit", values = { t = "hi" }, target = { id = "f", tag = "form" } }, got.e)
    assert.are.equal("u1", got.ctx.user)
    assert.is_string(got.ctx.requestId)
    assert.is_false(got.ctx.confirmed)
    assert.is_false(got.ctx.signal.aborted)
  end)
end)

-- Confirmation (SPEC §11 as issue 34 changes it): the page no longer asks before it sends; an
-- action the handler runs that needs confirmation has its input checked first, then the server
-- asks the person ({"t":"confirm"}) with the action's words for that call, and waits.
describe("clank.live confirmation", function()
  local function build(confirm)
    local removed = {}
    local remove = clank.defineAction { name = "items.remove", description = "Remove the item.",
      input = s.object { name = s.string { min = 1 } }, sideEffects = "destructive", confirm = confirm,
      handler = function(input) removed[#removed + 1] = input.name return {} end }
    local View = clank.defineView { name = "danger",
      load = function() return { runner = clank.actionRunner(remove), name = signal.signal("pen") } end,
      render = function(_, d)
        local err = d.runner.error.value
        return h.div(nil,
          h.button({ agentAction = "items.remove", onClick = function() d.runner:run({ name = d.name.value }) end },
            "Remove"),
          h.input({ agentId = "name", onInput = function(e) d.name.value = e.value end }),
          err and h.p({ role = "alert" }, err.code or tostring(err)) or nil)
      end }
    local live = new_live({ View }, { actions = { remove } })
    local sock = fake_socket()
    local id = session_id("danger")
    live:connect(id, REQUEST, sock)
    return live, id, sock, removed
  end

  local function confirm_answer(ask_id, ok)
    return json.encode { t = "confirm", id = ask_id, ok = ok }
  end

  -- The frames sent after the first n.
  local function since(sock, n)
    local out = {}
    for i = n + 1, #sock.frames do out[#out + 1] = sock.frames[i] end
    return out
  end

  it("renders data-clank-confirm naming the description and side effects", function()
    local _, _, sock = build()
    assert.truthy(html_of(sock.frames[1]):find(
      'data-clank-confirm="Remove the item. (destructive)"', 1, true), html_of(sock.frames[1]))
  end)

  it("asks the person with the action's words for the call, and runs it when they accept", function()
    local live, id, sock, removed = build(function(input) return "Remove \u{201c}" .. input.name .. "\u{201d}?" end)
    live:receive(id, event(1, 1, "0.0", "click"), sock)
    settle(20)
    assert.are.same({ t = "confirm", seq = 1, id = 1, message = "Remove \u{201c}pen\u{201d}?" }, sock:last())
    assert.are.same({}, removed) -- waiting for the answer
    local n = #sock.frames
    live:receive(id, confirm_answer(1, true), sock)
    settle(40)
    assert.are.same({ "pen" }, removed)
    local answers = since(sock, n)
    assert.are.same({ "html", 1 }, { answers[#answers].t, answers[#answers].seq }) -- the event's answer
    assert.is_nil(html_of(answers[#answers]):find("alert", 1, true))
  end)

  it("asks with the action's description when it has no confirm of its own", function()
    local live, id, sock = build()
    live:receive(id, event(1, 1, "0.0", "click"), sock)
    settle(20)
    assert.are.same({ t = "confirm", seq = 1, id = 1, message = "Remove the item." }, sock:last())
    live:receive(id, confirm_answer(1, false), sock)
    settle(40)
  end)

  it("runs nothing when the person declines, and the view shows the runner's CONFIRMATION_REQUIRED", function()
    local live, id, sock, removed = build("Remove it?")
    live:receive(id, event(1, 1, "0.0", "click"), sock)
    settle(20)
    assert.are.equal("Remove it?", sock:last().message)
    live:receive(id, confirm_answer(1, false), sock)
    settle(40)
    assert.are.same({}, removed)
    assert.truthy(html_of(sock:last()):find('<p role="alert">CONFIRMATION_REQUIRED</p>', 1, true))
  end)

  it("asks nothing about an invalid input: the view shows its issues at once", function()
    local live, id, sock, removed = build("Remove it?")
    live:receive(id, event(1, 1, "0.1", "input", { value = "" }), sock)
    local n = #sock.frames
    live:receive(id, event(2, sock:last().v, "0.0", "click"), sock)
    settle(20)
    assert.are.same({}, removed)
    for _, f in ipairs(since(sock, n)) do assert.are_not.equal("confirm", f.t) end
    assert.truthy(html_of(sock:last()):find(
      '<p role="alert">name: Must contain at least 1 character.</p>', 1, true), html_of(sock:last()))
  end)

  it("takes a connection that goes while the person is asked as a no", function()
    local live, id, sock, removed = build()
    live:receive(id, event(1, 1, "0.0", "click"), sock)
    settle(20)
    assert.are.equal("confirm", sock:last().t)
    live:disconnect(id, sock)
    settle(40)
    assert.are.same({}, removed)
  end)

  it("ignores an answer to another question, and closes 1002 on an answer of the wrong shape", function()
    local live, id, sock, removed = build()
    live:receive(id, event(1, 1, "0.0", "click"), sock)
    settle(20)
    live:receive(id, confirm_answer(7, true), sock)
    settle(20)
    assert.are.same({}, removed)
    live:receive(id, json.encode { t = "confirm", id = 1, ok = "yes" }, sock)
    assert.are.same({ code = 1002, reason = "unexpected message" }, sock.closed)
    settle(40)
    assert.are.same({}, removed)
  end)

  it("runs them from an event confirmed already, without asking", function()
    local live, id, sock, removed = build()
    live:receive(id, event(1, 1, "0.0", "click", { confirmed = true }), sock)
    settle(20)
    assert.are.same({ "pen" }, removed)
    for _, f in ipairs(sock.frames) do assert.are_not.equal("confirm", f.t) end
    assert.is_nil(html_of(sock:last()):find("alert", 1, true))
  end)
end)

describe("clank.live pushes", function()
  local function slow_view()
    local save = clank.defineAction { name = "slow.save", description = "Save slowly.",
      input = s.object {}, sideEffects = "read", handler = function() clank.sleep(120) return { ok = true } end }
    return clank.defineView { name = "slow",
      load = function() return { runner = clank.actionRunner(save) } end,
      render = function(_, d)
        local r = d.runner
        return h.div(nil,
          h.button({ onClick = function() r:run({}) end }, "Wait"),
          h.button({ onClick = function() clank.spawn(function() r:run({}) end) end }, "Start"),
          h.p(nil, r.pending.value and "pending" or r.data.value and "saved" or "idle"))
      end }
  end

  it("pushes changes with seq 0 while a handler waits; its final html carries its seq", function()
    local live = new_live { slow_view() }
    local sock = fake_socket()
    local id = session_id("slow")
    live:connect(id, REQUEST, sock)
    live:receive(id, event(1, 1, "0.0", "click"), sock)
    settle(200)
    local frames = sock.frames
    assert.are.equal(3, #frames)
    assert.are.same({ 0, 2 }, { frames[2].seq, frames[2].v })
    assert.truthy(frames[2].html:find("<p>pending</p>", 1, true))
    assert.are.same({ 1, 3 }, { frames[3].seq, frames[3].v })
    assert.truthy(frames[3].html:find("<p>saved</p>", 1, true))
  end)

  it("pushes a runner's result after its handler returned, with seq 0", function()
    local live = new_live { slow_view() }
    local sock = fake_socket()
    local id = session_id("slow")
    live:connect(id, REQUEST, sock)
    live:receive(id, event(1, 1, "0.1", "click"), sock)
    assert.are.same({ 1, 2 }, { sock:last().seq, sock:last().v })
    assert.truthy(sock:last().html:find("<p>pending</p>", 1, true))
    settle(200)
    assert.are.same({ 0, 3 }, { sock:last().seq, sock:last().v })
    assert.truthy(sock:last().html:find("<p>saved</p>", 1, true))
    assert.are.equal(3, #sock.frames)
  end)

  it("coalesces changes made within 50 ms into one push", function()
    local n = signal.signal(0)
    local View = clank.defineView { name = "shared", render = function() return h.p(nil, n.value) end }
    local live = new_live { View }
    local sock = fake_socket()
    live:connect(session_id("shared"), REQUEST, sock)
    n.value = 1
    n.value = 2
    n.value = 3
    settle(120)
    assert.are.equal(2, #sock.frames)
    assert.are.same({ 0, 4, "<p>3</p>" }, { sock.frames[2].seq, sock.frames[2].v, sock.frames[2].html })
  end)
end)

describe("clank.live idle sessions", function()
  it("ends an idle session idleMs after it became idle (tick)", function()
    local live = new_live(nil, nil, { limits = { idleMs = 1000, maxIdle = 10 } })
    local id = session_id()
    local sock = fake_socket()
    live:tick(5000)
    live:connect(id, REQUEST, sock)
    live:tick(9000)
    assert.are.equal(1, live:sessions()) -- connected: never idle
    live:disconnect(id, sock)
    live:tick(9500)
    live:tick(10000)
    assert.are.equal(1, live:sessions())
    live:tick(10001)
    assert.are.equal(0, live:sessions())
    local again = fake_socket()
    live:connect(id, REQUEST, again) -- a fresh mount from its token
    assert.are.same({ 0, 1 }, { again.frames[1].seq, again.frames[1].v })
  end)

  it("counts sessions that went idle before the first tick as idle from that tick", function()
    -- the loop's clock is large (it counts from boot): a session idle since before the first
    -- tick must not look idle since 0
    local live = new_live(nil, nil, { limits = { idleMs = 1000, maxIdle = 10 } })
    local ids = {}
    for i = 1, 3 do
      ids[i] = session_id()
      local sock = fake_socket()
      live:connect(ids[i], REQUEST, sock)
      live:disconnect(ids[i], sock)
    end
    assert.are.equal(3, live:sessions())
    live:tick(7200000)
    assert.are.equal(3, live:sessions())
    live:tick(7201000)
    assert.are.equal(3, live:sessions())
    live:tick(7201001)
    assert.are.equal(0, live:sessions())
  end)

  it("keeps at most maxIdle idle sessions, ending the oldest idle first", function()
    local live = new_live(nil, nil, { limits = { idleMs = 600000, maxIdle = 2 } })
    local ids, socks = {}, {}
    for i = 1, 3 do
      ids[i], socks[i] = session_id(), fake_socket()
      live:connect(ids[i], REQUEST, socks[i])
    end
    live:disconnect(ids[2], socks[2])
    live:disconnect(ids[1], socks[1])
    assert.are.equal(3, live:sessions())
    live:disconnect(ids[3], socks[3])
    assert.are.equal(2, live:sessions())
    -- the session of ids[2] (idle first) ended: reconnecting mounts a fresh one
    local s2, s1 = fake_socket(), fake_socket()
    live:connect(ids[1], REQUEST, s1)
    live:receive(ids[1], event(1, 1, "0.1", "click"), s1)
    live:disconnect(ids[1], s1)
    live:connect(ids[1], REQUEST, s1)
    assert.are.equal(2, s1:last().v) -- kept its state
    live:connect(ids[2], REQUEST, s2)
    assert.are.equal(1, s2:last().v)
  end)
end)

describe("clank.live hot reload", function()
  it("adopts a session: mounts fresh from the token and sends reload", function()
    local live = new_live()
    local id = session_id()
    local sock = fake_socket()
    live:connect(id, REQUEST, sock)
    live:receive(id, event(1, 1, "0.1", "click"), sock)
    local next_gen = new_live()
    local sock2 = fake_socket()
    next_gen:adopt(id, REQUEST, sock2)
    local f = sock2.frames[1]
    assert.are.equal("reload", f.t)
    assert.truthy(f.html:find('<output id="n">0</output>', 1, true)) -- state reset
    assert.are.same({ "html", 0, f.v, f.html }, { sock2.frames[2].t, sock2.frames[2].seq, sock2.frames[2].v,
      sock2.frames[2].html })
    next_gen:receive(id, event(1, f.v, "0.1", "click"), sock2)
    assert.truthy(html_of(sock2:last()):find('<output id="n">1</output>', 1, true))
  end)

  it("closes with 4404 when the view is gone or its props no longer validate", function()
    local id = session_id("counter", { extra = 1 })
    local gone = fake_socket()
    new_live({ clank.defineView { name = "other", render = function() return h.p() end } })
      :adopt(session_id(), REQUEST, gone)
    assert.are.equal(4404, gone.closed.code)
    local Strict = clank.defineView { name = "counter", props = s.object { n = s.number() },
      render = function() return h.p() end }
    local invalid = fake_socket()
    new_live({ Strict }):adopt(id, REQUEST, invalid)
    assert.are.equal(4404, invalid.closed.code)
  end)
end)

describe("clank.live forms", function()
  it("updates fields as the person types, shows errors and submits through a runner", function()
    local created
    local create = clank.defineAction { name = "tasks.create", description = "Create a task.",
      input = s.object { title = s.string { min = 1 }, estimate = s.number() }, sideEffects = "write",
      confirmation = "never",
      handler = function(input) clank.sleep(60) created = input return { id = "t1" } end }
    local View = clank.defineView { name = "new-task",
      load = function()
        return { form = clank.createForm { id = "task", action = create, fields = { "title", "estimate" },
          schema = s.object { title = s.string { min = 1 }, estimate = s.number() } } }
      end,
      render = function(_, d) return h.main(nil, d.form:render()) end }
    local live = new_live({ View }, { actions = { create } })
    local sock = fake_socket()
    local id = session_id("new-task")
    live:connect(id, REQUEST, sock)
    local html = sock.frames[1].html
    assert.truthy(html:find('<form aria-label="Create a task." data-clank-action="tasks.create" data-clank-form="task" '
      .. 'data-clank-key="0.0" data-clank-on="submit" id="task" novalidate>', 1, true), html)
    assert.truthy(html:find('data-clank-key="0.0.0.1" data-clank-on="input" id="task-title"', 1, true), html)
    live:receive(id, event(1, 1, "0.0", "submit", { values = { title = "", estimate = "" } }), sock)
    assert.truthy(sock:last().html:find('id="task-title-error" role="alert">', 1, true))
    local v = sock:last().v
    live:receive(id, event(2, v, "0.0.0.1", "input", { value = "Ship" }), sock)
    v = sock:last().v
    live:receive(id, event(3, v, "0.0.1.1", "input", { value = "2.5" }), sock)
    v = sock:last().v
    assert.is_nil(sock:last().html:find("task-title-error", 1, true))
    live:receive(id, event(4, v, "0.0", "submit", { values = { title = "Ship", estimate = "2.5" } }), sock)
    settle(120)
    assert.are.same({ title = "Ship", estimate = 2.5 }, created)
    local pending
    for _, f in ipairs(sock.frames) do
      if f.seq == 0 and f.html and f.html:find("Saving\u{2026}", 1, true) then pending = f end
    end
    assert.is_not_nil(pending, "a push shows the pending state")
    assert.truthy(pending.html:find(
      '<button aria-busy="true" data-clank-id="task.submit" disabled type="submit">', 1, true))
    assert.are.equal(4, sock:last().seq)
    assert.truthy(sock:last().html:find(">Submit</button>", 1, true))
  end)
end)
