-- The app bench/http.sh serves with clank-run: one fixed route, the same
-- body and content type that the bare and nginx baselines send.
local clank = require "clank"

local body = "Hello, world!\n"

return clank.app {
  name = "bench",
  routes = {
    ["GET /hello"] = function(request)
      return { status = 200, body = body }
    end,
  },
}
