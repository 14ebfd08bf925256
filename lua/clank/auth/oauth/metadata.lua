-- What a client discovers: the protected resource's metadata (RFC 9728: the MCP endpoint and
-- who issues its tokens), the authorization server's (RFC 8414, also at OpenID Connect's
-- address, where MCP clients look too), and the WWW-Authenticate challenge pointing at the
-- first (RFC 9728 §5.1, RFC 6750 §3).
local json = require "clank.json"
local answers = require "clank.auth.oauth.answers"
local scopes = require "clank.auth.oauth.scopes"
local urls = require "clank.auth.oauth.urls"

local type, ipairs, gsub, concat = type, ipairs, string.gsub, table.concat

local M = {}

M.RESOURCE_PATH = "/.well-known/oauth-protected-resource"
M.SERVER_PATH = "/.well-known/oauth-authorization-server"

local function list(t) return json.array(t) end

-- resource(auth, origin) → the protected resource metadata of the MCP endpoint.
function M.resource(auth, origin)
  local doc = {
    resource = urls.resource(origin),
    authorization_servers = list { origin },
    scopes_supported = list { scopes.READ, scopes.WRITE },
    bearer_methods_supported = list { "header" },
  }
  local name = auth.oauth and auth.oauth.resourceName
  if type(name) == "string" and name ~= "" then doc.resource_name = name end
  return doc
end

-- server(origin) → the authorization server metadata.
function M.server(origin)
  return {
    issuer = origin,
    authorization_endpoint = origin .. "/__clank/oauth/authorize",
    token_endpoint = origin .. "/__clank/oauth/token",
    revocation_endpoint = origin .. "/__clank/oauth/revoke",
    registration_endpoint = origin .. "/__clank/oauth/register",
    scopes_supported = list { scopes.READ, scopes.WRITE },
    response_types_supported = list { "code" },
    grant_types_supported = list { "authorization_code", "refresh_token" },
    code_challenge_methods_supported = list { "S256" },
    token_endpoint_auth_methods_supported = list { "none" },
    revocation_endpoint_auth_methods_supported = list { "none" },
    authorization_response_iss_parameter_supported = true,
    client_id_metadata_document_supported = true,
  }
end

-- The GET handlers (the router answers OPTIONS and a Host that is not one).
function M.getResource(c) return answers.json(200, M.resource(c.auth, c.origin), true) end
function M.getServer(c) return answers.json(200, M.server(c.origin), true) end

local function quoted(s) return '"' .. gsub(s, '["\\]', "\\%0") .. '"' end

-- challenge(origin, opts?) → the WWW-Authenticate value of a 401 or 403 from the MCP endpoint:
-- Bearer resource_metadata="<origin>/.well-known/oauth-protected-resource/__clank/mcp", and
-- opts.scope (default "agent:read"), opts.error ("invalid_token", "insufficient_scope") and
-- opts.description when given.
function M.challenge(origin, opts)
  opts = opts or {}
  local parts = { "resource_metadata=" .. quoted(origin .. M.RESOURCE_PATH .. urls.MCP_PATH) }
  for _, k in ipairs { "error", "error_description" } do
    local v = opts[k == "error" and "error" or "description"]
    if type(v) == "string" then parts[#parts + 1] = k .. "=" .. quoted(v) end
  end
  parts[#parts + 1] = "scope=" .. quoted(opts.scope or scopes.DEFAULT)
  return "Bearer " .. concat(parts, ", ")
end

return M
