-- The smallest Clank app: one page and a health check.
local clank = require "clank"

return clank.app {
  name = "hello",
  description = "Says hello.",
  routes = {
    ["GET /"] = function(request)
      local who = request.query.name or "world"
      return { status = 200, body = "Hello, " .. who .. "!\n" }
    end,
    ["GET /health"] = function() return { status = 200, body = "ok" } end,
  },
}
