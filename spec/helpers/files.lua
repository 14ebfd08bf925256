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

-- A new folder /tmp/<prefix>.XXXXXX (mktemp -d); the caller removes it.
function files.tmpdir(prefix)
  local p = assert(io.popen("mktemp -d " .. files.quote("/tmp/" .. prefix .. ".XXXXXX")))
  local dir = p:read("l")
  p:close()
  return dir
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

-- The same, failing when `seconds` pass: "not within N s: <what>".
function files.within(seconds, fn, what)
  local v = files.eventually(seconds, fn)
  if v == nil then error("not within " .. seconds .. " s: " .. what, 3) end
  return v
end

return files
