-- bench/fetch.sh's clank client: sequential keep-alive GETs with clank.fetch
-- from one runtime coroutine for SECONDS; prints "requests seconds".
--   lua5.4 bench/fetch/client.lua URL SECONDS   (clank.so and lua/ on the paths)
local clank = require "clank"
local socket = require "socket"

local url, seconds = arg[1], tonumber(arg[2])

local run = clank.defineAction {
  name = "bench", description = "Fetches in a loop.", input = clank.schema.object {}, sideEffects = "read",
  handler = function()
    local n, t0 = 0, socket.gettime()
    repeat
      for _ = 1, 100 do
        local res, err = clank.fetch(url)
        if not res then error(err.kind .. ": " .. err.message) end
        if res.status ~= 200 then error("status " .. res.status) end
        n = n + 1
      end
    until socket.gettime() - t0 >= seconds
    return { n = n, seconds = socket.gettime() - t0 }
  end,
}

local r = run({}, {})
print(r.n, r.seconds)
