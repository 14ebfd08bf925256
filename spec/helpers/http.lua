-- A raw HTTP/1.1 client over LuaSocket, independent of the server under test.
-- Every receive has a deadline, so a hung server fails the test instead of
-- hanging it. Failures return nil, message (so `assert(conn:read_response())`
-- reads naturally).
--
--   local conn = assert(http.connect(port))
--   conn:send("GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
--   local res = assert(conn:read_response())
--   res.status, res.headers["content-type"], res.body
local socket = require "socket"

local http = {}

http.timeout = os.getenv("CLANK_SANITIZED") == "1" and 20 or 5

local Conn = {}
Conn.__index = Conn

-- Opens a connection to 127.0.0.1:port (or host).
function http.connect(port, host)
  local sock = socket.tcp()
  sock:settimeout(http.timeout, "t")
  local ok, err = sock:connect(host or "127.0.0.1", port)
  if not ok then
    sock:close()
    return nil, err
  end
  sock:setoption("tcp-nodelay", true)
  return setmetatable({ sock = sock, port = port }, Conn)
end

-- Sends all of `data`; returns true, or nil, error.
function Conn:send(data, timeout)
  self.sock:settimeout(timeout or http.timeout, "t")
  local i = 1
  while i <= #data do
    local last, err, partial = self.sock:send(data, i)
    if not last then
      return nil, err, (partial or i - 1)
    end
    i = last + 1
  end
  return true
end

function Conn:close()
  self.sock:close()
end

-- Closes with a reset (SO_LINGER 0): a client that is gone, as the server can tell. A plain
-- close sends a FIN, which the server cannot tell from a half-close (shutdown(SHUT_WR)) of a
-- client still reading its answer (SPEC §13).
function Conn:reset()
  self.sock:setoption("linger", { on = true, timeout = 0 })
  self.sock:close()
end

-- Half-closes: no more bytes are sent, the answer is still read.
function Conn:shutdown()
  return self.sock:shutdown("send")
end

local function remaining(deadline)
  local t = deadline - socket.gettime()
  if t < 0 then
    t = 0
  end
  return t
end

function Conn:receive(pattern, deadline)
  self.sock:settimeout(remaining(deadline), "t")
  local data, err, partial = self.sock:receive(pattern)
  if not data then
    return nil, err, partial
  end
  return data
end

-- Reads one response. opts.method = "HEAD" means no body; opts.timeout in
-- seconds. Returns { version, status, reason, headers (lower-case names,
-- repeated ones joined by ", "), fields (the list of {name, value} in order),
-- count (name → number of field lines), body, chunks? } or nil, error.
-- 1xx responses are returned on their own (read again for the final one).
function Conn:read_response(opts)
  opts = opts or {}
  local deadline = socket.gettime() + (opts.timeout or http.timeout)
  local line, err, partial = self:receive("*l", deadline)
  if not line then
    if partial and partial ~= "" then
      return nil, err .. " (after " .. string.format("%q", partial) .. ")"
    end
    return nil, err
  end
  local version, status, reason = line:match("^(HTTP/%d%.%d) (%d%d%d) ?(.*)$")
  if not version then
    return nil, "bad status line: " .. string.format("%q", line)
  end
  local res = {
    version = version,
    status = tonumber(status),
    reason = reason,
    headers = {},
    fields = {},
    count = {},
    body = "",
  }
  while true do
    line, err = self:receive("*l", deadline)
    if not line then
      return nil, "reading headers: " .. err
    end
    if line == "" then
      break
    end
    local name, value = line:match("^([^:]+):[ \t]*(.-)[ \t]*$")
    if not name then
      return nil, "bad header line: " .. string.format("%q", line)
    end
    name = name:lower()
    res.fields[#res.fields + 1] = { name, value }
    res.count[name] = (res.count[name] or 0) + 1
    local prev = res.headers[name]
    res.headers[name] = prev and (prev .. ", " .. value) or value
  end

  local s = res.status
  if opts.method == "HEAD" or (s >= 100 and s < 200) or s == 204 or s == 304 then
    return res
  end
  local te = res.headers["transfer-encoding"]
  if te and te:lower():find("chunked", 1, true) then
    local parts = {}
    res.chunks = 0
    while true do
      line, err = self:receive("*l", deadline)
      if not line then
        return nil, "reading chunk size: " .. err
      end
      local size = tonumber(line:match("^(%x+)"), 16)
      if not size then
        return nil, "bad chunk size line: " .. string.format("%q", line)
      end
      if size == 0 then
        -- trailer section, up to the empty line
        repeat
          line, err = self:receive("*l", deadline)
          if not line then
            return nil, "reading trailers: " .. err
          end
        until line == ""
        break
      end
      local data
      data, err = self:receive(size, deadline)
      if not data then
        return nil, "reading chunk: " .. err
      end
      parts[#parts + 1] = data
      res.chunks = res.chunks + 1
      line, err = self:receive("*l", deadline)
      if line ~= "" then
        return nil, "missing CRLF after chunk: " .. tostring(err or line)
      end
    end
    res.body = table.concat(parts)
  elseif res.headers["content-length"] then
    local n = tonumber(res.headers["content-length"])
    if not n then
      return nil, "bad content-length: " .. res.headers["content-length"]
    end
    if n > 0 then
      local data
      data, err = self:receive(n, deadline)
      if not data then
        return nil, "reading body: " .. err
      end
      res.body = data
    end
  else
    -- no framing: the body runs to the end of the connection
    local data, err2, partial2 = self:receive("*a", deadline)
    if not data then
      return nil, "reading body to close: " .. err2 .. " (" .. tostring(partial2) .. ")"
    end
    res.body = data
    res.closed = true
  end
  return res
end

-- Reads n responses in order; methods[i] gives the request method of each.
function Conn:read_responses(n, methods, opts)
  local list = {}
  for i = 1, n do
    local o = { method = methods and methods[i], timeout = opts and opts.timeout }
    local res, err = self:read_response(o)
    if not res then
      return nil, "response " .. i .. " of " .. n .. ": " .. err, list
    end
    list[i] = res
  end
  return list
end

-- True when the server closes the connection within `timeout` seconds without
-- sending another byte (recv reports "closed"; a reset counts as closed too).
-- Returns false, reason otherwise ("timeout" or the bytes received).
function Conn:closed(timeout)
  self.sock:settimeout(timeout or http.timeout, "t")
  local data, err, partial = self.sock:receive(1)
  if data then
    self.sock:settimeout(0.05, "t")
    local rest, _, p = self.sock:receive(256)
    local more = rest or p or ""
    return false, "received bytes: " .. string.format("%q", data .. more)
  end
  if partial and partial ~= "" then
    return false, "received bytes: " .. string.format("%q", partial)
  end
  if err == "closed" or err:find("reset", 1, true) then
    return true, err
  end
  return false, err
end

-- True when nothing arrives and the connection stays open for `seconds`.
function Conn:stays_open(seconds)
  local closed, why = self:closed(seconds)
  if closed then
    return false, "connection closed"
  end
  if why == "timeout" then
    return true
  end
  return false, why
end

-- headers as a list of {name, value} pairs: a list is kept as it is (order and repeats), a map
-- becomes its pairs sorted by name.
function http.header_list(headers)
  if not headers or #headers > 0 or next(headers) == nil then
    return headers or {}
  end
  local names, list = {}, {}
  for k in pairs(headers) do
    names[#names + 1] = k
  end
  table.sort(names)
  for _, k in ipairs(names) do
    list[#list + 1] = { k, headers[k] }
  end
  return list
end

-- Builds a raw request. headers: a list of {name, value} pairs (kept in
-- order, repeats allowed) or a map. A Host header is added unless present
-- (pass host = false in opts to leave it out); content-length is added for a
-- body unless a length or transfer-encoding is given.
function http.build(method, target, headers, body, opts)
  opts = opts or {}
  local lines = { method .. " " .. target .. " " .. (opts.version or "HTTP/1.1") }
  local list = http.header_list(headers)
  local has = {}
  for _, h in ipairs(list) do
    has[h[1]:lower()] = true
  end
  if not has.host and opts.host ~= false then
    lines[#lines + 1] = "Host: " .. (opts.host or "127.0.0.1")
  end
  for _, h in ipairs(list) do
    lines[#lines + 1] = h[1] .. ": " .. h[2]
  end
  if body and not has["content-length"] and not has["transfer-encoding"] then
    lines[#lines + 1] = "Content-Length: " .. #body
  end
  return table.concat(lines, "\r\n") .. "\r\n\r\n" .. (body or "")
end

-- One request on a fresh connection; returns the response (with
-- res.conn still open for further use) or nil, error.
function http.request(port, method, path, headers, body, opts)
  local conn, err = http.connect(port)
  if not conn then
    return nil, "connect: " .. err
  end
  local ok
  ok, err = conn:send(http.build(method, path, headers, body, opts))
  if not ok then
    conn:close()
    return nil, "send: " .. err
  end
  local res
  res, err = conn:read_response({ method = method })
  if not res then
    conn:close()
    return nil, err
  end
  res.conn = conn
  if not (opts and opts.keep) then
    conn:close()
  end
  return res
end

-- Shorthand: GET a path and return the response.
function http.get(port, path, headers)
  return http.request(port, "GET", path, headers)
end

-- Sends raw bytes on a fresh connection and reads one response; the
-- connection is returned too (open) so callers can check it was closed.
function http.raw(port, bytes, opts)
  local conn, err = http.connect(port)
  if not conn then
    return nil, "connect: " .. err
  end
  local ok
  ok, err = conn:send(bytes)
  if not ok then
    -- the server may answer and close before reading everything
    local res = conn:read_response(opts)
    if res then
      return res, conn
    end
    conn:close()
    return nil, "send: " .. err
  end
  local res
  res, err = conn:read_response(opts)
  if not res then
    conn:close()
    return nil, err
  end
  return res, conn
end

-- Parses the "key=value" lines that the fixture's /inspect route answers.
function http.parse_lines(body)
  local t = {}
  for line in body:gmatch("[^\n]+") do
    local k, v = line:match("^([^=]+)=(.*)$")
    if k then
      t[k] = v
    end
  end
  return t
end

-- The value of an unlabelled sample of GET /__clank/metrics (nil when it has none).
function http.metric(port, name)
  local res = assert(http.get(port, "/__clank/metrics"))
  return tonumber(res.body:match("\n" .. name:gsub("%p", "%%%0") .. " (%d+)"))
end

http.sleep = socket.sleep
http.now = socket.gettime

return http
