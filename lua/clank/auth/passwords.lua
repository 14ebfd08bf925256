-- Passwords through clank.password (Argon2id, hashed on a thread while the task waits): hash,
-- verify (against a dummy hash when there is no user, so an unknown email takes as long as a
-- wrong password) and the parameters' upgrade after a successful sign-in.
local password = require "clank.password"
local action = require "clank.action"
local secrets = require "clank.auth.secrets"

local type, error, tostring = type, error, tostring

local M = {}

-- Raises what a wait that did not finish returned: an abort as clank.db raises one (503), any
-- other failure as a message.
local function raise(err, level)
  level = level + 1
  if type(err) == "table" and err.code == "ABORTED" then
    local reason = tostring(err.reason or "aborted")
    error(action.ActionError("ABORTED", "Password hashing was aborted (" .. reason .. ").", 503,
      { reason = reason }), level)
  end
  local message = type(err) == "table" and (err.message or err.code) or err
  error("clank.auth: password hashing failed: " .. tostring(message), level)
end

-- hash(auth, pw) → the encoded hash, made with auth.passwordParams (nil: clank.password's).
function M.hash(auth, pw)
  local encoded, err = password.hash(pw, auth.passwordParams)
  if not encoded then raise(err, 2) end
  return encoded
end

-- A hash of a random password, made once per Auth with its parameters.
local function dummy(auth)
  if not auth._dummyHash then
    auth._dummyHash = M.hash(auth, secrets.newSession())
  end
  return auth._dummyHash
end

local function verify(stored, pw)
  local ok, err = password.verify(stored, pw)
  if ok == nil then raise(err, 3) end
  return ok == true
end

-- verify(auth, stored, pw) → whether pw is the password of stored (nil: no such user; the
-- answer is false, as slowly as for a user). The dummy hash is made before the first verify
-- either way, so that first answer does not tell either.
function M.verify(auth, stored, pw)
  local fallback = dummy(auth)
  if stored == nil then
    verify(fallback, pw)
    return false
  end
  return verify(stored, pw)
end

-- rehash(auth, stored, pw) → a new hash of pw when stored was not made with the current
-- parameters, else nil.
function M.rehash(auth, stored, pw)
  if password.needsRehash(stored, auth.passwordParams) then return M.hash(auth, pw) end
  return nil
end

return M
