-- Who a request is: the bearer token of its authorization header (an API token, or an OAuth
-- access token: clank.auth.oauth.access), else the session of its clank_session cookie; and
-- the cookie a sign-in sets. A session's id is 32 random bytes in base64url, its hash (what
-- is stored, what credentials and onEnded name) the SHA-256 hex of that text.
local json = require "clank.json"
local reqlib = require "clank.request"
local store = require "clank.auth.store"
local secrets = require "clank.auth.secrets"

local type, tointeger, floor, match, sub = type, math.tointeger, math.floor, string.match, string.sub

local M = {}

M.COOKIE = "clank_session"
M.TOUCH_EVERY = 60000 -- ms: last_seen and last_used are written at most this often

-- user(row) → { id, email, roles, epoch } from a row with those columns (roles JSON text).
function M.user(row)
  local roles = json.decode(row.roles)
  if type(roles) ~= "table" or not json.isArray(roles) then roles = json.array() end
  return { id = tointeger(row.id), email = row.email, roles = roles, epoch = tointeger(row.epoch) }
end

local function header(request, name)
  local headers = request.headers
  if type(headers) ~= "table" then return nil end
  return headers[name]
end

-- cookie(request) → the clank_session cookie's value, or nil (request.cookies when the request
-- has them, as the runtime's do; the cookie header otherwise).
function M.cookie(request)
  local cookies = request.cookies
  if type(cookies) ~= "table" then cookies = reqlib.parseCookies(header(request, "cookie")) end
  local value = cookies[M.COOKIE]
  if type(value) ~= "string" then return nil end
  return value
end

local function by_token(auth, value, now)
  if not secrets.isToken(value) then return nil end
  local row = store.token(auth.db, secrets.hash(value))
  if not row then return nil end
  local id = tointeger(row.token_id)
  local last = row.last_used
  if type(last) ~= "number" or now - last >= M.TOUCH_EVERY then store.touchToken(auth.db, id, now) end
  return M.user(row), { kind = "token", id = id, scope = row.scope }
end

local function by_session(auth, value, now)
  if not secrets.isSession(value) then return nil end
  local hash = secrets.hash(value)
  local row = store.session(auth.db, hash)
  if not row then return nil end
  if now - row.last_seen > auth.sessionIdle or now - row.created_at > auth.sessionLifetime then
    local user_id = store.deleteSession(auth.db, hash)
    if user_id then auth:_ended({ hash }, user_id) end
    return nil
  end
  if now - row.last_seen >= M.TOUCH_EVERY then store.touchSession(auth.db, hash, now) end
  return M.user(row), { kind = "session", hash = hash }
end

-- lookup(auth, request) → user, credential, or nil. An authorization header decides alone:
-- when it is not a valid bearer token, the cookie is not looked at.
function M.lookup(auth, request)
  local now = auth.clock()
  local authorization = header(request, "authorization")
  if authorization ~= nil then
    local value = type(authorization) == "string" and
      match(authorization, "^%s*[Bb][Ee][Aa][Rr][Ee][Rr]%s+(%S+)%s*$")
    if not value then return nil end
    if sub(value, 1, 9) == "clank_at_" then -- an OAuth access token (clank.auth.oauth)
      return require("clank.auth.oauth.access").lookup(auth, request, value, now)
    end
    return by_token(auth, value, now)
  end
  local value = M.cookie(request)
  if value == nil then return nil end
  return by_session(auth, value, now)
end

-- create(q, userId, now) → the new session's id (the cookie's value) and hash.
function M.create(q, user_id, now)
  local id = secrets.newSession()
  local hash = secrets.hash(id)
  store.insertSession(q, hash, user_id, now)
  return id, hash
end

-- The set-cookie line of a session id (nil: the line that clears the cookie); Secure when the
-- request came over https.
function M.setCookie(auth, request, id)
  local line = M.COOKIE .. "=" .. (id or "") .. "; Path=/; Max-Age=" ..
    (id and floor(auth.sessionLifetime / 1000) or 0) .. "; HttpOnly; SameSite=Lax"
  if request.scheme == "https" then line = line .. "; Secure" end
  return line
end

-- The hash of the session cookie the request came with, valid or not (nil without one).
function M.cookieHash(request)
  local value = M.cookie(request)
  if not secrets.isSession(value) then return nil end
  return secrets.hash(value)
end

return M
