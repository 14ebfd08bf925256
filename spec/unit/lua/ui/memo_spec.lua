-- Components that did not change are not rendered again (issue 29, README "Live views"):
-- inside a mounted view's render, View(props) with props equal to last time's and no changed
-- signal returns last time's tree, the same table.
local clank = require "clank"
local signal = require "clank.signal"
local memo = require "clank.ui.memo"
local h, s = clank.h, clank.schema

-- A list of rows, each a Row component; renders[id] counts the renders of row id.
local function list_app()
  local app = { renders = {}, listRenders = 0 }
  app.Row = clank.defineView {
    name = "row", props = s.object { task = s.object { id = s.string(), title = s.string() } },
    render = function(p)
      app.renders[p.task.id] = (app.renders[p.task.id] or 0) + 1
      return h.li({ key = p.key }, p.task.title, app.done[p.task.id].value and " (done)" or "")
    end,
  }
  app.tasks = signal.signal({ { id = "a", title = "A" }, { id = "b", title = "B" }, { id = "c", title = "C" } })
  app.done = setmetatable({}, { __index = function(t, id)
    t[id] = signal.signal(false)
    return t[id]
  end })
  app.List = clank.defineView {
    name = "list",
    render = function()
      app.listRenders = app.listRenders + 1
      local rows = {}
      for i, t in ipairs(app.tasks.value) do
        rows[i] = app.Row { key = t.id, task = t }
      end
      return h.ul(nil, rows)
    end,
  }
  return app
end

local function rows(m) return m:tree().children end

describe("clank.ui.memo", function()
  it("renders again only the row whose signal changed, put in the old one's place", function()
    local app = list_app()
    local m = clank.mount(app.List)
    local a, b, c = table.unpack(rows(m))
    local root = m:tree()
    assert.are.same({ a = 1, b = 1, c = 1 }, app.renders)
    app.done.b.value = true
    assert.are.same({ a = 1, b = 2, c = 1 }, app.renders)
    assert.are.equal(1, app.listRenders) -- the list's render did not run again
    assert.are.equal(2, m.version)
    assert.are.equal(root, m:tree())
    local after = rows(m)
    assert.are.equal(a, after[1])
    assert.are.equal(c, after[3])
    assert.are_not.equal(b, after[2])
    assert.are.equal('<ul><li>A</li><li>B (done)</li><li>C</li></ul>', clank.render(m:tree()))
    -- then the list's own signal: it renders, with the rows' trees as they are now
    app.tasks.value = { { id = "a", title = "A" }, { id = "b", title = "B" } }
    assert.are.equal(2, app.listRenders)
    assert.are.same({ a = 1, b = 2, c = 1 }, app.renders)
    assert.are.equal(after[2], rows(m)[2])
    assert.are.equal('<ul><li>A</li><li>B (done)</li></ul>', clank.render(m:tree()))
    m:dispose()
  end)

  it("renders the list again when a row's tree is not where it was put (the render read it)", function()
    local flag = signal.signal(false)
    local Item = clank.defineView { name = "item",
      render = function() return h.b(nil, flag.value and "on" or "off") end }
    local renders = 0
    local m = clank.mount(clank.defineView { name = "wrap", render = function()
      renders = renders + 1
      local item = Item {}
      return h.p(nil, item.children[1]) -- its text, not its tree
    end })
    flag.value = true
    assert.are.equal(2, renders)
    assert.are.equal("<p>on</p>", clank.render(m:tree()))
    m:dispose()
  end)

  it("puts a row's new tree in place when the view returns the row itself", function()
    local flag = signal.signal(false)
    local Item = clank.defineView { name = "item",
      render = function() return h.b(nil, flag.value and "on" or "off") end }
    local m = clank.mount(clank.defineView { name = "only", render = function() return Item {} end })
    flag.value = true
    assert.are.equal("<b>on</b>", clank.render(m:tree()))
    m:dispose()
  end)

  it("compares props structurally: new plain tables with the same fields are the same props", function()
    local app = list_app()
    local m = clank.mount(app.List)
    app.tasks.value = { { id = "a", title = "A" }, { id = "b", title = "B2" }, { id = "c", title = "C" } }
    assert.are.same({ a = 1, b = 2, c = 1 }, app.renders)
    assert.are.equal('<ul><li>A</li><li>B2</li><li>C</li></ul>', clank.render(m:tree()))
    m:dispose()
  end)

  it("matches calls by key across a reorder, and renders a new key", function()
    local app = list_app()
    local m = clank.mount(app.List)
    local before = rows(m)
    app.tasks.value = { { id = "c", title = "C" }, { id = "d", title = "D" }, { id = "a", title = "A" } }
    assert.are.same({ a = 1, b = 1, c = 1, d = 1 }, app.renders)
    local after = rows(m)
    assert.are.equal(before[3], after[1])
    assert.are.equal(before[1], after[3])
    -- b was dropped: back, it renders again
    app.tasks.value = { { id = "b", title = "B" } }
    assert.are.equal(2, app.renders.b)
    m:dispose()
  end)

  it("drops the calls a render no longer makes at the end of the list: back, they render again", function()
    local app = list_app()
    local m = clank.mount(app.List)
    local before = rows(m)
    app.tasks.value = { { id = "a", title = "A" }, { id = "b", title = "B" } }
    assert.are.same({ a = 1, b = 1, c = 1 }, app.renders)
    assert.are.equal(before[1], rows(m)[1])
    assert.are.equal(before[2], rows(m)[2])
    app.tasks.value = { { id = "a", title = "A" }, { id = "b", title = "B" }, { id = "c", title = "C" } }
    assert.are.same({ a = 1, b = 1, c = 2 }, app.renders)
    assert.are.equal('<ul><li>A</li><li>B</li><li>C</li></ul>', clank.render(m:tree()))
    m:dispose()
  end)

  it("matches calls by key after the first one that leaves last time's order", function()
    local app = list_app()
    app.tasks.value = { { id = "a", title = "A" }, { id = "b", title = "B" }, { id = "c", title = "C" },
      { id = "d", title = "D" } }
    local m = clank.mount(app.List)
    local before = rows(m)
    app.tasks.value = { { id = "a", title = "A" }, { id = "b", title = "B" }, { id = "d", title = "D" },
      { id = "c", title = "C" } }
    assert.are.same({ a = 1, b = 1, c = 1, d = 1 }, app.renders)
    local after = rows(m)
    assert.are.equal(before[1], after[1])
    assert.are.equal(before[2], after[2])
    assert.are.equal(before[4], after[3])
    assert.are.equal(before[3], after[4])
    -- and each row is still its own: a change of c's signal renders c alone
    app.done.c.value = true
    assert.are.same({ a = 1, b = 1, c = 2, d = 1 }, app.renders)
    assert.are.equal('<ul><li>A</li><li>B</li><li>D</li><li>C (done)</li></ul>', clank.render(m:tree()))
    m:dispose()
  end)

  it("renders a call of another View made where last time's was, with the same key and props", function()
    local which = signal.signal("a")
    local A = clank.defineView { name = "a", render = function() return h.i(nil, "A") end }
    local B = clank.defineView { name = "b", render = function() return h.b(nil, "B") end }
    local m = clank.mount(clank.defineView { name = "ab", render = function()
      local V = which.value == "a" and A or B
      return h.p(nil, V { key = "x" }, A { key = "y" })
    end })
    assert.are.equal("<p><i>A</i><i>A</i></p>", clank.render(m:tree()))
    which.value = "b"
    assert.are.equal("<p><b>B</b><i>A</i></p>", clank.render(m:tree()))
    m:dispose()
  end)

  it("keeps last time's calls when a render raises after making some of them", function()
    local app = list_app()
    local fail = signal.signal(false)
    local errors = 0
    local List = clank.defineView { name = "failing", render = function()
      local out = {}
      for i, t in ipairs(app.tasks.value) do
        out[i] = app.Row { key = t.id, task = t }
        if i == 2 and fail.value then error("boom", 0) end
      end
      return h.ul(nil, out)
    end }
    local m = clank.mount(List, nil, { onError = function() errors = errors + 1 end })
    local before = rows(m)
    fail.value = true
    assert.are.equal(1, errors)
    fail.value = false
    assert.are.same({ a = 1, b = 1, c = 1 }, app.renders)
    assert.are.equal(before[3], rows(m)[3])
    m:dispose()
  end)

  it("matches calls without a key by their rank among the same View's calls", function()
    local renders, n = 0, signal.signal(2)
    local Cell = clank.defineView { name = "cell", render = function(p)
      renders = renders + 1
      return h.td(nil, p.text)
    end }
    local Other = clank.defineView { name = "other", render = function() return h.td(nil, "o") end }
    local m = clank.mount(clank.defineView { name = "t", render = function()
      local cells = {}
      for i = 1, n.value do cells[#cells + 1] = Other {}; cells[#cells + 1] = Cell { text = "c" .. i } end
      return h.tr(nil, cells)
    end })
    assert.are.equal(2, renders)
    n.value = 3
    assert.are.equal(3, renders)
    assert.are.equal("<tr><td>o</td><td>c1</td><td>o</td><td>c2</td><td>o</td><td>c3</td></tr>",
      clank.render(m:tree()))
    m:dispose()
  end)

  it("takes closures of one function with equal upvalues as equal, others not", function()
    local function handler(id) return function() return id end end
    assert.is_true(memo.equal({ onClick = handler("a") }, { onClick = handler("a") }))
    assert.is_false(memo.equal({ onClick = handler("a") }, { onClick = handler("b") }))
    assert.is_false(memo.equal({ f = function() return 1 end }, { f = function() return 2 end }))
    local function two(flag) return flag and function() return "a" end or function() return "b" end end
    assert.is_false(memo.equal({ f = two(true) }, { f = two(false) }))
    assert.is_true(memo.equal({ f = two(true) }, { f = two(true) }))
    assert.is_true(memo.equal({ t = { 1, { x = "y" } } }, { t = { 1, { x = "y" } } }))
    assert.is_false(memo.equal({ t = { 1, 2 } }, { t = { 1, 2, 3 } }))
    assert.is_false(memo.equal({ n = 1 }, { n = 1.0 }))
    local sig = signal.signal(1)
    assert.is_false(memo.equal({ s = sig }, { s = signal.signal(1) }))
    assert.is_true(memo.equal({ s = sig }, { s = sig }))
    -- tables with a metatable (elements) are equal only when they are the same table
    assert.is_false(memo.equal({ c = h.p(nil, "x") }, { c = h.p(nil, "x") }))
  end)

  it("renders a row again when a number prop turns from 1 to 1.0, or a field comes or goes", function()
    local n, extra = 1, signal.signal(nil) -- (a signal takes 1.0 for 1: no change)
    local tick = signal.signal(0)
    local Num = clank.defineView { name = "num", render = function(p) return h.b(nil, tostring(p.n), p.x) end }
    local m = clank.mount(clank.defineView { name = "o", render = function()
      return h.p(nil, tick.value, Num { n = n, x = extra.value })
    end })
    n = 1.0
    tick.value = 1
    assert.are.equal("<p>1<b>1.0</b></p>", clank.render(m:tree()))
    extra.value = "!"
    assert.are.equal("<p>1<b>1.0!</b></p>", clank.render(m:tree()))
    extra.value = nil
    assert.are.equal("<p>1<b>1.0</b></p>", clank.render(m:tree()))
    m:dispose()
  end)

  it("renders a row again when its props hold a new element (children)", function()
    local renders = 0
    local Box = clank.defineView { name = "box", render = function(p)
      renders = renders + 1
      return h.div(nil, p.children)
    end }
    local tick = signal.signal(0)
    local m = clank.mount(clank.defineView { name = "outer", render = function()
      return h.main(nil, tick.value, h(Box, nil, h.p(nil, "x")))
    end })
    tick.value = 1
    assert.are.equal(2, renders)
    m:dispose()
  end)

  it("renders a call whose props changed again in its place: what it calls with the same props is kept", function()
    local inner, row_renders = 0, 0
    local Badge = clank.defineView { name = "badge", render = function(p)
      inner = inner + 1
      return h.i(nil, p.label)
    end }
    local Row = clank.defineView { name = "row", render = function(p)
      row_renders = row_renders + 1
      return h.li(nil, p.title, Badge { label = "new" })
    end }
    local title = signal.signal("A")
    local m = clank.mount(clank.defineView { name = "list", render = function()
      return h.ul(nil, Row { key = "a", title = title.value }, Row { key = "b", title = "B" })
    end })
    local badge_a = m:tree().children[1].children[2]
    title.value = "A2"
    assert.are.equal(3, row_renders) -- a twice, b once
    assert.are.equal(2, inner) -- each row's badge once: a's second render got its badge back
    assert.are.equal(badge_a, m:tree().children[1].children[2])
    assert.are.equal("<ul><li>A2<i>new</i></li><li>B<i>new</i></li></ul>", clank.render(m:tree()))
    title.value = "A" -- and back
    assert.are.equal("<ul><li>A<i>new</i></li><li>B<i>new</i></li></ul>", clank.render(m:tree()))
    assert.are.equal(4, row_renders)
    assert.are.equal(2, inner)
    m:dispose()
  end)

  it("keeps a component that renders nothing, and renders it again when its signal changes", function()
    local shown = signal.signal(false)
    local Maybe = clank.defineView { name = "maybe", render = function(p)
      if shown.value then return h.b(nil, p.text) end
      return nil
    end }
    local m = clank.mount(clank.defineView { name = "outer", render = function()
      return h.p(nil, "a", Maybe { text = "x" }, Maybe { key = "k", text = "y" })
    end })
    assert.are.equal("<p>a</p>", clank.render(m:tree()))
    shown.value = true
    assert.are.equal("<p>a<b>x</b><b>y</b></p>", clank.render(m:tree()))
    shown.value = false
    assert.are.equal("<p>a</p>", clank.render(m:tree()))
    shown.value = true
    assert.are.equal("<p>a<b>x</b><b>y</b></p>", clank.render(m:tree()))
    m:dispose()
  end)

  it("compares props with the fields an entry keeps in its slots (render_core.slotsMatcher)", function()
    -- an entry as memo keeps one: the count in slot 2, the props table in slot 3, up to two
    -- names and values from slot 4 on; deep compares tables (here: by their field x)
    local deep_calls = 0
    local function deep(a, b, depth)
      deep_calls = deep_calls + 1
      assert.are.equal(1, depth)
      return type(a) == "table" and type(b) == "table" and a.x == b.x
    end
    local same = require("clank.render_core").slotsMatcher(deep, 2, 3, 4, 2)
    local function entry(props)
      local e, at, n = { false, 0, props, false, false, false, false }, 4, 0
      for k, v in next, props do
        n = n + 1
        if n <= 2 then e[at], e[at + 1], at = k, v, at + 2 end
      end
      e[2] = n
      return e
    end
    local kept = entry({ a = 1, b = "x" })
    assert.is_true(same(kept, { a = 1, b = "x" }))
    assert.is_true(same(kept, { b = "x", a = 1 })) -- made in another order
    local reordered = entry({ a = 1, b = "x" })
    reordered[4], reordered[5], reordered[6], reordered[7] = reordered[6], reordered[7], reordered[4], reordered[5]
    assert.is_true(same(reordered, { a = 1, b = "x" })) -- kept in another order
    assert.is_false(same(kept, { a = 1 }))
    assert.is_false(same(kept, { a = 1, b = "x", c = true }))
    assert.is_false(same(kept, { a = 1, c = "x" }))
    assert.is_false(same(kept, { a = 1.0, b = "x" })) -- 1 and 1.0 render apart
    assert.is_false(same(kept, { a = 2, b = "x" }))
    assert.is_false(same(kept, setmetatable({ a = 1, b = "x" }, {})))
    assert.is_false(same(kept, "props"))
    assert.are.equal(0, deep_calls)
    local t = entry({ t = { x = 1 } })
    assert.is_true(same(t, { t = { x = 1 } }))
    assert.is_false(same(t, { t = { x = 2 } }))
    assert.are.equal(2, deep_calls)
    -- more fields than the slots hold: compared with the props table in slot 3
    local many = entry({ a = 1, b = 2, c = { x = 3 } })
    assert.are.equal(3, many[2])
    assert.is_true(same(many, { a = 1, b = 2, c = { x = 3 } }))
    assert.is_false(same(many, { a = 1, b = 2, c = { x = 4 } }))
    assert.is_false(same(many, { a = 1, b = 2 }))
    assert.is_false(same(many, { a = 1, b = 2, c = { x = 3 }, d = 4 }))
    assert.has_error(function() require("clank.render_core").slotsMatcher(deep, "two", 3, 4, 2) end)
    assert.has_error(function() same("entry", { a = 1 }) end)
  end)

  it("asks for the next calls' entries ahead, changing nothing (render_core.callsPrefetcher)", function()
    local render_core = require("clank.render_core")
    local prefetch, arrays = render_core.callsPrefetcher(21)
    -- the Lua this runtime is built with is 5.4, whose tables' array parts it knows how to find
    assert.are.equal("Lua 5.4", _VERSION)
    assert.is_true(arrays)
    local big = {}
    for i = 1, 41 do big[i] = i end
    local order = { big, {}, { 1 }, "not a table", 42, false, setmetatable({ 1, 2 }, { __index = error }), big }
    for n = -3, #order + 3 do
      assert.are.equal(0, select("#", prefetch(order, n))) -- nothing back, nothing raised
    end
    assert.are.equal(8, #order)
    assert.are.equal(41, #big)
    for i = 1, 41 do assert.are.equal(i, big[i]) end
    assert.are.equal("not a table", order[4])
    assert.are.same({}, order[2])
    -- a hole in the list, and a list with a hash part only
    prefetch({ [3] = big }, 1)
    prefetch({ x = big }, 0)
    prefetch(order, math.maxinteger)
    prefetch(order, math.mininteger)
    assert.has_error(function() prefetch("order", 1) end)
    assert.has_error(function() prefetch(order, "one") end)
    assert.has_error(function() prefetch(order, 1.5) end)
    assert.has_error(function() render_core.callsPrefetcher(-1) end)
    assert.has_error(function() render_core.callsPrefetcher(1025) end)
    assert.has_error(function() render_core.callsPrefetcher("all") end)
    local none = render_core.callsPrefetcher(0) -- heads only
    none(order, 0)
  end)

  it("keeps a call's props in the entry and compares the next call's with them", function()
    local renders = 0
    local Cell = clank.defineView { name = "cell", render = function(p)
      renders = renders + 1
      return h.td(nil, p.a, p.b, p.c and p.c.x or "", p.d, p.e, p.f, p.g)
    end }
    local props = signal.signal({ a = 1, b = "x" })
    local row_renders = 0
    local m = clank.mount(clank.defineView { name = "row", render = function()
      row_renders = row_renders + 1
      local p = props.value
      local given = {}
      -- the fields given in a different order from one render to the next
      local names = {}
      for k in pairs(p) do names[#names + 1] = k end
      table.sort(names, row_renders % 2 == 0 and function(x, y) return x > y end or nil)
      for _, k in ipairs(names) do given[k] = p[k] end
      return h.tr(nil, Cell(given))
    end })
    assert.are.equal(1, renders)
    props.value = { a = 1, b = "x" }
    assert.are.equal(1, renders)
    props.value = { b = "x", a = 1, c = { x = 2 } }
    assert.are.equal(2, renders)
    assert.are.equal("<tr><td>1x2</td></tr>", clank.render(m:tree()))
    props.value = { a = 1, b = "x", c = { x = 2 } } -- an equal table
    assert.are.equal(2, renders)
    props.value = { a = 1, b = "x" } -- one field fewer
    assert.are.equal(3, renders)
    assert.are.equal("<tr><td>1x</td></tr>", clank.render(m:tree()))
    local seven = { a = 1, b = "x", c = { x = 3 }, d = "d", e = "e", f = "f", g = "g" }
    props.value = seven -- more fields than an entry keeps
    assert.are.equal(4, renders)
    assert.are.equal("<tr><td>1x3defg</td></tr>", clank.render(m:tree()))
    props.value = { a = 1, b = "x", c = { x = 3 }, d = "d", e = "e", f = "f", g = "g" }
    assert.are.equal(4, renders)
    props.value = { a = 1, b = "x", c = { x = 3 }, d = "d", e = "e", f = "f", g = "G" }
    assert.are.equal(5, renders)
    props.value = { a = 2 } -- fewer again: the slots of the ones gone are not compared
    assert.are.equal(6, renders)
    props.value = { a = 2 }
    assert.are.equal(6, renders)
    assert.are.equal("<tr><td>2</td></tr>", clank.render(m:tree()))
    m:dispose()
  end)

  it("renders the mounted view itself again on setData, its rows not", function()
    local app = list_app()
    local m = clank.mount(app.List)
    m:setData(nil)
    assert.are.equal(2, app.listRenders)
    assert.are.same({ a = 1, b = 1, c = 1 }, app.renders)
    m:dispose()
  end)

  it("renders every call outside a mounted view", function()
    local app = list_app()
    local a = app.List {}
    local b = app.List {}
    assert.are_not.equal(a.children[1], b.children[1])
    assert.are.same({ a = 2, b = 2, c = 2 }, app.renders)
  end)

  it("validates a key the props declare", function()
    local V = clank.defineView { name = "k", props = s.object { key = s.string() },
      render = function(p) return h.i({ key = p.key }) end }
    local ok = pcall(clank.mount, clank.defineView { name = "o", render = function() return V { key = 7 } end })
    assert.is_false(ok)
    local m = clank.mount(clank.defineView { name = "o", render = function() return V { key = "a" } end })
    assert.are.equal("<i></i>", clank.render(m:tree()))
  end)

  it("validates new props, with key set aside (Row's schema has no key)", function()
    local app = list_app()
    local m = clank.mount(app.List)
    assert.has_error(function() app.tasks.value = { { id = "a", title = 42 } } end)
    -- the render raised: the mount kept its tree
    assert.are.equal('<ul><li>A</li><li>B</li><li>C</li></ul>', clank.render(m:tree()))
    m:dispose()
  end)

  it("passes a row's error on with the traceback of where it was raised; the same props raise again", function()
    local fail = signal.signal(false)
    local Bad = clank.defineView { name = "bad", render = function(p)
      if fail.value then error("row broke") end
      return h.p(nil, p.text)
    end }
    local tick, errors = signal.signal(0), {}
    local m = clank.mount(clank.defineView { name = "outer", render = function()
      return h.main(nil, tick.value, Bad { text = "x" })
    end }, nil, { onError = function(err) errors[#errors + 1] = err end })
    fail.value = true
    assert.are.equal(1, #errors)
    assert.matches("memo_spec.lua:%d+: row broke", errors[1])
    assert.matches("stack traceback:\n.-memo_spec.lua:%d+: in", errors[1])
    tick.value = 1
    assert.are.equal(2, #errors)
    fail.value = false
    assert.are.equal("<main>1<p>x</p></main>", clank.render(m:tree()))
    m:dispose()
  end)
end)

describe("Mounted:hibernate", function()
  local function app()
    local a = { n = signal.signal(1), other = signal.signal("x"), renders = 0, rendered = {} }
    a.Row = clank.defineView { name = "row", render = function(p) return h.li(nil, p.i, ":", a.n.value) end }
    a.List = clank.defineView { name = "list", render = function(_, data)
      a.renders = a.renders + 1
      local items = {}
      for i = 1, 3 do items[i] = a.Row { i = i } end
      return h.ul({ title = data }, items)
    end }
    a.m = clank.mount(a.List, nil, { data = "d1", onRender = function(_, v) a.rendered[#a.rendered + 1] = v end })
    return a
  end

  it("lets go of the tree and its rows; a change of a signal it read renders a new version", function()
    local a = app()
    local tree = setmetatable({ a.m:tree(), a.m:tree().children[1] }, { __mode = "v" })
    local woken = 0
    assert.is_true(a.m:hibernate(function() woken = woken + 1 end))
    assert.is_true(a.m:asleep())
    assert.is_nil(a.m:tree())
    collectgarbage()
    collectgarbage()
    assert.is_nil(tree[1])
    assert.is_nil(tree[2])
    a.other.value = "y" -- not read: nothing
    assert.are.equal(0, woken)
    a.n.value = 2
    assert.are.equal(1, woken)
    assert.is_false(a.m:asleep())
    assert.are.equal(2, a.m.version)
    assert.are.same({ 2 }, a.rendered)
    assert.are.equal('<ul title="d1"><li>1:2</li><li>2:2</li><li>3:2</li></ul>', clank.render(a.m:tree()))
    -- awake again: changes render as before
    a.n.value = 3
    assert.are.equal(3, a.m.version)
    a.m:dispose()
  end)

  it("wakes as the same version when nothing changed, and setData wakes it as a new one", function()
    local a = app()
    local html = clank.render(a.m:tree())
    a.m:hibernate(function() end)
    a.m:wake(false)
    assert.are.equal(1, a.m.version)
    assert.are.equal(html, clank.render(a.m:tree()))
    a.m:hibernate(function() end)
    a.m:setData("d2")
    assert.are.equal(2, a.m.version)
    assert.are.equal('<ul title="d2"><li>1:1</li><li>2:1</li><li>3:1</li></ul>', clank.render(a.m:tree()))
    a.m:dispose()
    assert.is_false(a.m:hibernate(function() end))
  end)
end)

describe("Mounted:wake", function()
  it("passes a render that raises on waking to onError, as any re-render", function()
    local broken, errors = false, {}
    local m = clank.mount(clank.defineView { name = "w", render = function()
      if broken then error("broken now") end
      return h.p(nil, "ok")
    end }, nil, { onError = function(err) errors[#errors + 1] = err end })
    m:hibernate(function() end)
    broken = true
    m:wake(false)
    assert.are.equal(1, #errors)
    assert.matches("broken now", errors[1])
    m:dispose()
  end)
end)

describe("memo.treeSwaps", function()
  -- two renders of a list of Row components (their trees are memo outputs), as a mounted view
  -- makes them; extra(i) puts something more in row i's <li>, outside the component
  local function two_renders(first, second)
    local Row = clank.defineView { name = "row", render = function(p) return h.td({ key = p.key }, p.text) end }
    local which = signal.signal(first)
    local m = clank.mount(clank.defineView { name = "rows", render = function()
      local cells = {}
      for i, r in ipairs(which.value) do
        cells[i] = r.plain and h.td({ key = r.key }, r.text) or Row { key = r.key, text = r.text }
      end
      return h.tr({ class = which.value.class, onClick = function() end }, cells)
    end })
    local before = m:tree()
    which.value = second
    local after = m:tree()
    m:dispose()
    return before, after
  end

  it("gives the components' old and new trees where only they changed, in order", function()
    local old, new = two_renders({ { key = "a", text = "A" }, { key = "b", text = "B" }, { key = "c", text = "C" } },
      { { key = "a", text = "A" }, { key = "b", text = "B2" }, { key = "c", text = "C2" } })
    local olds, news = memo.treeSwaps(old, new)
    assert.are.same({ old.children[2], old.children[3] }, olds)
    assert.are.same({ new.children[2], new.children[3] }, news)
    assert.are.equal(new.children[1], old.children[1]) -- unchanged: the same tree, not a swap
  end)

  it("takes a new event handler for the old one, and gives no swap when nothing changed", function()
    local old, new = two_renders({ { key = "a", text = "A" } }, { { key = "a", text = "A" } })
    assert.are_not.equal(old.props.onClick, new.props.onClick)
    assert.are.same({}, (memo.treeSwaps(old, new)))
  end)

  it("gives nil when anything but components' trees differs", function()
    local cases = {
      -- an attribute of the element around them
      { { { key = "a", text = "A" }, class = "x" }, { { key = "a", text = "B" }, class = "y" } },
      -- an element that is not a component's tree
      { { { key = "a", text = "A", plain = true } }, { { key = "a", text = "B", plain = true } } },
      -- a component's tree in another's place (another key)
      { { { key = "a", text = "A" } }, { { key = "b", text = "B" } } },
      -- one row more
      { { { key = "a", text = "A" } }, { { key = "a", text = "A" }, { key = "b", text = "B" } } },
    }
    for i, c in ipairs(cases) do
      local old, new = two_renders(c[1], c[2])
      assert.is_nil(memo.treeSwaps(old, new), "case " .. i)
    end
  end)

  it("tells 1 from 1.0, in children and in attributes", function()
    assert.is_nil(memo.treeSwaps(h.p(nil, 1), h.p(nil, 1.0)))
    assert.is_nil(memo.treeSwaps(h.p({ tabindex = 1 }, "x"), h.p({ tabindex = 1.0 }, "x")))
    assert.are.same({}, (memo.treeSwaps(h.p({ tabindex = 1 }, 2), h.p({ tabindex = 1 }, 2))))
  end)

  it("gives nil past 64 swaps", function()
    local a, b = {}, {}
    for i = 1, 65 do
      a[i] = { key = "k" .. i, text = "A" }
      b[i] = { key = "k" .. i, text = "B" }
    end
    local old, new = two_renders(a, b)
    assert.is_nil(memo.treeSwaps(old, new))
    local old64, new64 = two_renders({ table.unpack(a, 1, 64) }, { table.unpack(b, 1, 64) })
    assert.are.equal(64, #memo.treeSwaps(old64, new64))
  end)
end)
