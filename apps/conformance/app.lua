-- The app the official MCP conformance suite (@modelcontextprotocol/conformance, server
-- scenarios) runs against: the tools those scenarios call, with their names and behaviour, as
-- plain Clank actions (SPEC §6). spec/mcp/conformance.mjs runs the suite against it.
--
-- What a scenario wants beyond an action's JSON output is said in app.mcp.tools: a fixed text
-- block (`text`) and a named sub-schema published as $defs (`defs`). tools-call-elicitation's
-- elicitation/create is the confirmation step of app.mcp.confirmation = "elicit".
local clank = require "clank"
local s = clank.schema

local empty = s.object {}
local said = s.object { text = s.string() }

local function say(output)
  return output.text
end

local actions = {
  clank.defineAction {
    name = "test_simple_text", description = "Returns a simple text block.",
    input = empty, output = said, sideEffects = "none",
    handler = function()
      return { text = "This is a simple text response for testing." }
    end,
  },
  clank.defineAction {
    name = "test_error_handling", description = "Always fails.",
    input = empty, sideEffects = "none",
    handler = function()
      error(clank.ActionError("TOOL_ERROR", "This tool intentionally returns an error for testing"))
    end,
  },
  clank.defineAction {
    name = "test_tool_with_logging", description = "Logs three messages while it runs.",
    input = empty, output = said, sideEffects = "none",
    handler = function(_, ctx)
      ctx.log("info", "Tool execution started")
      clank.sleep(50)
      ctx.log("info", "Tool processing data")
      clank.sleep(50)
      ctx.log("info", "Tool execution completed")
      return { text = "Tool with logging executed successfully" }
    end,
  },
  clank.defineAction {
    name = "test_tool_with_progress", description = "Reports progress 0, 50 and 100 of 100.",
    input = empty, output = said, sideEffects = "none",
    handler = function(_, ctx)
      ctx.progress(0, 100)
      clank.sleep(50)
      ctx.progress(50, 100)
      clank.sleep(50)
      ctx.progress(100, 100)
      return { text = "Tool with progress executed successfully" }
    end,
  },
  clank.defineAction {
    name = "test_elicitation", description = "Asks the user before it answers.",
    input = s.object { message = s.string { description = "The message to show the user" } },
    output = said, sideEffects = "write",
    handler = function(input)
      return { text = "User response: accept (" .. input.message .. ")" }
    end,
  },
  clank.defineAction {
    name = "json_schema_2020_12_tool", description = "Tool with JSON Schema 2020-12 features",
    input = s.object {
      name = s.optional(s.string()),
      address = s.optional(s.object {
        street = s.optional(s.string()),
        city = s.optional(s.string()),
      }),
    },
    output = s.object { ok = s.boolean() }, sideEffects = "none",
    handler = function() return { ok = true } end,
  },
}

return clank.app {
  name = "conformance", version = "1.0.0",
  actions = actions,
  mcp = {
    confirmation = "elicit",
    tools = {
      test_simple_text = { text = say },
      test_tool_with_logging = { text = say },
      test_tool_with_progress = { text = say },
      test_elicitation = { text = say },
      json_schema_2020_12_tool = { defs = { address = "address" } },
    },
  },
}
