-- A small WebSocket client (RFC 6455) over LuaSocket, independent of the server under test: the
-- opening handshake through helpers.http, masked text frames out, unmasked frames in. Every
-- receive has a deadline, so a server (or proxy) that never answers fails the test.
--
--   local ws = require "helpers.websocket"
--   local live = assert(ws.connect(port, "/__clank/sessions/" .. id .. "/live",
--                                  { Host = "127.0.0.1:" .. port, Origin = "http://127.0.0.1:" .. port }))
--   local msg = assert(live:next_json())      -- the next text frame, decoded
--   live:send_json({ t = "event", ... })
--   local code = live:close_code(5)           -- waits for the server's close frame
local http = require "helpers.http"
local socket = require "socket"
local cjson = require "cjson"

local ws = {}

local char, byte, concat = string.char, string.byte, table.concat

local Ws = {}
Ws.__index = Ws

-- A fresh Sec-WebSocket-Key: 16 random bytes in base64.
local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function random_key()
  local out = {}
  for _ = 1, 5 do -- 15 bytes as 20 characters, then the 16th byte
    local n = math.random(0, 0xFFFFFF)
    for shift = 18, 0, -6 do
      local i = (n >> shift) & 63
      out[#out + 1] = B64:sub(i + 1, i + 1)
    end
  end
  local last = math.random(0, 255)
  out[#out + 1] = B64:sub((last >> 2) + 1, (last >> 2) + 1)
  out[#out + 1] = B64:sub(((last & 3) << 4) + 1, ((last & 3) << 4) + 1)
  return concat(out) .. "=="
end

-- Opens `path` on 127.0.0.1:port with the given extra headers (a map; Host and Origin are the
-- caller's). Returns the client, or nil, message, response (a non-101 answer).
function ws.connect(port, path, headers)
  local conn, err = http.connect(port)
  if not conn then
    return nil, "connect: " .. tostring(err)
  end
  local list = {
    { "Upgrade", "websocket" }, { "Connection", "Upgrade" },
    { "Sec-WebSocket-Version", "13" }, { "Sec-WebSocket-Key", random_key() },
  }
  for _, h in ipairs(http.header_list(headers)) do
    list[#list + 1] = h
  end
  local ok
  ok, err = conn:send(http.build("GET", path, list))
  if not ok then
    conn:close()
    return nil, "send: " .. tostring(err)
  end
  local res
  res, err = conn:read_response()
  if not res then
    conn:close()
    return nil, "handshake: " .. tostring(err)
  end
  if res.status ~= 101 then
    -- a refusal carries a body: read_response returned 1xx only without one
    conn:close()
    return nil, "handshake answered " .. res.status, res
  end
  return setmetatable({ conn = conn, response = res }, Ws)
end

local function frame(opcode, payload)
  local n = #payload
  local head
  if n < 126 then
    head = char(0x80 | opcode, 0x80 | n)
  elseif n < 65536 then
    head = char(0x80 | opcode, 0x80 | 126, n >> 8, n & 0xFF)
  else
    head = char(0x80 | opcode, 0x80 | 127) .. string.pack(">I8", n)
  end
  local mask = { math.random(0, 255), math.random(0, 255), math.random(0, 255), math.random(0, 255) }
  local out = {}
  for i = 1, n do
    out[i] = char(byte(payload, i) ~ mask[(i - 1) % 4 + 1])
  end
  return head .. char(mask[1], mask[2], mask[3], mask[4]) .. concat(out)
end

function Ws:send_text(text)
  return self.conn:send(frame(0x1, text))
end

function Ws:send_json(value)
  return self:send_text(cjson.encode(value))
end

-- Reads one frame: opcode, payload; or nil, error.
function Ws:read_frame(deadline)
  local head, err = self.conn:receive(2, deadline)
  if not head then
    return nil, err
  end
  local b1, b2 = byte(head, 1, 2)
  local n = b2 & 0x7F
  if b2 & 0x80 ~= 0 then
    return nil, "the server masked a frame"
  end
  if n == 126 then
    local ext = self.conn:receive(2, deadline)
    if not ext then
      return nil, "truncated frame length"
    end
    n = string.unpack(">I2", ext)
  elseif n == 127 then
    local ext = self.conn:receive(8, deadline)
    if not ext then
      return nil, "truncated frame length"
    end
    n = string.unpack(">I8", ext)
  end
  local payload = ""
  if n > 0 then
    payload, err = self.conn:receive(n, deadline)
    if not payload then
      return nil, "reading payload: " .. tostring(err)
    end
  end
  return b1 & 0x0F, payload, b1 & 0x80 ~= 0
end

-- The next message: "text", payload; or "close", code; or nil, error. Pings are answered.
function Ws:next_message(timeout)
  local deadline = socket.gettime() + (timeout or http.timeout)
  local parts = {}
  while true do
    local op, payload, fin = self:read_frame(deadline)
    if not op then
      return nil, payload
    end
    if op == 0x9 then
      self.conn:send(frame(0xA, payload))
    elseif op == 0x8 then
      self.closed = true
      local code = #payload >= 2 and string.unpack(">I2", payload) or 1005
      return "close", code
    elseif op == 0x1 or op == 0x0 then
      parts[#parts + 1] = payload
      if fin then
        return "text", concat(parts)
      end
    end
  end
end

-- The next text message that decodes to a table satisfying pred (default: any), skipping others;
-- nil, reason when the connection closes or the time runs out.
function Ws:next_json(pred, timeout)
  local deadline = socket.gettime() + (timeout or http.timeout)
  while true do
    local kind, data = self:next_message(math.max(0, deadline - socket.gettime()))
    if kind == nil then
      return nil, "no message: " .. tostring(data)
    elseif kind == "close" then
      return nil, "closed with " .. data
    end
    local msg = cjson.decode(data)
    if not pred or pred(msg) then
      return msg
    end
  end
end

-- Waits for the server's close frame and returns its code; nil, reason otherwise.
function Ws:close_code(timeout)
  local deadline = socket.gettime() + (timeout or http.timeout)
  while true do
    local kind, data = self:next_message(math.max(0, deadline - socket.gettime()))
    if kind == nil then
      return nil, data
    elseif kind == "close" then
      return data
    end
  end
end

function Ws:close()
  if not self.closed then
    self.conn:send(frame(0x8, string.pack(">I2", 1000)))
  end
  self.conn:close()
end

return ws
