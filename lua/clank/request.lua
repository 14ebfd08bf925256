-- The methods of a request (SPEC §2, §15 "Bodies"): request:form(), request:json() and
-- request.cookies. Requests get them through the metatable runtime/host/lua_request.c sets,
-- whose __index calls M.index; the request's plain fields stay plain. The body is already
-- read and held within its limit (§13) when a handler runs.
local json = require "clank.json"
local multipart = require "clank.multipart"

local type, tonumber, rawget, rawset = type, tonumber, rawget, rawset
local char, find, sub, gsub, lower, match, gmatch =
  string.char, string.find, string.sub, string.gsub, string.lower, string.match, string.gmatch
local concat = table.concat

local M = {}

-- application/x-www-form-urlencoded decoding as URLSearchParams does it: '+' is a space, a bad
-- escape stays as it is (the same rules as request.query).
local function unescape(s)
  s = gsub(s, "+", " ")
  return (gsub(s, "%%(%x%x)", function(h) return char(tonumber(h, 16)) end))
end

-- "a=1&b=x+y" → { a = "1", b = "x y" }; a repeated name: the last value wins, as for
-- request.query (§2).
function M.parseUrlencoded(body)
  local fields = {}
  for pair in gmatch(body, "[^&]+") do
    local eq = find(pair, "=", 1, true)
    if eq then
      fields[unescape(sub(pair, 1, eq - 1))] = unescape(sub(pair, eq + 1))
    else
      fields[unescape(pair)] = ""
    end
  end
  return fields
end

-- A quoted-string at the start of s → its value (backslash escapes undone) and the rest after
-- it, or nil when it is not closed.
local function quoted(s)
  local out, i = {}, 2
  while i <= #s do
    local c = sub(s, i, i)
    if c == '"' then return concat(out), match(s, "^%s*(.*)$", i + 1) end
    if c == "\\" then
      i = i + 1
      c = sub(s, i, i)
    end
    out[#out + 1] = c
    i = i + 1
  end
  return nil
end

-- The media type (lower case) and its parameters (names lower case, quoted values unquoted).
local function media_type(value)
  local mtype = lower(match(value, "^%s*([^;%s]*)"))
  local params = {}
  local rest = match(value, "^[^;]*(.*)$")
  while rest ~= "" do
    local name, after = match(rest, "^;%s*([^=;%s]+)%s*=%s*(.*)$")
    if not name then
      rest = match(rest, "^;?[^;]*(.*)$")
    else
      local v, tail
      if sub(after, 1, 1) == '"' then
        v, tail = quoted(after)
      else
        v, tail = match(after, "^([^;]*)(.*)$")
        v = match(v, "^(.-)%s*$")
      end
      if not v then break end
      params[lower(name)] = v
      rest = tail
    end
  end
  return mtype, params
end
M.mediaType = media_type

-- multipart/form-data (RFC 7578 over RFC 2046): text parts are strings, a part with a
-- filename is { filename, type, data }; a repeated name: the last part wins. The parser is
-- incremental, in C (runtime/util/multipart.c), so it can take the body in pieces.
function M.parseMultipart(body, boundary)
  return multipart.parse(body, boundary)
end

local FORM_TYPES = "Expected a form body (application/x-www-form-urlencoded or multipart/form-data)."

-- request:form() → the fields, or nil, message (no body: an empty table).
function M.form(request)
  local body = request.body
  if body == nil or body == "" then return {} end
  local mtype, params = media_type(request.headers and request.headers["content-type"] or "")
  if mtype == "application/x-www-form-urlencoded" then return M.parseUrlencoded(body) end
  if mtype == "multipart/form-data" then return M.parseMultipart(body, params.boundary) end
  return nil, FORM_TYPES
end

-- request:json() → the value decoded strictly (§5), or nil, message.
function M.json(request)
  local body = request.body
  if body == nil or body == "" then return nil, "A JSON request body is required." end
  local value, err = json.decode(body)
  if value == nil then return nil, "Request body is not valid JSON: " .. err end
  return value
end

local TOKEN = "^[!#$%%&'*+%-.^_`|~%w]+$"
local NOT_OCTET = '[%c%s",;\\\128-\255]' -- cookie-octet is %x21 / %x23-2B / %x2D-3A / %x3C-5B / %x5D-7E

-- The cookie header (RFC 6265 §4.2.1, "name=value; name=value") → { name = value }; a pair
-- whose name is not a token or whose value is not cookie-octets (quotes allowed around it) is
-- skipped; a repeated name: the first wins, as browsers send the most specific first.
function M.parseCookies(header)
  local cookies = {}
  if type(header) ~= "string" then return cookies end
  for pair in gmatch(header, "[^;,]+") do
    local name, value = match(pair, "^%s*([^=]-)%s*=%s*(.-)%s*$")
    if name and match(name, TOKEN) then
      local inner = match(value, '^"(.*)"$')
      if inner then value = inner end
      if not find(value, NOT_OCTET) and cookies[name] == nil then cookies[name] = value end
    end
  end
  return cookies
end

-- __index of a request: its methods, and request.cookies made on first use.
function M.index(request, key)
  if key == "form" then return M.form end
  if key == "json" then return M.json end
  if key == "cookies" then
    local headers = rawget(request, "headers")
    local cookies = M.parseCookies(type(headers) == "table" and headers.cookie or nil)
    rawset(request, "cookies", cookies)
    return cookies
  end
  return nil
end

return M
