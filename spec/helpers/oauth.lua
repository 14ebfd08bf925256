-- What the OAuth specs share (on top of helpers.auth): requests to the origin http://app.test,
-- a signed-in person, a registered client, the authorization request's parameters, the
-- consent page's request id, and a Location's parts. PKCE's pair is RFC 7636 Appendix B's.
local clank = require "clank"
local reqlib = require "clank.request"
local H = require "helpers.auth"

local json = clank.json

local M = {}

M.HOST = "app.test"
M.ORIGIN = "http://app.test"
M.RESOURCE = "http://app.test/__clank/mcp"
M.PASSWORD = "correct horse battery"
M.REDIRECT = "https://client.example/oauth/callback"
M.LOOPBACK = "http://127.0.0.1:8123/callback"
-- RFC 7636 Appendix B
M.VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
M.CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"

-- request(r) → helpers.auth's request, to Host app.test unless r.headers.host says otherwise.
function M.request(r)
  r.headers = r.headers or {}
  if r.headers.host == nil then r.headers.host = M.HOST end
  return H.request(r)
end

function M.get(a, path, r)
  r = r or {}
  r.method, r.path = "GET", path
  return a:handle(M.request(r))
end

function M.post(a, path, r)
  r = r or {}
  r.method, r.path = "POST", path
  return a:handle(M.request(r))
end

-- Signs email in (registering it the first time) → the session cookie's value.
function M.signIn(a, email)
  local r = M.post(a, "/__clank/auth/login", { json = { email = email, password = M.PASSWORD } })
  if r.status == 401 then
    r = M.post(a, "/__clank/auth/register", { json = { email = email, password = M.PASSWORD } })
  end
  return assert(H.cookieOf(r), r.body)
end

-- Registers a client (RFC 7591) → its client_id.
function M.register(a, meta)
  meta = meta or { redirect_uris = { M.REDIRECT, M.LOOPBACK }, client_name = "Test Client" }
  local r = M.post(a, "/__clank/oauth/register", { json = meta })
  assert(r.status == 201, r.body)
  return json.decode(r.body).client_id
end

-- The authorization request's query: a good one for clientId, with more's fields over it
-- (false removes one).
function M.query(client_id, more)
  local q = {
    response_type = "code", client_id = client_id, redirect_uri = M.REDIRECT,
    code_challenge = M.CHALLENGE, code_challenge_method = "S256", state = "st-123",
    scope = "agent:read", resource = M.RESOURCE,
  }
  for k, v in pairs(more or {}) do q[k] = v or nil end
  return q
end

-- GET /__clank/oauth/authorize with the query, as the person with cookie (or nobody).
function M.authorize(a, query, cookie)
  return M.get(a, "/__clank/oauth/authorize", { query = query, cookie = cookie })
end

-- The one-time request id in a consent page.
function M.requestId(answer)
  return answer.body:match('<input[^>]* name="request"[^>]* value="([^"]+)"')
end

-- POSTs the consent form → the answer. ticked: nil sends no scope field (all asked is
-- granted); a list sends what the page's form sends with those boxes ticked (its empty scope,
-- then one per box).
function M.decide(a, cookie, id, decision, ticked)
  local form = { request = id, decision = decision or "approve" }
  if ticked then
    form.scope = { "" }
    for _, name in ipairs(ticked) do form.scope[#form.scope + 1] = name end
  end
  return M.post(a, "/__clank/oauth/authorize", { cookie = cookie, form = form })
end

-- location(answer) → the Location without its query, and the query's fields (decoded).
function M.location(answer)
  local location = answer.headers.location
  local base, query = location:match("^([^?]*)%??(.*)$")
  return base, reqlib.parseUrlencoded(query)
end

-- A code for the client through the whole consent, as cookie's person → the code.
function M.code(a, cookie, client_id, more)
  local page = M.authorize(a, M.query(client_id, more), cookie)
  assert(page.status == 200, page.body)
  local r = M.decide(a, cookie, M.requestId(page))
  assert(r.status == 303, r.body)
  local _, params = M.location(r)
  return assert(params.code, r.headers.location)
end

-- POST /__clank/oauth/token with fields → the answer and its decoded body.
function M.token(a, fields)
  local r = M.post(a, "/__clank/oauth/token", { form = fields })
  return r, json.decode(r.body)
end

-- The token fields of a code exchange, with more's over them (false removes one).
function M.exchange(client_id, code, more)
  local f = { grant_type = "authorization_code", code = code, redirect_uri = M.REDIRECT,
    client_id = client_id, code_verifier = M.VERIFIER, resource = M.RESOURCE }
  for k, v in pairs(more or {}) do f[k] = v or nil end
  return f
end

-- authenticate as the MCP endpoint sees a bearer token → user, credential.
function M.bearer(a, value, path, host)
  return a:authenticate(M.request { path = path or "/__clank/mcp", method = "POST",
    headers = { authorization = "Bearer " .. value, host = host } })
end

return M
