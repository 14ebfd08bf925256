-- hello: a Clank app made by `clank-run new`. One action an agent can call, a page with a
-- form over that action's input, and a stylesheet. Serve it with `clank-run .` in this folder.
local clank = require "clank"
local s, h, signal = clank.schema, clank.h, clank.signal

local Greeting = s.object {
  name = s.string { min = 1, max = 80, description = "Who to greet" },
}

local greet = clank.defineAction {
  name = "greet",
  description = "Greets someone by name.",
  input = Greeting,
  output = s.object { text = s.string() },
  sideEffects = "none",
  handler = function(input)
    return { text = "Hello, " .. input.name .. "!" }
  end,
}

local Home = clank.defineView {
  name = "home",
  description = "Greet someone",
  -- once per view session: the form (over greet's input schema) and the last greeting
  load = function()
    local d = { text = signal.signal(nil) }
    d.form = clank.createForm {
      id = "greet",
      schema = Greeting,
      action = greet,
      submitLabel = "Greet",
      onSubmit = function()
        local out = d.form:submit()
        if out then d.text.value = out.text end
      end,
    }
    return d
  end,
  render = function(_, d)
    return h.main({ class = "app" },
      h.h1(nil, "hello"),
      d.form:render(),
      d.text.value and h.p({ agentId = "greeting", role = "status" }, d.text.value))
  end,
}

return clank.app {
  name = "hello",
  description = "A Clank app",
  actions = { greet },
  views = { Home },
  static = { ["/assets"] = "public" },
  page = { stylesheets = { "/assets/app.css" } },
}
