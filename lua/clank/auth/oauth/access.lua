-- Who an OAuth access token (authorization: Bearer clank_at_...) is: its grant's user, for a
-- request to the resource it was issued for (the MCP endpoint of this origin) only, while it
-- is unexpired and its grant stands. clank.auth.sessions calls lookup for those tokens.
local sessions = require "clank.auth.sessions"
local scopes = require "clank.auth.oauth.scopes"
local secrets = require "clank.auth.oauth.secrets"
local store = require "clank.auth.oauth.store"
local urls = require "clank.auth.oauth.urls"

local type = type

local M = {}

M.PREFIX = secrets.ACCESS

-- lookup(auth, request, value, now) → user, credential { kind = "oauth", grantId, clientId,
-- clientName, scope = "read"|"write", scopes }, or nil.
function M.lookup(auth, request, value, now)
  if not auth.oauth or request.path ~= urls.MCP_PATH or not secrets.is(secrets.ACCESS, value) then
    return nil
  end
  local origin = urls.origin(auth, request)
  if not origin then return nil end
  local row = store.access(auth.db, secrets.hash(value))
  if not row or row.expires_at <= now or row.resource ~= urls.resource(origin) then return nil end
  local granted = scopes.intersect(row.scope, row.grant_scope) -- the grant may have less now
  if granted == "" then return nil end
  local last = row.last_used
  if type(last) ~= "number" or now - last >= sessions.TOUCH_EVERY then
    store.touchGrant(auth.db, row.grant_id, now, sessions.TOUCH_EVERY)
  end
  local name = type(row.client_name) == "string" and row.client_name or row.client_id
  return sessions.user(row), { kind = "oauth", grantId = row.grant_id, clientId = row.client_id,
    clientName = name, scope = scopes.credential(granted), scopes = granted }
end

return M
