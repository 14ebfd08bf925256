-- The fixed app fuzz/http_request.c serves (and bench/soak.sh, from a copy it
-- rewrites to reload): two actions with schemas, one needing confirmation, and
-- routes. maxRequestBytes is small so that 413 is cheap to reach.
local clank = require "clank"
local s = clank.schema

local add = clank.defineAction {
  name = "notes.add",
  description = "Add a note (needs confirmation).",
  input = s.object {
    title = s.string { min = 1, max = 40 },
    tags = s.optional(s.array(s.enum { "a", "b", "c" }, { max = 3 })),
    size = s.nullable(s.number { min = 0, max = 100, integer = true }),
  },
  output = s.object { id = s.string(), title = s.string() },
  sideEffects = "write",
  handler = function(input)
    return { id = "n1", title = input.title }
  end,
}

local find = clank.defineAction {
  name = "notes.find",
  description = "Find notes by a query.",
  input = s.object {
    q = s.string { max = 20, pattern = "^[%w ]*$" },
    limit = s.optional(s.number { min = 1, max = 10 }),
    mode = s.optional(s.union { s.literal("all"), s.boolean() }),
  },
  sideEffects = "read",
  handler = function(input)
    if input.q == "fail" then
      error("the note store failed")
    end
    return { hits = { input.q }, limit = input.limit or 1 }
  end,
}

return clank.app {
  name = "fuzz",
  actions = { add, find },
  bridge = { maxRequestBytes = 1024 },
  routes = {
    ["GET /hello"] = function()
      return { status = 200, body = "Hello\n" }
    end,
    ["POST /echo/:name"] = function(request)
      return { status = 200, headers = { ["content-type"] = "text/plain" },
               body = request.params.name .. ":" .. (request.body or "") }
    end,
  },
}
