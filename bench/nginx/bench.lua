-- bench/nginx/bench.lua: the nginx + ngx_lua baseline of bench/http.sh, written
-- the way an OpenResty user writes an endpoint by hand: read the body, decode it
-- with lua-cjson, validate the seed's CreateTask with plain Lua, answer with the
-- same JSON envelope, status codes and messages as clank's bridge (SPEC §3, §5).
--   init_by_lua_block    { bench = require "bench"; bench.init(manifest_file, etag) }
--   content_by_lua_block { bench.hello() }   /hello
--   content_by_lua_block { bench.manifest() }  /manifest
--   content_by_lua_block { bench.create() }  /actions/tasks.create
-- `require "cjson"` works inside Debian's ngx_lua: LuaJIT loads lua-cjson's Lua
-- 5.1 build (/usr/lib/x86_64-linux-gnu/lua/5.1/cjson.so, ABI-compatible).
-- Known gaps, none reached by the bench: Debian's lua-cjson is upstream 2.1.0,
-- which decodes [] and {} to the same empty table (so "tags": {} passes) and
-- does not check that strings are valid UTF-8; it also writes "/" as "\/".
-- luacheck: std luajit, globals ngx
local cjson = require "cjson.safe"

local ngx = ngx
local type, pairs, ipairs, tostring, tonumber = type, pairs, ipairs, tostring, tonumber
local concat, sort = table.concat, table.sort
local find, match, byte, lower = string.find, string.match, string.byte, string.lower
local huge = math.huge
local null = cjson.null

local M = {}

local MAX_BODY = 65536
local hello_body = "Hello, world!\n"
local manifest_body, manifest_etag

function M.init(manifest_file, etag)
  local f = assert(io.open(manifest_file, "rb"))
  manifest_body = f:read("*a"):gsub("\n$", "")
  f:close()
  manifest_etag = etag
end

function M.hello()
  ngx.header["Content-Type"] = "text/plain; charset=utf-8"
  ngx.header["Content-Length"] = #hello_body
  ngx.print(hello_body)
end

function M.manifest()
  ngx.header["Cache-Control"] = "no-cache"
  ngx.header["ETag"] = manifest_etag
  if ngx.var.http_if_none_match == manifest_etag then
    return ngx.exit(304)
  end
  ngx.header["Content-Type"] = "application/json"
  ngx.header["Content-Length"] = #manifest_body
  ngx.print(manifest_body)
end

-- ------------------------------------------------------------ answers

local function send(status, body)
  ngx.status = status
  ngx.header["Content-Type"] = "application/json"
  ngx.header["Content-Length"] = #body
  if status >= 400 then ngx.header["Cache-Control"] = "no-store" end
  ngx.print(body)
  return ngx.exit(status)
end

local function fail(status, code, message, details)
  return send(status, cjson.encode { ok = false,
    error = { code = code, message = message, details = details } })
end

-- ------------------------------------------------------------ CreateTask

local priorities = { low = true, normal = true, high = true }
local known = { title = true, priority = true, estimate = true, tags = true }

-- UTF-8 code points: bytes that do not continue a sequence.
local function length(s)
  if not find(s, "[\128-\255]") then return #s end
  local n = 0
  for i = 1, #s do
    local b = byte(s, i)
    if b < 0x80 or b >= 0xC0 then n = n + 1 end
  end
  return n
end

local function is_array(t)
  if type(t) ~= "table" then return false end
  local n = 0
  for k in pairs(t) do
    if type(k) ~= "number" or k < 1 or k % 1 ~= 0 then return false end
    n = n + 1
  end
  return n == #t
end

local function is_object(t)
  if type(t) ~= "table" then return false end
  for k in pairs(t) do
    if type(k) ~= "string" then return false end
  end
  return true
end

-- Every issue of v, in the order clank reports them (keys sorted, then the
-- unknown keys sorted); nil when v is a valid CreateTask.
local function validate(v)
  local issues = {}
  local function add(path, message, expected)
    issues[#issues + 1] = { path = path, message = message, expected = expected }
  end
  local e = v.estimate
  if e ~= null then
    if type(e) ~= "number" or e ~= e or e == huge or e == -huge then
      add({ "estimate" }, "Expected a finite number.", "number")
    elseif e < 0 then
      add({ "estimate" }, "Must be at least 0.")
    end
  end
  local p = v.priority
  if p ~= nil and not (type(p) == "string" and priorities[p]) then
    add({ "priority" }, "Expected one of: low, normal, high.", "enum")
  end
  local tags = v.tags
  if not is_array(tags) then
    add({ "tags" }, "Expected an array.", "array")
  elseif #tags > 10 then
    add({ "tags" }, "Must contain at most 10 items.")
  else
    for i = 1, #tags do
      if type(tags[i]) ~= "string" then
        add({ "tags", i - 1 }, "Expected a string.", "string")
      end
    end
  end
  local title = v.title
  if type(title) ~= "string" then
    add({ "title" }, "Expected a string.", "string")
  else
    local n = length(title)
    if n < 1 then
      add({ "title" }, "Must contain at least 1 character.")
    elseif n > 120 then
      add({ "title" }, "Must contain at most 120 characters.")
    end
  end
  local unknown
  for k in pairs(v) do
    if not known[k] then
      unknown = unknown or {}
      unknown[#unknown + 1] = k
    end
  end
  if unknown then
    sort(unknown)
    for _, k in ipairs(unknown) do add({ k }, "Unknown property.") end
  end
  if #issues > 0 then return issues end
end

local function message(issues)
  local parts = {}
  for i, issue in ipairs(issues) do
    local path = {}
    for j, key in ipairs(issue.path) do path[j] = tostring(key) end
    parts[i] = concat(path, ".") .. ": " .. issue.message
  end
  return concat(parts, "; ")
end

-- application/json or */*+json, parameters and case ignored.
local function json_type(ctype)
  local media = ctype and match(lower(ctype), "^%s*([^;%s]+)")
  return media == "application/json" or (media ~= nil and find(media, "^[^/]+/[^/]*%+json$") ~= nil)
end

-- cjson encodes an empty path as {}, so the one root-level issue is spelled out.
local not_an_object = '{"ok":false,"error":{"code":"INVALID_INPUT","message":'
  .. '"value: Expected an object.","details":[{"path":[],"message":"Expected an object.",'
  .. '"expected":"object"}]}}'

function M.create()
  if ngx.req.get_method() ~= "POST" then
    return fail(404, "NOT_FOUND", "Agent endpoint not found.")
  end
  if not json_type(ngx.var.content_type) then
    return fail(415, "UNSUPPORTED_MEDIA_TYPE", "Expected an application/json request body.")
  end
  local length_header = tonumber(ngx.var.http_content_length)
  if length_header and length_header > MAX_BODY then
    return fail(413, "PAYLOAD_TOO_LARGE", "Request body exceeds " .. MAX_BODY .. " bytes.")
  end
  ngx.req.read_body()
  local body = ngx.req.get_body_data()
  if not body or body == "" then
    return fail(400, "INVALID_JSON", "A JSON request body is required.")
  end
  local input = cjson.decode(body)
  if input == nil then
    return fail(400, "INVALID_JSON", "Request body is not valid JSON.")
  end
  -- cjson decodes [] and {} alike; the body tells them apart.
  if not is_object(input) or find(body, "^%s*%[") then
    return send(422, not_an_object)
  end
  local issues = validate(input)
  if issues then
    return fail(422, "INVALID_INPUT", message(issues), issues)
  end
  -- The handler: what clank's action returns, encoded per request as clank does.
  return send(200, cjson.encode { ok = true, output = { id = "t1", created = true } })
end

return M
