-- clank.auth: sign-in built into the runtime (issue 30). An app gives
--
--   clank.app { auth = clank.auth { db = db_or_target, registration = "open", ... } }
--
-- and the runtime serves /__clank/auth/* with auth:handle(request) and knows who a request is
-- with auth:authenticate(request). The accounts, sessions, API tokens, reset links and the
-- guessing limits' counts live in the app's database (tables clank_*, made by the runtime's
-- migrations, recorded in clank_auth_migrations); passwords are Argon2id (clank.password).
--
--   auth:authenticate(request) → user { id, email, roles (a JSON array), epoch }, credential
--     { kind = "session", hash } or { kind = "token", id, scope = "read"|"write" }, or nil.
--     A session's hash is the SHA-256 hex of the cookie's text (clank_session=<that text>).
--   auth:handle(request) → { status, headers, body } (set-cookie among the headers).
--   auth:addUser(email, password, roles?) → user; auth:endSessions(userId, exceptHash?).
--   auth.onEnded: functions called as fn(hashes, userId) after sessions ended and the change
--     committed: sign-out, a sign-in replacing the request's session, a password change (every
--     session of the user, this browser's old one too: it gets a new id), a reset, an expired
--     session found by authenticate, endSessions. What one raises is logged.
--   auth:ready(): the migrations, once (every method runs it first).
--
-- Options beyond the documented ones: baseUrl (the origin reset links start with, and
-- OAuth's issuer; without it, the request's scheme and Host header, which a client chooses:
-- set it in production) and passwordParams (clank.password's { opslimit, memlimit }, for
-- tests).
--
-- OAuth (issue 31, clank.auth.oauth): an authorization server for MCP clients, on unless
-- `oauth = false`. handle also answers /.well-known/oauth-protected-resource[/__clank/mcp],
-- /.well-known/oauth-authorization-server, /.well-known/openid-configuration,
-- /__clank/oauth/{authorize,token,revoke,register} and /__clank/auth/grants (auth:handles(path)
-- says which paths are its); authenticate also takes `authorization: Bearer clank_at_...` on
-- /__clank/mcp → credential { kind = "oauth", grantId, clientId, clientName, scope =
-- "read"|"write", scopes = "agent:read agent:write" }. auth:oauthChallenge(request, opts?) →
-- the WWW-Authenticate value of the MCP endpoint's 401/403 (opts: error, description, scope).
-- oauth = { resourceName = "..." } names the resource in its metadata; oauth = {
-- allowInsecureClientIds = true } (for specs only, never documented) lets http client ID
-- metadata documents, and ones on this machine, through.
--
-- Files: init.lua (options, the Auth object), sessions.lua (who a request is, cookies),
-- http.lua (the endpoints), pages.lua (their HTML), store.lua (the SQL), limits.lua (guessing
-- limits), passwords.lua (hashing), secrets.lua (random ids and tokens), input.lua (what
-- people type), oauth/ (the authorization server: oauth/init.lua's comment).
--
-- Everything that reads or writes the database waits, so it runs in a runtime task (an
-- action's handler, a route).
local core = require "clank.core"
local db_module = require "clank.db"
local json = require "clank.json"
local input = require "clank.auth.input"
local passwords = require "clank.auth.passwords"
local sessions = require "clank.auth.sessions"
local store = require "clank.auth.store"

local type, pairs, ipairs, error, pcall, tostring, setmetatable, getmetatable =
  type, pairs, ipairs, error, pcall, tostring, setmetatable, getmetatable
local format, mtype = string.format, math.type

local http -- clank.auth.http, loaded on the first handle (it needs the page renderer)
local oauth -- clank.auth.oauth, the same

local Auth = { __name = "clank.Auth" }
Auth.__index = Auth

local M = {}

-- ---- options ----

local DAY = 86400000

local DEFAULTS = {
  registration = "open",
  passwordMinLength = 8,
  passwordMaxBytes = 1024,
  sessionIdle = 14 * DAY,
  sessionLifetime = 90 * DAY,
}
local LIMITS = { account = 10, address = 50, window = 15 * 60000 }

local PAGE_NAMES = { login = true, register = true, reset = true, newPassword = true,
  resetSent = true, password = true }

local function is_callable(x)
  if type(x) == "function" then return true end
  local mt = getmetatable(x)
  return type(mt) == "table" and mt.__call ~= nil
end

local function positive_integer(x) return mtype(x) == "integer" and x > 0 end
local function positive_number(x) return type(x) == "number" and x > 0 and x < math.huge end

local function is_db(x)
  return type(x) == "table" and (x.kind == "sqlite" or x.kind == "postgres")
    and type(x.transaction) == "function" and type(x.migrate) == "function"
end

local function default_send_reset(user, url)
  core.log("info", "clank.auth: password reset link for " .. user.email .. " (set sendReset to " ..
    "email it): " .. url)
end

-- Each field's check → nil, or what is wrong with the value.
local CHECKS = {
  db = function(v)
    if not is_db(v) and (type(v) ~= "string" or v == "") then
      return "must be a clank.db database or a target (a path, sqlite:PATH or a postgres:// URL)"
    end
  end,
  registration = function(v)
    if v ~= "open" and v ~= "closed" then return 'must be "open" or "closed"' end
  end,
  passwordMinLength = function(v)
    if not positive_integer(v) then return "must be a positive integer (characters)" end
  end,
  passwordMaxBytes = function(v)
    if not positive_integer(v) then return "must be a positive integer (bytes)" end
  end,
  sessionIdle = function(v)
    if not positive_number(v) then return "must be a positive number of milliseconds" end
  end,
  sessionLifetime = function(v)
    if not positive_number(v) then return "must be a positive number of milliseconds" end
  end,
  sendReset = function(v)
    if not is_callable(v) then return "must be a function(user, url)" end
  end,
  limits = function(v)
    if type(v) ~= "table" then return "must be a table { account, address, window }" end
    for k, n in pairs(v) do
      if k == "account" or k == "address" then
        if not positive_integer(n) then return format("%s must be a positive integer", k) end
      elseif k == "window" then
        if not positive_number(n) then return "window must be a positive number of milliseconds" end
      else
        return format("has an unknown field '%s' (account, address, window)", tostring(k))
      end
    end
  end,
  pages = function(v)
    if type(v) ~= "table" then return "must be a table of views or functions" end
    for k, page in pairs(v) do
      if not PAGE_NAMES[k] then
        return format("has an unknown page '%s' (login, register, reset, newPassword, resetSent, " ..
          "password)", tostring(k))
      end
      if not is_callable(page) then return format("%s must be a view or a function(props)", k) end
    end
  end,
  clock = function(v)
    if not is_callable(v) then return "must be a function returning epoch milliseconds" end
  end,
  baseUrl = function(v)
    if type(v) ~= "string" or not v:find("^https?://[^/%s?#]+/?$") then
      return 'must be the origin reset links start with, like "https://app.example"'
    end
  end,
  passwordParams = function(v) -- for tests: clank.password's parameters
    if type(v) ~= "table" then return "must be a table of clank.password parameters" end
  end,
  oauth = function(v)
    if v == false then return nil end
    if type(v) ~= "table" then return "must be false or a table { resourceName }" end
    for k, x in pairs(v) do
      if k == "resourceName" then
        if type(x) ~= "string" or x == "" then return "resourceName must be a non-empty string" end
      elseif k == "allowInsecureClientIds" then -- for specs: http metadata documents, on this machine
        if type(x) ~= "boolean" then return "allowInsecureClientIds must be a boolean" end
      else
        return format("has an unknown field '%s' (resourceName)", tostring(k))
      end
    end
  end,
}

-- problem(opts) → nil, or the message naming what is wrong.
local function problem(opts)
  if type(opts) ~= "table" then return "expected a table of options, got " .. type(opts) end
  for k, v in pairs(opts) do
    local check = CHECKS[k]
    if not check then return format("unknown field '%s'", tostring(k)) end
    local wrong = check(v)
    if wrong then return format("field '%s' %s", k, wrong) end
  end
  if opts.db == nil then return "field 'db' is required (a clank.db database or a target)" end
  local min = opts.passwordMinLength or DEFAULTS.passwordMinLength
  local max = opts.passwordMaxBytes or DEFAULTS.passwordMaxBytes
  if min > max then
    return format("field 'passwordMinLength' (%d) is more than passwordMaxBytes (%d)", min, max)
  end
end

local function new(opts)
  local wrong = problem(opts)
  if wrong then error("clank.auth: " .. wrong, 3) end
  local db = opts.db
  if type(db) == "string" then
    local ok, opened = pcall(db_module.open, db)
    if not ok then error("clank.auth: field 'db': " .. tostring(opened), 3) end
    db = opened
  end
  local limits = {}
  for k, v in pairs(LIMITS) do limits[k] = (opts.limits or LIMITS)[k] or v end
  local self = setmetatable({
    db = db,
    registration = opts.registration or DEFAULTS.registration,
    passwordMinLength = opts.passwordMinLength or DEFAULTS.passwordMinLength,
    passwordMaxBytes = opts.passwordMaxBytes or DEFAULTS.passwordMaxBytes,
    sessionIdle = opts.sessionIdle or DEFAULTS.sessionIdle,
    sessionLifetime = opts.sessionLifetime or DEFAULTS.sessionLifetime,
    sendReset = opts.sendReset or default_send_reset,
    limits = limits,
    pages = {},
    clock = opts.clock or function() return os.time() * 1000 end,
    baseUrl = opts.baseUrl and opts.baseUrl:gsub("/$", ""),
    passwordParams = opts.passwordParams,
    -- OAuth's settings and per-Auth state (the metadata documents' cache), false when off
    oauth = opts.oauth ~= false and {
      resourceName = opts.oauth and opts.oauth.resourceName,
      allowInsecureClientIds = (opts.oauth and opts.oauth.allowInsecureClientIds) == true,
    },
    onEnded = {},
    _seen = setmetatable({}, { __mode = "k" }), -- request → { user, credential } or false
  }, Auth)
  for k, v in pairs(opts.pages or {}) do self.pages[k] = v end
  return self
end

function M.isAuth(x) return getmetatable(x) == Auth end

-- ---- the object ----

-- Runs the migrations (once per Auth; every method that needs the tables calls it).
function Auth:ready()
  if not self._migrated then
    store.migrate(self.db)
    self._migrated = true
  end
  return self
end

-- authenticate(request) → user, credential, or nil; one lookup per request table.
function Auth:authenticate(request)
  if type(request) ~= "table" then
    error("clank.auth: authenticate expects a request, got " .. type(request), 2)
  end
  local seen = self._seen[request]
  if seen ~= nil then
    if seen then return seen[1], seen[2] end
    return nil
  end
  self:ready()
  local user, credential = sessions.lookup(self, request)
  self._seen[request] = user and { user, credential } or false
  return user, credential
end

-- Forgets what authenticate found for request (handle calls it: the request changed it).
function Auth:_forget(request)
  self._seen[request] = nil
end

-- handle(request) → { status, headers, body } for a path under /__clank/auth/.
function Auth:handle(request)
  if type(request) ~= "table" then error("clank.auth: handle expects a request, got " .. type(request), 2) end
  if self.oauth then
    oauth = oauth or require "clank.auth.oauth"
    if oauth.handles(request.path) then return oauth.handle(self, request) end
  end
  http = http or require "clank.auth.http"
  return http.handle(self, request)
end

-- handles(path) → whether handle answers path: /__clank/auth/..., and OAuth's when it is on.
function Auth:handles(path)
  if type(path) ~= "string" then return false end
  if path:sub(1, 14) == "/__clank/auth/" then return true end
  if not self.oauth then return false end
  oauth = oauth or require "clank.auth.oauth"
  return oauth.handles(path)
end

-- oauthChallenge(request, opts?) → the WWW-Authenticate value of the MCP endpoint's 401 or
-- 403 (opts: error, description, scope), or nil when OAuth is off or the Host is no host name.
function Auth:oauthChallenge(request, opts)
  if not self.oauth then return nil end
  oauth = oauth or require "clank.auth.oauth"
  return oauth.challenge(self, request, opts)
end

-- Creates a user → the user, or nil and the message when the email is taken.
function Auth:_createUser(email, pw, roles)
  self:ready()
  if store.userByEmail(self.db, email) then return nil, "An account with this email already exists." end
  local hash = passwords.hash(self, pw)
  roles = json.array(roles or {})
  local ok, id = pcall(store.insertUser, self.db, email, hash, roles, self.clock())
  if not ok then
    if store.isUniqueViolation(id) then return nil, "An account with this email already exists." end
    error(id, 0)
  end
  return { id = id, email = email, roles = roles, epoch = 0 }
end

-- addUser(email, password, roles?) → the user; raises for a bad email or password, or an
-- email that has an account. For the CLI and an app's setup: registration may be closed.
function Auth:addUser(email, pw, roles)
  local address, wrong = input.email(email)
  if not address then error("clank.auth.addUser: " .. wrong, 2) end
  local ok
  ok, wrong = input.password(pw, self.passwordMinLength, self.passwordMaxBytes)
  if not ok then error("clank.auth.addUser: " .. wrong, 2) end
  if roles ~= nil then
    if type(roles) ~= "table" then error("clank.auth.addUser: roles must be a list of strings", 2) end
    local list = {}
    for i, role in ipairs(roles) do
      if type(role) ~= "string" or role == "" then
        error("clank.auth.addUser: roles must be a list of non-empty strings", 2)
      end
      list[i] = role
    end
    roles = list
  end
  local user, taken = self:_createUser(address, pw, roles)
  if not user then error("clank.auth.addUser: " .. address .. ": " .. taken, 2) end
  return user
end

-- Calls each onEnded function with the hashes of sessions that ended (after their commit);
-- what one raises is logged.
function Auth:_ended(hashes, user_id)
  if #hashes == 0 then return end
  for _, fn in ipairs(self.onEnded) do
    local ok, err = pcall(fn, hashes, user_id)
    if not ok then core.log("error", "clank.auth: an onEnded function failed: " .. tostring(err)) end
  end
end

-- endSessions(userId, exceptHash?) → the hashes of the sessions it ended: all of the user's
-- ("sign out everywhere", which also bumps the user's epoch), or all but exceptHash's ("sign out
-- the other devices": the epoch stays, so what the kept session holds stays valid).
function Auth:endSessions(user_id, except)
  if mtype(user_id) ~= "integer" then error("clank.auth.endSessions: userId must be an integer", 2) end
  if except ~= nil and type(except) ~= "string" then
    error("clank.auth.endSessions: exceptHash must be a session hash (a string) or nil", 2)
  end
  self:ready()
  local hashes = self.db:transaction(function(tx)
    local ended = store.deleteSessionsOf(tx, user_id, except)
    if except == nil then store.bumpEpoch(tx, user_id) end
    return ended
  end)
  self:_ended(hashes, user_id)
  return hashes
end

-- auth(opts): new is called from here, not tail-called, so its errors name the caller's line.
return setmetatable(M, {
  __call = function(_, opts)
    local auth = new(opts)
    return auth
  end,
})
