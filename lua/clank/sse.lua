-- clank.sse(send): server-sent events (WHATWG HTML §9.2) over a route's
-- streamed answer (SPEC §15). The route sets content-type: text/event-stream.
--
--   stream = function(send)
--     local sse = clank.sse(send)
--     sse:event{ event = "tick", id = "1", data = { n = 1 } }
--     sse:comment("still here")
--   end
local json = require "clank.json"

local concat, format, type = table.concat, string.format, type

local Sse = {}
Sse.__index = Sse

-- Each line of text (split at CRLF, CR or LF) behind prefix.
local function lines(out, prefix, text)
  text = text:gsub("\r\n", "\n"):gsub("\r", "\n")
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    out[#out + 1] = prefix .. line .. "\n"
  end
end

local function field(value, name)
  if value == nil then
    return nil
  end
  if type(value) ~= "string" and type(value) ~= "number" then
    error(format("clank.sse: %s must be a string, got %s", name, type(value)), 3)
  end
  value = tostring(value)
  if value:find("[\r\n]") or (name == "id" and value:find("\0", 1, true)) then
    error(format("clank.sse: %s must be one line", name), 3)
  end
  return value
end

-- sse:event{ event?, id?, data, retry? } → what send returned (false: the client is gone).
-- data is a string (split into data: lines) or a table (canonical JSON).
function Sse:event(e)
  if type(e) ~= "table" then
    error("clank.sse: event expects a table { event?, id?, data, retry? }", 2)
  end
  local out = {}
  local name, id = field(e.event, "event"), field(e.id, "id")
  if name then
    out[#out + 1] = "event: " .. name .. "\n"
  end
  if id then
    out[#out + 1] = "id: " .. id .. "\n"
  end
  if e.retry ~= nil then
    if math.type(e.retry) ~= "integer" or e.retry < 0 then
      error("clank.sse: retry must be a non-negative integer (milliseconds)", 2)
    end
    out[#out + 1] = format("retry: %d\n", e.retry)
  end
  local data = e.data
  if type(data) == "table" then
    data = json.encode(data)
  elseif type(data) ~= "string" then
    error("clank.sse: data must be a string or a table, got " .. type(data), 2)
  end
  lines(out, "data: ", data)
  out[#out + 1] = "\n"
  return self.send(concat(out))
end

-- sse:comment(text): a line the client ignores (keeps proxies from timing out).
function Sse:comment(text)
  if type(text) ~= "string" then
    error("clank.sse: comment expects a string, got " .. type(text), 2)
  end
  local out = {}
  lines(out, ": ", text)
  out[#out + 1] = "\n"
  return self.send(concat(out))
end

return function(send)
  if type(send) ~= "function" then
    error("clank.sse: expects the stream's send function, got " .. type(send), 2)
  end
  return setmetatable({ send = send }, Sse)
end
