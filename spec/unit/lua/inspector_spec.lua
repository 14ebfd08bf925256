-- clank.inspector.view (SPEC §16) in process: the inspector's view over an app's contract, seen
-- through its agent surface (§9). Expected answers follow the bridge's envelope (§5).
local clank = require "clank"
local runner = require "clank.runner"
local element = require "clank.ui.element"
local inspector_view = require "clank.inspector.view"
local s, h, json = clank.schema, clank.h, clank.json

local add = clank.defineAction {
  name = "notes.add", description = "Add a note.", sideEffects = "write", confirmation = "write",
  input = s.object { text = s.string { min = 1 } },
  output = s.object { count = s.number { integer = true } },
  handler = function() return { count = 1 } end,
}
local echo = clank.defineAction {
  name = "echo", description = "Echo a string.", sideEffects = "none",
  input = s.string(),
  handler = function(v) return v end,
}
local Plain = clank.defineView {
  name = "plain", description = "No props",
  render = function() return h.div({ id = "plain" }, h.button({ agentId = "go" }, "Go")) end,
}
local Needy = clank.defineView {
  name = "needy", props = s.object { id = s.string() },
  render = function(p) return h.p(nil, p.id) end,
}
local Broken = clank.defineView {
  name = "broken", render = function() error("broken on purpose", 0) end,
}
local app = clank.app { name = "notes", actions = { add, echo }, views = { Plain, Needy, Broken } }

local log = {
  requests = { { method = "GET", path = "/x", status = 200, ms = 1.25, id = "r1", at = 0 } },
  reloads = { { result = "failed", ms = 3, at = 0, note = "app.lua:1: boom" } },
}

-- Runs fn in a task bound to a request (as a live event is) with that confirmation.
local function as_request(confirmed, fn)
  local driver = clank.defineAction {
    name = "test.driver", description = "Drives a task.", input = s.object {}, sideEffects = "read",
    handler = function()
      local co = coroutine.running()
      runner.bindRequest(co, { confirmed = confirmed })
      local ok, err = pcall(fn)
      runner.bindRequest(co, nil)
      assert(ok, err)
      return {}
    end,
  }
  driver({}, {})
end

local function mount()
  local View = inspector_view.define(app, function() return log end)
  local data = View.load({}, {})
  local m = clank.mount(View, {}, { data = data })
  return m, clank.createAgentSurface(m)
end

-- Every node of a surface, by id.
local function by_id(nodes, out)
  out = out or {}
  for _, n in ipairs(nodes) do
    if n.id then out[n.id] = n end
    if n.children then by_id(n.children, out) end
  end
  return out
end

local function text_of(tree, id)
  local found
  local function walk(node)
    if type(node) ~= "table" then return end
    if element.isElement(node) then
      if node.props.agentId == id or node.props.id == id then found = node return end
      for _, c in ipairs(node.children or {}) do walk(c) end
    else
      for _, c in ipairs(node) do walk(c) end
    end
  end
  walk(tree)
  if not found then return nil end
  local parts = {}
  for _, c in ipairs(found.children) do parts[#parts + 1] = tostring(c) end
  return table.concat(parts)
end

describe("clank.inspector.view", function()
  it("has a form for every action whose input is an object, and says why for the others", function()
    local m, surface = mount()
    local nodes = by_id(surface:inspect())
    assert.are.equal("textbox", nodes["action-notes.add.text"].role)
    assert.are.equal("button", nodes["action-notes.add.submit"].role)
    assert.are.equal("notes.add", nodes["action-notes.add"].action)
    assert.is_nil(nodes["action-echo.submit"])
    local html = clank.render(m:tree())
    assert.truthy(html:find("No form for this input schema", 1, true))
    m:dispose()
  end)

  it("calls the action when its form is submitted, confirmed, and shows the bridge's answer", function()
    local m, surface = mount()
    assert.is_true(surface:input("action-notes.add.text", "hello"))
    as_request(true, function() assert.is_true(surface:activate("action-notes.add.submit")) end)
    assert.are.equal('{"ok":true,"output":{"count":1}}', text_of(m:tree(), "answer.notes.add"))
    m:dispose()
  end)

  it("shows CONFIRMATION_REQUIRED when the event was not confirmed", function()
    local m, surface = mount()
    surface:input("action-notes.add.text", "hello")
    as_request(false, function() surface:activate("action-notes.add.submit") end)
    local answer = json.decode(text_of(m:tree(), "answer.notes.add"))
    assert.are.equal(false, answer.ok)
    assert.are.equal("CONFIRMATION_REQUIRED", answer.error.code)
    m:dispose()
  end)

  it("shows invalid input as the bridge's INVALID_INPUT", function()
    local m, surface = mount()
    surface:activate("action-notes.add.submit")
    local answer = json.decode(text_of(m:tree(), "answer.notes.add"))
    assert.are.equal("INVALID_INPUT", answer.error.code)
    assert.are.equal("text: Expected a string.", answer.error.message)
    m:dispose()
  end)

  it("shows every view's surface with empty props, or why not", function()
    local m = mount()
    local tree = m:tree()
    local plain = json.decode(text_of(tree, "surface-plain"))
    assert.are.equal("plain", plain[1].id)
    assert.are.equal("go", plain[1].children[1].id)
    local html = clank.render(tree)
    assert.truthy(html:find("This view needs props: id: Expected a string.", 1, true))
    assert.truthy(html:find("The view failed to mount: broken on purpose", 1, true))
    m:dispose()
  end)

  it("lists the requests and reloads it is given", function()
    local m = mount()
    local html = clank.render(m:tree())
    assert.truthy(html:find("<td>GET</td><td>/x</td><td>200</td><td>1.3</td><td>r1</td>", 1, true)
      or html:find("<td>GET</td><td>/x</td><td>200</td><td>1.2</td><td>r1</td>", 1, true))
    assert.truthy(html:find("<td>failed</td><td>3.0</td><td>app.lua:1: boom</td>", 1, true))
    m:dispose()
  end)
end)
