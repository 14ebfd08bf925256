-- A live update that only put components' new trees where their old ones were (a row's own
-- signal changed) is written from the html the connection holds, the old rows' HTML replaced
-- by the new rows' (clank.live, patched_html). Whatever path it takes, the html the client ends
-- up with must be the page's full render, byte for byte: checked here after every event of a
-- seeded random run, against a render that keeps nothing.
local clank = require "clank"
local live_mod = require "clank.live"
local token = require "clank.live.token"
local render = require "clank.ui.render"
local json = clank.json
local h, s = clank.h, clank.schema
local signal = clank.signal

local harness = require "helpers.live_socket"
local fake_socket, apply = harness.fake_socket, harness.apply

local DIFFS = { method = "GET", url = "/?diffs=1", path = "/", query = { diffs = "1" }, headers = {} }

-- Rows that change in every way a swap can: their text and class, their badge (a component
-- inside them, the same props most of the time), a row that renders nothing or another tag,
-- a key that changes, and ranked (unkeyed) calls beside the keyed ones.
local function make_app()
  local state = {}
  local Badge = clank.defineView { name = "badge", render = function(p)
    return h.i({ class = "badge" }, p.text)
  end }
  local Row = clank.defineView {
    name = "row", props = s.object { id = s.string(), st = s.unknown() },
    render = function(p)
      local st = p.st
      local n = st.n.value
      if st.gone.value then return nil end
      local toggle = function() st.n.value = st.n.value + 1 end
      if n % 7 == 6 then -- another tag: its parent's markup does not change, a div in a div
        return h.p({ key = p.key, agentId = "p-" .. p.id }, "odd ", n)
      end
      return h.div({ key = st.rekey.value and (p.key .. "x") or p.key, agentId = "row-" .. p.id,
        class = n % 2 == 1 and "on" or nil },
        h.span(nil, "Row ", p.id, " & <", n, ">"),
        Badge { text = n % 3 == 0 and "three" or "other" },
        h.button({ agentId = "b-" .. p.id, onClick = toggle }, "Toggle"))
    end,
  }
  local Plain = clank.defineView { name = "plain", props = s.object { st = s.unknown() },
    render = function(p)
      local function add() p.st.n.value = p.st.n.value + 1 end
      return h.li(nil, "plain ", p.st.n.value, h.button({ onClick = add }, "+"))
    end }
  -- two components whose HTML is often the same text: the old one's is then not found once
  local Twin = clank.defineView { name = "twin", props = s.object { st = s.unknown() },
    render = function(p) return h.b(nil, "twin ", p.st.n.value % 2) end }
  for i = 1, 22 do
    state[i] = { n = signal.signal(0), gone = signal.signal(false), rekey = signal.signal(false) }
  end
  local View = clank.defineView { name = "rows", render = function()
    local rows, plain = {}, {}
    for i = 1, 12 do rows[i] = Row { key = "r" .. i, id = tostring(i), st = state[i] } end
    for i = 13, 20 do plain[#plain + 1] = Plain { st = state[i] } end
    -- (characters of 2, 3 and 4 bytes before the rows: splices count UTF-16 units)
    return h.main(nil, h.h1(nil, "Rows é — 😀"), h.div({ key = "list" }, rows), h.ul(nil, plain),
      h.p(nil, Twin { st = state[22] }, Twin { st = state[21] }))
  end }
  return clank.app { name = "t", views = { View } }, state
end

-- The session's page rendered anew, keeping nothing.
local function full_render(live, sess)
  return render.render(sess.mounted:tree(), { live = true, actions = live.renderOptions.actions })
end

-- A list that renders again on its own signals (as a publish's load gives new data): a row's
-- label or number changes (its props: the list's tree is the last one but for that row's), a
-- row goes or comes back, the order turns around, the title changes.
local function make_list_app()
  local labels, reversed, title = signal.signal({}), signal.signal(false), signal.signal("Rows é — 😀")
  local Row = clank.defineView {
    name = "lrow", props = s.object { id = s.string(), label = s.string(), n = s.number() },
    render = function(p)
      return h.li({ key = p.key, agentId = "l-" .. p.id, class = p.n % 2 == 1 and "on" or nil },
        p.label, " ", p.n, h.button({ onClick = function() end }, "x"))
    end,
  }
  local View = clank.defineView { name = "list", render = function()
    local ls, rows = labels.value, {}
    for i = 1, 15 do
      local j = reversed.value and (16 - i) or i
      local l = ls[j]
      if l ~= false then
        rows[#rows + 1] = Row { key = "k" .. j, id = tostring(j), label = l and l.text or ("L" .. j),
          n = l and l.n or 0 }
      end
    end
    return h.main(nil, h.h1(nil, title.value), h.ul({ key = "l" }, rows))
  end }
  return clank.app { name = "t2", views = { View } }, labels, reversed, title
end

-- Connects a session of view (with diffs), then runs body(t) with t.random(n) (seeded),
-- t.push(step) (a push, applied to the html held, then checked against a full render) and
-- t.click(step) (a click on one of the page's buttons, likewise) → how many renders wrote an
-- element alone (the patched way).
local function drive(app, view, seed, body)
  local live = live_mod.new { app = app, secret = "spec-secret" }
  local id = token.sign("spec-secret", view, {}, nil, os.time())
  local sock = fake_socket()
  local at_renders, real_render = 0, render.render
  render.render = function(node, options)
    if options and options.at then at_renders = at_renders + 1 end
    return real_render(node, options)
  end
  local ok, err = pcall(function()
    live:connect(id, DIFFS, sock)
    local held, v = sock:last().html, sock:last().v
    local sess = live.sessionsById[id]
    local rng = seed
    local t = {}
    function t.random(n)
      rng = (rng * 1103515245 + 12345) % 2147483648
      return rng % n + 1
    end
    local function answered(step)
      local f = sock:last()
      assert.are.equal(step, f.seq)
      if f.t == "diff" then
        assert.are.equal(v, f.base)
        held = apply(held, f.splices)
      else
        held = f.html
      end
      v = f.v
      assert.are.equal(full_render(live, sess), held)
    end
    function t.push(step)
      live:sendHtml(sess, step)
      answered(step)
    end
    function t.click(step)
      local keys = {}
      for k in held:gmatch('data%-clank%-key="([^"]+)" data%-clank%-on="click"') do
        keys[#keys + 1] = k
      end
      local key = keys[t.random(#keys)]
      live:receive(id, json.encode { t = "event", seq = step, v = v, key = key, type = "click" }, sock)
      answered(step)
    end
    body(t)
  end)
  render.render = real_render
  assert(ok, err)
  return at_renders
end

describe("clank.live: an update of components' trees written from the html held", function()
  it("gives the full render's html after each of 300 random changes, and takes that way", function()
    local app, state = make_app()
    local at_renders = drive(app, "rows", 29, function(t)
      for step = 1, 300 do
        local i, what = t.random(22), t.random(10)
        local st = state[i]
        -- a change from outside the page (as a publish's handler would make), then a push
        if what <= 6 then
          st.n.value = st.n.value + 1
        elseif what <= 8 then
          st.gone.value = not st.gone.value
        else
          st.rekey.value = not st.rekey.value
        end
        t.push(step)
      end
      -- and by events on the rows' buttons
      for step = 301, 340 do t.click(step) end
    end)
    assert.is_true(at_renders > 150, at_renders) -- most changes were written from the html held
    assert.is_true(at_renders < 340, at_renders) -- not all: some could not be
  end)

  it("gives the full render's html after each of 200 changes of a list that renders again", function()
    local app, labels, reversed, title = make_list_app()
    local at_renders = drive(app, "list", 7, function(t)
      for step = 1, 200 do
        local what, random = t.random(20), t.random
        local copy = table.move(labels:peek(), 1, 15, 1, {})
        if what <= 14 then -- one row's props, or two
          for _ = 1, what <= 11 and 1 or 2 do
            local j = random(15)
            copy[j] = { text = "L" .. j .. " #" .. step .. (random(4) == 1 and " & <b>" or ""), n = random(3) }
          end
          labels.value = copy
        elseif what <= 16 then -- a row goes, or comes back
          local j = random(15)
          copy[j] = copy[j] == false and nil or false
          labels.value = copy
        else -- the order turns, or the title changes, and a row's props with it
          local j = random(15)
          copy[j] = { text = "L" .. j .. " %" .. step, n = random(3) }
          signal.batch(function()
            labels.value = copy
            if what <= 18 then reversed.value = not reversed:peek() else title.value = "Rows 😀 " .. step end
          end)
        end
        t.push(step)
      end
    end)
    assert.is_true(at_renders > 100, at_renders) -- most were written from the html held
  end)
end)
