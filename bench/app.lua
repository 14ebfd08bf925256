-- The app bench/http.sh serves with clank-run:
--   GET /hello                  the same body and content type as every baseline
--   GET /manifest               the bridge's manifest (bench/manifest.json holds its bytes)
--   POST /actions/tasks.create  the seed's CreateTask, validated by clank.schema; the handler
--                               touches no database, so the figure measures the runtime
-- confirmation = "never": no request needs x-clank-confirmation, on any server.
local clank = require "clank"
local s = clank.schema

local hello = "Hello, world!\n"

local create = clank.defineAction {
  name = "tasks.create",
  description = "Create one task (the bench's: no database, always t1).",
  input = s.object {
    title = s.string { min = 1, max = 120, description = "Short task title" },
    priority = s.optional(s.enum { "low", "normal", "high" }),
    estimate = s.nullable(s.number { min = 0 }),
    tags = s.array(s.string(), { max = 10 }),
  },
  output = s.object { id = s.string(), created = s.boolean() },
  sideEffects = "write",
  confirmation = "never",
  handler = function()
    return { id = "t1", created = true }
  end,
}

return clank.app {
  name = "bench",
  actions = { create },
  routes = {
    ["GET /hello"] = function()
      return { status = 200, body = hello }
    end,
  },
}
