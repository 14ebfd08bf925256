-- The HTML kept of components' trees (issue 29, README "Live views"): a live render given
-- fragments and outputs writes an unchanged component's HTML from what it kept, while that tree
-- is at the same place. Differential: for random lists of components and random edits, a
-- mounted view rendered with fragments gives the HTML a render without them gives, byte for byte.
local clank = require "clank"
local signal = require "clank.signal"
local memo = require "clank.ui.memo"
local render = require "clank.ui.render"
local h = clank.h

local function live(fragments)
  return { live = true, fragments = fragments, outputs = memo.outputs }
end

describe("kept fragments", function()
  it("writes a kept element from its fragment while it stays at the same place", function()
    local row = h.li({ key = "a", onClick = function() end }, "first")
    memo.outputs[row] = true
    local fragments = setmetatable({}, { __mode = "k" })
    local html = render.render(h.ul(nil, row), live(fragments))
    assert.are.equal('<ul><li data-clank-key="0.k:a" data-clank-on="click">first</li></ul>', html)
    -- what changes the table without a new one (only events and the surface do, and they drop
    -- the fragments): the kept HTML shows it was used
    row.children[1] = "changed"
    assert.are.equal(html, render.render(h.ul(nil, row), live(fragments)))
    -- keyed, a sibling before it leaves its place (its key) as it was
    assert.are.equal('<ul><li data-clank-key="0.0" data-clank-on="click">x</li><li data-clank-key="0.k:a" '
      .. 'data-clank-on="click">first</li></ul>',
      render.render(h.ul(nil, h.li({ onClick = function() end }, "x"), row), live(fragments)))
    -- at another place it is written again
    assert.are.equal('<div><ul><li data-clank-key="0.0.k:a" data-clank-on="click">changed</li></ul></div>',
      render.render(h.div(nil, h.ul(nil, row)), live(fragments)))
  end)

  it("keeps nothing of elements that are not outputs, nor without fragments", function()
    local fragments = setmetatable({}, { __mode = "k" })
    local el = h.p(nil, "x")
    render.render(h.div(nil, el), live(fragments))
    assert.is_nil(next(fragments))
    memo.outputs[el] = true
    render.render(h.div(nil, el), { live = true })
    el.children[1] = "y"
    assert.are.equal('<div><p>y</p></div>', render.render(h.div(nil, el), live(fragments)))
  end)

  it("is not used under a select, whose value picks the options", function()
    local option = h.option({ value = "a" }, "A")
    memo.outputs[option] = true
    local fragments = setmetatable({}, { __mode = "k" })
    render.render(h.select({ value = "a" }, option), live(fragments))
    assert.are.equal('<select><option selected value="a">A</option></select>',
      render.render(h.select({ value = "a" }, option), live(fragments)))
    assert.are.equal('<select><option value="a">A</option></select>',
      render.render(h.select({ value = "b" }, option), live(fragments)))
  end)

  -- A small deterministic generator (the same cases on every run).
  local function generator(seed)
    local x = seed
    return function(n)
      x = (x * 1103515245 + 12345) % 2147483648
      return x % n + 1
    end
  end

  it("gives, for random lists and edits, the HTML a render without fragments gives", function()
    for seed = 1, 40 do
      local rnd = generator(seed)
      local items = signal.signal({})
      local flags = {}
      local function flag(id)
        flags[id] = flags[id] or signal.signal(false)
        return flags[id]
      end
      local Row = clank.defineView { name = "row", render = function(p)
        local on = flag(p.item.id).value
        return h.li({ key = p.keyed and p.item.id or nil, class = on and "on" or nil },
          h.span(nil, p.item.title), on and h.em(nil, "!") or nil,
          h.button({ onClick = function() flag(p.item.id).value = not on end }, "toggle"))
      end }
      local List = clank.defineView { name = "list", render = function()
        local rows = {}
        for i, it in ipairs(items.value) do
          rows[i] = Row { key = it.keyed and it.id or nil, keyed = it.keyed, item = it }
        end
        return h.main(nil, h.h1(nil, #rows, " rows"), h.ul(nil, rows), Row { item = { id = "tail", title = "tail" } })
      end }
      local m = clank.mount(List)
      local fragments = setmetatable({}, { __mode = "k" })
      local next_id = 0
      local function new_item()
        next_id = next_id + 1
        return { id = "i" .. next_id, title = "item " .. next_id, keyed = rnd(3) > 1 }
      end
      for _ = 1, 30 do
        local list = {}
        for i, it in ipairs(items.value) do list[i] = it end
        local op = rnd(6)
        if op == 1 or #list == 0 then
          table.insert(list, rnd(#list + 1), new_item())
        elseif op == 2 then
          table.remove(list, rnd(#list))
        elseif op == 3 then
          local i, j = rnd(#list), rnd(#list)
          list[i], list[j] = list[j], list[i]
        elseif op == 4 then
          local i = rnd(#list)
          list[i] = { id = list[i].id, title = list[i].title .. "+", keyed = list[i].keyed }
        end
        if op == 5 and #list > 0 then
          local f = flag(list[rnd(#list)].id)
          f.value = not f.value
        else
          items.value = list
        end
        local kept = render.render(m:tree(), live(fragments))
        assert.are.equal(render.render(m:tree(), { live = true }), kept, "seed " .. seed)
      end
      m:dispose()
    end
  end)
end)
