-- What people type into clank.auth: email addresses, passwords, token names and the `next`
-- path of a form. Each check returns the value to use, or nil and the message a person reads.
local type, find, match, lower, sub, byte = type, string.find, string.match, string.lower,
  string.sub, string.byte
local utf8len = utf8.len

local M = {}

M.EMAIL_MAX = 254 -- bytes (RFC 5321's path limit, less the angle brackets)
M.TOKEN_NAME_MAX = 100 -- characters

local function trim(s) return (match(s, "^%s*(.-)%s*$")) end

-- email(s) → the address trimmed and lower-cased, or nil, message: at most 254 bytes of valid
-- UTF-8, no spaces or control characters, one @ with something before it and a domain with a
-- dot inside it (not at either end, never two in a row).
function M.email(s)
  if s == nil then return nil, "Enter your email address." end
  if type(s) ~= "string" then return nil, "The email address must be text." end
  s = trim(s)
  if s == "" then return nil, "Enter your email address." end
  if #s > M.EMAIL_MAX then
    return nil, "The email address must be at most " .. M.EMAIL_MAX .. " bytes."
  end
  local at = find(s, "@", 1, true)
  if not utf8len(s) or find(s, "[%s%c]") or not at or find(s, "@", at + 1, true) then
    return nil, "Enter a valid email address, like name@example.com."
  end
  local domain = sub(s, at + 1)
  if at == 1 or not find(domain, ".", 1, true) or byte(domain, 1) == 46 or byte(domain, -1) == 46
      or find(domain, "..", 1, true) then
    return nil, "Enter a valid email address, like name@example.com."
  end
  return lower(s)
end

-- password(pw, min, maxBytes) → pw, or nil, message: a password to set (register, reset,
-- change): valid UTF-8, min characters at least, maxBytes bytes at most.
function M.password(pw, min, max_bytes)
  if pw == nil or pw == "" then return nil, "Enter a password." end
  if type(pw) ~= "string" then return nil, "The password must be text." end
  if #pw > max_bytes then
    return nil, "The password must be at most " .. max_bytes .. " bytes."
  end
  local n = utf8len(pw)
  if not n then return nil, "The password must be valid UTF-8 text." end
  if n < min then
    return nil, "The password must be at least " .. min .. " characters."
  end
  return pw
end

-- given(pw, maxBytes) → pw, or nil, message: a password to check (sign-in, the current one):
-- refused before any hashing when it is empty or too long to be one that was set.
function M.given(pw, max_bytes)
  if pw == nil or pw == "" then return nil, "Enter your password." end
  if type(pw) ~= "string" then return nil, "The password must be text." end
  if #pw > max_bytes then
    return nil, "The password must be at most " .. max_bytes .. " bytes."
  end
  return pw
end

-- tokenName(s) → the name trimmed, or nil, message: 1 to 100 characters of UTF-8 text without
-- control characters.
function M.tokenName(s)
  if type(s) ~= "string" then return nil, "Give the token a name." end
  s = trim(s)
  local n = utf8len(s)
  if s == "" then return nil, "Give the token a name." end
  if not n or find(s, "%c") then return nil, "The token's name must be text without control characters." end
  if n > M.TOKEN_NAME_MAX then
    return nil, "The token's name must be at most " .. M.TOKEN_NAME_MAX .. " characters."
  end
  return s
end

-- scope(s) → "read" (the default) or "write", or nil, message.
function M.scope(s)
  if s == nil or s == "" then return "read" end
  if s == "read" or s == "write" then return s end
  return nil, "The token's scope must be \"read\" or \"write\"."
end

-- next(s) → where a successful form post goes: s when it is a path on this site (one "/" then
-- no "/" or "\": never another host), else fallback.
function M.next(s, fallback)
  if type(s) ~= "string" or #s > 2048 or find(s, "[%c%s]") then return fallback end
  if s == "/" or find(s, "^/[^/\\]") then return s end
  return fallback
end

return M
