-- Small things every spec that drives processes needs: shell quoting, whole-file reads and
-- writes, and polling with a deadline (a spec waits for something, never forever).
local socket = require "socket"

local files = {}

-- s as one single-quoted shell word.
function files.quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- The file's bytes, or nil when it cannot be opened.
function files.read(path)
  local f = io.open(path, "rb")
  if not f then
    return nil
  end
  local data = f:read("a")
  f:close()
  return data
end

function files.write(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

-- Calls fn every 20 ms until it returns a truthy value (returned) or `seconds` pass (nil).
function files.eventually(seconds, fn)
  local deadline = socket.gettime() + seconds
  repeat
    local v = fn()
    if v then
      return v
    end
    socket.sleep(0.02)
  until socket.gettime() >= deadline
  return nil
end

return files
