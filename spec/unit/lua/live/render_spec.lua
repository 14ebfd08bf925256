-- Live rendering (SPEC §11): data-clank-on, positional data-clank-key, data-clank-confirm and
-- the implied tbody; and the surface of a mounted view listing the view's own top element.
local clank = require "clank"
local h, s = clank.h, clank.schema
local LIVE = { live = true }

describe("clank.render (live)", function()
  local f = function() end

  it("writes data-clank-on and a positional data-clank-key on elements with handlers", function()
    local tree = h.div(nil,
      h.p(nil, "text"),
      "loose text",
      h.ul(nil, h.li(nil, "a"), h.li({ onClick = f }, "b")),
      h.input({ onInput = f, onChange = f }))
    assert.are.equal(table.concat {
      "<div><p>text</p>loose text<ul><li>a</li>",
      '<li data-clank-key="0.1.1" data-clank-on="click">b</li></ul>',
      '<input data-clank-key="0.2" data-clank-on="change input"></div>',
    }, clank.render(tree, LIVE))
  end)

  it("keys a list of top elements from 0", function()
    assert.are.equal('<p>a</p><button data-clank-key="1" data-clank-on="click">b</button>',
      clank.render({ h.p(nil, "a"), h.button({ onClick = f }, "b") }, LIVE))
  end)

  it("never writes an inline on* attribute, live or not", function()
    local el = h.form({ onSubmit = f }, h.button({ onClick = f }, "Go"))
    assert.are.equal("<form><button>Go</button></form>", clank.render(el))
    local html = clank.render(el, LIVE)
    assert.is_nil(html:find(" on", 1, true))
  end)

  it("writes the tbody an HTML parser implies, keys counting the server's children", function()
    local tree = h.table(nil,
      h.caption(nil, "T"),
      h.tr(nil, h.td(nil, "1")),
      h.tr({ onClick = f }, h.td(nil, "2")),
      h.tfoot(nil, h.tr(nil, h.td(nil, "f"))))
    assert.are.equal(table.concat {
      "<table><caption>T</caption><tbody><tr><td>1</td></tr>",
      '<tr data-clank-key="0.2" data-clank-on="click"><td>2</td></tr></tbody>',
      "<tfoot><tr><td>f</td></tr></tfoot></table>",
    }, clank.render(tree, LIVE))
    assert.are.equal("<table><tbody><tr><td>x</td></tr></tbody></table>",
      clank.render(h.table(nil, h.tr(nil, h.td(nil, "x")))))
    assert.are.equal("<table><thead><tr><th>h</th></tr></thead><tbody><tr><td>x</td></tr></tbody></table>",
      clank.render(h.table(nil, h.thead(nil, h.tr(nil, h.th(nil, "h"))), h.tbody(nil, h.tr(nil, h.td(nil, "x"))))))
  end)

  it("writes data-clank-confirm when the agentAction requires confirmation", function()
    local remove = clank.defineAction { name = "items.remove", description = "Remove an item.",
      input = s.object {}, sideEffects = "destructive", handler = function() return {} end }
    local read = clank.defineAction { name = "items.read", description = "Read.",
      input = s.object {}, sideEffects = "read", handler = function() return {} end }
    assert.are.equal(
      '<button data-clank-action="items.remove" data-clank-confirm="Remove an item. (destructive)">x</button>',
      clank.render(h.button({ agentAction = remove }, "x"), LIVE))
    assert.are.equal(
      '<button data-clank-action="items.remove" data-clank-confirm="Remove an item. (destructive)">x</button>',
      clank.render(h.button({ agentAction = "items.remove" }, "x"),
        { live = true, actions = { ["items.remove"] = remove } }))
    assert.are.equal('<button data-clank-action="items.read">x</button>',
      clank.render(h.button({ agentAction = read }, "x"), LIVE))
    assert.are.equal('<button data-clank-action="items.remove">x</button>',
      clank.render(h.button({ agentAction = remove }, "x"))) -- not live
  end)
end)

describe("clank.createAgentSurface over a mounted view", function()
  it("lists the view's top element when it is kept", function()
    local View = clank.defineView { name = "v", render = function()
      return h.section({ agentId = "top" }, h.button(nil, "Go"))
    end }
    local nodes = clank.createAgentSurface(clank.mount(View)):inspect()
    assert.are.same({ { id = "top", tag = "section", label = "Go",
      children = { { tag = "button", role = "button", label = "Go" } } } }, nodes)
  end)

  -- SPEC §11: "the view's own top element is listed (as a wrapper when it has no id or role)"
  it("lists a top element without an id or role as a wrapper", function()
    local View = clank.defineView { name = "v", render = function()
      return h.div(nil, h.button(nil, "A"), h.button(nil, "B"))
    end }
    assert.are.same({ { tag = "div", children = { { tag = "button", role = "button", label = "A" },
      { tag = "button", role = "button", label = "B" } } } }, clank.createAgentSurface(clank.mount(View)):inspect())
  end)
end)

describe("clank.mount with data", function()
  it("passes load's data to render and keeps the last tree when a re-render fails", function()
    local n = clank.signal.signal(1)
    local errors = {}
    local View = clank.defineView { name = "v", render = function(_, data)
      if n.value < 0 then error("negative") end
      return h.p(nil, data.label, n.value)
    end }
    local m = clank.mount(View, {}, { data = { label = "n=" }, onError = function(e) errors[#errors + 1] = e end })
    assert.are.equal("<p>n=1</p>", clank.render(m:tree()))
    n.value = -1
    assert.are.equal("<p>n=1</p>", clank.render(m:tree()))
    assert.are.equal(1, #errors)
    assert.are.equal(1, m.version)
    n.value = 2
    assert.are.equal("<p>n=2</p>", clank.render(m:tree()))
    assert.are.equal(2, m.version)
    m:dispose()
  end)
end)
