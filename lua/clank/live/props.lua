-- View props from outside (SPEC §11): a query string coerced by the props schema as forms
-- coerce their fields (§10), or JSON; validated, and at most 2 KiB as canonical JSON.
local json = require "clank.json"
local form = require "clank.ui.form"
local form_fields = require "clank.ui.form_fields"

local type, pairs, ipairs, tonumber, pcall, char = type, pairs, ipairs, tonumber, pcall, string.char

local M = {}

M.MAX_BYTES = 2048

-- decodeURIComponent with + as a space (form encoding); nil on a bad escape or bad UTF-8.
local function unescape(s)
  local bad = false
  s = s:gsub("+", " "):gsub("%%(..)", function(h)
    local n = h:match("^%x%x$") and tonumber(h, 16)
    if not n then bad = true return "" end
    return char(n)
  end)
  if bad or not utf8.len(s) then return nil end
  return s
end
M.unescape = unescape

-- query(url) → { name → { values... } } in order of appearance; nil on a bad escape.
function M.query(url)
  local out = {}
  local q = (url or ""):match("%?([^#]*)") or ""
  for pair in q:gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    k, v = unescape(k), unescape(v)
    if k == nil or v == nil then return nil end
    if k ~= "" then
      out[k] = out[k] or {}
      out[k][#out[k] + 1] = v
    end
  end
  return out
end

local BOOLEAN = { ["true"] = true, on = true, ["1"] = true, ["false"] = false, off = false, ["0"] = false }

local function coerce_item(info, v)
  if info.itemType == "number" or info.itemType == "integer" then return tonumber(v) or v end
  return v
end

-- fromQuery(view, url) → props (unvalidated), or nil when the query is not valid encoding.
-- Names the schema does not know are left out (tracking parameters and the like).
function M.fromQuery(view, url)
  local query = M.query(url)
  if not query then return nil end
  local props = {}
  if not view.props then return props end
  local ok, _, _, known = pcall(form_fields.describe, "props", view.props)
  if not ok then
    for k, values in pairs(query) do props[k] = values[#values] end
    return props
  end
  for name, info in pairs(known) do
    local values = query[name]
    if values then
      if info.control == "list" or info.multiple then
        local list = json.array()
        for i, v in ipairs(values) do list[i] = coerce_item(info, v) end
        props[name] = list
      elseif info.control == "checkbox" then
        local v = values[#values]
        if BOOLEAN[v] ~= nil then props[name] = BOOLEAN[v] else props[name] = v end
      else
        props[name] = form.coerce(info, values[#values])
      end
    end
  end
  return props
end

-- The issues of a ValidationError as { path, message, expected? } (no input values).
function M.details(err, zero_based)
  local out = json.array()
  for _, issue in ipairs(err.issues or {}) do
    local path = json.array()
    for i, p in ipairs(issue.path or {}) do
      path[i] = (type(p) == "number" and zero_based) and p - 1 or p
    end
    out[#out + 1] = { path = path, message = issue.message, expected = issue.expected }
  end
  return out
end

-- validate(view, props) → props | nil, "invalid", ValidationError | nil, "too large"
function M.validate(view, props)
  local data = {} -- a view without a props schema takes none
  if view.props then
    local result = view.props:safeParse(props)
    if not result.success then return nil, "invalid", result.error end
    data = result.data
  end
  if #json.encode(data) > M.MAX_BYTES then return nil, "too large" end
  return data
end

return M
