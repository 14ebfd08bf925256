-- The secrets clank.auth hands out: session ids (the clank_session cookie), API tokens and
-- password reset tokens, each 32 random bytes in base64url (a token has the prefix clank_).
-- Only their SHA-256 hex is stored: the database alone signs no one in.
local core = require "clank.core"
local token = require "clank.live.token"

local type, byte, format, gsub, sub = type, string.byte, string.format, string.gsub, string.sub
local encode64, decode64, random = token.encode64, token.decode64, core.randomBytes

local M = {}

M.TOKEN_PREFIX = "clank_"
M.same = token.same -- constant-time equality

-- hash(s) → the SHA-256 hex of s, as stored.
function M.hash(s)
  return (gsub(core.sha256(s), ".", function(c) return format("%02x", byte(c)) end))
end

local function new() return encode64(random(32)) end
M.newSession = new
M.newReset = new
function M.newToken() return M.TOKEN_PREFIX .. new() end

-- Whether s is spelled as new() spells one: 32 bytes in base64url. Anything else is refused
-- before the database is asked.
local function well_formed(s)
  if type(s) ~= "string" or #s ~= 43 then return false end
  local bytes = decode64(s)
  return bytes ~= nil and #bytes == 32
end
M.isSession = well_formed
M.isReset = well_formed

function M.isToken(s)
  return type(s) == "string" and sub(s, 1, #M.TOKEN_PREFIX) == M.TOKEN_PREFIX
    and well_formed(sub(s, #M.TOKEN_PREFIX + 1))
end

return M
