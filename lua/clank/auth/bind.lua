-- An app's accounts (clank.app { auth = clank.auth { ... } }, issue 30) bound to the rest of the
-- runtime: the context every action, route, view and MCP call gets (ctx.user, ctx.credential,
-- ctx.client and request.user), the default principal that binds view sessions and MCP
-- sessions to the user, the handler of the auth paths (/__clank/auth/..., /__clank/oauth/...,
-- the OAuth metadata), and the note every worker and instance gets when sessions end, so that
-- their live pages close.
local pubsub = require "clank.pubsub"

local type, pairs, ipairs, pcall = type, pairs, ipairs, pcall

local M = {}

-- Where ended sessions are announced: a runtime topic, carried to every worker and instance.
M.ENDED_TOPIC = "clank.auth.ended"
-- A payload stays under pubsub's 4 KiB: 64 hex digits a session, 50 a message.
local PER_MESSAGE = 50

-- The context the app's own (appContext, or nil) returns, with the signed-in user (or nil) as
-- `user`, how they signed in as `credential` ({ kind = "session" | "token" | "oauth", scope }),
-- read by the bridge's check of actions' auth, and the OAuth client acting for them as
-- `client`. The app's own `user` gives way.
function M.context(a, appContext)
  return function(request)
    local user, credential = a:authenticate(request)
    local ctx = {}
    if appContext then
      local given = appContext(request)
      if type(given) == "table" then
        for k, v in pairs(given) do ctx[k] = v end
      end
    end
    ctx.user = user or nil
    ctx.credential = credential and { kind = credential.kind, scope = credential.scope } or nil
    -- the OAuth client acting for the user (issue 31), or nil
    ctx.client = credential and credential.kind == "oauth"
      and { id = credential.clientId, name = credential.clientName } or nil
    if type(request) == "table" then request.user = user or nil end -- routes read it there too
    return ctx
  end
end

-- app.principal's default: the signed-in user's id (nil for anyone else).
function M.principal(a)
  return function(request)
    local user = a:authenticate(request)
    return user and user.id or nil
  end
end

-- The id of the session a request signed in with (a live page's), or nil.
function M.session(a, request)
  local ok, user, credential = pcall(a.authenticate, a, request)
  if ok and user and credential and credential.kind == "session" then return credential.hash end
  return nil
end

-- Tells every worker and instance which sessions ended.
local function announce(hashes)
  for i = 1, #hashes, PER_MESSAGE do
    local part = {}
    for j = i, math.min(i + PER_MESSAGE - 1, #hashes) do part[#part + 1] = hashes[j] end
    pubsub.publish(M.ENDED_TOPIC, { sessions = part })
  end
end

-- clank.app's part: the app's context and principal wrapped, and ended sessions announced.
function M.app(out, def)
  local a = def.auth
  out.context = M.context(a, def.context)
  out.principal = def.principal or M.principal(a)
  out.ownPrincipal = def.principal ~= nil -- then MCP sessions are bound to it alone
  -- the protected resource's metadata names the app, unless the app named it itself
  if type(a.oauth) == "table" and a.oauth.resourceName == nil then a.oauth.resourceName = def.name end
  local hooks = a.onEnded
  local known = false
  for _, fn in ipairs(hooks) do known = known or fn == announce end
  if not known then hooks[#hooks + 1] = announce end
end

-- The handler of the auth paths (runtime/host/dispatch.c): no app context runs for it.
function M.route(app)
  local a = app.auth
  return function(request) return a:handle(request) end
end

-- fn(hashes) for each announcement of ended sessions, keyed by the watcher's table → unwatch.
function M.watchEnded(key, fn)
  return pubsub.watch(M.ENDED_TOPIC, key, function(_, payload)
    if type(payload) == "table" and type(payload.sessions) == "table" then fn(payload.sessions) end
  end)
end

return M
