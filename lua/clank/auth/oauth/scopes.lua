-- The scopes a client asks for and a person grants: agent:read (what an API token of scope
-- "read" may do: actions whose sideEffects are none or read) and agent:write (everything, as
-- scope "write"). A scope string is space-separated (RFC 6749 §3.3); here it is always
-- written in one order, without repeats.
local type, ipairs, pairs, gmatch, concat = type, ipairs, pairs, string.gmatch, table.concat

local M = {}

M.READ, M.WRITE = "agent:read", "agent:write"
M.SUPPORTED = { M.READ, M.WRITE }
M.DEFAULT = M.READ

local WORDS = {
  [M.READ] = "Read your data",
  [M.WRITE] = "Change your data",
}

-- parse(s) → the set { [scope] = true } and its string (nil or "": the default), or nil and
-- the first scope that is not supported.
function M.parse(s)
  if s == nil or s == "" then s = M.DEFAULT end
  if type(s) ~= "string" then return nil, "" end
  local set, any = {}, false
  for name in gmatch(s, "[^ ]+") do
    if not WORDS[name] then return nil, name end
    set[name], any = true, true
  end
  if not any then set[M.DEFAULT] = true end
  return set, M.format(set)
end

-- format(set) → its string in the supported order.
function M.format(set)
  local out = {}
  for _, name in ipairs(M.SUPPORTED) do
    if set[name] then out[#out + 1] = name end
  end
  return concat(out, " ")
end

-- The set of the supported scopes a stored string has (no default: "" has none).
local function set_of(s)
  local set = {}
  if type(s) == "string" then
    for name in gmatch(s, "[^ ]+") do
      if WORDS[name] then set[name] = true end
    end
  end
  return set
end

-- intersect(a, b) → the string of the scopes both strings have ("" for none).
function M.intersect(a, b)
  local sa, sb, both = set_of(a), set_of(b), {}
  for _, name in ipairs(M.SUPPORTED) do
    if sa[name] and sb[name] then both[name] = true end
  end
  return M.format(both)
end

-- union(a, b) → the string of the scopes either string has (nil: none).
function M.union(a, b)
  local set = set_of(a)
  for name in pairs(set_of(b)) do set[name] = true end
  return M.format(set)
end

-- covers(a, b) → whether string a has every scope of string b.
function M.covers(a, b)
  local sa = set_of(a)
  for name in pairs(set_of(b)) do
    if not sa[name] then return false end
  end
  return true
end

-- credential(s) → "write" when s has agent:write, else "read" (an API token's scope words).
function M.credential(s)
  return set_of(s)[M.WRITE] and "write" or "read"
end

-- names(s) → { "agent:read", ... }: the supported scopes s has, in the supported order.
function M.names(s)
  local set, out = set_of(s), {}
  for _, name in ipairs(M.SUPPORTED) do
    if set[name] then out[#out + 1] = name end
  end
  return out
end

-- label(name) → "Read your data (agent:read)": a supported scope in words, for the pages.
function M.label(name)
  return WORDS[name] .. " (" .. name .. ")"
end

-- words(s) → { "Read your data (agent:read)", ... }.
function M.words(s)
  local out = M.names(s)
  for i, name in ipairs(out) do out[i] = M.label(name) end
  return out
end

return M
