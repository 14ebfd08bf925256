-- The addresses OAuth deals in: this server's origin (the issuer), the MCP endpoint (the one
-- resource), the redirect URIs a client may use and how one is matched (exactly, or a
-- loopback one on any port: RFC 8252 §7.3), client ID metadata document URLs, and query
-- strings.
local type, ipairs, pairs, tonumber, tostring = type, ipairs, pairs, tonumber, tostring
local find, match, lower, gsub, format, byte, sort, concat =
  string.find, string.match, string.lower, string.gsub, string.format, string.byte, table.sort,
  table.concat

local M = {}

M.MCP_PATH = "/__clank/mcp"
M.MAX_URI = 2000 -- bytes: a redirect URI or a client id URL longer than this is refused

local function header(request, name)
  local headers = request.headers
  local v = type(headers) == "table" and headers[name] or nil
  return type(v) == "string" and v or nil
end

-- origin(auth, request) → the issuer: auth.baseUrl, else the request's scheme and Host (a
-- host name or [IPv6] and a port, nothing else), or nil when the Host is not one.
function M.origin(auth, request)
  if auth.baseUrl then return auth.baseUrl end
  local host = header(request, "host") or ""
  if not (find(host, "^[%w%.%-]+:?%d*$") or find(host, "^%[[%x:%.]+%]:?%d*$")) then return nil end
  return (request.scheme == "https" and "https://" or "http://") .. lower(host)
end

-- resource(origin) → the MCP endpoint's URL, the audience of every token.
function M.resource(origin) return origin .. M.MCP_PATH end

-- parse(s) → { scheme, host (lower case, [IPv6] with brackets), port (string, "" for none),
-- rest (path and query) } of an absolute http(s) URL without credentials or a fragment, or
-- nil and what is wrong.
function M.parse(s)
  if type(s) ~= "string" or s == "" then return nil, "is missing" end
  if #s > M.MAX_URI then return nil, "is longer than " .. M.MAX_URI .. " bytes" end
  if find(s, "[%c%s\127-\255]") then return nil, "has spaces or characters outside ASCII" end
  local scheme, authority, rest = match(s, "^(%a[%w+.-]*)://([^/?#]*)(.*)$")
  if not scheme then return nil, "is not an absolute URL" end
  scheme = lower(scheme)
  if scheme ~= "https" and scheme ~= "http" then return nil, "is not an http or https URL" end
  if find(rest, "#", 1, true) then return nil, "has a fragment" end
  if find(authority, "@", 1, true) then return nil, "has a user name or password" end
  local host, port = match(authority, "^(%[[%x:%.]+%]):?(%d*)$")
  if not host then host, port = match(authority, "^([%w%.%-]+):?(%d*)$") end
  if not host then return nil, "has no valid host" end
  if port ~= "" and (tonumber(port) < 1 or tonumber(port) > 65535) then return nil, "has a bad port" end
  if rest ~= "" and byte(rest) ~= 47 and byte(rest) ~= 63 then return nil, "has a bad path" end
  return { scheme = scheme, host = lower(host), port = port, rest = rest }
end

local LOOPBACK = { ["127.0.0.1"] = true, ["[::1]"] = true, localhost = true }

-- isLoopback(u) → whether parsed u is http on the machine itself (RFC 8252 §7.3, §8.3).
function M.isLoopback(u)
  return u.scheme == "http" and LOOPBACK[u.host] == true
end

-- redirectProblem(s) → nil when s may be registered as a redirect URI (https, or http to a
-- loopback address; no fragment, no credentials), else what is wrong with it.
function M.redirectProblem(s)
  local u, wrong = M.parse(s)
  if not u then return wrong end
  if u.scheme == "http" and not M.isLoopback(u) then
    return "must be https, or http to 127.0.0.1, [::1] or localhost"
  end
  return nil
end

-- redirectMatches(registered, given) → whether given is one of the registered redirect URIs:
-- the same string, or for a loopback one the same but for the port.
function M.redirectMatches(registered, given)
  if type(given) ~= "string" then return false end
  for _, uri in ipairs(registered) do
    if uri == given then return true end
  end
  local g = M.parse(given)
  if not g or not M.isLoopback(g) then return false end
  for _, uri in ipairs(registered) do
    local r = M.parse(uri)
    if r and M.isLoopback(r) and r.host == g.host and r.rest == g.rest then return true end
  end
  return false
end

-- originOf(s) → scheme://host[:port] of an URL (for a CSP source), or nil.
function M.originOf(s)
  local u = M.parse(s)
  if not u then return nil end
  return u.scheme .. "://" .. u.host .. (u.port ~= "" and ":" .. u.port or "")
end

-- hostOf(s) → host[:port] of an URL, to show a person, or nil.
function M.hostOf(s)
  local u = M.parse(s)
  if not u then return nil end
  return u.host .. (u.port ~= "" and ":" .. u.port or "")
end

-- ---- client ID metadata documents ----

-- isClientIdUrl(s) → whether s is a client id meant as a URL (a scheme and "://"): such a
-- client is its metadata document, never a registered one.
function M.isClientIdUrl(s)
  return type(s) == "string" and find(s, "^%a[%w+.-]*://") ~= nil
end

local function private_v4(host)
  local a, b = match(host, "^(%d+)%.(%d+)%.%d+%.%d+$")
  if not a then return false end
  a, b = tonumber(a), tonumber(b)
  return a == 0 or a == 10 or a == 127 or (a == 169 and b == 254) or (a == 172 and b >= 16 and b <= 31)
    or (a == 192 and b == 168) or (a == 100 and b >= 64 and b <= 127) or a >= 224
end

-- clientIdProblem(s, insecure) → nil when s may be fetched as a client ID metadata document
-- (https, a path, no fragment, credentials or dot segments; not an address of this machine or
-- a private network, unless insecure, which also lets http through: for specs), else what is
-- wrong with it.
function M.clientIdProblem(s, insecure)
  local u, wrong = M.parse(s)
  if not u then return wrong end
  if u.scheme ~= "https" and not insecure then return "must be an https URL" end
  local path = match(u.rest, "^[^?]*")
  if #path < 2 then return "must have a path" end
  if find(path .. "/", "/%.%.?/") then return "must not have . or .. segments" end
  if not insecure and (u.host == "localhost" or find(u.host, "%.localhost$") or find(u.host, "^%[")
      or private_v4(u.host)) then
    return "must not name this machine or a private network"
  end
  return nil
end

-- ---- query strings ----

-- encode(s) → s percent-encoded but for RFC 3986's unreserved characters.
function M.encode(s)
  return (gsub(tostring(s), "[^%w%-._~]", function(c) return format("%%%02X", byte(c)) end))
end

-- withParams(uri, params, order) → uri with the params (those of order that are set, in that
-- order) added to its query.
function M.withParams(uri, params, order)
  local parts = {}
  for _, k in ipairs(order) do
    local v = params[k]
    if v ~= nil then parts[#parts + 1] = k .. "=" .. M.encode(v) end
  end
  if #parts == 0 then return uri end
  return uri .. (find(uri, "?", 1, true) and "&" or "?") .. concat(parts, "&")
end

-- query(fields) → "a=1&b=2": every string field, names sorted.
function M.query(fields)
  local names = {}
  for k, v in pairs(fields) do
    if type(k) == "string" and type(v) == "string" then names[#names + 1] = k end
  end
  sort(names)
  local parts = {}
  for i, k in ipairs(names) do parts[i] = M.encode(k) .. "=" .. M.encode(fields[k]) end
  return concat(parts, "&")
end

return M
