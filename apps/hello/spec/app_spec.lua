-- The app in process, through clank.test: nothing listens on a port.
local test = require "clank.test"

describe("hello", function()
  local t = test.app("app.lua")

  it("greets through the agent bridge", function()
    local answer, status = t:call("greet", { name = "Ada" })
    assert.are.equal(200, status)
    assert.are.same({ ok = true, output = { text = "Hello, Ada!" } }, answer)
  end)

  it("refuses an empty name", function()
    local answer, status = t:call("greet", { name = "" })
    assert.are.equal(422, status)
    assert.is_false(answer.ok)
    assert.are.equal("INVALID_INPUT", answer.error.code)
  end)

  it("serves the page with the form", function()
    local status, html = t:page("/")
    assert.are.equal(200, status)
    assert.truthy(html:find("<h1>hello</h1>", 1, true))
    assert.truthy(html:find('href="/assets/app.css"', 1, true))
  end)

  it("greets through the page's form, as an agent operating the view", function()
    local surface = t:surface("home")
    assert.is_true(surface:input("greet.name", "Grace"))
    assert.is_true(surface:activate("greet.submit"))
    local greeting = surface:find("greeting")
    assert.are.equal("Hello, Grace!", greeting.label)
  end)
end)
