-- Guessing limits: failures (or requests) counted per key in a sliding window, in the
-- database (clank_attempts), so every worker and instance counts the same ones. A key is
-- "<what>:<by>:" .. the SHA-256 hex of the account's email or the client's address: no
-- address is stored as it is, and any bytes make a key.
local core = require "clank.core"
local store = require "clank.auth.store"

local ipairs, tostring, ceil, max, gsub, byte, format = ipairs, tostring, math.ceil, math.max, string.gsub,
  string.byte, string.format

local M = {}

local function hex(s)
  return (gsub(s, ".", function(c) return format("%02x", byte(c)) end))
end

-- keys(what, email, address, limits) → the list of { key, max } counted for what ("login",
-- "reset"): the account always, the address when there is one.
function M.keys(what, email, address, limits)
  local keys = { { key = what .. ":account:" .. hex(core.sha256(email)), max = limits.account } }
  if address ~= nil and address ~= "" then
    keys[2] = { key = what .. ":address:" .. hex(core.sha256(tostring(address))), max = limits.address }
  end
  return keys
end

-- check(q, keys, now, window) → nil while every key is under its limit, else the seconds
-- until enough of the counted attempts leave the window to let one more through.
function M.check(q, keys, now, window)
  local wait
  for _, k in ipairs(keys) do
    local times = store.attempts(q, k.key, now - window)
    if #times >= k.max then
      local leaves = times[#times - k.max + 1] + window -- when the count drops under max
      wait = max(wait or 1, ceil((leaves - now) / 1000))
    end
  end
  return wait
end

-- count(q, keys, now, window): one more attempt for each key; attempts out of the window are
-- dropped as it goes.
function M.count(q, keys, now, window)
  for _, k in ipairs(keys) do store.addAttempt(q, k.key, now) end
  store.pruneAttempts(q, now - window)
end

-- clear(q, keys): forgets the first key's attempts (the account's).
function M.clear(q, keys)
  store.clearAttempts(q, keys[1].key)
end

return M
