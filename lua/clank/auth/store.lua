-- clank.auth's tables and every statement on them. q is a clank.db database or a transaction
-- (both have query/one/exec); every value is a $n parameter. Times are epoch milliseconds;
-- session, token and reset secrets are stored as the SHA-256 hex of what the client holds.
local json = require "clank.json"

local type, ipairs, tointeger = type, ipairs, math.tointeger

local M = {}

M.TABLE = "clank_auth_migrations"

-- The runtime's migrations, one statement each, in order; never edit one that shipped (its
-- checksum is recorded): add the next.
local MIGRATIONS = {
  sqlite = {
    [[CREATE TABLE clank_users (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  email TEXT NOT NULL UNIQUE,
  password_hash TEXT NOT NULL,
  roles TEXT NOT NULL DEFAULT '[]',
  epoch INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL)]],
    [[CREATE TABLE clank_sessions (
  hash TEXT PRIMARY KEY,
  user_id INTEGER NOT NULL REFERENCES clank_users (id) ON DELETE CASCADE,
  created_at INTEGER NOT NULL,
  last_seen INTEGER NOT NULL)]],
    "CREATE INDEX clank_sessions_user ON clank_sessions (user_id)",
    [[CREATE TABLE clank_tokens (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id INTEGER NOT NULL REFERENCES clank_users (id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  scope TEXT NOT NULL CHECK (scope IN ('read', 'write')),
  hash TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  last_used INTEGER)]],
    "CREATE INDEX clank_tokens_user ON clank_tokens (user_id)",
    [[CREATE TABLE clank_resets (
  hash TEXT PRIMARY KEY,
  user_id INTEGER NOT NULL REFERENCES clank_users (id) ON DELETE CASCADE,
  expires_at INTEGER NOT NULL,
  used_at INTEGER)]],
    "CREATE INDEX clank_resets_user ON clank_resets (user_id)",
    [[CREATE TABLE clank_attempts (
  key TEXT NOT NULL,
  at INTEGER NOT NULL)]],
    "CREATE INDEX clank_attempts_key ON clank_attempts (key, at)",
    "CREATE INDEX clank_attempts_at ON clank_attempts (at)",
    -- OAuth (issue 31, clank.auth.oauth): registered clients, the consent requests waiting for
    -- a person's answer, grants (a person's yes to a client), codes and tokens. No foreign key
    -- is relied on to delete (SQLite runs without them): clank.auth.oauth.store deletes a
    -- grant's codes and tokens itself.
    [[CREATE TABLE clank_oauth_clients (
  id TEXT PRIMARY KEY,
  name TEXT,
  redirect_uris TEXT NOT NULL,
  metadata TEXT NOT NULL,
  created_at INTEGER NOT NULL)]],
    [[CREATE TABLE clank_oauth_requests (
  hash TEXT PRIMARY KEY,
  user_id INTEGER NOT NULL REFERENCES clank_users (id) ON DELETE CASCADE,
  client_id TEXT NOT NULL,
  client_name TEXT,
  redirect_uri TEXT NOT NULL,
  code_challenge TEXT NOT NULL,
  scope TEXT NOT NULL,
  resource TEXT NOT NULL,
  state TEXT,
  expires_at INTEGER NOT NULL)]],
    "CREATE INDEX clank_oauth_requests_expires ON clank_oauth_requests (expires_at)",
    [[CREATE TABLE clank_oauth_grants (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id INTEGER NOT NULL REFERENCES clank_users (id) ON DELETE CASCADE,
  client_id TEXT NOT NULL,
  client_name TEXT,
  scope TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  last_used INTEGER,
  UNIQUE (user_id, client_id))]],
    [[CREATE TABLE clank_oauth_codes (
  hash TEXT PRIMARY KEY,
  grant_id INTEGER NOT NULL REFERENCES clank_oauth_grants (id) ON DELETE CASCADE,
  client_id TEXT NOT NULL,
  redirect_uri TEXT NOT NULL,
  code_challenge TEXT NOT NULL,
  scope TEXT NOT NULL,
  resource TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at INTEGER)]],
    "CREATE INDEX clank_oauth_codes_grant ON clank_oauth_codes (grant_id)",
    [[CREATE TABLE clank_oauth_tokens (
  hash TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
  grant_id INTEGER NOT NULL REFERENCES clank_oauth_grants (id) ON DELETE CASCADE,
  scope TEXT NOT NULL,
  resource TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  seed TEXT,
  rotated_at INTEGER)]],
    "CREATE INDEX clank_oauth_tokens_grant ON clank_oauth_tokens (grant_id)",
    "CREATE INDEX clank_oauth_tokens_expires ON clank_oauth_tokens (expires_at)",
  },
  postgres = {
    [[CREATE TABLE clank_users (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,
  password_hash TEXT NOT NULL,
  roles TEXT NOT NULL DEFAULT '[]',
  epoch BIGINT NOT NULL DEFAULT 0,
  created_at BIGINT NOT NULL)]],
    [[CREATE TABLE clank_sessions (
  hash TEXT PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES clank_users (id) ON DELETE CASCADE,
  created_at BIGINT NOT NULL,
  last_seen BIGINT NOT NULL)]],
    "CREATE INDEX clank_sessions_user ON clank_sessions (user_id)",
    [[CREATE TABLE clank_tokens (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES clank_users (id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  scope TEXT NOT NULL CHECK (scope IN ('read', 'write')),
  hash TEXT NOT NULL UNIQUE,
  created_at BIGINT NOT NULL,
  last_used BIGINT)]],
    "CREATE INDEX clank_tokens_user ON clank_tokens (user_id)",
    [[CREATE TABLE clank_resets (
  hash TEXT PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES clank_users (id) ON DELETE CASCADE,
  expires_at BIGINT NOT NULL,
  used_at BIGINT)]],
    "CREATE INDEX clank_resets_user ON clank_resets (user_id)",
    [[CREATE TABLE clank_attempts (
  key TEXT NOT NULL,
  at BIGINT NOT NULL)]],
    "CREATE INDEX clank_attempts_key ON clank_attempts (key, at)",
    "CREATE INDEX clank_attempts_at ON clank_attempts (at)",
    [[CREATE TABLE clank_oauth_clients (
  id TEXT PRIMARY KEY,
  name TEXT,
  redirect_uris TEXT NOT NULL,
  metadata TEXT NOT NULL,
  created_at BIGINT NOT NULL)]],
    [[CREATE TABLE clank_oauth_requests (
  hash TEXT PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES clank_users (id) ON DELETE CASCADE,
  client_id TEXT NOT NULL,
  client_name TEXT,
  redirect_uri TEXT NOT NULL,
  code_challenge TEXT NOT NULL,
  scope TEXT NOT NULL,
  resource TEXT NOT NULL,
  state TEXT,
  expires_at BIGINT NOT NULL)]],
    "CREATE INDEX clank_oauth_requests_expires ON clank_oauth_requests (expires_at)",
    [[CREATE TABLE clank_oauth_grants (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES clank_users (id) ON DELETE CASCADE,
  client_id TEXT NOT NULL,
  client_name TEXT,
  scope TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  last_used BIGINT,
  UNIQUE (user_id, client_id))]],
    [[CREATE TABLE clank_oauth_codes (
  hash TEXT PRIMARY KEY,
  grant_id BIGINT NOT NULL REFERENCES clank_oauth_grants (id) ON DELETE CASCADE,
  client_id TEXT NOT NULL,
  redirect_uri TEXT NOT NULL,
  code_challenge TEXT NOT NULL,
  scope TEXT NOT NULL,
  resource TEXT NOT NULL,
  expires_at BIGINT NOT NULL,
  used_at BIGINT)]],
    "CREATE INDEX clank_oauth_codes_grant ON clank_oauth_codes (grant_id)",
    [[CREATE TABLE clank_oauth_tokens (
  hash TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
  grant_id BIGINT NOT NULL REFERENCES clank_oauth_grants (id) ON DELETE CASCADE,
  scope TEXT NOT NULL,
  resource TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  seed TEXT,
  rotated_at BIGINT)]],
    "CREATE INDEX clank_oauth_tokens_grant ON clank_oauth_tokens (grant_id)",
    "CREATE INDEX clank_oauth_tokens_expires ON clank_oauth_tokens (expires_at)",
  },
}
M.MIGRATIONS = MIGRATIONS

function M.migrate(db)
  return db:migrate(MIGRATIONS[db.kind], { table = M.TABLE })
end

-- An INSERT whose new id exec returns as lastId: PostgreSQL says so with RETURNING.
local function insert_id(q, sql, ...)
  if q.kind == "postgres" or (q.db and q.db.kind == "postgres") then
    sql = sql .. " RETURNING id"
  end
  return tointeger(q:exec(sql, ...).lastId)
end

-- Whether e is the error of a UNIQUE constraint (SQLite's SQLITE_CONSTRAINT..., SQLSTATE 23505).
function M.isUniqueViolation(e)
  local code = type(e) == "table" and e.code
  return code == "23505" or (type(code) == "string" and code:find("^SQLITE_CONSTRAINT") ~= nil)
end

-- ---- users ----

local USER = "SELECT id, email, password_hash, roles, epoch FROM clank_users "

function M.userByEmail(q, email) return q:one(USER .. "WHERE email = $1", email) end
function M.userById(q, id) return q:one(USER .. "WHERE id = $1", id) end

function M.insertUser(q, email, hash, roles, now)
  return insert_id(q, "INSERT INTO clank_users (email, password_hash, roles, epoch, created_at) " ..
    "VALUES ($1, $2, $3, 0, $4)", email, hash, json.encode(roles), now)
end

function M.setPassword(q, id, hash)
  q:exec("UPDATE clank_users SET password_hash = $1 WHERE id = $2", hash, id)
end

function M.bumpEpoch(q, id)
  q:exec("UPDATE clank_users SET epoch = epoch + 1 WHERE id = $1", id)
end

-- ---- sessions ----

function M.insertSession(q, hash, user_id, now)
  q:exec("INSERT INTO clank_sessions (hash, user_id, created_at, last_seen) VALUES ($1, $2, $3, $3)",
    hash, user_id, now)
end

-- The session and its user: { created_at, last_seen, user_id, id, email, roles, epoch }.
function M.session(q, hash)
  return q:one("SELECT s.created_at, s.last_seen, u.id, u.email, u.roles, u.epoch " ..
    "FROM clank_sessions s JOIN clank_users u ON u.id = s.user_id WHERE s.hash = $1", hash)
end

function M.touchSession(q, hash, now)
  q:exec("UPDATE clank_sessions SET last_seen = $1 WHERE hash = $2", now, hash)
end

-- Deletes one session → its user's id, or nil when there was none.
function M.deleteSession(q, hash)
  local row = q:one("SELECT user_id FROM clank_sessions WHERE hash = $1", hash)
  if not row then return nil end
  q:exec("DELETE FROM clank_sessions WHERE hash = $1", hash)
  return tointeger(row.user_id)
end

-- Deletes the user's sessions, but the one whose hash is except → the hashes deleted.
function M.deleteSessionsOf(q, user_id, except)
  local rows = q:query("SELECT hash FROM clank_sessions WHERE user_id = $1 ORDER BY created_at, hash",
    user_id)
  local hashes = {}
  for _, row in ipairs(rows) do
    if row.hash ~= except then hashes[#hashes + 1] = row.hash end
  end
  if except then
    q:exec("DELETE FROM clank_sessions WHERE user_id = $1 AND hash <> $2", user_id, except)
  else
    q:exec("DELETE FROM clank_sessions WHERE user_id = $1", user_id)
  end
  return hashes
end

-- ---- tokens ----

function M.insertToken(q, user_id, name, scope, hash, now)
  return insert_id(q, "INSERT INTO clank_tokens (user_id, name, scope, hash, created_at) " ..
    "VALUES ($1, $2, $3, $4, $5)", user_id, name, scope, hash, now)
end

-- The token and its user: { token_id, scope, last_used, id, email, roles, epoch }.
function M.token(q, hash)
  return q:one("SELECT t.id AS token_id, t.scope, t.last_used, u.id, u.email, u.roles, u.epoch " ..
    "FROM clank_tokens t JOIN clank_users u ON u.id = t.user_id WHERE t.hash = $1", hash)
end

function M.touchToken(q, id, now)
  q:exec("UPDATE clank_tokens SET last_used = $1 WHERE id = $2", now, id)
end

function M.tokensOf(q, user_id)
  return q:query("SELECT id, name, scope, created_at, last_used FROM clank_tokens " ..
    "WHERE user_id = $1 ORDER BY id", user_id)
end

-- Deletes the user's token id → whether there was one.
function M.deleteToken(q, id, user_id)
  return q:exec("DELETE FROM clank_tokens WHERE id = $1 AND user_id = $2", id, user_id).changes > 0
end

-- ---- password resets ----

function M.insertReset(q, hash, user_id, expires_at)
  q:exec("INSERT INTO clank_resets (hash, user_id, expires_at) VALUES ($1, $2, $3)",
    hash, user_id, expires_at)
end

-- The user of a reset that is unused and not expired at now, or nil.
function M.openReset(q, hash, now)
  local row = q:one("SELECT user_id FROM clank_resets WHERE hash = $1 AND used_at IS NULL " ..
    "AND expires_at > $2", hash, now)
  return row and tointeger(row.user_id)
end

-- Uses the reset (once: two at the same time, one wins) → its user's id, or nil; the user's
-- other open resets are used up with it.
function M.useReset(q, hash, now)
  local user_id = M.openReset(q, hash, now)
  if not user_id then return nil end
  local changed = q:exec("UPDATE clank_resets SET used_at = $1 WHERE hash = $2 AND used_at IS NULL",
    now, hash).changes
  if changed ~= 1 then return nil end
  q:exec("UPDATE clank_resets SET used_at = $1 WHERE user_id = $2 AND used_at IS NULL", now, user_id)
  return user_id
end

-- ---- attempts (clank.auth.limits) ----

-- The times of key's attempts after since, oldest first.
function M.attempts(q, key, since)
  local out = {}
  for i, row in ipairs(q:query("SELECT at FROM clank_attempts WHERE key = $1 AND at > $2 ORDER BY at",
      key, since)) do
    out[i] = tointeger(row.at) or row.at
  end
  return out
end

function M.addAttempt(q, key, at)
  q:exec("INSERT INTO clank_attempts (key, at) VALUES ($1, $2)", key, at)
end

function M.clearAttempts(q, key)
  q:exec("DELETE FROM clank_attempts WHERE key = $1", key)
end

function M.pruneAttempts(q, before)
  q:exec("DELETE FROM clank_attempts WHERE at <= $1", before)
end

return M
