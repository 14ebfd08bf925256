-- clank.createAgentSurface over element trees and mounted views (SPEC §9). Expected nodes are
-- written by hand from the SPEC.
local clank = require "clank"
local h, json = clank.h, clank.json

local function surface(...) return clank.createAgentSurface(h.main(nil, ...)) end
local function inspect(...) return surface(...):inspect() end

describe("clank.createAgentSurface", function()
  it("refuses what is neither an element nor a mounted view", function()
    assert.has_error(function() clank.createAgentSurface({}) end,
      "clank.createAgentSurface: expected an element tree or a mounted view")
  end)

  describe("inspect", function()
    it("lists the root's children, never the root itself, as a JSON array", function()
      local s = clank.createAgentSurface(h.main({ id = "root" }, h.button({ id = "b" }, "Go")))
      local nodes = s:inspect()
      assert.are.same({ { id = "b", tag = "button", role = "button", label = "Go" } }, nodes)
      assert.is_true(json.isArray(nodes))
      assert.are.equal("[]", json.encode(clank.createAgentSurface(h.main()):inspect()))
    end)

    -- SPEC §9: "Other elements appear only as wrappers of kept children."
    it("lists other elements only as wrappers of kept children, { tag, children }", function()
      local nodes = inspect(h.div(nil, h.section(nil, h.a({ href = "/x" }, "X"))),
        h.nav({ agentId = "menu" }, h.ul(nil, h.li(nil, h.button(nil, "A")), h.li(nil, "text only"))),
        h.div({ class = "empty" }, h.p(nil, "no kept child")))
      assert.are.same({
        { tag = "div", children = {
          { tag = "section", children = { { tag = "a", role = "link", label = "X", href = "/x" } } } } },
        -- text content as the DOM joins it: no space between elements
        { id = "menu", tag = "nav", label = "Atext only", children = {
          { tag = "ul", children = {
            { tag = "li", children = { { tag = "button", role = "button", label = "A" } } } } } } },
      }, nodes)
      assert.is_true(json.isArray(nodes[1].children))
      assert.is_true(json.isArray(nodes[2].children[1].children))
    end)

    it("lists a table's rows inside the tbody the renderer writes and a browser shows", function()
      local nodes = inspect(h.table(nil, h.caption(nil, h.button(nil, "C")),
        h.tr(nil, h.td(nil, h.button(nil, "A"))), h.tr(nil, h.td(nil, "text")),
        h.tfoot(nil, h.tr(nil, h.td(nil, h.a({ href = "/f" }, "F")))),
        h.tr({ hidden = true }, h.td(nil, h.button(nil, "hidden"))), h.tr(nil, h.th(nil, "text"))))
      assert.are.same({ { tag = "table", children = {
        { tag = "caption", children = { { tag = "button", role = "button", label = "C" } } },
        { tag = "tbody", children = { { tag = "tr", children = { { tag = "td", children = {
          { tag = "button", role = "button", label = "A" } } } } } } },
        { tag = "tfoot", children = { { tag = "tr", children = { { tag = "td", children = {
          { tag = "a", role = "link", label = "F", href = "/f" } } } } } } },
        -- the second run of rows has a tbody of its own, with nothing kept in it
      } } }, nodes)
      assert.are.equal(
        "<table><caption><button>C</button></caption><tbody><tr><td><button>A</button></td></tr><tr><td>text</td></tr>"
        .. "</tbody><tfoot><tr><td><a href=\"/f\">F</a></td></tr></tfoot><tbody><tr hidden><td><button>hidden</button>"
        .. "</td></tr><tr><th>text</th></tr></tbody></table>",
        clank.render(h.table(nil, h.caption(nil, h.button(nil, "C")),
          h.tr(nil, h.td(nil, h.button(nil, "A"))), h.tr(nil, h.td(nil, "text")),
          h.tfoot(nil, h.tr(nil, h.td(nil, h.a({ href = "/f" }, "F")))),
          h.tr({ hidden = true }, h.td(nil, h.button(nil, "hidden"))), h.tr(nil, h.th(nil, "text")))))
    end)

    local kept = {
      { "agentId", h.div({ agentId = "k" }, "t"), { id = "k", tag = "div", label = "t" } },
      { "id", h.span({ id = "k" }, "t"), { id = "k", tag = "span", label = "t" } },
      { "agentId over id", h.span({ id = "dom", agentId = "agent" }), { id = "agent", tag = "span" } },
      { "an explicit role", h.div({ role = "tab" }, "t"), { tag = "div", role = "tab", label = "t" } },
      { "intent", h.div({ intent = "nav" }), { tag = "div", intent = "nav" } },
      { "agentAction", h.div({ agentAction = "x.y" }), { tag = "div", action = "x.y" } },
      { "a description", h.div({ agentId = "d", agentDescription = "About." }),
        { id = "d", tag = "div", description = "About." } },
      { "an a without href (no role)", h.a(nil, "t"), { tag = "a", label = "t" } },
      { "summary", h.summary(nil, "More"), { tag = "summary", role = "button", label = "More" } },
    }
    for _, case in ipairs(kept) do
      it("keeps an element with " .. case[1], function()
        assert.are.same({ case[3] }, inspect(case[2]))
      end)
    end

    it("leaves out elements with nothing semantic", function()
      assert.are.same({}, inspect(h.div(nil, h.p(nil, "text"), h.span({ class = "x" }, "y"), h.label(nil, "z"))))
    end)

    local skipped = {
      { "agentHidden", { agentHidden = true } },
      { "hidden", { hidden = true } },
      { "hidden = \"\"", { hidden = "" } },
      { "aria-hidden=\"true\"", { ["aria-hidden"] = "true" } },
      { "aria-hidden = true", { ["aria-hidden"] = true } },
    }
    for _, case in ipairs(skipped) do
      it("skips the subtree of an element with " .. case[1], function()
        local props = case[2]
        props.agentId = "outer"
        assert.are.same({ { tag = "button", role = "button", label = "Shown" } },
          inspect(h.div(props, h.button({ agentId = "inner" }, "Inner")), h.button(nil, "Shown")))
      end)
    end

    it("keeps aria-hidden=\"false\" and hidden = false", function()
      assert.are.equal(2, #inspect(h.button({ ["aria-hidden"] = "false" }), h.button({ hidden = false })))
    end)

    it("skips input type=hidden", function()
      assert.are.same({}, inspect(h.input({ type = "hidden", name = "csrf", value = "tok", id = "t" })))
    end)

    local roles = {
      { h.button(), "button" },
      { h.summary(), "button" },
      { h.a({ href = "/" }), "link" },
      { h.select(), "combobox" },
      { h.select({ multiple = true }), "listbox" },
      { h.textarea(), "textbox" },
      { h.input(), "textbox" },
      { h.input({ type = "checkbox" }), "checkbox" },
      { h.input({ type = "radio" }), "radio" },
      { h.input({ type = "range" }), "slider" },
      { h.input({ type = "button" }), "button" },
      { h.input({ type = "submit" }), "button" },
      { h.input({ type = "reset" }), "button" },
      { h.input({ type = "email" }), "textbox" },
      { h.input({ type = "SUBMIT" }), "button" },
      { h.button({ role = "switch" }), "switch" },
    }
    for _, case in ipairs(roles) do
      it("gives " .. clank.render(case[1]) .. " the role " .. case[2], function()
        assert.are.equal(case[2], inspect(case[1])[1].role)
      end)
    end

    it("reports only true flags, with explicit expanded = false", function()
      local nodes = inspect(
        h.input({ id = "a", disabled = true, readonly = true, required = true, ["aria-invalid"] = "true" }),
        h.input({ id = "b", disabled = false, required = false, ["aria-invalid"] = "false" }),
        h.button({ id = "c", ["aria-expanded"] = "false" }),
        h.button({ id = "d", ["aria-expanded"] = true }),
        h.button({ id = "e", ["aria-disabled"] = "true" }),
        h.select({ id = "f", multiple = true }))
      assert.are.same({ id = "a", tag = "input", role = "textbox", disabled = true, readonly = true,
        required = true, invalid = true }, nodes[1])
      assert.are.same({ id = "b", tag = "input", role = "textbox" }, nodes[2])
      assert.is_false(nodes[3].expanded)
      assert.is_true(nodes[4].expanded)
      assert.is_true(nodes[5].disabled)
      assert.are.same({ id = "f", tag = "select", role = "listbox", multiple = true, value = {} }, nodes[6])
    end)

    it("always reports checked for checkboxes and radios", function()
      local nodes = inspect(h.input({ type = "checkbox", name = "a" }),
        h.input({ type = "radio", name = "b", value = "x", checked = true }))
      assert.are.same({ tag = "input", role = "checkbox", type = "checkbox", name = "a", checked = false },
        nodes[1])
      assert.are.same({ tag = "input", role = "radio", type = "radio", name = "b", value = "x", checked = true },
        nodes[2])
    end)

    it("reports name, type, placeholder, href and values", function()
      local nodes = inspect(
        h.input({ name = "q", type = "search", placeholder = "Find", value = "tea" }),
        h.a({ href = "/help", title = "Help" }),
        h.textarea({ name = "body" }, "Hello"),
        h.select({ name = "p" }, h.option({ value = "l" }, "Low"), h.option({ value = "h", selected = true }, "High")),
        h.select({ name = "first" }, h.option(nil, "One"), h.option(nil, "Two")))
      assert.are.same({ tag = "input", role = "textbox", name = "q", type = "search", placeholder = "Find",
        label = "Find", value = "tea" }, nodes[1])
      assert.are.same({ tag = "a", role = "link", href = "/help", label = "Help" }, nodes[2])
      assert.are.same({ tag = "textarea", role = "textbox", name = "body", value = "Hello" }, nodes[3])
      assert.are.equal("h", nodes[4].value)
      assert.are.equal("One", nodes[5].value)
    end)

    it("lists the selected values of a select multiple", function()
      local nodes = inspect(
        h.select({ multiple = true }, h.option({ value = "a", selected = true }), h.option({ value = "b" }),
          h.optgroup(nil, h.option({ value = "c", selected = true }))),
        h.select({ multiple = true, value = { "b" } }, h.option({ value = "a", selected = true }),
          h.option({ value = "b" })))
      assert.are.same({ "a", "c" }, nodes[1].value)
      assert.are.same({ "b" }, nodes[2].value)
      assert.are.equal('["a","c"]', json.encode(nodes[1].value))
    end)

    it("never shows password, file or format = password values anywhere", function()
      local secret = "hunter2-secret"
      local s = surface(h.form({ id = "login" },
        h.label({ ["for"] = "pw" }, "Password"),
        h.input({ id = "pw", type = "password", value = secret }),
        h.input({ id = "up", type = "file", value = "C:\\" .. secret }),
        h.input({ id = "pw2", type = "PASSWORD", value = secret }),
        h.textarea({ id = "key", format = "password" }, secret),
        h.input({ id = "tok", format = "password", value = secret })))
      local nodes = s:inspect()
      local encoded = json.encode(nodes)
      assert.is_nil(encoded:find(secret, 1, true), encoded)
      assert.are.equal("Password", nodes[1].children[1].label)
      assert.are.equal(5, #nodes[1].children)
    end)
  end)

  describe("labels", function()
    local function label_of(target, ...)
      return inspect(target, ...)[1].label
    end

    local cases = {
      { "agentLabel first", h.button({ agentLabel = "Agent", ["aria-label"] = "Aria", title = "T" }, "Text"), "Agent" },
      { "then aria-label", h.button({ ["aria-label"] = "Aria", title = "T" }, "Text"), "Aria" },
      { "then placeholder", h.input({ placeholder = "Ph", title = "T" }), "Ph" },
      { "then title", h.input({ title = "T" }), "T" },
      { "then text content", h.button(nil, "Save ", h.b(nil, "now")), "Save now" },
      { "without hidden text", h.button(nil, h.span({ ["aria-hidden"] = "true" }, "*"), "Star"), "Star" },
      { "numbers in text", h.button(nil, "Page ", 2), "Page 2" },
      { "raw text without tags", h.button(nil, clank.raw("<b>Bold</b> move")), "Bold move" },
      { "no text content for inputs", h.input({ value = "typed" }), nil },
      { "collapsed whitespace", h.button(nil, "  Save \n\t  all  "), "Save all" },
      { "an empty agentLabel skipped", h.button({ agentLabel = "  " }, "Text"), "Text" },
    }
    for _, case in ipairs(cases) do
      it("takes " .. case[1], function()
        assert.are.equal(case[3], label_of(case[2]))
      end)
    end

    it("joins aria-labelledby texts with a space, before <label for>", function()
      local nodes = inspect(
        h.span({ id = "l1" }, "First"), h.span({ id = "l2" }, " Second  part "),
        h.label({ ["for"] = "x" }, "For label"),
        h.input({ id = "x", ["aria-labelledby"] = "l1 missing l2" }))
      assert.are.equal("First Second part", nodes[3].label) -- after the two kept spans
    end)

    it("takes <label for=id> before the enclosing label", function()
      local nodes = inspect(h.label({ ["for"] = "x" }, "By for"),
        h.label(nil, "Around ", h.input({ id = "x", placeholder = "Ph" })))
      -- labels are not kept: the first is left out, the second is the input's wrapper
      assert.are.same({ { tag = "label", children = { { id = "x", tag = "input", role = "textbox",
        label = "By for", placeholder = "Ph" } } } }, nodes)
    end)

    it("takes the enclosing label before the placeholder", function()
      local nodes = inspect(h.label(nil, "Email", h.input({ placeholder = "you@x" })))
      assert.are.equal("Email", nodes[1].children[1].label) -- in the label's wrapper
    end)

    it("accepts htmlFor on the label", function()
      assert.are.equal("Name", inspect(h.label({ htmlFor = "n" }, "Name"), h.input({ id = "n" }))[1].label)
    end)

    it("cuts labels to their first 160 characters", function()
      assert.are.equal(string.rep("a", 160), label_of(h.button(nil, string.rep("a", 200))))
      assert.are.equal(string.rep("a", 160), label_of(h.button(nil, string.rep("a", 160))))
      local long = string.rep("é", 170)
      assert.are.equal(string.rep("é", 160), label_of(h.button({ agentLabel = long })))
    end)
  end)

  describe("activate", function()
    it("refuses missing, disabled and aria-disabled targets", function()
      local clicked = false
      local on = function() clicked = true end
      local s = surface(h.button({ id = "d", disabled = true, onClick = on }),
        h.button({ agentId = "a", ["aria-disabled"] = "true", onClick = on }))
      assert.is_false(s:activate("nope"))
      assert.is_false(s:activate("d"))
      assert.is_false(s:activate("a"))
      assert.is_false(s:activate(nil))
      assert.is_false(clicked)
    end)

    it("runs onClick with the event and targets agentId before id", function()
      local events = {}
      local s = surface(
        h.button({ id = "x", onClick = function() events[#events + 1] = "by-dom-id" end }),
        h.button({ agentId = "x", name = "n", onClick = function(e) events[#events + 1] = e end }))
      assert.is_true(s:activate("x"))
      assert.are.same({ { type = "click", target = { id = "x", name = "n", tag = "button" } } }, events)
    end)

    it("toggles a checkbox, then runs onClick, onInput and onChange", function()
      local seen = {}
      local function record(e) seen[#seen + 1] = e.type .. ":" .. tostring(e.checked) end
      local s = surface(h.input({ type = "checkbox", id = "c", onClick = record, onInput = record,
        onChange = record }))
      assert.is_true(s:activate("c"))
      assert.are.same({ "click:true", "input:true", "change:true" }, seen)
      assert.is_true(s:inspect()[1].checked)
      s:activate("c")
      assert.is_false(s:inspect()[1].checked)
    end)

    it("checks a radio and unchecks the rest of its group only", function()
      local changes = 0
      local s = surface(
        h.input({ type = "radio", name = "size", value = "s", id = "s", checked = true }),
        h.input({ type = "radio", name = "size", value = "m", id = "m",
          onChange = function() changes = changes + 1 end }),
        h.input({ type = "radio", name = "other", value = "o", id = "o", checked = true }))
      assert.is_true(s:activate("m"))
      local nodes = s:inspect()
      assert.are.same({ false, true, true }, { nodes[1].checked, nodes[2].checked, nodes[3].checked })
      assert.are.equal(1, changes)
      s:activate("m") -- already checked: no change event
      assert.are.equal(1, changes)
    end)

    it("submits the form of a submit button with the form's data", function()
      local submitted
      local s = surface(h.form({ id = "f", onSubmit = function(e) submitted = e end },
        h.input({ name = "title", value = "Tea" }),
        h.input({ name = "secret", type = "password", value = "pw" }),
        h.input({ type = "checkbox", name = "done", checked = true }),
        h.input({ type = "checkbox", name = "off" }),
        h.input({ name = "gone", value = "x", disabled = true }),
        h.select({ name = "tags", multiple = true }, h.option({ value = "a", selected = true }),
          h.option({ value = "b", selected = true })),
        h.textarea({ name = "body" }, "Hi"),
        h.button({ type = "button", id = "plain" }, "No submit"),
        h.button({ id = "go" }, "Go")))
      assert.is_true(s:activate("plain"))
      assert.is_nil(submitted)
      assert.is_true(s:activate("go"))
      assert.are.equal("submit", submitted.type)
      assert.are.same({ id = "f", tag = "form" }, submitted.target)
      assert.are.same({ title = "Tea", secret = "pw", done = "on", tags = { "a", "b" }, body = "Hi" },
        submitted.values)
    end)

    it("submits through input type=submit but not a button outside a form", function()
      local n = 0
      local s = surface(h.form({ onSubmit = function() n = n + 1 end }, h.input({ type = "submit", id = "i" })),
        h.button({ id = "lone" }))
      assert.is_true(s:activate("i"))
      assert.is_true(s:activate("lone"))
      assert.are.equal(1, n)
    end)
  end)

  describe("input", function()
    local refusals = {
      { "a missing control", "nope", "x" },
      { "a disabled control", "disabled", "x" },
      { "a readonly control", "readonly", "x" },
      { "an aria-disabled control", "aria-disabled", "x" },
      { "an aria-readonly control", "aria-readonly", "x" },
      { "a file input", "file", "x" },
      { "a hidden input", "hidden", "x" },
      { "a non-control", "div", "x" },
      { "a number for a text input", "text", 3 },
      { "a string for a checkbox", "check", "true" },
      { "a string for a select multiple", "multi", "a" },
      { "a list with a number for a select multiple", "multi", { "a", 1 } },
      { "an unknown option", "single", "zzz" },
      { "a list for a text input", "text", { "a" } },
    }
    for _, case in ipairs(refusals) do
      it("refuses " .. case[1], function()
        local called = false
        local on = function() called = true end
        local s = surface(
          h.input({ id = "disabled", disabled = true, onInput = on }),
          h.input({ id = "readonly", readonly = true, onInput = on }),
          h.input({ id = "aria-disabled", ["aria-disabled"] = "true", onInput = on }),
          h.textarea({ id = "aria-readonly", ["aria-readonly"] = "true", onInput = on }),
          h.input({ id = "file", type = "file", onInput = on }),
          h.input({ id = "hidden", type = "hidden", onInput = on }),
          h.div({ id = "div", onInput = on }),
          h.input({ id = "text", onInput = on }),
          h.input({ id = "check", type = "checkbox", onInput = on }),
          h.select({ id = "multi", multiple = true, onInput = on }, h.option({ value = "a" })),
          h.select({ id = "single", onInput = on }, h.option({ value = "a" })))
        assert.is_false(s:input(case[2], case[3]))
        assert.is_false(called)
      end)
    end

    it("types a string, then runs onInput and onChange", function()
      local seen = {}
      local function record(e) seen[#seen + 1] = e end
      local s = surface(h.input({ agentId = "t", name = "title", onInput = record, onChange = record }))
      assert.is_true(s:input("t", "Ship it"))
      assert.are.same({
        { type = "input", value = "Ship it", target = { id = "t", name = "title", tag = "input" } },
        { type = "change", value = "Ship it", target = { id = "t", name = "title", tag = "input" } },
      }, seen)
      assert.are.equal("Ship it", s:inspect()[1].value)
    end)

    it("sets a checkbox from a boolean and a radio in its group", function()
      local s = surface(h.input({ type = "checkbox", id = "c" }),
        h.input({ type = "radio", name = "g", id = "r1", checked = true }),
        h.input({ type = "radio", name = "g", id = "r2" }))
      assert.is_true(s:input("c", true))
      assert.is_true(s:input("r2", true))
      local nodes = s:inspect()
      assert.are.same({ true, false, true }, { nodes[1].checked, nodes[2].checked, nodes[3].checked })
    end)

    it("sets a select multiple from a list", function()
      local got
      local s = surface(h.select({ id = "m", multiple = true, onChange = function(e) got = e.value end },
        h.option({ value = "a", selected = true }), h.option({ value = "b" }), h.option({ value = "c" })))
      assert.is_true(s:input("m", { "b", "c" }))
      assert.are.same({ "b", "c" }, s:inspect()[1].value)
      assert.are.same({ "b", "c" }, got)
      assert.is_true(s:input("m", {}))
      assert.are.equal("[]", json.encode(s:inspect()[1].value))
    end)

    it("writes a password but never reads it back", function()
      local typed
      local s = surface(h.input({ type = "password", id = "pw", onInput = function(e) typed = e.value end }))
      assert.is_true(s:input("pw", "s3cret"))
      assert.are.equal("s3cret", typed)
      assert.is_nil(json.encode(s:inspect()):find("s3cret", 1, true))
    end)
  end)

  describe("over a mounted view", function()
    local signal = require "clank.signal"

    it("shows a re-render after a handler changes a signal", function()
      local count = signal.signal(0)
      local Counter = clank.defineView {
        name = "counter",
        render = function()
          return h.div(nil,
            h.output({ id = "n" }, count.value),
            h.button({ agentId = "inc", onClick = function() count.value = count.value + 1 end }, "Add"))
        end,
      }
      local view = clank.mount(Counter, {})
      local s = clank.createAgentSurface(view)
      -- the view's div is its nodes' wrapper
      assert.are.equal("0", s:inspect()[1].children[1].label)
      assert.is_true(s:activate("inc"))
      assert.is_true(s:activate("inc"))
      assert.are.equal("2", s:inspect()[1].children[1].label)
      view:dispose()
    end)

    -- SPEC §11: "the root of a mounted view is its container, so the view's own top element is
    -- listed (as a wrapper when it has no id or role)"
    it("lists the view's root element as the first node, a wrapper when it is not kept", function()
      local View = clank.defineView {
        name = "v", render = function() return h.form({ id = "f" }, h.button(nil, "Go")) end,
      }
      local s = clank.createAgentSurface(clank.mount(View))
      assert.are.same({ { id = "f", tag = "form", label = "Go",
        children = { { tag = "button", role = "button", label = "Go" } } } }, s:inspect())
      local Plain = clank.defineView {
        name = "plain", render = function() return h.div({ class = "card" }, h.button(nil, "Go")) end,
      }
      assert.are.same({ { tag = "div", children = { { tag = "button", role = "button", label = "Go" } } } },
        clank.createAgentSurface(clank.mount(Plain)):inspect())
    end)

    it("keeps typed text through a controlled input", function()
      local title = signal.signal("")
      local View = clank.defineView {
        name = "edit",
        render = function()
          return h.div(nil, h.input({ agentId = "title", value = title.value,
            onInput = function(e) title.value = e.value end }), h.p({ id = "echo" }, "Echo: ", title.value))
        end,
      }
      local s = clank.createAgentSurface(clank.mount(View))
      assert.is_true(s:input("title", "Tea"))
      local nodes = s:inspect()[1].children -- in the view's div
      assert.are.equal("Tea", nodes[1].value)
      assert.are.equal("Echo: Tea", nodes[2].label)
    end)

    it("lets a handler wait when it runs in a runtime task", function()
      local done = signal.signal(false)
      local View = clank.defineView {
        name = "slow",
        render = function()
          return h.div(nil, h.button({ agentId = "go", onClick = function()
            clank.sleep(1)
            done.value = true
          end }, done.value and "Done" or "Go"))
        end,
      }
      local s = clank.createAgentSurface(clank.mount(View))
      assert.has_error(function() s:activate("go") end) -- plain code cannot wait
      local run = clank.defineAction {
        name = "ui.activate", description = "Activates go.", input = clank.schema.object {},
        sideEffects = "write", handler = function() return { ok = s:activate("go") } end,
      }
      assert.is_true(run({}, {}).ok)
      assert.are.equal("Done", s:inspect()[1].children[1].label)
    end)
  end)
end)
