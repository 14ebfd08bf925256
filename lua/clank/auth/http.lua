-- The endpoints under /__clank/auth/: sign-in, registration, sign-out, the signed-in user,
-- password change and reset, API tokens. handle(auth, request) → { status, headers, body }.
-- JSON answers (canonical, no-store) when the body is JSON or accept asks for it (always for
-- me and tokens); HTML otherwise: a failed form is shown again with the message and the email
-- typed (never a password), a successful one answers 303 to its `next`.
local action = require "clank.action"
local core = require "clank.core"
local json = require "clank.json"
local reqlib = require "clank.request"
local input = require "clank.auth.input"
local limits = require "clank.auth.limits"
local pages = require "clank.auth.pages"
local passwords = require "clank.auth.passwords"
local secrets = require "clank.auth.secrets"
local sessions = require "clank.auth.sessions"
local store = require "clank.auth.store"

local type, ipairs, tostring, tonumber, tointeger, pcall =
  type, ipairs, tostring, tonumber, math.tointeger, pcall
local find, sub, match, gsub, format, lower, concat = string.find, string.sub, string.match,
  string.gsub, string.format, string.lower, table.concat

local M = {}

local PREFIX = pages.PREFIX
local RESET_LIFETIME = 60 * 60 * 1000 -- ms

-- ---- answers ----

local function json_answer(status, value, headers)
  headers = headers or {}
  headers["content-type"] = "application/json"
  headers["cache-control"] = "no-store"
  return { status = status, headers = headers, body = json.encode(value) }
end

local function public_user(user)
  return { id = user.id, email = user.email, roles = user.roles }
end

-- fail(c, status, code, message, opts) → the failure: JSON, or the form opts.page shown again
-- (with opts.email), or a page of its own. opts.headers are added (retry-after, allow).
local function fail(c, status, code, message, opts)
  opts = opts or {}
  if c.json then
    return json_answer(status, { ok = false, error = { code = code, message = message } }, opts.headers)
  end
  if opts.page then
    return pages.show(c.auth, opts.page, {
      error = message, email = opts.email, next = c.next or "/", registration = c.auth.registration,
      token = opts.token,
    }, status, opts.headers)
  end
  return pages.problem(status, opts.title or "Something went wrong", message, opts.headers)
end

-- A successful form post: 303 to where it said to go next.
local function redirect(location, cookie)
  local headers = { location = location, ["cache-control"] = "no-store" }
  if cookie then headers["set-cookie"] = cookie end
  return { status = 303, headers = headers, body = "" }
end

local function show(c, name, props, status)
  props = props or {}
  props.next = c.next or "/"
  props.registration = c.auth.registration
  return pages.show(c.auth, name, props, status or 200)
end

local function rate_limited(c, wait, opts)
  opts = opts or {}
  opts.headers = { ["retry-after"] = tostring(wait) }
  return fail(c, 429, "RATE_LIMITED", "Too many attempts. Try again in " .. wait ..
    (wait == 1 and " second." or " seconds."), opts)
end

local function unauthorized(c)
  return fail(c, 401, "UNAUTHORIZED", "Sign in first.", { title = "Sign in first" })
end

local WRONG = "Wrong email or password."

-- ---- requests ----

local function header(request, name)
  local headers = request.headers
  local v = type(headers) == "table" and headers[name] or nil
  if type(v) == "string" then return v end
  return nil
end

local function media_type(request)
  return (reqlib.mediaType(header(request, "content-type") or ""))
end

-- The body's fields: a JSON object or a form → fields, or nil, status, code, message.
local function body_of(c)
  local request = c.request
  if media_type(request) == "application/json" then
    local value, err = reqlib.json(request)
    if value == nil then return nil, 400, "INVALID_JSON", err end
    if type(value) ~= "table" or json.isArray(value) then
      return nil, 422, "INVALID_INPUT", "The body must be a JSON object."
    end
    return value
  end
  local fields, err = reqlib.form(request)
  if not fields then return nil, 422, "INVALID_INPUT", err end
  return fields
end

-- c.next: the body's next when it is a local path, else the query's (nil: neither).
local function take_next(c, body)
  c.next = input.next(body.next, nil) or c.next
end

-- The signed-in user of a session (not a token: tokens cannot manage credentials).
local function session_user(c)
  local user, credential = c.auth:authenticate(c.request)
  if user and credential.kind == "session" then return user, credential end
  return nil
end

local function log(level, message)
  core.log(level, "clank.auth: " .. message)
end

-- ---- sign-in, registration, sign-out ----

local function login_form(c) return show(c, "login") end

-- Signs user in: a new session (the one the request came with is deleted) → the cookie line.
local function sign_in(c, user_id, now)
  local auth, request = c.auth, c.request
  local old = sessions.cookieHash(request)
  local id, ended_user
  auth.db:transaction(function(tx)
    if old then ended_user = store.deleteSession(tx, old) end
    id = sessions.create(tx, user_id, now)
  end)
  if ended_user then auth:_ended({ old }, ended_user) end
  return sessions.setCookie(auth, request, id)
end

local function login(c)
  local auth = c.auth
  local body, status, code, message = body_of(c)
  if not body then return fail(c, status, code, message, { page = "login" }) end
  take_next(c, body)
  local typed = type(body.email) == "string" and body.email or nil
  local email, problem = input.email(body.email)
  if not email then return fail(c, 422, "INVALID_INPUT", problem, { page = "login", email = typed }) end
  local pw
  pw, problem = input.given(body.password, auth.passwordMaxBytes)
  if not pw then return fail(c, 422, "INVALID_INPUT", problem, { page = "login", email = typed }) end

  local now = auth.clock()
  local keys = limits.keys("login", email, c.request.remoteAddress, auth.limits)
  local wait = limits.check(auth.db, keys, now, auth.limits.window)
  if wait then return rate_limited(c, wait, { page = "login", email = typed }) end

  local row = store.userByEmail(auth.db, email)
  if not passwords.verify(auth, row and row.password_hash, pw) then
    limits.count(auth.db, keys, now, auth.limits.window)
    return fail(c, 401, "INVALID_CREDENTIALS", WRONG, { page = "login", email = typed })
  end
  local user_id = tointeger(row.id)
  local upgraded = passwords.rehash(auth, row.password_hash, pw)
  if upgraded then store.setPassword(auth.db, user_id, upgraded) end
  limits.clear(auth.db, keys)
  local cookie = sign_in(c, user_id, now)
  if c.json then
    return json_answer(200, { ok = true, user = public_user(sessions.user(row)) },
      { ["set-cookie"] = cookie })
  end
  return redirect(c.next or "/", cookie)
end

local function register_form(c) return show(c, "register") end

local function register(c)
  local auth = c.auth
  local body, status, code, message = body_of(c)
  if not body then return fail(c, status, code, message, { page = "register" }) end
  take_next(c, body)
  local typed = type(body.email) == "string" and body.email or nil
  if auth.registration ~= "open" then
    return fail(c, 403, "REGISTRATION_CLOSED", "Registration is closed.", { page = "register" })
  end
  local email, problem = input.email(body.email)
  if not email then return fail(c, 422, "INVALID_INPUT", problem, { page = "register", email = typed }) end
  local pw
  pw, problem = input.password(body.password, auth.passwordMinLength, auth.passwordMaxBytes)
  if not pw then return fail(c, 422, "INVALID_INPUT", problem, { page = "register", email = typed }) end
  local user, taken = auth:_createUser(email, pw)
  if not user then
    return fail(c, 409, "EMAIL_TAKEN", taken, { page = "register", email = typed })
  end
  local cookie = sign_in(c, user.id, auth.clock())
  if c.json then
    return json_answer(201, { ok = true, user = public_user(user) }, { ["set-cookie"] = cookie })
  end
  return redirect(c.next or "/", cookie)
end

local function logout(c)
  local auth, request = c.auth, c.request
  local body = body_of(c) or {}
  take_next(c, body)
  local hash = sessions.cookieHash(request)
  if hash then
    local user_id = store.deleteSession(auth.db, hash)
    if user_id then auth:_ended({ hash }, user_id) end
  end
  local cookie = sessions.setCookie(auth, request, nil)
  if c.json then return json_answer(200, { ok = true }, { ["set-cookie"] = cookie }) end
  return redirect(c.next or "/", cookie)
end

local function me(c)
  local user = c.auth:authenticate(c.request)
  if not user then return unauthorized(c) end
  return json_answer(200, { ok = true, user = public_user(user) })
end

-- ---- password change ----

local function password_form(c)
  if not session_user(c) then
    if c.json then return unauthorized(c) end
    return redirect(PREFIX .. "login?next=" .. gsub(PREFIX .. "password", "/", "%%2F"))
  end
  return show(c, "password")
end

local function change_password(c)
  local auth = c.auth
  local user = session_user(c)
  if not user then return unauthorized(c) end
  local body, status, code, message = body_of(c)
  if not body then return fail(c, status, code, message, { page = "password" }) end
  take_next(c, body)
  local current = input.given(body.current, auth.passwordMaxBytes)
  if not current then
    return fail(c, 422, "INVALID_INPUT", "Enter your current password.", { page = "password" })
  end
  local pw, problem = input.password(body.password, auth.passwordMinLength, auth.passwordMaxBytes)
  if not pw then return fail(c, 422, "INVALID_INPUT", problem, { page = "password" }) end

  local now = auth.clock()
  local keys = limits.keys("login", user.email, c.request.remoteAddress, auth.limits)
  local wait = limits.check(auth.db, keys, now, auth.limits.window)
  if wait then return rate_limited(c, wait, { page = "password" }) end
  local row = store.userById(auth.db, user.id)
  if not row or not passwords.verify(auth, row.password_hash, current) then
    limits.count(auth.db, keys, now, auth.limits.window)
    return fail(c, 401, "INVALID_CREDENTIALS", "Wrong password.", { page = "password" })
  end
  local hash = passwords.hash(auth, pw)
  -- every session ends, this browser's too: it gets a new id (and the user a new epoch)
  local ended, id
  auth.db:transaction(function(tx)
    store.setPassword(tx, user.id, hash)
    ended = store.deleteSessionsOf(tx, user.id, nil)
    store.bumpEpoch(tx, user.id)
    id = sessions.create(tx, user.id, now)
  end)
  limits.clear(auth.db, keys)
  auth:_ended(ended, user.id)
  local cookie = sessions.setCookie(auth, c.request, id)
  if c.json then
    local fresh = sessions.user(store.userById(auth.db, user.id))
    return json_answer(200, { ok = true, user = public_user(fresh) }, { ["set-cookie"] = cookie })
  end
  return redirect(c.next or "/", cookie)
end

-- ---- password reset ----

local INVALID_TOKEN = "This reset link is not valid: it was used already, it expired, " ..
  "or it is wrong. Ask for a new one."
local SENT = "If an account exists for that email, a link to choose a new password was sent to it."

local function reset_form(c)
  local token = c.query.token
  if token == nil then return show(c, "reset") end
  if not secrets.isReset(token) or not store.openReset(c.auth.db, secrets.hash(token), c.auth.clock()) then
    return fail(c, 400, "INVALID_TOKEN", INVALID_TOKEN, { page = "reset" })
  end
  return show(c, "newPassword", { token = token })
end

-- The address of the reset link: baseUrl when the app gave one, else this request's origin.
local function reset_url(c, token)
  local base = c.auth.baseUrl
  if not base then
    -- a host name or [IPv6], and a port: nothing that could carry the link elsewhere
    local host = header(c.request, "host") or ""
    local ok = find(host, "^[%w%.%-]+:?%d*$") or find(host, "^%[[%x:%.]+%]:?%d*$")
    base = ok and ((c.request.scheme == "https" and "https://" or "http://") .. host) or ""
  end
  return base .. PREFIX .. "reset?token=" .. token
end

local function send_reset(auth, user, url)
  core.spawn(function()
    local ok, err = pcall(auth.sendReset, user, url)
    if not ok then log("error", "sendReset failed: " .. tostring(err)) end
  end)
end

-- POST reset { email }: always the same answer; a link for an account that exists.
local function request_reset(c, body)
  local auth = c.auth
  local typed = type(body.email) == "string" and body.email or nil
  local email, problem = input.email(body.email)
  if not email then return fail(c, 422, "INVALID_INPUT", problem, { page = "reset", email = typed }) end
  local now = auth.clock()
  local keys = limits.keys("reset", email, c.request.remoteAddress, auth.limits)
  local wait = limits.check(auth.db, keys, now, auth.limits.window)
  if wait then return rate_limited(c, wait, { page = "reset", email = typed }) end
  limits.count(auth.db, keys, now, auth.limits.window)
  local row = store.userByEmail(auth.db, email)
  if row then
    local token = secrets.newReset()
    store.insertReset(auth.db, secrets.hash(token), row.id, now + RESET_LIFETIME)
    send_reset(auth, sessions.user(row), reset_url(c, token))
  end
  if c.json then return json_answer(200, { ok = true, message = SENT }) end
  return show(c, "resetSent", { email = typed })
end

-- POST reset { token, password }: the new password; every session of the user ends.
local function finish_reset(c, body)
  local auth = c.auth
  local token = body.token
  local pw, problem = input.password(body.password, auth.passwordMinLength, auth.passwordMaxBytes)
  local shown = type(token) == "string" and token or nil
  if not pw then
    return fail(c, 422, "INVALID_INPUT", problem, { page = "newPassword", token = shown })
  end
  local now = auth.clock()
  local hash_of = secrets.isReset(token) and secrets.hash(token)
  if not hash_of or not store.openReset(auth.db, hash_of, now) then
    return fail(c, 400, "INVALID_TOKEN", INVALID_TOKEN, { page = "reset" })
  end
  local hash = passwords.hash(auth, pw)
  local user_id, ended
  auth.db:transaction(function(tx)
    user_id = store.useReset(tx, hash_of, now)
    if not user_id then return end
    store.setPassword(tx, user_id, hash)
    ended = store.deleteSessionsOf(tx, user_id, nil)
    store.bumpEpoch(tx, user_id)
  end)
  if not user_id then return fail(c, 400, "INVALID_TOKEN", INVALID_TOKEN, { page = "reset" }) end
  local row = store.userById(auth.db, user_id)
  limits.clear(auth.db, limits.keys("login", row.email, nil, auth.limits))
  auth:_ended(ended, user_id)
  if c.json then return json_answer(200, { ok = true }) end
  return redirect(c.next or PREFIX .. "login")
end

local function reset(c)
  local body, status, code, message = body_of(c)
  if not body then return fail(c, status, code, message, { page = "reset" }) end
  take_next(c, body)
  if body.token ~= nil then return finish_reset(c, body) end
  return request_reset(c, body)
end

-- ---- API tokens ----

local function list_tokens(c)
  local user = session_user(c)
  if not user then return unauthorized(c) end
  local list = json.array()
  for i, row in ipairs(store.tokensOf(c.auth.db, user.id)) do
    list[i] = { id = tointeger(row.id), name = row.name, scope = row.scope,
      createdAt = row.created_at, lastUsed = type(row.last_used) == "number" and row.last_used or json.null }
  end
  return json_answer(200, { ok = true, tokens = list })
end

local function create_token(c)
  local user = session_user(c)
  if not user then return unauthorized(c) end
  local body, status, code, message = body_of(c)
  if not body then return fail(c, status, code, message) end
  local name, problem = input.tokenName(body.name)
  if not name then return fail(c, 422, "INVALID_INPUT", problem) end
  local scope
  scope, problem = input.scope(body.scope)
  if not scope then return fail(c, 422, "INVALID_INPUT", problem) end
  local token = secrets.newToken()
  local id = store.insertToken(c.auth.db, user.id, name, scope, secrets.hash(token), c.auth.clock())
  return json_answer(201, { ok = true, id = id, token = token })
end

local function revoke_token(c, id)
  local user = session_user(c)
  if not user then return unauthorized(c) end
  local n = #id <= 18 and tointeger(tonumber(id)) -- digits only, checked by the route
  if not n or not store.deleteToken(c.auth.db, n, user.id) then
    return fail(c, 404, "NOT_FOUND", "No such token.")
  end
  return { status = 204, headers = { ["cache-control"] = "no-store" }, body = "" }
end

-- ---- dispatch ----

local ROUTES = {
  login = { GET = login_form, POST = login },
  register = { GET = register_form, POST = register },
  logout = { POST = logout },
  me = { GET = me },
  password = { GET = password_form, POST = change_password },
  reset = { GET = reset_form, POST = reset },
  tokens = { GET = list_tokens, POST = create_token },
}
local TOKEN_ROUTE = { DELETE = revoke_token }
local ALWAYS_JSON = { me = true, tokens = true }

local function allow(route)
  local methods = {}
  for _, m in ipairs { "GET", "POST", "DELETE" } do
    if route[m] then methods[#methods + 1] = m end
  end
  return concat(methods, ", ")
end

local function wants_json(request)
  if media_type(request) == "application/json" then return true end
  local accept = header(request, "accept")
  return accept ~= nil and find(lower(accept), "application/json", 1, true) ~= nil
end

local function dispatch(c)
  local request = c.request
  local path = type(request.path) == "string" and request.path or ""
  if sub(path, 1, #PREFIX) ~= PREFIX then
    return fail(c, 404, "NOT_FOUND", "Nothing here.", { title = "Not found" })
  end
  local rest = sub(path, #PREFIX + 1)
  local route, arg = ROUTES[rest], nil
  if not route then
    arg = match(rest, "^tokens/(%d+)$")
    if arg then route, rest = TOKEN_ROUTE, "tokens" end
  end
  if not route then return fail(c, 404, "NOT_FOUND", "Nothing here.", { title = "Not found" }) end
  if ALWAYS_JSON[rest] then c.json = true end
  local fn = route[request.method]
  if not fn then
    return fail(c, 405, "METHOD_NOT_ALLOWED", "This address takes " .. allow(route) .. ".",
      { title = "Method not allowed", headers = { allow = allow(route) } })
  end
  if request.method ~= "GET" and header(request, "sec-fetch-site") == "cross-site" then
    return fail(c, 403, "CROSS_SITE", "Cross-site requests are refused here.", { title = "Refused" })
  end
  c.auth:ready()
  return fn(c, arg)
end

-- The answer to a failure nothing expected: 503/504 for a database wait that was aborted or
-- timed out (its ActionError), else 500; one log line either way.
local function crashed(c, err)
  if action.isActionError(err) then
    log("warn", format("%s %s: %s", tostring(c.request.method), tostring(c.request.path), err.message))
    return fail(c, err.status, err.code, err.message, { title = "Unavailable" })
  end
  log("error", format("%s %s failed: %s", tostring(c.request.method), tostring(c.request.path),
    tostring(err)))
  return fail(c, 500, "INTERNAL", "Something went wrong on our side. Try again in a moment.",
    { title = "Something went wrong" })
end

-- answer(c, dispatch, crashed) → dispatch(c), or what crashed(c, err) makes of its error (a
-- bare 500 when that fails too); then the request's cached lookup is dropped, so the next one
-- sees what this request changed. clank.auth.oauth answers the same way.
function M.guarded(c, run, crashed_with)
  local ok, answer = pcall(run, c)
  if not ok then
    local shown, page = pcall(crashed_with, c, answer)
    answer = shown and page or {
      status = 500, headers = { ["content-type"] = "text/plain; charset=utf-8", ["cache-control"] = "no-store" },
      body = "Internal server error\n",
    }
  end
  c.auth:_forget(c.request)
  return answer
end

function M.handle(auth, request)
  local query = type(request.query) == "table" and request.query or {}
  local c = { auth = auth, request = request, query = query, json = wants_json(request),
    next = input.next(query.next, nil) }
  return M.guarded(c, dispatch, crashed)
end

M.ROUTES = ROUTES

return M
