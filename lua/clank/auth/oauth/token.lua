-- The token endpoint (POST /__clank/oauth/token, a form; JSON answers, no-store): an
-- authorization code for a first pair (RFC 6749 §4.1.3, PKCE RFC 7636 §4.6), a refresh token
-- for the next (rotation, OAuth 2.1 §4.3.1). Public clients only: no client authentication,
-- the client_id says who asks.
--
-- A code used twice revokes its grant (every token the first use issued; RFC 6749 §4.1.2).
-- A refresh token is exchanged once; for GRACE after that the same exchange answers the same
-- new pair (a client that retries after losing the answer), and after GRACE a reuse revokes the
-- grant (the old token was copied: RFC 9700 §4.14.2).
local core = require "clank.core"
local reqlib = require "clank.request"
local token = require "clank.live.token"
local answers = require "clank.auth.oauth.answers"
local scopes = require "clank.auth.oauth.scopes"
local secrets = require "clank.auth.oauth.secrets"
local store = require "clank.auth.oauth.store"

local type, find, ceil = type, string.find, math.ceil

local M = {}

M.ACCESS_LIFETIME = 3600000 -- ms
M.REFRESH_LIFETIME = 30 * 86400000 -- ms a refresh token lives unused
M.GRACE = 60000 -- ms an exchanged refresh token still answers its successor pair
M.KEEP_CODES = 86400000 -- ms a used code is kept after it expired, to notice a second use

local function fail(code, description)
  return answers.error(code == "invalid_client" and 401 or 400, code, description, true)
end

local function issued(access, refresh, expires_in, scope)
  return answers.json(200, { access_token = access, token_type = "Bearer", expires_in = expires_in,
    refresh_token = refresh, scope = scope }, true)
end

-- insert_pair(q, grantId, access, refresh, scope, resource, now) stores both tokens' hashes;
-- the refresh token gets a random seed for its successors.
local function insert_pair(q, grant_id, access, refresh, scope, resource, now)
  store.insertToken(q, { hash = secrets.hash(access), kind = "access", grant_id = grant_id, scope = scope,
    resource = resource, created_at = now, expires_at = now + M.ACCESS_LIFETIME })
  store.insertToken(q, { hash = secrets.hash(refresh), kind = "refresh", grant_id = grant_id,
    scope = scope, resource = resource, created_at = now, expires_at = now + M.REFRESH_LIFETIME,
    seed = secrets.new() })
end

-- The pair a refresh token is exchanged for, the same each time it is asked.
local function successors(refresh, seed)
  return secrets.derive(secrets.ACCESS, "clank oauth access", refresh, seed),
    secrets.derive(secrets.REFRESH, "clank oauth refresh", refresh, seed)
end

-- Revokes a grant: it, its codes and its tokens go.
local function revoke_grant(auth, grant_id)
  auth.db:transaction(function(tx) store.deleteGrant(tx, grant_id) end)
end

-- ---- grant_type=authorization_code ----

local VERIFIER = "^[%w%-%._~]+$" -- RFC 7636 §4.1: 43 to 128 of these

local function s256(verifier) return token.encode64(core.sha256(verifier)) end

local function by_code(c, f)
  local auth = c.auth
  local code, redirect_uri, client_id, verifier = f.code, f.redirect_uri, f.client_id, f.code_verifier
  if not code or not redirect_uri or not client_id or not verifier then
    return fail("invalid_request", "code, redirect_uri, client_id and code_verifier are required.")
  end
  if #verifier < 43 or #verifier > 128 or not find(verifier, VERIFIER) then
    return fail("invalid_request", "code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~.")
  end
  local now = auth.clock()
  local hash = secrets.is("", code) and secrets.hash(code)
  local row = hash and store.code(auth.db, hash)
  if not row then return fail("invalid_grant", "The code is not valid.") end
  if type(row.used_at) == "number" then
    revoke_grant(auth, row.grant_id)
    return fail("invalid_grant", "The code was used already: what it gave is revoked.")
  end
  if row.expires_at <= now then return fail("invalid_grant", "The code has expired.") end
  if row.client_id ~= client_id then return fail("invalid_grant", "The code was issued to another client.") end
  if row.redirect_uri ~= redirect_uri then
    return fail("invalid_grant", "redirect_uri is not the one of the authorization request.")
  end
  if f.resource ~= nil and f.resource ~= row.resource then
    return fail("invalid_target", "The code was issued for " .. row.resource .. ".")
  end
  if not secrets.same(s256(verifier), row.code_challenge) then
    return fail("invalid_grant", "code_verifier does not match the code_challenge.")
  end
  local scope = scopes.intersect(row.scope, row.grant_scope)
  local access, refresh = secrets.new(secrets.ACCESS), secrets.new(secrets.REFRESH)
  local won = auth.db:transaction(function(tx)
    if not store.useCode(tx, hash, now) then return false end
    store.pruneCodes(tx, now - M.KEEP_CODES)
    store.pruneTokens(tx, now)
    insert_pair(tx, row.grant_id, access, refresh, scope, row.resource, now)
    return true
  end)
  if not won then -- another exchange of the same code got there first: a second use
    revoke_grant(auth, row.grant_id)
    return fail("invalid_grant", "The code was used already: what it gave is revoked.")
  end
  return issued(access, refresh, M.ACCESS_LIFETIME // 1000, scope)
end

-- ---- grant_type=refresh_token ----

local function by_refresh(c, f)
  local auth = c.auth
  local refresh, client_id = f.refresh_token, f.client_id
  if not refresh or not client_id then
    return fail("invalid_request", "refresh_token and client_id are required.")
  end
  local now = auth.clock()
  local hash = secrets.is(secrets.REFRESH, refresh) and secrets.hash(refresh)
  local row = hash and store.token(auth.db, hash)
  if not row or row.kind ~= "refresh" or row.expires_at <= now then
    return fail("invalid_grant", "The refresh token is not valid.")
  end
  if row.client_id ~= client_id then
    return fail("invalid_grant", "The refresh token was issued to another client.")
  end
  if f.resource ~= nil and f.resource ~= row.resource then
    return fail("invalid_target", "The refresh token was issued for " .. row.resource .. ".")
  end
  local scope = scopes.intersect(row.scope, row.grant_scope)
  if f.scope ~= nil then
    local set, asked = scopes.parse(f.scope)
    if not set or not scopes.covers(scope, asked) then
      return fail("invalid_scope", "The scope asked for is more than the grant's (" .. scope .. ").")
    end
    scope = asked
  end
  if scope == "" then return fail("invalid_grant", "The grant has none of this token's scopes left.") end
  local access, next_refresh = successors(refresh, row.seed)
  if type(row.rotated_at) ~= "number" then
    local won = auth.db:transaction(function(tx)
      if not store.rotate(tx, hash, now) then return false end
      store.pruneTokens(tx, now)
      insert_pair(tx, row.grant_id, access, next_refresh, scope, row.resource, now)
      return true
    end)
    if won then return issued(access, next_refresh, M.ACCESS_LIFETIME // 1000, scope) end
    row = store.token(auth.db, hash) or {} -- another exchange of it got there first
  end
  -- exchanged before: the same pair within the grace window, the grant revoked after it
  if type(row.rotated_at) == "number" and now - row.rotated_at <= M.GRACE then
    local pair = store.token(auth.db, secrets.hash(access))
    if not pair then return fail("invalid_grant", "The refresh token was exchanged already.") end
    return issued(access, next_refresh, ceil((pair.expires_at - now) / 1000), pair.scope)
  end
  if row.grant_id then revoke_grant(auth, row.grant_id) end
  return fail("invalid_grant", "The refresh token was used already: the grant is revoked.")
end

-- ---- the endpoint ----

local GRANTS = { authorization_code = by_code, refresh_token = by_refresh }

-- The form of a POST to the token or revocation endpoint, and its headers; or nil and the
-- failure when the body is not application/x-www-form-urlencoded.
local function form_of(c)
  local request = c.request
  local headers = type(request.headers) == "table" and request.headers or {}
  if reqlib.mediaType(headers["content-type"] or "") ~= "application/x-www-form-urlencoded" then
    return nil, fail("invalid_request", "The body must be application/x-www-form-urlencoded.")
  end
  return reqlib.parseUrlencoded(type(request.body) == "string" and request.body or ""), headers
end

function M.handle(c)
  local f, headers = form_of(c)
  if not f then return headers end
  if headers.authorization ~= nil or f.client_secret ~= nil then
    return fail("invalid_client", "Clients authenticate with nothing here (token_endpoint_auth_method none).")
  end
  local grant_type = f.grant_type
  if grant_type == nil then return fail("invalid_request", "grant_type is required.") end
  local fn = GRANTS[grant_type]
  if not fn then
    return fail("unsupported_grant_type", "grant_type must be authorization_code or refresh_token.")
  end
  return fn(c, f)
end

-- ---- revocation (RFC 7009) ----

-- POST /__clank/oauth/revoke { token, token_type_hint?, client_id? } → 200 whatever the token:
-- an access token ends; a refresh token ends its grant (every token of it). A client_id that
-- is not the token's client revokes nothing.
function M.revoke(c)
  local f, failure = form_of(c)
  if not f then return failure end
  local value = f.token
  if type(value) ~= "string" or value == "" then return fail("invalid_request", "token is required.") end
  local auth = c.auth
  if secrets.is(secrets.ACCESS, value) or secrets.is(secrets.REFRESH, value) then
    local hash = secrets.hash(value)
    local row = store.token(auth.db, hash)
    if row and (f.client_id == nil or f.client_id == row.client_id) then
      if row.kind == "access" then
        store.deleteToken(auth.db, hash)
      else
        revoke_grant(auth, row.grant_id)
      end
    end
  end
  return { status = 200, body = "", headers = { ["cache-control"] = "no-store",
    ["access-control-allow-origin"] = "*" } }
end

return M
