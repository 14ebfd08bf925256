-- The authorization endpoint (/__clank/oauth/authorize): GET checks the request and shows the
-- signed-in person the consent page; its form POSTs back here with Approve or Deny.
--
-- Until the client and its redirect URI are known good, a problem is an error page, never a
-- redirect (else anyone could send people anywhere through this site). After that, problems
-- go back to the client's redirect URI (RFC 6749 §4.1.2.1) with iss (RFC 9207).
--
-- The consent form carries a one-time request id and a checkbox per scope asked: the pending
-- request itself (client, redirect URI, PKCE challenge, scope, resource, state) is stored under
-- the id's hash, bound to the person who saw the page, for 10 minutes, and taken once by the
-- POST. The person may untick a scope: the grant and the code get the ticked ones of those asked.
local reqlib = require "clank.request"
local base = require "clank.auth.pages"
local answers = require "clank.auth.oauth.answers"
local clients = require "clank.auth.oauth.clients"
local pages = require "clank.auth.oauth.pages"
local scopes = require "clank.auth.oauth.scopes"
local secrets = require "clank.auth.oauth.secrets"
local store = require "clank.auth.oauth.store"
local urls = require "clank.auth.oauth.urls"

local type, find, gmatch, concat = type, string.find, string.gmatch, table.concat

local M = {}

M.REQUEST_LIFETIME = 10 * 60000 -- ms between the consent page and its answer
M.CODE_LIFETIME = 60000 -- ms an authorization code can be exchanged

local PARAMS = { "code", "error", "error_description", "state", "iss" }

local function problem(status, message)
  return pages.problem(status, "This app cannot sign in here", message)
end

local function text(v) return type(v) == "string" and v or nil end

-- back(c, redirectUri, params) → 303 to the client with params, its state and iss.
local function back(c, redirect_uri, state, params)
  params.state, params.iss = state, c.origin
  return answers.redirect(urls.withParams(redirect_uri, params, PARAMS))
end

-- The consent page of a pending request (id) for the person user; more: { ticked, error } when
-- it comes back after an answer that chose nothing.
local function consent_page(client_id, client_name, redirect_uri, scope, user, id, more)
  more = more or {}
  return pages.consent {
    clientName = client_name or client_id, redirectHost = urls.hostOf(redirect_uri),
    clientHost = urls.isClientIdUrl(client_id) and urls.hostOf(client_id) or nil,
    redirectOrigin = urls.originOf(redirect_uri), scope = scope, ticked = more.ticked, error = more.error,
    email = user.email, request = id,
  }
end

-- GET: the request checked, then the sign-in page (not signed in) or the consent page.
function M.show(c)
  local auth, q = c.auth, c.query
  local client, why = clients.resolve(auth, text(q.client_id))
  if not client then return problem(400, why) end
  local redirect_uri = text(q.redirect_uri)
  if not redirect_uri or redirect_uri == "" then return problem(400, "The request has no redirect_uri.") end
  if not urls.redirectMatches(client.redirectUris, redirect_uri) then
    return problem(400, "The request's redirect_uri is not one this client registered.")
  end
  local state = text(q.state)
  local function fail(code, description)
    return back(c, redirect_uri, state, { error = code, error_description = description })
  end
  if q.response_type ~= "code" then
    return fail("unsupported_response_type", "Only response_type=code is supported.")
  end
  local challenge = text(q.code_challenge)
  if not challenge or challenge == "" then
    return fail("invalid_request", "code_challenge is required (PKCE with S256).")
  end
  if q.code_challenge_method ~= "S256" then
    return fail("invalid_request", "code_challenge_method must be S256.")
  end
  if #challenge ~= 43 or not find(challenge, "^[%w%-_]+$") then
    return fail("invalid_request", "code_challenge must be the 43 base64url characters of a SHA-256.")
  end
  local set, scope = scopes.parse(text(q.scope))
  if not set then
    return fail("invalid_scope", "The supported scopes are agent:read and agent:write.")
  end
  local resource = urls.resource(c.origin)
  if q.resource ~= nil and q.resource ~= resource then
    return fail("invalid_target", "The only resource here is " .. resource .. ".")
  end

  local user = c.signedIn()
  if not user then
    local here = pages.AUTHORIZE .. "?" .. urls.query(q)
    return answers.redirect(base.PREFIX .. "login?next=" .. urls.encode(here))
  end
  local id = secrets.new()
  local now = auth.clock()
  auth.db:transaction(function(tx)
    store.pruneRequests(tx, now)
    store.insertRequest(tx, {
      hash = secrets.hash(id), user_id = user.id, client_id = client.id, client_name = client.name,
      redirect_uri = redirect_uri, code_challenge = challenge, scope = scope, resource = resource,
      state = state, expires_at = now + M.REQUEST_LIFETIME,
    })
  end)
  return consent_page(client.id, client.name, redirect_uri, scope, user, id)
end

local GONE = "This request was answered already, has expired, or is not yours. Go back to the app " ..
  "and connect it again."
local NONE = "Choose at least one thing it may do, or Deny."

-- The scopes ticked on the form, space-separated: every `scope` field's value (the page sends
-- an empty one, then one per ticked box; request.form keeps only the last of a name, so an
-- urlencoded body is read again here; of a multipart one, the last field), or nil when the form
-- has no scope field at all (an older page, or a client that scripts the POST: then what was
-- asked is granted).
local function ticked(request, form)
  if form.scope == nil then return nil end
  local headers = type(request.headers) == "table" and request.headers or {}
  if reqlib.mediaType(headers["content-type"] or "") ~= "application/x-www-form-urlencoded" then
    return text(form.scope) or ""
  end
  local out = {}
  for pair in gmatch(request.body, "[^&]+") do
    out[#out + 1] = text(reqlib.parseUrlencoded(pair).scope)
  end
  return concat(out, " ")
end

-- POST: the consent form's answer, by the person it was shown to, once, in time.
function M.decide(c)
  local auth = c.auth
  local user = c.signedIn()
  if not user then return problem(401, "Sign in first, then connect the app again.") end
  local form = reqlib.form(c.request)
  if not form then return problem(400, "The answer must be the consent page's form.") end
  local decision, id = form.decision, form.request
  if decision ~= "approve" and decision ~= "deny" then
    return problem(400, "The answer must be Approve or Deny.")
  end
  if not secrets.is("", id) then return problem(400, GONE) end
  local chosen = ticked(c.request, form)
  local now = auth.clock()
  local hash = secrets.hash(id)
  local code, none
  local row = auth.db:transaction(function(tx)
    if decision == "approve" and chosen then
      -- a yes to nothing is no answer: the page again, its request still open
      local open = store.request(tx, hash, user.id, now)
      if open and scopes.intersect(open.scope, chosen) == "" then
        none = true
        return open
      end
    end
    local taken = store.takeRequest(tx, hash, user.id, now)
    if not taken or decision ~= "approve" then return taken end
    local name = text(taken.client_name)
    -- what the person ticked of what was asked (a box for a scope not asked counts for nothing)
    local granted = chosen and scopes.intersect(taken.scope, chosen) or taken.scope
    -- A grant only grows: a yes adds its scopes to the earlier ones and takes nothing from the
    -- tokens they gave (a step-up asks for just the scope it lacks; a host's other connection
    -- asks again for what the 401 names). Taking back is the grants page's Revoke.
    local scope = scopes.union(store.grantScope(tx, user.id, taken.client_id), granted)
    local grant_id = store.saveGrant(tx, user.id, taken.client_id, name, scope, now)
    code = secrets.new()
    store.insertCode(tx, {
      hash = secrets.hash(code), grant_id = grant_id, client_id = taken.client_id,
      redirect_uri = taken.redirect_uri, code_challenge = taken.code_challenge, scope = granted,
      resource = taken.resource, expires_at = now + M.CODE_LIFETIME,
    })
    return taken
  end)
  if not row then return problem(400, GONE) end
  if none then
    return consent_page(row.client_id, text(row.client_name), row.redirect_uri, row.scope, user, id,
      { ticked = "", error = NONE })
  end
  local state = text(row.state) -- NULL is json.null
  if not code then
    return back(c, row.redirect_uri, state, { error = "access_denied",
      error_description = "The person denied access." })
  end
  return back(c, row.redirect_uri, state, { code = code })
end

return M
