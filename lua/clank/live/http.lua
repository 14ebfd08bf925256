-- The HTTP side of live views (SPEC §11): the page of a view, and the endpoints for agents
-- without a browser (sessions and their surface). Both run in a task: load may wait.
local core = require "clank.core"
local json = require "clank.json"
local bridge = require "clank.bridge"
local token = require "clank.live.token"
local page = require "clank.live.page"
local props_mod = require "clank.live.props"
local surface_mod = require "clank.ui.surface"
local render = require "clank.ui.render"

local type, ipairs, pcall, xpcall, tostring, concat =
  type, ipairs, pcall, xpcall, tostring, table.concat

local M = {}

local function log(level, msg) require("clank.live").log(level, msg) end

local errors = require "clank.live.errors"
local trace, describe = errors.trace, errors.describe

-- ---- the page ----

-- A view with auth = "user" to someone not signed in: with app.auth, 303 to its sign-in page,
-- which comes back here (next); without, 401. next is escaped as a query value the way the
-- page's script (encodeURIComponent) and clank.auth's own redirects escape it, "/" too, so
-- every way to the sign-in page names the same address.
local function sign_in_first(live, request, opts, csp)
  if not live.app.auth then
    return page.errorPage(401, "Sign in first", { "This page is for signed-in users." }, opts, csp)
  end
  local next_url = request.url or request.path or "/"
  local escaped = next_url:gsub("[^%w%-._~]", function(c) return ("%%%02X"):format(c:byte()) end)
  return { status = 303, body = "", headers = {
    location = "/__clank/auth/login?next=" .. escaped, ["cache-control"] = "no-store" } }
end

local function view_of(live, path)
  if path == "/" then return live.first end
  local name = path:match("^/views/([^/]+)$")
  name = name and props_mod.unescape((name:gsub("+", "%%2B")))
  return name and live.views[name] or nil
end

function M.page(live, request)
  local opts, csp = live.pageOptions, live.csp
  local view = view_of(live, request.path or "/")
  if not view then return page.errorPage(404, "Not found", { "There is no such view." }, opts, csp) end
  local props = props_mod.fromQuery(view, request.url)
  if not props then
    return page.errorPage(400, "Bad request", { "The query string is not valid URL encoding." }, opts, csp)
  end
  local data, why, err = props_mod.validate(view, props)
  if not data then
    local lines = {}
    if why == "too large" then
      lines[1] = "The view's props exceed " .. props_mod.MAX_BYTES .. " bytes as JSON."
    else
      for _, issue in ipairs(err.issues) do
        local path = {}
        for i, p in ipairs(issue.path or {}) do path[i] = tostring(p) end
        lines[#lines + 1] = (#path > 0 and concat(path, ".") or "value") .. ": " .. issue.message
      end
    end
    return page.errorPage(400, "Bad request", lines, opts, csp)
  end
  local ctx -- the request's ctx, made once: who is signed in, then load's
  if view.auth == "user" then
    local made, got = pcall(live.context, live, request)
    if not made then
      log("error", "view " .. view.viewManifest.name .. ": sign-in check failed: " .. describe(got))
      return page.errorPage(500, "Something went wrong", nil, opts, csp)
    end
    if not got.user then return sign_in_first(live, request, opts, csp) end
    ctx = got
  end
  local m = view.viewManifest
  local id
  local ok, result = xpcall(function()
    id = token.sign(live.secret, m.name, data, live:principal(request), live.clock())
    local loaded
    if view.load then loaded = view.load(data, ctx or live:context(request)) end
    local inner = render.render(view(data, loaded), live.renderOptions)
    return page.html(m.description or m.name, opts, id, inner, page.scriptPath())
  end, trace)
  if not ok then
    log("error", "view " .. m.name .. ": page failed: " .. describe(result))
    if live.dev and id then
      -- development: the page with the error where the view goes; its script's live connection
      -- shows it over the page and waits there for the save that mends it (SPEC §14)
      local inner = '<pre class="clank-dev-error-page">' .. render.escape(describe(result)) .. "</pre>"
      return { status = 500, headers = page.headers(csp),
        body = page.html(m.description or m.name, opts, id, inner, page.scriptPath()) }
    end
    return page.errorPage(500, "Something went wrong", { "The error was logged on the server." }, opts, csp)
  end
  return { status = 200, headers = page.headers(csp), body = result }
end

-- ---- JSON answers ----

local function answer(status, body)
  return { status = status, body = json.encode(body), headers = {
    ["content-type"] = "application/json", ["cache-control"] = "no-store" } }
end

local function fail(status, code, message, details)
  return answer(status, { ok = false, error = { code = code, message = message, details = details } })
end

local function not_found() return fail(404, "NOT_FOUND", "Session not found.") end
-- Past 80 % of the memory cap no new session is mounted (SPEC §13): try again later.
local function full()
  local response = fail(503, "RESOURCE_LIMIT", "The server is at its memory limit: try again later.")
  response.headers["retry-after"] = "1"
  return response
end

-- A mount or a surface call's handler stopped over its CPU or memory budget.
local function stopped()
  local e = require("clank.live").STOPPED
  return fail(503, e.code, e.message)
end

local function header(request, name)
  local v = request.headers and request.headers[name]
  return type(v) == "string" and v or nil
end

-- The JSON body of a request as §5 reads it (the bridge's own step 7) → value | nil, response
local function body_of(live, request)
  local max = (live.app.bridge and live.app.bridge.maxRequestBytes) or bridge.DEFAULT_MAX_REQUEST_BYTES
  local value, status, code, message = bridge.readJsonBody(request, max)
  if status then return nil, fail(status, code, message) end
  return value
end

local function invalid(err)
  local message = tostring(err.message or err)
  return fail(422, "INVALID_INPUT", message, props_mod.details(err, true))
end

local function nodes(live, s)
  live:awake(s)
  return surface_mod.createAgentSurface(s.mounted):inspect()
end

-- ---- POST /__clank/views/:name/sessions ----

local function create(live, request, name)
  local view = live.views[name]
  if not view then return fail(404, "NOT_FOUND", "View not found.") end
  if view.auth == "user" and not live:signedIn(request) then
    return fail(401, "UNAUTHORIZED", "Sign in to open this view.")
  end
  local body, response = body_of(live, request)
  if response then return response end
  local data, why, err = props_mod.validate(view, body)
  if not data then
    if why == "too large" then
      return fail(413, "PAYLOAD_TOO_LARGE", "View props exceed " .. props_mod.MAX_BYTES
        .. " bytes as canonical JSON.")
    end
    return invalid(err)
  end
  -- with --workers N, an ID this worker owns (SPEC §13): its requests then stay here
  local worker = live.worker
  local id
  repeat
    id = token.sign(live.secret, name, data, live:principal(request), live.clock())
  until not worker or token.owner(id, worker.count) == worker.index
  if core.memoryTight() then return full() end
  local s, outcome = live:mount(id, view, data, request)
  if outcome == "stopped" then return stopped() end
  if not s then return fail(500, "MOUNT_FAILED", "The view failed to load.") end
  return answer(201, { id = id, nodes = nodes(live, s) })
end

-- ---- the surface of a session ----

local function operate(live, request, s, kind)
  local body, response = body_of(live, request)
  if response then return response end
  if type(body) ~= "table" or json.isArray(body) or type(body.id) ~= "string"
    or (kind == "input" and body.value == nil) then
    local want = kind == "input" and '{"id", "value"}' or '{"id"}'
    return fail(422, "INVALID_INPUT", "Expected a JSON object " .. want .. ".")
  end
  local confirmed = header(request, "x-clank-confirmation") == "confirmed"
  local id = core.requestId() or nil -- the HTTP request's: the job runs in the session's task
  -- Without x-clank-confirmation, an action the handler runs that needs confirmation and whose
  -- input is valid does not run, and the answer is 428 with the text a person would confirm
  -- (issue 34: the input is checked first, so an invalid one answers with its issues shown).
  local wanted
  local function ask(text)
    wanted = wanted or text
    return false
  end
  local done, ran, ok, result = live:run(s, function()
    local got, ctx = xpcall(live.context, trace, live, request, confirmed, id)
    if not got then return false, ctx end
    live:awake(s)
    local surface = surface_mod.createAgentSurface(s.mounted)
    live:touched(s) -- the surface writes into the tree's props
    return live:asRequestAsking(ctx, ask, function()
      if kind == "input" then return surface:input(body.id, body.value) end
      return surface:activate(body.id)
    end)
  end, live.actionTimeout)
  if done and not ran then ok, result = false, ok end
  live:setIdleIfIdle(s)
  if not done then
    if s.ended then return not_found() end
    return fail(504, "TIMEOUT", "The action timed out.")
  end
  if not ok then
    if result == require("clank.live").STOPPED then return stopped() end
    log("error", "live view " .. s.name .. ": surface " .. kind .. " failed: " .. describe(result))
    return fail(500, "HANDLER_FAILED", "The event handler failed.")
  end
  if wanted then
    return fail(428, "CONFIRMATION_REQUIRED", "This action requires explicit confirmation.",
      { confirm = wanted })
  end
  return answer(200, { ok = result == true, nodes = nodes(live, s) })
end

function M.handle(live, request)
  local path, method = request.path or "", request.method
  local name = path:match("^/__clank/views/([^/]+)/sessions$")
  if name then
    if method ~= "POST" then return fail(404, "NOT_FOUND", "Endpoint not found.") end
    name = props_mod.unescape((name:gsub("+", "%%2B")))
    return create(live, request, name or "")
  end
  local id, rest = path:match("^/__clank/sessions/([^/]+)/surface(.*)$")
  local kind = rest == "" and method == "GET" and "inspect"
    or rest == "/input" and method == "POST" and "input"
    or rest == "/activate" and method == "POST" and "activate"
  if not id or not kind then return fail(404, "NOT_FOUND", "Endpoint not found.") end
  local s, why = live:open(id, request)
  if why == "failed" then return fail(500, "MOUNT_FAILED", "The view failed to load.") end
  if why == "full" then return full() end
  if why == "stopped" then return stopped() end
  if not s then return not_found() end
  live:catchUp(s) -- what it missed while nobody watched it
  live:setIdleIfIdle(s)
  if kind == "inspect" then return answer(200, { nodes = nodes(live, s) }) end
  return operate(live, request, s, kind)
end

return M
