-- Session tokens (SPEC §11): the ID of a view session is base64url(payload .. mac), the mac
-- HMAC-SHA256(secret, payload), the payload canonical JSON of { v = view name, p = props,
-- n = nonce (hex of 16 random bytes), t = time (seconds), u = principal (when there is one) }.
-- A page load keeps no state: everything a session needs to mount is in its token.
local core = require "clank.core"
local json = require "clank.json"

local type, byte, char, concat, floor = type, string.byte, string.char, table.concat, math.floor

local M = {}

M.MAX_AGE = 24 * 60 * 60 -- seconds

local ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
local DECODE = {}
for i = 1, 64 do DECODE[byte(ALPHABET, i)] = i - 1 end

-- base64url without padding.
function M.encode64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = byte(s, i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local k = #out
    out[k + 1] = ALPHABET:sub(floor(n / 262144) + 1, floor(n / 262144) + 1)
    out[k + 2] = ALPHABET:sub(floor(n / 4096) % 64 + 1, floor(n / 4096) % 64 + 1)
    if b then out[k + 3] = ALPHABET:sub(floor(n / 64) % 64 + 1, floor(n / 64) % 64 + 1) end
    if c then out[k + 4] = ALPHABET:sub(n % 64 + 1, n % 64 + 1) end
  end
  return concat(out)
end

-- The bytes, or nil when s is not exactly what encode64 writes for them: unpadded base64url
-- whose last character leaves its unused low bits zero. One spelling per byte string, so a
-- token (or a signed value) has one spelling too: its string is its identity.
function M.decode64(s)
  if type(s) ~= "string" or #s % 4 == 1 then return nil end
  local out = {}
  for i = 1, #s, 4 do
    local n, count = 0, 0
    for j = i, i + 3 do
      local ch = byte(s, j)
      if ch then
        local d = DECODE[ch]
        if not d then return nil end
        n = n * 64 + d
        count = count + 1
      else
        n = n * 64
      end
    end
    local a, b, c = floor(n / 65536), floor(n / 256) % 256, n % 256
    if count == 4 then out[#out + 1] = char(a, b, c)
    elseif count == 3 then
      if c ~= 0 then return nil end -- the last character's 2 unused bits
      out[#out + 1] = char(a, b)
    else
      if b ~= 0 or c ~= 0 then return nil end -- its 4 unused bits
      out[#out + 1] = char(a)
    end
  end
  return concat(out)
end

local function hex(s)
  return (s:gsub(".", function(c) return ("%02x"):format(byte(c)) end))
end

-- Equal strings, in time that depends on their lengths only.
local function same(a, b)
  if #a ~= #b then return false end
  local diff = 0
  for i = 1, #a do diff = diff | (byte(a, i) ~ byte(b, i)) end
  return diff == 0
end
M.same = same

-- owner(id, n) → the worker (0 .. n-1) that owns a session ID with --workers n (SPEC §13):
-- FNV-1a 64 of its bytes, as an unsigned number, mod n (runtime/host/handoff.c computes the same).
function M.owner(id, n)
  local h = -3750763034362895579 -- 0xcbf29ce484222325
  for i = 1, #id do
    h = (h ~ byte(id, i)) * 1099511628211 -- 0x100000001b3, wrapping as uint64 does
  end
  return ((h >> 1) % n * 2 + (h & 1)) % n
end

-- sign(secret, view, props, principal, now) → token
function M.sign(secret, view, props, principal, now)
  local payload = json.encode({ v = view, p = props, n = hex(core.randomBytes(16)),
    t = floor(now), u = principal })
  return M.encode64(payload .. core.hmacSHA256(secret, payload))
end

-- verify(secret, token, principal, now) → { view, props, time } | nil, why
function M.verify(secret, token, principal, now)
  local raw = M.decode64(token)
  if not raw or #raw <= 32 then return nil, "malformed" end
  local payload, mac = raw:sub(1, -33), raw:sub(-32)
  if not same(core.hmacSHA256(secret, payload), mac) then return nil, "signature" end
  local claims = json.decode(payload)
  if type(claims) ~= "table" or type(claims.v) ~= "string" or type(claims.t) ~= "number"
    or type(claims.p) ~= "table" then
    return nil, "malformed"
  end
  if now - claims.t > M.MAX_AGE or claims.t - now > 300 then return nil, "expired" end
  local want = claims.u ~= nil and json.encode(claims.u) or nil
  local have = principal ~= nil and json.encode(principal) or nil
  if want ~= have then return nil, "principal" end
  return { view = claims.v, props = claims.p, time = claims.t }
end

return M
