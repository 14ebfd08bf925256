-- clank.mcp: the app's actions over the Model Context Protocol, Streamable HTTP transport, at
-- /__clank/mcp (SPEC §6). clank-run calls handle(request, env) in a runtime task for every
-- request to that path, after its own framing, size and Host checks.
--
-- env: app, bridge, actions (name → action), contractHash, secret, context, maxRequestBytes,
-- stream(status, headers) → writer (then handle returns nil).
local bridge = require "clank.bridge"
local json = require "clank.json"
local rpc = require "clank.mcp.rpc"
local session = require "clank.mcp.session"
local tools = require "clank.mcp.tools"
local elicit = require "clank.mcp.elicit"
local notify = require "clank.mcp.notify"
local runner = require "clank.runner"

local decode, isArray = json.decode, json.isArray
local checkOrigin, isJsonMediaType = bridge.checkOrigin, bridge.isJsonMediaType
local type, pairs, next, tostring = type, pairs, next, tostring
local mtype = math.type

local mcp = {}

local FORBIDDEN = "Cross-origin agent request rejected."

--------------------------------------------------------------------------------
-- HTTP: origin, method, media type (the bridge's rules, SPEC §5 steps 3 and 7)

-- Returns ok, and the cors headers for an allowed foreign origin.
local function check_origin(request, env)
  local ok, foreign = checkOrigin(request, env.app and env.app.allowedOrigins)
  if not ok or not foreign then
    return ok
  end
  return true, { ["access-control-allow-origin"] = foreign, vary = "Origin",
                 ["access-control-expose-headers"] = "mcp-session-id" }
end

local function merge(a, b)
  local out = {}
  for k, v in pairs(a or {}) do
    out[k] = v
  end
  for k, v in pairs(b or {}) do
    out[k] = v
  end
  return out
end

--------------------------------------------------------------------------------
-- JSON-RPC messages

local function valid_id(id)
  return type(id) == "string" or mtype(id) == "integer"
    or (mtype(id) == "float" and id == id and id % 1 == 0)
end

-- "request", "notification", "response", or nil for anything else.
local function kind(msg)
  if type(msg) ~= "table" or isArray(msg) or msg.jsonrpc ~= "2.0" then
    return nil
  end
  if msg.method ~= nil then
    if type(msg.method) ~= "string" then
      return nil
    end
    if msg.id == nil then
      return "notification"
    end
    return valid_id(msg.id) and "request" or nil
  end
  if valid_id(msg.id) and (msg.result ~= nil or msg.error ~= nil) then
    return "response"
  end
  return nil
end

local function confirmation_mode(env)
  local m = env.app and env.app.mcp
  local mode = m and m.confirmation or "annotations"
  if mode == "annotations" or mode == "elicit" or mode == "refuse" then
    return mode
  end
  return "refuse" -- an unknown mode fails closed
end

--------------------------------------------------------------------------------
-- Methods

local function elicitation_declared(params)
  local caps = type(params) == "table" and params.capabilities
  local e = type(caps) == "table" and caps.elicitation
  if type(e) ~= "table" or isArray(e) then
    return false
  end
  return next(e) == nil or e.form ~= nil -- {} means form mode (2025-06-18)
end

-- The app's principal for a request as text, or nil: MCP sessions are bound to it. With
-- accounts (issue 30), the signed-in user's id and epoch, so that a password change or reset,
-- which ends the user's sessions, ends their MCP sessions too (their clients initialize again).
local function principal_of(env, request)
  local auth = env.app and env.app.auth
  if auth and not env.app.ownPrincipal then
    local user = auth:authenticate(request)
    return user and (tostring(user.id) .. ":" .. tostring(user.epoch)) or nil
  end
  local fn = env.app and env.app.principal
  if not fn then return nil end
  local p = fn(request)
  if p == nil then return nil end
  return type(p) == "string" and p or json.encode(p)
end

local function initialize(msg, request, env, cors)
  local params = msg.params
  local asked = type(params) == "table" and params.protocolVersion
  local version = session.supported(asked) and asked or session.LATEST
  local app = env.app or {}
  local result = {
    protocolVersion = version,
    capabilities = { tools = { listChanged = false }, logging = {} },
    serverInfo = { name = app.name or "clank", version = (app.version or "0.0.0") .. "+"
                   .. env.contractHash },
  }
  local headers = merge(cors, { ["mcp-session-id"] = session.create(env, version,
    elicitation_declared(params), principal_of(env, request)) })
  return rpc.answer(200, rpc.result(msg.id, result), headers)
end

-- Where the call's ctx.log and ctx.progress go (a progress token only from _meta.progressToken).
local function channel_for(msg, env, sess, cors, act)
  local meta = type(msg.params) == "table" and msg.params._meta
  local token = type(meta) == "table" and meta.progressToken
  return notify.channel { env = env, cors = cors, session_id = sess.id, action = act.manifest.name,
                          token = notify.valid_token(token) and token or nil }
end

local function tools_call(msg, request, env, sess, cors)
  local act, input, wrapped, not_object = tools.resolve(env, msg.params)
  if not act then
    return rpc.fail(200, msg.id, input, wrapped, cors)
  end
  local channel = channel_for(msg, env, sess, cors, act)
  -- who may call it before any confirmation is asked (issue 30); a grant without the scope the
  -- tool needs: 403 naming it, so the host asks the person for more (issue 31's step-up)
  tools.audit(env, request, act)
  local result, needs = tools.refusal(env, request, act)
  if needs then
    return rpc.fail(403, msg.id, rpc.INVALID_REQUEST, "This call needs the scope " .. needs .. ".",
      merge(cors, { ["www-authenticate"] = tools.challenge(env.app.auth, request, "insufficient_scope",
        needs) }))
  end
  if not result and act:requiresConfirmation() then
    local mode = confirmation_mode(env)
    if mode == "refuse" and request.headers["x-clank-confirmation"] ~= "confirmed" then
      result = tools.confirmation_required()
    elseif mode == "elicit" then
      result = tools.check(act, input, wrapped, not_object)
      if not result and not sess.elicit then
        result = tools.confirmation_required()
      end
      if not result then -- the input is valid: the person is asked about this very call
        local worded, message = pcall(elicit.message, act, input)
        if not worded then
          result = tools.from_error(message, wrapped, env, act.manifest.name)
        else
          return elicit.run(env, request, sess, msg.id, act, input, wrapped, channel, message)
        end
      end
    end
  end
  result = result or tools.run(env, request, act, input, wrapped, not_object, channel)
  runner.countCall(act, not result.isError) -- clank_action_calls_total (SPEC §15)
  return channel:answer(msg.id, result)
end

local function set_level(msg, _, _, sess, cors)
  local params = msg.params
  local level = type(params) == "table" and params.level
  if not notify.valid_level(level) then
    return rpc.fail(200, msg.id, rpc.INVALID_PARAMS, "Invalid params: level must be one of "
      .. table.concat(notify.LEVELS, ", ") .. ".", cors)
  end
  notify.set_level(sess.id, level)
  return rpc.answer(200, rpc.result(msg.id, {}), cors)
end

local methods = {
  ping = function(msg, _, _, _, cors)
    return rpc.answer(200, rpc.result(msg.id, {}), cors)
  end,
  ["tools/list"] = function(msg, request, env, _, cors)
    return rpc.answer(200, rpc.result(msg.id, tools.list(env, request)), cors)
  end,
  ["tools/call"] = tools_call,
  ["logging/setLevel"] = set_level,
}

--------------------------------------------------------------------------------
-- The endpoint

-- The session a message carries: sess, or nil, an answer (404, or 400 for the version header).
local function check_session(request, env, id, cors)
  local sess = session.verify(env, request.headers["mcp-session-id"], principal_of(env, request))
  if not sess then
    return nil, rpc.fail(404, id, rpc.SESSION_NOT_FOUND, "Session not found.", cors)
  end
  local version = request.headers["mcp-protocol-version"]
  if version ~= nil and not session.supported(version) then
    return nil, rpc.fail(400, id, rpc.INVALID_REQUEST, "Unsupported MCP-Protocol-Version: "
      .. version .. ".", cors)
  end
  return sess
end

local function post(request, env, cors)
  if not isJsonMediaType(request.headers["content-type"]) then
    return rpc.fail(415, nil, rpc.TRANSPORT, "Expected an application/json request body.", cors)
  end
  local msg, why = decode(request.body or "")
  if msg == nil then
    return rpc.fail(400, nil, rpc.PARSE_ERROR, "Parse error: " .. tostring(why), cors)
  end
  if isArray(msg) then
    return rpc.fail(400, nil, rpc.INVALID_REQUEST, "Batch requests are not supported.", cors)
  end
  local k = kind(msg)
  if k == nil then
    local id = type(msg) == "table" and not isArray(msg) and valid_id(msg.id) and msg.id or nil
    return rpc.fail(400, id, rpc.INVALID_REQUEST, "Invalid Request.", cors)
  end
  local sid = request.headers["mcp-session-id"]
  if k ~= "request" then
    if sid ~= nil then
      local sess, answer = check_session(request, env, nil, cors)
      if not sess then
        return answer
      end
      if k == "response" then
        elicit.deliver(sess.id, msg)
      elseif msg.method == "notifications/cancelled" and type(msg.params) == "table"
        and valid_id(msg.params.requestId) then
        elicit.cancel(sess.id, msg.params.requestId)
      end
    end
    return rpc.answer(202, "", cors)
  end
  if msg.method == "initialize" then
    return initialize(msg, request, env, cors)
  end
  local method = methods[msg.method]
  if sid == nil then
    if not method then
      return rpc.fail(400, msg.id, rpc.METHOD_NOT_FOUND, "Method not found: " .. msg.method, cors)
    end
    return rpc.fail(400, msg.id, rpc.INVALID_REQUEST, "Missing Mcp-Session-Id.", cors)
  end
  local sess, answer = check_session(request, env, msg.id, cors)
  if not sess then
    return answer
  end
  if not method then
    return rpc.fail(200, msg.id, rpc.METHOD_NOT_FOUND, "Method not found: " .. msg.method, cors)
  end
  return method(msg, request, env, sess, cors)
end

-- With accounts (issues 30, 31), what answers a request without a user: 401 naming where the
-- protected resource's metadata is (RFC 9728), which MCP hosts follow to the authorization
-- server; nil when the request is signed in (or the app has no accounts).
local function sign_in_first(request, env, cors)
  local auth = env.app and env.app.auth
  if not auth or auth:authenticate(request) then return nil end
  local given = request.headers.authorization ~= nil
  return rpc.fail(401, nil, rpc.TRANSPORT, "Authorization required.", merge(cors, {
    ["www-authenticate"] = tools.challenge(auth, request, given and "invalid_token" or nil,
      "agent:read agent:write"),
  }))
end

-- One request to /__clank/mcp: returns { status, headers, body }, or nil after env.stream.
function mcp.handle(request, env)
  if request.headers == nil then
    request.headers = {}
  end
  local ok, cors = check_origin(request, env)
  if not ok then
    return rpc.fail(403, nil, rpc.INVALID_REQUEST, FORBIDDEN)
  end
  local method = request.method
  if method ~= "OPTIONS" then
    local refused = sign_in_first(request, env, cors)
    if refused then return refused end
  end
  if method == "POST" then
    return post(request, env, cors)
  end
  if method == "DELETE" then
    return rpc.answer(204, "", cors)
  end
  if method == "OPTIONS" and cors then
    return rpc.answer(204, "", merge(cors, {
      ["access-control-allow-methods"] = "POST, DELETE",
      ["access-control-allow-headers"] = "content-type, mcp-session-id, mcp-protocol-version, "
        .. "x-clank-confirmation, last-event-id",
    }))
  end
  return rpc.fail(405, nil, rpc.TRANSPORT, "Method not allowed.",
                  merge(cors, { allow = "POST, DELETE" }))
end

return mcp
