-- clank.fetch(url, opts): an HTTP/1.1 client that waits in the running task
-- and never blocks the loop (SPEC §12).
--
--   local res, err = clank.fetch("https://api.example.com/items", {
--     method = "POST", json = { name = "a" }, timeout = 5000 })
--   if not res then return { status = 502, body = err.kind .. ": " .. err.message } end
--   local items = res:json()
--
-- The exchange itself (connection, TLS, parsing, the keep-alive pool, the
-- wait with its signal and timeout) is C: clank.fetch.core over the HTTP
-- library's client. Here: the URL, the request bytes, redirects and the
-- response object.
local fcore = require "clank.fetch.core"
local core = require "clank.core"
local json = require "clank.json"

local current_signal = core.currentSignal
local request = fcore.request
local type, error, tostring, tonumber, pairs, setmetatable = type, error, tostring, tonumber, pairs, setmetatable
local concat = table.concat

local DEFAULT_TIMEOUT = 30000
local DEFAULT_MAX_BYTES = 16 * 1024 * 1024
local MAX_REDIRECTS = 5
local REDIRECT = { [301] = true, [302] = true, [303] = true, [307] = true, [308] = true }
-- the writer's own: a caller setting them could desynchronise the connection
local OWNED = { ["content-length"] = true, ["transfer-encoding"] = true, connection = true }
-- dropped with the body when a redirect turns the method into GET (fetch standard §4.4)
local BODY_HEADERS = { ["content-type"] = true, ["content-encoding"] = true,
  ["content-language"] = true, ["content-location"] = true }

-- scheme://host[:port][/path][?query][#fragment] -> parts, or nil, message
local function parse_url(url)
  local scheme, rest = url:match("^(%a[%w+.-]*)://(.*)$")
  if not scheme then return nil, "not an absolute URL" end
  scheme = scheme:lower()
  if scheme ~= "http" and scheme ~= "https" then return nil, "unsupported scheme " .. scheme end
  local authority, target = rest:match("^([^/?#]*)(.*)$")
  target = target:gsub("#.*$", "")
  if target == "" or target:sub(1, 1) == "?" then target = "/" .. target end
  if authority:find("@", 1, true) then return nil, "credentials in URLs are not supported" end
  local host, port
  if authority:sub(1, 1) == "[" then
    host, port = authority:match("^%[([%x:.]+)%]:?(%d*)$")
  else
    host, port = authority:match("^([^:]+):?(%d*)$")
  end
  if not host or host == "" then return nil, "no host" end
  if target:find("[%s%c]") then return nil, "spaces or control characters in the path" end
  host = host:lower()
  local default = scheme == "https" and 443 or 80
  port = port ~= "" and tonumber(port) or default
  if port < 1 or port > 65535 then return nil, "bad port" end
  local host_header = authority:sub(1, 1) == "[" and "[" .. host .. "]" or host
  if port ~= default then host_header = host_header .. ":" .. port end
  return {
    scheme = scheme, host = host, port = port, target = target, host_header = host_header,
    origin = scheme .. "://" .. host_header,
  }
end

-- The Location of a redirect against the URL that answered it (RFC 3986 §5.2, simplified).
local function resolve(base, loc)
  if loc:match("^%a[%w+.-]*:") then return loc end
  if loc:sub(1, 2) == "//" then return base.scheme .. ":" .. loc end
  if loc:sub(1, 1) == "/" then return base.origin .. loc end
  if loc:sub(1, 1) == "?" then return base.origin .. base.target:gsub("%?.*$", "") .. loc end
  local dir = base.target:gsub("%?.*$", ""):match("^(.*/)") or "/"
  return base.origin .. dir .. loc
end

local function head_bytes(method, u, headers, body)
  local lines = { method, " ", u.target, " HTTP/1.1\r\n" }
  local has = {}
  for name, value in pairs(headers) do
    has[name] = true
    lines[#lines + 1] = name .. ": " .. value .. "\r\n"
  end
  if not has.host then lines[#lines + 1] = "host: " .. u.host_header .. "\r\n" end
  if not has["user-agent"] then lines[#lines + 1] = "user-agent: clank/" .. core.version .. "\r\n" end
  if body then
    lines[#lines + 1] = "content-length: " .. #body .. "\r\n"
  elseif method == "POST" or method == "PUT" or method == "PATCH" then
    lines[#lines + 1] = "content-length: 0\r\n"
  end
  lines[#lines + 1] = "\r\n"
  if body then lines[#lines + 1] = body end
  return concat(lines)
end

-- ---- the response ----

local Response = {}
Response.__index = Response
Response.__name = "clank.FetchResponse"

function Response:json()
  if type(self.body) ~= "string" then error("res:json(): no body (a streamed response: read it)", 2) end
  return json.decode(self.body)
end

-- The next chunk of a streamed body, nil at its end, or nil, err.
function Response:read()
  local s = self._stream
  if not s then return nil end
  local chunk, err = s:read(false, self._timeout, self._signal)
  if chunk == nil then self._stream = nil end
  return chunk, err
end

-- Lines of a streamed body (without their "\r\n" or "\n"); a failure raises its err.
function Response:lines()
  local pending, done = "", false
  return function()
    while true do
      local nl = pending:find("\n", 1, true)
      if nl then
        local line = pending:sub(1, nl - 1):gsub("\r$", "")
        pending = pending:sub(nl + 1)
        return line
      end
      if done then
        if pending == "" then return nil end
        local line = pending
        pending = ""
        return line
      end
      local chunk, err = self:read()
      if err then error(err, 2) end
      if chunk then pending = pending .. chunk else done = true end
    end
  end
end

function Response:close()
  if self._stream then self._stream:close() end
  self._stream = nil
end

-- ---- the exchange ----

local function check_headers(given)
  local out = {}
  if given == nil then return out end
  if type(given) ~= "table" then error("clank.fetch: headers must be a table", 3) end
  for name, value in pairs(given) do
    if type(name) ~= "string" or not name:match("^[%w!#$%%&'*+.^_`|~-]+$") then
      error("clank.fetch: bad header name " .. tostring(name), 3)
    end
    value = tostring(value)
    if value:find("[\r\n%z]") then error("clank.fetch: bad value for header " .. name, 3) end
    name = name:lower()
    if OWNED[name] then error("clank.fetch: the header " .. name .. " is set by the client", 3) end
    out[name] = value
  end
  return out
end

local function fetch(url, opts)
  if type(url) ~= "string" then error("clank.fetch: url must be a string", 2) end
  opts = opts or {}
  local method = (opts.method or "GET"):upper()
  if not method:match("^[%w!#$%%&'*+.^_`|~-]+$") then error("clank.fetch: bad method " .. method, 2) end
  local headers = check_headers(opts.headers)
  local body = opts.body
  if opts.json ~= nil then
    if body ~= nil then error("clank.fetch: body and json both given", 2) end
    body = json.encode(opts.json)
    if not headers["content-type"] then headers["content-type"] = "application/json" end
  elseif body ~= nil and type(body) ~= "string" then
    error("clank.fetch: body must be a string", 2)
  end
  local redirect = opts.redirect or "manual"
  if redirect ~= "manual" and redirect ~= "follow" then
    error("clank.fetch: redirect must be \"manual\" or \"follow\"", 2)
  end
  local tls = opts.tls or {}
  local timeout = opts.timeout or DEFAULT_TIMEOUT
  local signal = opts.signal or current_signal()
  local max_bytes = opts.maxBytes or DEFAULT_MAX_BYTES

  local u, why = parse_url(url)
  if not u then error("clank.fetch: bad url " .. url .. ": " .. why, 2) end
  local redirects = 0
  while true do
    local status, res_headers, stream = request {
      tls = u.scheme == "https", host = u.host, port = u.port,
      request = head_bytes(method, u, headers, body), head = method == "HEAD",
      timeout = timeout, signal = signal, maxBytes = max_bytes,
      verify = tls.verify ~= false, ca = tls.ca,
    }
    if not status then return nil, res_headers end
    local location = res_headers.location
    if redirect == "follow" and REDIRECT[status] and location then
      stream:close()
      redirects = redirects + 1
      if redirects > MAX_REDIRECTS then
        return nil, { kind = "protocol", message = "more than " .. MAX_REDIRECTS .. " redirects" }
      end
      local next_url = resolve(u, location)
      local nu = parse_url(next_url)
      if not nu then
        return nil, { kind = "protocol", message = "bad redirect location " .. location }
      end
      if (status == 303 and method ~= "GET" and method ~= "HEAD")
          or ((status == 301 or status == 302) and method == "POST") then
        method = "GET"
        body = nil
        for name in pairs(BODY_HEADERS) do headers[name] = nil end
      end
      if nu.origin ~= u.origin then headers.authorization = nil end
      if headers.host then headers.host = nil end
      u, url = nu, next_url
    else
      local res = setmetatable({ status = status, headers = res_headers, url = url }, Response)
      if opts.stream then
        res._stream, res._timeout, res._signal = stream, timeout, signal
        return res
      end
      local all, err = stream:read(true, timeout, signal)
      if all == nil and err then return nil, err end
      res.body = all or ""
      return res
    end
  end
end

return fetch
