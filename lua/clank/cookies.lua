-- clank.cookies (SPEC §15): signed cookie values. sign(value) is
-- base64url(value) .. "." .. base64url(HMAC-SHA256(secret, "clank.cookie\0" .. value)), only
-- cookie-octets, so it can be a cookie's value as it is; verify(signed) gives the value back, or
-- nil for anything this secret did not sign. The secret is CLANK_SECRET; without it, the per-run
-- secret (signed values then do not outlive the run) and one warning.
local core = require "clank.core"
local token = require "clank.live.token"

local type, find, sub = type, string.find, string.sub
local getenv = os.getenv

local M = {}

local CONTEXT = "clank.cookie\0" -- keeps these MACs apart from other uses of the secret

local secret

-- CLANK_SECRET itself; without it clank-run's per-run secret (the same for every generation,
-- so a reload keeps signed cookies valid), or in plain lua5.4 random bytes.
local function key()
  if secret == nil then
    local env = getenv("CLANK_SECRET")
    secret = (env ~= nil and env ~= "" and env) or core.appSecret() or core.randomBytes(32)
    if env == nil or env == "" then
      core.log("warn", "clank.cookies: CLANK_SECRET is not set; signed cookies use a per-run "
        .. "secret and will not verify after a restart or on another worker")
    end
  end
  return secret
end

-- sign(value) → the signed value (a string of cookie-octets).
function M.sign(value)
  if type(value) ~= "string" then
    error("clank.cookies.sign: value must be a string, got " .. type(value), 2)
  end
  return token.encode64(value) .. "." .. token.encode64(core.hmacSHA256(key(), CONTEXT .. value))
end

-- verify(signed) → the value, or nil when signed was tampered with, signed under another
-- secret, or is not a signed value at all.
function M.verify(signed)
  if type(signed) ~= "string" then return nil end
  local dot = find(signed, ".", 1, true)
  if not dot then return nil end
  local value = token.decode64(sub(signed, 1, dot - 1))
  local mac = token.decode64(sub(signed, dot + 1))
  -- decode64 takes only the spelling encode64 writes: a signed value has one spelling
  if not value or not mac or #mac ~= 32 then return nil end
  if not token.same(core.hmacSHA256(key(), CONTEXT .. value), mac) then return nil end
  return value
end

return M
