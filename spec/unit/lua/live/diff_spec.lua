-- clank.live.diff (README, Live views: the "diff" frame): splices between two renders, their
-- positions and lengths in UTF-16 code units. Differential: for random trees and random edits,
-- the splices applied to the old HTML, as the browser client applies them, give the new HTML
-- byte for byte.
local clank = require "clank"
local diff = require "clank.live.diff"
local h = clank.h
local LIVE = { live = true }

-- A UTF-8 string as its UTF-16 code units (what a JavaScript string holds), and back.
local function to16(s)
  local out = {}
  for _, c in utf8.codes(s) do
    if c >= 0x10000 then
      c = c - 0x10000
      out[#out + 1] = 0xD800 + (c >> 10)
      out[#out + 1] = 0xDC00 + (c & 0x3FF)
    else
      out[#out + 1] = c
    end
  end
  return out
end

local function from16(units)
  local out, i = {}, 1
  while i <= #units do
    local c = units[i]
    if c >= 0xD800 and c <= 0xDBFF then
      local lo = assert(units[i + 1], "a lone high surrogate")
      assert(lo >= 0xDC00 and lo <= 0xDFFF, "a high surrogate without its low one")
      c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00)
      i = i + 1
    else
      assert(c < 0xDC00 or c > 0xDFFF, "a lone low surrogate")
    end
    out[#out + 1] = utf8.char(c)
    i = i + 1
  end
  return table.concat(out)
end

-- The client's algorithm (runtime/client/client.js, applySplices): in UTF-16 units, each
-- splice at or after the end of the previous one, within the old string.
local function apply(old, splices)
  local src, out, from = to16(old), {}, 1
  local prev = 0
  for _, sp in ipairs(splices) do
    local at, del, ins = sp[1], sp[2], sp[3]
    assert(math.type(at) == "integer" and math.type(del) == "integer" and type(ins) == "string")
    assert(at >= prev and del >= 0 and at + del <= #src, "a splice out of order or range")
    for k = from, at do out[#out + 1] = src[k] end
    for _, u in ipairs(to16(ins)) do out[#out + 1] = u end
    from, prev = at + del + 1, at + del
  end
  for k = from, #src do out[#out + 1] = src[k] end
  return from16(out)
end

-- A small deterministic generator (the same cases on every run).
local seed = 12345
local function rand(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n + 1
end

local WORDS = { "a", "row", "Zoë", "naïve", "日本語", "😀", "𝄞 clef", "<&>\"'", "x y", "" }
local TAGS = { "div", "p", "span", "li", "b", "td" }

local function text() return WORDS[rand(#WORDS)] .. WORDS[rand(#WORDS)] end

-- A random tree as plain data: { tag, attrs, children } or a string.
local function gen(depth)
  if depth == 0 or rand(4) == 1 then return text() end
  local node = { tag = TAGS[rand(#TAGS)], attrs = {}, children = {} }
  if rand(2) == 1 then node.attrs.class = text() end
  if rand(3) == 1 then node.attrs.title = text() end
  for i = 1, rand(5) - 1 do node.children[i] = gen(depth - 1) end
  return node
end

local function copy(n)
  if type(n) == "string" then return n end
  local c = { tag = n.tag, attrs = {}, children = {} }
  for k, v in pairs(n.attrs) do c.attrs[k] = v end
  for i, ch in ipairs(n.children) do c.children[i] = copy(ch) end
  return c
end

-- One random edit somewhere in the tree: insert, remove, change a text or an attribute.
local function edit(root)
  local nodes = {}
  local function walk(n)
    if type(n) ~= "string" then
      nodes[#nodes + 1] = n
      for _, c in ipairs(n.children) do walk(c) end
    end
  end
  walk(root)
  local n = nodes[rand(#nodes)]
  local what, kids = rand(4), n.children
  if what == 1 then
    table.insert(kids, rand(#kids + 1), gen(2))
  elseif what == 2 and #kids > 0 then
    table.remove(kids, rand(#kids))
  elseif what == 3 and #kids > 0 then
    kids[rand(#kids)] = text()
  else
    n.attrs[rand(2) == 1 and "class" or "title"] = rand(5) == 1 and nil or text()
  end
end

local function build(n)
  if type(n) == "string" then return n end
  local kids = {}
  for i, c in ipairs(n.children) do kids[i] = build(c) end
  local props = {}
  for k, v in pairs(n.attrs) do props[k] = v end
  return h[n.tag](props, kids)
end

local function render(n) return clank.render(h.div(nil, build(n)), LIVE) end

-- The renders of a random tree and of a copy given one to three random edits: old, new.
local function render_edited()
  local tree = { tag = "section", attrs = {}, children = { gen(3), gen(3), gen(3) } }
  local edited = copy(tree)
  for _ = 1, rand(3) do edit(edited) end
  return render(tree), render(edited)
end

describe("clank.live.diff", function()
  it("gives splices that turn the old render into the new one, for random trees and edits", function()
    for _ = 1, 300 do
      local old, new = render_edited()
      local splices = diff.splices(old, new)
      assert.are.equal(new, apply(old, splices))
    end
  end)

  it("gives the same splices when told how many bytes the two have the same at each end", function()
    local function same_ends(a, b)
      local n, p, q = math.min(#a, #b), 0, 0
      while p < n and a:byte(p + 1) == b:byte(p + 1) do p = p + 1 end
      while q < n - p and a:byte(#a - q) == b:byte(#b - q) do q = q + 1 end
      return p, q
    end
    for _ = 1, 200 do
      local old, new = render_edited()
      local p, q = same_ends(old, new)
      local want = diff.splices(old, new)
      -- told all of it, or less (the rest is compared)
      assert.are.same(want, diff.splices(old, new, p, q))
      assert.are.same(want, diff.splices(old, new, rand(p + 1) - 1, rand(q + 1) - 1))
    end
  end)

  it("counts positions in UTF-16 units: a character past U+FFFF is two", function()
    -- the token "<p>😀a" is 3 + 2 + 1 units; "<p>😀a</p>" before "<i>" is 3 + 2 + 1 + 4
    assert.are.same({ { 0, 6, "<p>😀b" } }, diff.splices("<p>😀a</p><i>x</i>", "<p>😀b</p><i>x</i>"))
    assert.are.same({ { 10, 4, "<b>é" } }, diff.splices("<p>😀a</p><i>x</i>", "<p>😀a</p><b>é</i>"))
  end)

  it("gives nothing for the same HTML, and nil for invalid UTF-8", function()
    assert.are.same({}, diff.splices("<p>a</p>", "<p>a</p>"))
    assert.is_nil(diff.splices("<p>\255</p>", "<p>a</p>"))
    assert.is_nil(diff.splices("<p>\192</p><b>", "<p>a</p><i>"))
  end)

  it("changes one row of a 100-row list and a counter elsewhere in two small splices", function()
    local function view(changed, count)
      local rows = {}
      for i = 1, 100 do
        rows[i] = h.li({ key = i }, h.span(nil, i == changed and "changed" or "row " .. i),
          h.button({ onClick = function() end }, "Done"))
      end
      return clank.render(h.div(nil, h.p(nil, "Count: ", count), h.ul({ key = "l" }, rows)), LIVE)
    end
    local old, new = view(nil, 1), view(50, 2)
    local splices = diff.splices(old, new)
    assert.are.equal(2, #splices)
    assert.are.equal(new, apply(old, splices))
    local bytes = 0
    for _, sp in ipairs(splices) do bytes = bytes + #sp[3] end
    assert.is_true(bytes < 64, ("%d bytes inserted"):format(bytes))
  end)

  -- (diff.c works on the C stack up to some 170 tokens, in a userdata beyond)
  it("gives splices however many tokens differ: one, then every row of a 300-row list", function()
    local function list(word, from, to)
      local rows = {}
      for i = 1, 300 do
        rows[i] = h.li(nil, h.b(nil, (i >= from and i <= to) and word or "same"), " ", i)
      end
      return clank.render(h.ul(nil, rows), LIVE)
    end
    local old = list("old", 1, 300)
    for _, case in ipairs({ { 150, 150 }, { 100, 130 }, { 1, 300 } }) do
      local new = list("new", case[1], case[2])
      local splices = diff.splices(old, new)
      assert.are.equal(new, apply(old, splices))
    end
  end)
end)

describe("Html buffers (render_core.htmlBuffer): a session's renders, rewritten in place", function()
  local core = require "clank.render_core"

  it("holds a render given as into, and gives it back as text, length and splices", function()
    local a, b = core.htmlBuffer(), core.htmlBuffer()
    assert.are.equal(0, #a)
    assert.are.equal("", tostring(a))
    local tree1 = h.ul(nil, h.li({ key = "x" }, "one"), h.li({ key = "y" }, "two"))
    local tree2 = h.ul(nil, h.li({ key = "x" }, "one"), h.li({ key = "y" }, "2"))
    assert.are.equal(a, clank.render(tree1, { live = true, into = a }))
    assert.are.equal(clank.render(tree1, LIVE), tostring(a))
    assert.are.equal(#tostring(a), #a)
    clank.render(tree2, { live = true, into = b })
    local want = diff.splices(clank.render(tree1, LIVE), clank.render(tree2, LIVE))
    assert.are.same(want, diff.splices(a, b))
    assert.are.same(want, diff.splices(tostring(a), b))
    assert.are.equal(tostring(b), apply(tostring(a), diff.splices(a, b)))
  end)

  it("is rewritten by the next render, smaller or larger, and empty once freed", function()
    local buf = core.htmlBuffer()
    local big = {}
    for i = 1, 2000 do big[i] = h.li(nil, "item " .. i) end
    clank.render(h.ul(nil, big), { live = true, into = buf })
    assert.is_true(#buf > 20000)
    clank.render(h.p(nil, "small"), { live = true, into = buf })
    assert.are.equal("<p>small</p>", tostring(buf))
    buf:free()
    assert.are.equal(0, #buf)
    assert.are.equal("", tostring(buf))
    clank.render(h.b(nil, "again"), { live = true, into = buf })
    assert.are.equal("<b>again</b>", tostring(buf))
  end)

  it("is patched from another (htmlPatch): each old text found there once, replaced", function()
    local base, into = core.htmlBuffer(), core.htmlBuffer()
    clank.render(h.ul(nil, h.li(nil, "aa"), h.li(nil, "bb"), h.li(nil, "cc")), { live = true, into = base })
    local before = tostring(base)
    -- then how many bytes are the same at the start (up to <li>aa</li>) and at the end (after
    -- <li>cc</li>)
    assert.are.same({ true, #"<ul>", #"</ul>" },
      { core.htmlPatch(base, into, { "<li>cc</li>", "<li>aa</li>" }, { "<li>C</li>", "" }) })
    assert.are.equal("<ul><li>bb</li><li>C</li></ul>", tostring(into))
    assert.are.equal((before:gsub("<li>cc</li>", "<li>C</li>"):gsub("<li>aa</li>", "")), tostring(into))
    assert.are.equal(before, tostring(base)) -- the base is read, not written
    clank.render(h.p(nil, "kept"), { live = true, into = into })
    -- not found, found twice, overlapping: false, into as it was
    assert.is_false(core.htmlPatch(base, into, { "<li>dd</li>" }, { "x" }))
    assert.is_false(core.htmlPatch(base, into, { "<li>" }, { "x" }))
    assert.is_false(core.htmlPatch(base, into, { "<li>aa</li>", "aa</li><li>bb" }, { "x", "y" }))
    assert.are.equal("<p>kept</p>", tostring(into))
    assert.has_error(function() core.htmlPatch(base, base, { "a" }, { "b" }) end)
    assert.has_error(function() core.htmlPatch(base, into, {}, {}) end)
    assert.has_error(function() core.htmlPatch(base, into, { "a" }, {}) end)
    assert.has_error(function() core.htmlPatch(base, into, { 1 }, { {} }) end)
    assert.has_error(function() core.htmlPatch("text", into, { "a" }, { "b" }) end)
  end)

  it("finds an old text longer than 256 bytes only where all of it is, and only once", function()
    -- rows whose first 300 bytes are the same: each is told apart by what follows
    local same = ("x"):rep(300)
    local function row(tail) return h.li(nil, same .. tail) end
    local base, into = core.htmlBuffer(), core.htmlBuffer()
    clank.render(h.ul(nil, row("a"), row("b"), row("c")), { live = true, into = base })
    -- the second and the last: the first place whose opening matches is not theirs
    assert.is_true((core.htmlPatch(base, into, { "<li>" .. same .. "b</li>" }, { "<li>B</li>" })))
    assert.are.equal("<ul><li>" .. same .. "a</li><li>B</li><li>" .. same .. "c</li></ul>", tostring(into))
    assert.is_true((core.htmlPatch(base, into, { "<li>" .. same .. "c</li></ul>" }, { "</ul>" })))
    assert.are.equal("<ul><li>" .. same .. "a</li><li>" .. same .. "b</li></ul>", tostring(into))
    -- there twice: refused; not there at all (a longer text than any row): refused
    clank.render(h.ul(nil, row("a"), row("a")), { live = true, into = base })
    assert.is_false(core.htmlPatch(base, into, { "<li>" .. same .. "a</li>" }, { "x" }))
    assert.is_false(core.htmlPatch(base, into, { "<li>" .. same .. "aa</li>" }, { "x" }))
    assert.is_false(core.htmlPatch(base, into, { tostring(base) .. "<" }, { "x" }))
  end)

  it("is patched where it is (htmlPatchInPlace): the old text's place in UTF-16 units", function()
    local buf = core.htmlBuffer()
    -- é is 2 bytes and 1 unit, — 3 bytes and 1 unit, 😀 4 bytes and 2 units
    clank.render(h.ul(nil, h.li(nil, "é—😀"), h.li(nil, "aa"), h.li(nil, "bb")), { live = true, into = buf })
    local at = #"<ul><li>" + 1 + 1 + 2 + #"</li>"
    assert.are.equal(at, core.htmlPatchInPlace(buf, "<li>aa</li>", "<li>A</li>"))
    assert.are.equal("<ul><li>é—😀</li><li>A</li><li>bb</li></ul>", tostring(buf))
    -- longer than the buffer holds: it grows, and what follows moves
    local long = "<li>" .. ("z"):rep(5000) .. "</li>"
    assert.are.equal(at + #"<li>A</li>", core.htmlPatchInPlace(buf, "<li>bb</li>", long))
    assert.are.equal("<ul><li>é—😀</li><li>A</li>" .. long .. "</ul>", tostring(buf))
    assert.are.equal(0, core.htmlPatchInPlace(buf, "<ul><li>é", "<ol><li>e"))
    assert.are.equal(#"<ol><li>e" + 1 + 2 + #"</li><li>A</li>", core.htmlPatchInPlace(buf, long, ""))
    assert.are.equal("<ol><li>e—😀</li><li>A</li></ul>", tostring(buf))
    -- not there, there twice: nil; before it not valid UTF-8: false; the buffer as it was
    assert.is_nil(core.htmlPatchInPlace(buf, "<li>B</li>", "x"))
    assert.is_nil(core.htmlPatchInPlace(buf, "li>", "x"))
    local bad = core.htmlBuffer()
    clank.render(h.p(nil, clank.raw("\xff<b>x</b>")), { live = true, into = bad })
    assert.is_false(core.htmlPatchInPlace(bad, "<b>x</b>", "<b>y</b>"))
    assert.are.equal("<ol><li>e—😀</li><li>A</li></ul>", tostring(buf))
    assert.are.equal("<p>\xff<b>x</b></p>", tostring(bad))
    assert.is_nil(core.htmlPatchInPlace(core.htmlBuffer(), "a", "b")) -- an empty buffer
    assert.has_error(function() core.htmlPatchInPlace("text", "a", "b") end)
  end)

  it("is left as it was by a render that raised, and refuses what is not a buffer", function()
    local buf = core.htmlBuffer()
    clank.render(h.p(nil, "kept"), { live = true, into = buf })
    assert.has_error(function()
      clank.render(h.ul(nil, h.li({ key = 1 }), h.li({ key = 1 })), { live = true, into = buf })
    end, 'clank.render: duplicate key "1" among the children of <ul>')
    assert.are.equal("<p>kept</p>", tostring(buf))
    assert.has_error(function() clank.render(h.p(), { live = true, into = {} }) end)
    assert.has_error(function() diff.splices({}, "x") end)
  end)
end)
