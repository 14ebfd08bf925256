-- Mcp-Session-Id: a token any worker can verify without shared state (SPEC §6).
--
--   <protocol version>.<elicitation 0|1>.<nonce, 16 hex>.<HMAC-SHA256, 64 hex>
--
-- The HMAC runs under the per-run secret over the contract hash, the version, the flag and the
-- nonce; a reload that changes the contract changes the hash, so old ids no longer verify (404).
local core = require "clank.core"

local type, ipairs = type, ipairs
local byte, format, gsub = string.byte, string.format, string.gsub
local concat = table.concat

local session = {}

session.VERSIONS = { "2025-11-25", "2025-06-18", "2025-03-26" }
session.LATEST = "2025-11-25"

local supported = {}
for _, v in ipairs(session.VERSIONS) do
  supported[v] = true
end

function session.supported(version)
  return supported[version] == true
end

local function hex(s)
  return (gsub(s, ".", function(c) return format("%02x", byte(c)) end))
end

function session.randomHex(nbytes)
  return hex(core.randomBytes(nbytes))
end

-- principal: the app's principal for the request as text (issue 30: the signed-in user), or
-- nil; a session made for one principal does not verify for another.
local function mac(env, version, flag, nonce, principal)
  local parts = { env.contractHash, version, flag, nonce }
  if principal ~= nil then parts[5] = "principal=" .. principal end
  return hex(core.hmacSHA256(env.secret, concat(parts, "\n")))
end

-- Equal strings of equal length, in time that does not depend on where they differ.
local function same(a, b)
  if #a ~= #b then
    return false
  end
  local diff = 0
  for i = 1, #a do
    diff = diff | (byte(a, i) ~ byte(b, i))
  end
  return diff == 0
end

-- A new id for a client that negotiated `version` and did (or did not) declare elicitation,
-- bound to principal (text or nil).
function session.create(env, version, elicit, principal)
  local flag = elicit and "1" or "0"
  local nonce = session.randomHex(8)
  return concat({ version, flag, nonce, mac(env, version, flag, nonce, principal) }, ".")
end

-- The session an id stands for, { id, version, elicit }, or nil when it does not verify.
function session.verify(env, id, principal)
  if type(id) ~= "string" then
    return nil
  end
  local version, flag, nonce, tag = id:match("^(%d%d%d%d%-%d%d%-%d%d)%.([01])%.(%x+)%.(%x+)$")
  if not version or not supported[version] or #nonce ~= 16 or #tag ~= 64 then
    return nil
  end
  if not same(tag, mac(env, version, flag, nonce, principal)) then
    return nil
  end
  return { id = id, version = version, elicit = flag == "1" }
end

return session
