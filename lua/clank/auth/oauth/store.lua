-- The OAuth tables' statements (their migrations are clank.auth.store's, after the accounts').
-- q is a clank.db database or a transaction; every value is a $n parameter; NULL is json.null
-- both ways; times are epoch milliseconds; request ids, codes and tokens are stored as the SHA-256 hex of what the
-- client holds. A grant's codes and tokens are deleted with it here, by statement: SQLite
-- runs without foreign keys, so ON DELETE CASCADE is not relied on.
local json = require "clank.json"

local tointeger = math.tointeger

local M = {}

local function int(x) return tointeger(x) or x end
local function null(x) -- a value that may be nil (SQL NULL is json.null: read so, bound so)
  if x == nil then return json.null end
  return x
end

-- ---- registered clients (RFC 7591) ----

function M.insertClient(q, id, name, redirect_uris, metadata, now)
  q:exec("INSERT INTO clank_oauth_clients (id, name, redirect_uris, metadata, created_at) " ..
    "VALUES ($1, $2, $3, $4, $5)", id, null(name), redirect_uris, metadata, now)
end

-- { id, name, redirect_uris (JSON text) } or nil.
function M.client(q, id)
  return q:one("SELECT id, name, redirect_uris FROM clank_oauth_clients WHERE id = $1", id)
end

-- ---- consent requests (the form between the consent page and its POST) ----

function M.insertRequest(q, r)
  q:exec("INSERT INTO clank_oauth_requests (hash, user_id, client_id, client_name, redirect_uri, " ..
    "code_challenge, scope, resource, state, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, " ..
    "$9, $10)", r.hash, r.user_id, r.client_id, null(r.client_name), r.redirect_uri, r.code_challenge,
    r.scope, r.resource, null(r.state), r.expires_at)
end

local REQUEST = "SELECT user_id, client_id, client_name, redirect_uri, code_challenge, scope, " ..
  "resource, state, expires_at FROM clank_oauth_requests "

-- The request hash of user_id still open at now → its row, or nil (another user's: nil).
function M.request(q, hash, user_id, now)
  return q:one(REQUEST .. "WHERE hash = $1 AND user_id = $2 AND expires_at > $3", hash, user_id, now)
end

-- Takes the request hash for user_id (once: two at the same time, one wins) → its row, or nil
-- when there is none for that user that is still open at now. Another user's try leaves it.
function M.takeRequest(q, hash, user_id, now)
  local row = M.request(q, hash, user_id, now)
  if not row then return nil end
  local gone = q:exec("DELETE FROM clank_oauth_requests WHERE hash = $1 AND user_id = $2", hash, user_id)
  if gone.changes ~= 1 then return nil end
  return row
end

function M.pruneRequests(q, now)
  q:exec("DELETE FROM clank_oauth_requests WHERE expires_at <= $1", now)
end

-- ---- grants (a person's yes to a client) ----

-- The scope of the grant of (user, client), or nil when there is none.
function M.grantScope(q, user_id, client_id)
  local row = q:one("SELECT scope FROM clank_oauth_grants WHERE user_id = $1 AND client_id = $2",
    user_id, client_id)
  return row and row.scope or nil
end

-- Creates the grant of (user, client) or gives it scope and the new name → its id.
function M.saveGrant(q, user_id, client_id, client_name, scope, now)
  q:exec("INSERT INTO clank_oauth_grants (user_id, client_id, client_name, scope, created_at, " ..
    "updated_at) VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (user_id, client_id) DO UPDATE SET " ..
    "client_name = excluded.client_name, scope = excluded.scope, updated_at = excluded.updated_at",
    user_id, client_id, null(client_name), scope, now)
  local row = q:one("SELECT id FROM clank_oauth_grants WHERE user_id = $1 AND client_id = $2",
    user_id, client_id)
  return int(row.id)
end

function M.grantsOf(q, user_id)
  return q:query("SELECT id, client_id, client_name, scope, created_at, updated_at, last_used " ..
    "FROM clank_oauth_grants WHERE user_id = $1 ORDER BY created_at, id", user_id)
end

-- Deletes a grant, its codes and its tokens → whether there was one (of user_id, when given).
function M.deleteGrant(q, id, user_id)
  local row
  if user_id then
    row = q:one("SELECT id FROM clank_oauth_grants WHERE id = $1 AND user_id = $2", id, user_id)
  else
    row = q:one("SELECT id FROM clank_oauth_grants WHERE id = $1", id)
  end
  if not row then return false end
  q:exec("DELETE FROM clank_oauth_tokens WHERE grant_id = $1", id)
  q:exec("DELETE FROM clank_oauth_codes WHERE grant_id = $1", id)
  q:exec("DELETE FROM clank_oauth_grants WHERE id = $1", id)
  return true
end

-- last_used = now when it is older than every ms (or unset).
function M.touchGrant(q, id, now, every)
  q:exec("UPDATE clank_oauth_grants SET last_used = $1 WHERE id = $2 AND " ..
    "(last_used IS NULL OR last_used <= $3)", now, id, now - every)
end

-- ---- authorization codes ----

function M.insertCode(q, c)
  q:exec("INSERT INTO clank_oauth_codes (hash, grant_id, client_id, redirect_uri, code_challenge, " ..
    "scope, resource, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", c.hash, c.grant_id,
    c.client_id, c.redirect_uri, c.code_challenge, c.scope, c.resource, c.expires_at)
end

-- The code and its grant's scope: { grant_id, client_id, redirect_uri, code_challenge, scope,
-- resource, expires_at, used_at, grant_scope }, or nil.
function M.code(q, hash)
  local row = q:one("SELECT c.grant_id, c.client_id, c.redirect_uri, c.code_challenge, c.scope, " ..
    "c.resource, c.expires_at, c.used_at, g.scope AS grant_scope FROM clank_oauth_codes c " ..
    "JOIN clank_oauth_grants g ON g.id = c.grant_id WHERE c.hash = $1", hash)
  if row then row.grant_id = int(row.grant_id) end
  return row
end

-- Marks the code used → whether this call did (two at the same time: one does).
function M.useCode(q, hash, now)
  return q:exec("UPDATE clank_oauth_codes SET used_at = $1 WHERE hash = $2 AND used_at IS NULL",
    now, hash).changes == 1
end

-- Codes expired before `before` go: used ones are kept until then to notice a second use.
function M.pruneCodes(q, before)
  q:exec("DELETE FROM clank_oauth_codes WHERE expires_at <= $1", before)
end

-- ---- access and refresh tokens ----

function M.insertToken(q, t)
  q:exec("INSERT INTO clank_oauth_tokens (hash, kind, grant_id, scope, resource, created_at, " ..
    "expires_at, seed) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", t.hash, t.kind, t.grant_id, t.scope,
    t.resource, t.created_at, t.expires_at, null(t.seed))
end

-- An access token with its grant and user: { scope, resource, expires_at, grant_id, client_id,
-- client_name, grant_scope, last_used, id, email, roles, epoch }, or nil.
function M.access(q, hash)
  local row = q:one("SELECT t.scope, t.resource, t.expires_at, g.id AS grant_id, g.client_id, " ..
    "g.client_name, g.scope AS grant_scope, g.last_used, u.id, u.email, u.roles, u.epoch " ..
    "FROM clank_oauth_tokens t JOIN clank_oauth_grants g ON g.id = t.grant_id " ..
    "JOIN clank_users u ON u.id = g.user_id WHERE t.hash = $1 AND t.kind = 'access'", hash)
  if row then row.grant_id = int(row.grant_id) end
  return row
end

-- Any token with its grant: { kind, scope, resource, expires_at, seed, rotated_at, grant_id,
-- client_id, grant_scope }, or nil.
function M.token(q, hash)
  local row = q:one("SELECT t.kind, t.scope, t.resource, t.expires_at, t.seed, t.rotated_at, " ..
    "t.grant_id, g.client_id, g.scope AS grant_scope FROM clank_oauth_tokens t " ..
    "JOIN clank_oauth_grants g ON g.id = t.grant_id WHERE t.hash = $1", hash)
  if row then row.grant_id = int(row.grant_id) end
  return row
end

-- Marks a refresh token exchanged → whether this call did (two at the same time: one does).
function M.rotate(q, hash, now)
  return q:exec("UPDATE clank_oauth_tokens SET rotated_at = $1 WHERE hash = $2 AND kind = 'refresh' " ..
    "AND rotated_at IS NULL", now, hash).changes == 1
end

function M.deleteToken(q, hash)
  q:exec("DELETE FROM clank_oauth_tokens WHERE hash = $1", hash)
end

-- Tokens expired at now go (a rotated refresh token stays until its expiry: a reuse until
-- then is noticed).
function M.pruneTokens(q, now)
  q:exec("DELETE FROM clank_oauth_tokens WHERE expires_at <= $1", now)
end

return M
