-- clank.auth's OAuth 2.1 authorization server (issue 31; MCP authorization, revisions
-- 2025-06-18 and 2025-11-25): MCP clients get a person's consent and tokens for the app's MCP
-- endpoint, the one protected resource. auth:handle(request) calls handle for the paths of
-- ROUTES (handles(path) says which); auth:authenticate takes its access tokens
-- (clank.auth.oauth.access).
--
-- Files: metadata.lua (the discovery documents, the WWW-Authenticate challenge), clients.lua
-- (dynamic registration, client ID metadata documents), authorize.lua (the request and the
-- consent), token.lua (codes and refresh tokens for tokens; revocation), access.lua (who an
-- access token is), grants.lua (the grants page), pages.lua (their HTML), store.lua (the SQL),
-- scopes.lua, urls.lua, secrets.lua, answers.lua.
local action = require "clank.action"
local core = require "clank.core"
local answers = require "clank.auth.oauth.answers"
local authorize = require "clank.auth.oauth.authorize"
local clients = require "clank.auth.oauth.clients"
local grants = require "clank.auth.oauth.grants"
local metadata = require "clank.auth.oauth.metadata"
local pages = require "clank.auth.oauth.pages"
local token = require "clank.auth.oauth.token"
local urls = require "clank.auth.oauth.urls"

local type, tostring, ipairs = type, tostring, ipairs
local find, lower, format, concat = string.find, string.lower, string.format, table.concat

local M = {}

-- path → { methods, cors? }: cors routes are called cross-origin by browser-based clients
-- (no cookies) and answer OPTIONS; the others are pages of this site.
local RESOURCE = { GET = metadata.getResource, cors = true }
local SERVER = { GET = metadata.getServer, cors = true }
local ROUTES = {
  [metadata.RESOURCE_PATH] = RESOURCE,
  [metadata.RESOURCE_PATH .. urls.MCP_PATH] = RESOURCE,
  [metadata.SERVER_PATH] = SERVER,
  ["/.well-known/openid-configuration"] = SERVER,
  [pages.AUTHORIZE] = { GET = authorize.show, POST = authorize.decide },
  ["/__clank/oauth/token"] = { POST = token.handle, cors = true },
  ["/__clank/oauth/revoke"] = { POST = token.revoke, cors = true },
  ["/__clank/oauth/register"] = { POST = clients.register, cors = true },
  [pages.GRANTS] = { GET = grants.show, POST = grants.revoke },
}
M.ROUTES = ROUTES

local OAUTH_PREFIX = "/__clank/oauth/"

-- handles(path) → whether handle answers it: a route's path, or anything under
-- /__clank/oauth/ (a 404 of its own).
function M.handles(path)
  return type(path) == "string" and (ROUTES[path] ~= nil or path:sub(1, #OAUTH_PREFIX) == OAUTH_PREFIX)
end

local function header(request, name)
  local headers = request.headers
  local v = type(headers) == "table" and headers[name] or nil
  return type(v) == "string" and v or nil
end

local function allow(route)
  local methods = {}
  for _, m in ipairs { "GET", "POST" } do
    if route[m] then methods[#methods + 1] = m end
  end
  if route.cors then methods[#methods + 1] = "OPTIONS" end
  return concat(methods, ", ")
end

local function wants_json(request)
  local ctype = header(request, "content-type")
  if ctype and find(lower(ctype), "^%s*application/json") then return true end
  local accept = header(request, "accept")
  return accept ~= nil and find(lower(accept), "application/json", 1, true) ~= nil
end

-- fail(c, status, code, message, headers?) → JSON for cors routes and JSON requests, else a page.
local function fail(c, status, code, message, headers)
  if c.route and c.route.cors then
    return answers.error(status, code, message, true, headers)
  end
  if c.json then
    return answers.json(status, { ok = false, error = { code = code, message = message } }, false, headers)
  end
  return pages.problem(status, status == 404 and "Not found" or "Something went wrong", message, headers)
end

local function dispatch(c)
  local request = c.request
  local route = ROUTES[request.path]
  if not route then return fail(c, 404, "not_found", "Nothing here.") end
  c.route = route
  local method = request.method
  if method == "OPTIONS" and route.cors then return answers.preflight(allow(route)) end
  local fn = route[method]
  if not fn then
    return fail(c, 405, "method_not_allowed", "This address takes " .. allow(route) .. ".",
      { allow = allow(route) })
  end
  if not route.cors and method ~= "GET" and header(request, "sec-fetch-site") == "cross-site" then
    return fail(c, 403, "CROSS_SITE", "Cross-site requests are refused here.")
  end
  c.origin = urls.origin(c.auth, request)
  if not c.origin then return fail(c, 400, "invalid_request", "The request's Host is not a host name.") end
  c.auth:ready()
  return fn(c)
end

local function log(level, message) core.log(level, "clank.auth.oauth: " .. message) end

-- The answer to a failure nothing expected: the status of a database wait's ActionError, else
-- 500; one log line either way.
local function crashed(c, err)
  local what = format("%s %s", tostring(c.request.method), tostring(c.request.path))
  if action.isActionError(err) then
    log("warn", what .. ": " .. err.message)
    return fail(c, err.status, c.route and c.route.cors and "temporarily_unavailable" or err.code, err.message)
  end
  log("error", what .. " failed: " .. tostring(err))
  return fail(c, 500, c.route and c.route.cors and "server_error" or "INTERNAL",
    "Something went wrong on our side. Try again in a moment.")
end

-- handle(auth, request) → { status, headers, body } for a path handles(path) accepts.
function M.handle(auth, request)
  local c = { auth = auth, request = request, json = wants_json(request),
    query = type(request.query) == "table" and request.query or {} }
  -- the person signed in with a session (never a token: tokens do not consent or revoke)
  function c.signedIn()
    local user, credential = auth:authenticate(request)
    if user and credential.kind == "session" then return user end
    return nil
  end
  return require("clank.auth.http").guarded(c, dispatch, crashed)
end

-- challenge(auth, request, opts?) → the WWW-Authenticate value for the MCP endpoint's 401 or
-- 403 (clank.auth.oauth.metadata.challenge), or nil when the Host is not a host name.
function M.challenge(auth, request, opts)
  local origin = urls.origin(auth, request)
  return origin and metadata.challenge(origin, opts) or nil
end

return M
