-- Keyed children (issue 29): the prop `key` names an element among its siblings. Live renders
-- write it only inside data-clank-key (the element's path, its own segment "k:<key>"); a
-- duplicate or a key of another type raises; clank.live resolves a keyed path by key, in
-- whichever version's tree, and refuses malformed paths. Expected values written by hand.
local clank = require "clank"
local live_mod = require "clank.live"
local token = require "clank.live.token"
local json = clank.json
local h = clank.h
local signal = clank.signal
local LIVE = { live = true }
local f = function() end

describe("clank.render (keyed children)", function()
  it("writes a keyed element's path with its key as its segment, for strings and integers", function()
    local tree = h.ul(nil,
      h.li({ key = "row-7" }, "a"),
      h.li({ key = 42 }, h.button({ onClick = f }, "b")),
      h.li({ onClick = f }, "c"))
    assert.are.equal(table.concat {
      '<ul><li data-clank-key="0.k:row-7">a</li>',
      '<li data-clank-key="0.k:42"><button data-clank-key="0.k:42.0" data-clank-on="click">b</button></li>',
      '<li data-clank-key="0.2" data-clank-on="click">c</li></ul>', -- unkeyed: its index, as before
    }, clank.render(tree, LIVE))
  end)

  it("writes a negative integer key with its sign", function()
    assert.are.equal('<ul><li data-clank-key="0.k:-3">x</li></ul>',
      clank.render(h.ul(nil, h.li({ key = -3 }, "x")), LIVE))
  end)

  it("keys a keyed element among the top elements of a list", function()
    assert.are.equal('<p data-clank-key="k:a">a</p><p data-clank-key="1" data-clank-on="click">b</p>',
      clank.render({ h.p({ key = "a" }, "a"), h.p({ onClick = f }, "b") }, LIVE))
  end)

  it("percent-encodes every byte of a key but letters, digits, _ and -", function()
    local html = clank.render(h.ul(nil, h.li({ key = 'a"<b>&c.d%e f:\u{e9}' }, "x")), LIVE)
    assert.are.equal('<ul><li data-clank-key="0.k:a%22%3Cb%3E%26c%2Ed%25e%20f%3A%C3%A9">x</li></ul>', html)
  end)

  it("writes an empty key as an empty segment", function()
    assert.are.equal('<ul><li data-clank-key="0.k:">x</li></ul>',
      clank.render(h.ul(nil, h.li({ key = "" }, "x")), LIVE))
  end)

  it("never writes key as an attribute, and nothing for it outside live renders", function()
    local tree = h.ul(nil, h.li({ key = "a", class = "row" }, "x"))
    assert.are.equal('<ul><li class="row">x</li></ul>', clank.render(tree))
    assert.are.equal('<ul><li class="row" data-clank-key="0.k:a">x</li></ul>', clank.render(tree, LIVE))
  end)

  it("ignores the key of a view's single top element (it has no siblings) but checks it", function()
    assert.are.equal('<div data-clank-key="0" data-clank-on="click">x</div>',
      clank.render(h.div({ key = "top", onClick = f }, "x"), LIVE))
    assert.has_error(function() clank.render(h.div({ key = false }), LIVE) end,
      "clank.render: the key of <div> must be a string or an integer (got boolean)")
  end)

  it("raises on a duplicate key among siblings, naming it and the parent", function()
    local tree = h.ul(nil, h.li({ key = "a" }), h.li({ key = "b" }), h.li({ key = "a" }))
    for _, options in ipairs { LIVE, false } do
      assert.has_error(function() clank.render(tree, options or nil) end,
        'clank.render: duplicate key "a" among the children of <ul>')
    end
    assert.has_error(function() clank.render(h.ol(nil, h.li({ key = 7 }), h.li({ key = "7" })), LIVE) end,
      'clank.render: duplicate key "7" among the children of <ol>')
    assert.has_error(function() clank.render({ h.p({ key = "x" }), h.p({ key = "x" }) }, LIVE) end,
      'clank.render: duplicate key "x" among the elements of a list')
  end)

  it("takes the same key under different parents", function()
    local tree = h.div(nil, h.ul(nil, h.li({ key = 1 }, "a")), h.ul(nil, h.li({ key = 1 }, "b")))
    assert.are.equal(table.concat {
      '<div><ul><li data-clank-key="0.0.k:1">a</li></ul>',
      '<ul><li data-clank-key="0.1.k:1">b</li></ul></div>',
    }, clank.render(tree, LIVE))
  end)

  it("checks each list's keys apart when lists are nested, before and after the inner ones", function()
    local inner = h.ul(nil, h.li({ key = "x" }), h.li({ key = "a" }))
    local ok = h.ul(nil, h.li({ key = "a" }, inner), h.li({ key = "x" }), h.li({ key = "b" }, inner))
    assert.truthy(clank.render(ok, LIVE):find('data-clank-key="0.k:b.0.k:a"', 1, true))
    -- the outer list's "a" is found again after the inner list that also had one
    local late = h.ol(nil, h.li({ key = "a" }, inner), h.li({ key = "b" }), h.li({ key = "a" }))
    assert.has_error(function() clank.render(late, LIVE) end,
      'clank.render: duplicate key "a" among the children of <ol>')
    local deep = h.ol(nil, h.li({ key = "a" }, h.ul(nil, h.li({ key = "y" }), h.li({ key = "y" }))))
    assert.has_error(function() clank.render(deep, LIVE) end,
      'clank.render: duplicate key "y" among the children of <ul>')
  end)

  it("tells thousands of keys apart, and finds the one duplicate among them", function()
    local items = {}
    for i = 1, 3000 do items[i] = h.li({ key = i % 2 == 0 and i or ("k" .. i) }) end
    local html = clank.render(h.ul(nil, items), LIVE)
    assert.truthy(html:find('data-clank-key="0.k:3000"', 1, true))
    assert.truthy(html:find('data-clank-key="0.k:k2999"', 1, true))
    items[3001] = h.li({ key = "k1777" })
    assert.has_error(function() clank.render(h.ul(nil, items), LIVE) end,
      'clank.render: duplicate key "k1777" among the children of <ul>')
  end)

  it("raises for keyed children whose list claims more children than any page holds", function()
    local ul = h.ul(nil, h.li({ key = "a" }))
    local kids = ul.children
    ul.children = setmetatable({}, { __len = function() return math.maxinteger end,
      __index = function(_, i) return kids[i] end })
    assert.has_error(function() clank.render(ul, LIVE) end, "clank.render: too many children")
  end)

  it("renders as before after a render that raised, and inside a render", function()
    local bad = h.ul(nil, h.li({ key = "a" }), h.li({ key = "a" }))
    local good = h.ul(nil, h.li({ key = "a" }, "A"), h.li({ key = "b" }, "B"))
    local want = '<ul><li data-clank-key="0.k:a">A</li><li data-clank-key="0.k:b">B</li></ul>'
    for _ = 1, 3 do
      assert.has_error(function() clank.render(bad, LIVE) end)
      assert.are.equal(want, clank.render(good, LIVE))
    end
    -- a mounted view's tree is read during the walk; a render made there has a state of its own
    local inner_html
    local node = setmetatable({}, { __index = { tree = function()
      inner_html = clank.render(good, LIVE)
      return h.p({ key = "p" }, "in")
    end } })
    assert.are.equal('<p>in</p>', clank.render(node, LIVE)) -- a single top element: its key unused
    assert.are.equal(want, inner_html)
  end)

  it("raises on a key that is neither a string nor an integer, naming the element and the type", function()
    local cases = {
      { true, "boolean" }, { 1.5, "a number that is not an integer" }, { 2.0, "a number that is not an integer" },
      { {}, "table" }, { f, "function" }, { json.null, "userdata" },
    }
    for _, case in ipairs(cases) do
      for _, options in ipairs { LIVE, false } do
        assert.has_error(function() clank.render(h.ul(nil, h.li({ key = case[1] })), options or nil) end,
          "clank.render: the key of <li> must be a string or an integer (got " .. case[2] .. ")")
      end
    end
  end)

  it("raises when key is also given as data-clank-key", function()
    assert.has_error(function() clank.render(h.ul(nil, h.li({ key = "a", ["data-clank-key"] = "x" })), LIVE) end,
      "clank.render: attribute data-clank-key given twice")
  end)
end)

describe("clank.live.findKey", function()
  local find = live_mod.findKey
  local function rows(order)
    local items = {}
    for i, id in ipairs(order) do
      items[i] = h.li({ key = id }, h.span(nil, "row " .. id), h.button({ agentId = "b-" .. id, onClick = f }))
    end
    return h.div(nil, h.h1(nil, "t"), h.ul(nil, items))
  end

  it("finds a keyed row's button in the tree before and after a reorder", function()
    local before, after = rows { "a", "b", 7 }, rows { 7, "b", "a" }
    for _, tree in ipairs { before, after } do
      assert.are.equal("b-a", find(tree, "0.1.k:a.1").props.agentId)
      assert.are.equal("b-7", find(tree, "0.1.k:7.1").props.agentId)
    end
    -- positions still count every element child
    assert.are.equal("b-a", find(before, "0.1.0.1").props.agentId)
    assert.are.equal("b-7", find(after, "0.1.0.1").props.agentId)
  end)

  it("decodes a percent-encoded key", function()
    local tree = h.ul(nil, h.li({ key = "x" }), h.li({ key = 'a.b "c"' }, h.b()))
    assert.are.equal("b", find(tree, "0.k:a%2Eb%20%22c%22.0").tag)
  end)

  it("finds nothing for a key no sibling has", function()
    local tree = rows { "a" }
    assert.is_nil(find(tree, "0.1.k:z.1"))
    assert.is_nil(find(tree, "0.k:a"))
  end)

  it("counts element children only, in a tree that is an element or a list of them", function()
    local list = { h.p(nil, "one"), h.ul(nil, "text ", h.li({ key = 3 }), " more ", h.li(nil, h.b())) }
    assert.are.equal("p", find(list, "0").tag)
    assert.are.equal("b", find(list, "1.1.0").tag)
    assert.are.equal("li", find(list, "1.k:3").tag)
    assert.are.equal("li", find(list, "01.0").tag) -- digits as tonumber reads them
    assert.is_nil(find(list, "2"))
    assert.is_nil(find(list, "1.2"))
    assert.is_nil(find(list, "1.99999999999999999999999"))
    assert.is_nil(find(h.p(nil, "x"), "1"))
    assert.are.equal("p", find(h.p(nil, "x"), "0").tag)
  end)

  it("matches a key by its bytes: an integer by its digits, the empty key, a byte escaped", function()
    local tree = h.ul(nil, h.li({ key = "" }, "e"), h.li({ key = -12 }, "n"), h.li({ key = "a\0b" }, "z"))
    assert.are.equal("e", find(tree, "0.k:").children[1])
    assert.are.equal("n", find(tree, "0.k:-12").children[1])
    assert.are.equal("z", find(tree, "0.k:a%00b").children[1])
    assert.is_nil(find(tree, "0.k:-1"))
    assert.is_nil(find(tree, "0.k:a%00"))
  end)

  -- lists of 16 rows or more are looked up through an index of their keys (keys.c), which
  -- must answer what a scan of the rows answers, whatever happened to the list since
  local function long_list(n)
    local items = {}
    for i = 1, n do
      local key = i % 2 == 0 and i or "r" .. i
      items[i] = h.li({ key = key }, "row " .. i)
    end
    local tree = h.ul(nil, items)
    return tree.children, tree -- the list the tree holds, changed in place below
  end

  it("finds each row of a long list by its key, the first of a key given twice", function()
    local items, tree = long_list(40)
    items[30] = h.li({ key = "r11" }, "again")
    for i = 1, 40 do
      local key = i % 2 == 0 and tostring(i) or "r" .. i
      if i ~= 30 then assert.are.equal("row " .. i, find(tree, "0.k:" .. key).children[1]) end
    end
    assert.are.equal("row 11", find(tree, "0.k:r11").children[1])
    assert.is_nil(find(tree, "0.k:r30"))
    assert.is_nil(find(tree, "0.k:41"))
    assert.are.equal("row 12", find(tree, "0.k:12").children[1]) -- after a miss too
  end)

  it("finds the rows of a long list changed in place since the last lookup", function()
    local items, tree = long_list(40)
    assert.are.equal("row 5", find(tree, "0.k:r5").children[1])
    items[5] = h.li({ key = "new" }, "replaced") -- another key where r5 was
    items[1], items[2] = items[2], items[1]
    items[41] = h.li({ key = "tail" }, "appended")
    items[20] = h.li({ key = 20 }, "same key, new row")
    assert.is_nil(find(tree, "0.k:r5"))
    assert.are.equal("replaced", find(tree, "0.k:new").children[1])
    assert.are.equal("row 1", find(tree, "0.k:r1").children[1])
    assert.are.equal("row 2", find(tree, "0.k:2").children[1])
    assert.are.equal("appended", find(tree, "0.k:tail").children[1])
    assert.are.equal("same key, new row", find(tree, "0.k:20").children[1])
    -- moved after its index was made: the row at the old place has another key now
    items[7], items[9] = items[9], items[7]
    assert.are.equal("row 7", find(tree, "0.k:r7").children[1])
    assert.are.equal("row 9", find(tree, "0.k:r9").children[1])
    table.remove(items, 3)
    assert.is_nil(find(tree, "0.k:r3"))
    assert.are.equal("row 4", find(tree, "0.k:4").children[1])
    assert.are.equal("appended", find(tree, "0.k:tail").children[1])
  end)

  it("finds nothing for a path not in its one form, however it could be read", function()
    local tree = h.ul(nil, h.li({ key = "a." }), h.li({ key = "%" }))
    assert.is_nil(find(tree, "0.k:a."))
    assert.is_nil(find(tree, "0.k:%"))
    assert.is_nil(find(tree, "0.k:a%2e"))
    assert.are.equal("li", find(tree, "0.k:a%2E").tag)
    assert.are.equal("li", find(tree, "0.k:%25").tag)
    assert.is_nil(find(42, "0"))
  end)
end)

describe("clank.live.validPath", function()
  local valid = live_mod.validPath
  local good = { "0", "0.2.1", "0.k:row-7", "k:a.0", "0.k:.1", "0.k:a%2Eb", "0.k:%C3%A9", "0.k:-3", "0.k:a_b" }
  local bad = { "", ".", "0.", ".0", "0..1", "a.b", "0.k", "0.K:a", "0.x:a", "0.k:a b", "0.k:a:b",
    "0.k:a%2", "0.k:a%2e", "0.k:%41", "0.k:a%G1", "0.k:a%%", "0.k:\u{e9}", "0.-1", "0.1a", "0.k:%",
    "0.k:%5f", "0.k:%5F", "0.k:a\0", "0 ", "+1" }
  for _, key in ipairs(good) do
    it("accepts " .. key, function() assert.is_true(valid(key)) end)
  end
  for _, key in ipairs(bad) do
    it("refuses " .. string.format("%q", key), function() assert.is_false(valid(key)) end)
  end
end)

-- A live session over a fake socket.
local harness = require "helpers.live_socket"
local settle, fake_socket = harness.settle, harness.fake_socket

local REQUEST = { method = "GET", url = "/", path = "/", query = {}, headers = {} }

local function event(seq, v, key)
  return json.encode { t = "event", seq = seq, v = v, key = key, type = "click" }
end

local List = clank.defineView {
  name = "list",
  load = function() return { order = signal.signal { "a", "b", "c" }, last = signal.signal("none") } end,
  render = function(_, d)
    local items = {}
    for i, id in ipairs(d.order.value) do
      items[i] = h.li({ key = id }, h.button({ onClick = function() d.last.value = id end }, id))
    end
    return h.div(nil,
      h.button({ agentId = "reverse", onClick = function()
        local o = d.order.value
        d.order.value = { o[3], o[2], o[1] }
      end }, "Reverse"),
      h.ul(nil, items),
      h.output({ id = "last" }, d.last.value))
  end,
}

describe("clank.live events on keyed paths", function()
  local live, sock, id
  before_each(function()
    live = live_mod.new { app = clank.app { name = "t", views = { List } }, secret = "spec-secret" }
    sock = fake_socket()
    id = token.sign("spec-secret", "list", {}, nil, os.time())
    live:connect(id, REQUEST, sock)
    settle(0)
  end)

  local function last_text()
    return sock:last().html:match('<output id="last">([^<]*)</output>')
  end

  it("reaches the same row from the DOM of a version before a reorder and after it", function()
    assert.truthy(sock:last().html:find('<li data-clank-key="0.1.k:a"><button data-clank-key="0.1.k:a.0"', 1, true))
    live:receive(id, event(1, 1, "0.0"), sock) -- reverse: v 2 holds c, b, a
    assert.are.same({ "html", 1, 2 }, { sock:last().t, sock:last().seq, sock:last().v })
    assert.truthy(sock:last().html:find('<ul><li data-clank-key="0.1.k:c">', 1, true), sock:last().html)
    live:receive(id, event(2, 1, "0.1.k:a.0"), sock) -- sent from v 1, where a was first
    assert.are.equal("a", last_text())
    live:receive(id, event(3, 3, "0.1.k:c.0"), sock) -- from the newest DOM, where c is first
    assert.are.equal("c", last_text())
    assert.is_nil(sock.closed)
  end)

  it("closes with 1002 on a malformed keyed path", function()
    live:receive(id, event(1, 1, "0.1.k:a%2e.0"), sock)
    assert.are.equal(1002, sock.closed and sock.closed.code)
  end)
end)
