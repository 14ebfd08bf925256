-- The inspector (SPEC §16): one view (clank.inspector.view) served at /__clank/inspector as a
-- live page, over the running generation's app. clank-run makes one per generation on first use:
--
--   inspector = require("clank.inspector").new { app, log = fn, limits = { idleMs, maxIdle } }
--   inspector:page(request)  → response        (in a task: the view's load may wait)
--   inspector.jobs(request)  → response        /__clank/inspector/jobs... (clank.inspector.jobs)
--   inspector:connect / receive / disconnect / adopt / tick, as clank.live's objects
--
-- It is a clank.live object of its own, whose sessions are signed under a key derived from the
-- app secret: an inspector token never opens an app's view session, nor the reverse. The page's
-- session id is its token behind "i.", which is how clank-run routes its live channel here (and
-- applies the inspector's access rule to it).
local core = require "clank.core"
local live_mod = require "clank.live"
local token = require "clank.live.token"
local page = require "clank.live.page"
local render = require "clank.ui.render"
local view_mod = require "clank.inspector.view"

local xpcall = xpcall

local M = {}

M.VIEW = view_mod.NAME
M.ID_PREFIX = "i."

local errors = require "clank.live.errors"
local trace, describe = errors.trace, errors.describe

-- GET /__clank/inspector: the page, rendered on the server, its session in its token.
local function serve_page(self, request)
  local view, csp = self.first, self.csp
  local ok, result = xpcall(function()
    local id = token.sign(self.secret, M.VIEW, {}, self:principal(request), self.clock())
    local data = view.load({}, self:context(request))
    local inner = render.render(view({}, data), self.renderOptions)
    return page.html("Clank inspector", {}, M.ID_PREFIX .. id, inner, page.scriptPath())
  end, trace)
  if not ok then
    live_mod.log("error", "inspector: page failed: " .. describe(result))
    return page.errorPage(500, "Something went wrong", nil, {}, csp)
  end
  return { status = 200, headers = page.headers(csp), body = result }
end

function M.new(opts)
  local app = opts.app
  local secret = core.appSecret() or core.randomBytes(32)
  local shadow = {
    name = app.name, views = { view_mod.define(app, opts.log) }, actions = app.actions,
    context = app.context, principal = app.principal, actionTimeout = app.actionTimeout,
    bridge = app.bridge,
  }
  local self = live_mod.new {
    app = shadow, secret = core.hmacSHA256(secret, "clank inspector sessions"),
    limits = opts.limits,
  }
  self.page = serve_page
  -- a plain page and its forms, not a view: loaded on its first request, as most apps have no jobs
  self.jobs = function(request) return require("clank.inspector.jobs").handle(request, app.name) end
  return self
end

return M
