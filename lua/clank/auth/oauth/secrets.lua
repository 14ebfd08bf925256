-- The secrets of OAuth: access tokens (clank_at_...), refresh tokens (clank_rt_...),
-- authorization codes, consent request ids and client ids, each random bytes in base64url;
-- stored as the SHA-256 hex of their text (clank.auth.secrets.hash), never as they are.
--
-- A refresh token's successor pair is not random: it is derived from the old token's text
-- and a random seed stored with it, so the same pair can be answered again to a client
-- retrying the exchange (the grace window) without the database ever holding a token
-- anyone could present. The text alone (a stolen token) or the seed alone (a read database)
-- derives nothing.
local core = require "clank.core"
local token = require "clank.live.token"
local secrets = require "clank.auth.secrets"

local type, sub = type, string.sub
local encode64, decode64, random, sha256 = token.encode64, token.decode64, core.randomBytes, core.sha256

local M = {}

M.ACCESS = "clank_at_"
M.REFRESH = "clank_rt_"
M.hash = secrets.hash
M.same = secrets.same

-- new(prefix?) → prefix .. 32 random bytes in base64url.
function M.new(prefix) return (prefix or "") .. encode64(random(32)) end

-- clientId() → a registered client's id: 18 random bytes in base64url (no ":", so never
-- taken for a metadata document's URL).
function M.clientId() return encode64(random(18)) end

-- derive(prefix, label, text, seed) → prefix .. base64url(SHA-256(label, seed, text)).
function M.derive(prefix, label, text, seed)
  return prefix .. encode64(sha256(label .. "\0" .. seed .. "\0" .. text))
end

-- is(prefix, s) → whether s is prefix and 32 bytes in base64url as new spells them.
function M.is(prefix, s)
  if type(s) ~= "string" or #s ~= #prefix + 43 or sub(s, 1, #prefix) ~= prefix then return false end
  local bytes = decode64(sub(s, #prefix + 1))
  return bytes ~= nil and #bytes == 32
end

return M
