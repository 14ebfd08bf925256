-- clank.defineView and clank.mount (SPEC §8).
local clank = require "clank"
local signal = require "clank.signal"
local h, s, json = clank.h, clank.schema, clank.json

local raised = require("helpers.errors").raised

local Greeting = clank.defineView {
  name = "greeting",
  description = "Greets one person.",
  props = s.object { name = s.string { min = 1 } },
  render = function(props)
    return h.section(nil, h.h1(nil, "Hello, ", props.name), props.children)
  end,
}

describe("clank.defineView", function()
  it("attaches a viewManifest with the props' JSON Schema", function()
    assert.are.equal('{"description":"Greets one person.","name":"greeting","propsSchema":'
      .. '{"additionalProperties":false,"properties":{"name":{"minLength":1,"type":"string"}},'
      .. '"required":["name"],"type":"object"}}', json.encode(Greeting.viewManifest))
  end)

  it("leaves propsSchema out without props", function()
    local V = clank.defineView { name = "plain", description = "d", render = function() return h.div() end }
    assert.are.same({ name = "plain", description = "d" }, V.viewManifest)
  end)

  it("renders validated props, with children set aside for validation and put back", function()
    local el = Greeting { name = "Ada", children = { h.p(nil, "child") } }
    assert.are.equal("<section><h1>Hello, Ada</h1><p>child</p></section>", clank.render(el))
  end)

  it("takes children through h like any component", function()
    assert.are.equal("<section><h1>Hello, Bo</h1>x</section>",
      clank.render(h(Greeting, { name = "Bo" }, "x")))
  end)

  it("raises the ValidationError of invalid props", function()
    local err = raised(Greeting, { name = "" })
    assert.are.equal("name: Must contain at least 1 character.", tostring(err))
    assert.are.equal("table", type(err.issues))
    err = raised(Greeting, { name = "A", extra = 1 })
    assert.are.equal("extra: Unknown property.", tostring(err))
  end)

  it("does not change the caller's props table", function()
    local props = { name = "Ada", children = { "c" } }
    Greeting(props)
    assert.are.same({ name = "Ada", children = { "c" } }, props)
  end)

  local misuse = {
    { "a missing name", { render = function() end }, "name must be a non%-empty string" },
    { "a missing render", { name = "x" }, "render must be a function" },
    { "props that are not a schema", { name = "x", render = function() end, props = {} }, "props must be a schema" },
    { "an unknown option", { name = "x", render = function() end, title = "t" }, "unknown option title" },
  }
  for _, case in ipairs(misuse) do
    it("refuses " .. case[1], function()
      assert.matches("clank.defineView: " .. case[3], tostring(raised(clank.defineView, case[2])))
    end)
  end

  it("lists views in the bridge manifest", function()
    local bridge = clank.createAgentBridge({}, { views = { Greeting } })
    assert.are.equal("greeting", bridge:manifest().views[1].name)
  end)
end)

describe("clank.mount", function()
  it("re-renders when a signal its render read changes, until disposed", function()
    local count = signal.signal(1)
    local renders = 0
    local Counter = clank.defineView {
      name = "counter",
      render = function(props)
        renders = renders + 1
        return h.p(nil, props.label, count.value)
      end,
    }
    local view = clank.mount(Counter, { label = "n=" })
    assert.are.equal("<p>n=1</p>", clank.render(view:tree()))
    count.value = 2
    assert.are.equal("<p>n=2</p>", clank.render(view:tree()))
    assert.are.equal(2, renders)
    view:dispose()
    count.value = 3
    assert.are.equal("<p>n=2</p>", clank.render(view:tree()))
    assert.are.equal(2, renders)
  end)

  it("does not re-render for signals the render did not read", function()
    local shown, other = signal.signal("a"), signal.signal(0)
    local renders = 0
    local view = clank.mount(function()
      renders = renders + 1
      return h.p(nil, shown.value)
    end)
    other.value = 1
    assert.are.equal(1, renders)
    shown.value = "b"
    assert.are.equal(2, renders)
    assert.are.equal("<p>b</p>", clank.render(view))
    view:dispose()
  end)

  it("raises invalid props at mount", function()
    assert.are.equal("name: Expected a string.", tostring(raised(clank.mount, Greeting, {})))
  end)

  it("refuses what is not a view", function()
    assert.matches("clank.mount: expected a view", tostring(raised(clank.mount, 42)))
  end)
end)
