-- The app's actions as MCP tools: tools/list entries and tools/call results (SPEC §6).
local core = require "clank.core"
local json = require "clank.json"
local schema = require "clank.schema"
local action = require "clank.action"
local bridge = require "clank.bridge"

local array, encode, decode = json.array, json.encode, json.decode
local errorEnvelope = bridge.errorEnvelope
local pairs, ipairs, type, pcall, setmetatable = pairs, ipairs, type, pcall, setmetatable
local sort = table.sort
local format, byte = string.format, string.byte

local tools = {}

tools.CONFIRMATION_MESSAGE = "This action requires explicit confirmation."

--------------------------------------------------------------------------------
-- tools/list

local annotations = {
  none = function()
    return { readOnlyHint = true, destructiveHint = false, idempotentHint = true,
             openWorldHint = false }
  end,
  read = function() return { readOnlyHint = true } end,
  write = function() return { readOnlyHint = false, destructiveHint = false } end,
  destructive = function() return { destructiveHint = true } end,
}

-- MCP wants object schemas; anything else travels as the `value` property.
local function wraps(json_schema)
  return json_schema.type ~= "object"
end

local function object_schema(json_schema)
  if not wraps(json_schema) then
    return json_schema
  end
  return { type = "object", properties = { value = json_schema }, required = array { "value" } }
end

local function sorted_names(actions)
  local names = {}
  for name in pairs(actions) do
    names[#names + 1] = name
  end
  sort(names)
  return names
end

--------------------------------------------------------------------------------
-- Portable tool names (SPEC §6): ^[A-Za-z0-9_-]{1,64}$

local function portable(name)
  return #name <= 64 and name:find("^[A-Za-z0-9_-]+$") ~= nil
end

local function digest8(name)
  local d = core.sha256(name)
  return format("%02x%02x%02x%02x", byte(d, 1, 4))
end

-- action name → tool name and back, for a set of action names (a pure function of the names, so
-- the contract hash, which covers the names, covers the tool names too).
function tools.names(actions)
  local candidate, mapped = {}, {}
  local uses = {}
  for name in pairs(actions) do
    local c = name
    if not portable(name) then
      c = name:gsub("[^A-Za-z0-9_-]", "_")
      mapped[name] = true
    end
    candidate[name] = c
    uses[c] = (uses[c] or 0) + 1
  end
  local to_tool, to_action = {}, {}
  for name, c in pairs(candidate) do
    if mapped[name] and (#c > 64 or uses[c] > 1) then
      c = c:sub(1, 55) .. "_" .. digest8(name)
    end
    to_tool[name], to_action[c] = c, name
  end
  return to_tool, to_action
end

local name_cache = setmetatable({}, { __mode = "k" })

local function names_of(env)
  local cached = name_cache[env.actions]
  if not cached then
    local to_tool, to_action = tools.names(env.actions)
    cached = { tool = to_tool, action = to_action }
    name_cache[env.actions] = cached
  end
  return cached
end

function tools.tool_name(env, action_name)
  return names_of(env).tool[action_name]
end

--------------------------------------------------------------------------------
-- What an app says about a tool beyond its action: app.mcp.tools[<action name>] =
--   { text = function(output) → string,  -- the text block's text instead of the JSON
--     defs = { <name> = <input property> } } -- that property's schema as $defs.<name>, $ref'd

local function tool_options(env, action_name)
  local m = env.app and env.app.mcp
  local t = type(m) == "table" and type(m.tools) == "table" and m.tools[action_name]
  return type(t) == "table" and t or nil
end

-- app.mcp.tools is part of the MCP contract (SPEC §6: a reload that changes it makes old sessions
-- 404): a canonical encoding of its data, where a function counts by its key's presence only.
-- Tags keep kinds apart; strings carry their length; table keys sort by that same encoding.
local canonical
local function encode_value(v, seen)
  local t = type(v)
  if t == "string" then
    return "s" .. #v .. ":" .. v
  elseif t == "number" then
    return math.type(v) == "integer" and "i" .. v or "f" .. format("%.17g", v)
  elseif t == "boolean" then
    return v and "T" or "F"
  elseif t == "function" then
    return "fn"
  elseif t == "table" then
    return canonical(v, seen)
  end
  return "?" .. t -- userdata, threads: by kind only
end

canonical = function(tbl, seen)
  if seen[tbl] then
    return "cycle"
  end
  seen[tbl] = true
  local entries = {}
  for k, v in pairs(tbl) do
    entries[#entries + 1] = encode_value(k, seen) .. "=" .. encode_value(v, seen)
  end
  seen[tbl] = nil
  sort(entries)
  return "{" .. table.concat(entries, ",") .. "}"
end

-- The contract hash MCP sessions use: the bridge's (base, over the manifest) when the app has no
-- app.mcp.tools, else 16 hex digits of SHA-256 over base and app.mcp.tools' canonical encoding.
function tools.contract_hash(base, app)
  local m = type(app) == "table" and app.mcp
  local t = type(m) == "table" and m.tools or nil
  if t == nil then
    return base
  end
  local d = core.sha256(base .. "\napp.mcp.tools=" .. encode_value(t, {}))
  return format(string.rep("%02x", 8), byte(d, 1, 8))
end

tools.DIALECT = "https://json-schema.org/draft/2020-12/schema"

-- The same schema with named sub-schemas moved to $defs (a $defs keyword is 2020-12's, so the
-- schema then declares its dialect).
local function with_defs(json_schema, defs)
  if type(defs) ~= "table" or type(json_schema.properties) ~= "table" then
    return json_schema
  end
  local out, props, found = {}, {}, {}
  for k, v in pairs(json_schema) do
    out[k] = v
  end
  for k, v in pairs(json_schema.properties) do
    props[k] = v
  end
  local names = {}
  for def in pairs(defs) do
    names[#names + 1] = def
  end
  sort(names)
  for _, def in ipairs(names) do
    local prop = defs[def]
    if type(prop) == "string" and props[prop] ~= nil then
      found[def] = props[prop]
      props[prop] = { ["$ref"] = "#/$defs/" .. def }
    end
  end
  if next(found) == nil then
    return json_schema
  end
  out.properties, out["$defs"], out["$schema"] = props, found, tools.DIALECT
  return out
end

-- Who may call: the context of the request (app.context) as the bridge checks it, or nil when
-- the app has no accounts and no action says who may call it.
local function caller_context(env, request)
  if request == nil or not (env.app and env.app.context and env.bridge) then return nil end
  return env.app.context(request)
end

-- An action's auth as the manifest shows it: its own, else "user" in an app with accounts.
local function auth_of(env, act)
  local own = act.auth
  if own ~= nil then return own end
  return env.app and env.app.auth and "user" or nil
end

-- tools/call's answer when the caller may not call act (not signed in, without its role, a
-- read token for an action that writes), else nil; and, when the caller is an OAuth grant
-- without the scope act needs, that scope (issue 31: answered 403 for a step-up).
function tools.refusal(env, request, act)
  if auth_of(env, act) == nil then return nil end
  local context = caller_context(env, request)
  local allowed, status, code, message = env.bridge:allows(act, context, true)
  if allowed then return nil end
  local credential = type(context) == "table" and context.credential
  if status == 403 and type(credential) == "table" and credential.kind == "oauth"
    and credential.scope == "read" then
    return tools.failure(code, message), "agent:write"
  end
  return tools.failure(code, message)
end

-- WWW-Authenticate of a refused MCP request (RFC 6750 §3, RFC 9728 §5.1): where the protected
-- resource's metadata is, the scope the call needs, and why (err), when there is a why; a plain
-- Bearer challenge when the app's accounts have no OAuth.
function tools.challenge(auth, request, err, scope)
  return auth:oauthChallenge(request, { error = err, scope = scope }) or "Bearer"
end

-- Every tool call goes to the log with who made it: the user, and the OAuth client acting for
-- them (issue 31's audit).
function tools.audit(env, request, act)
  local auth = env.app and env.app.auth
  if not auth then return end
  local user, credential = auth:authenticate(request)
  local client = credential and credential.clientId
  core.log("info", format("mcp: %s called by user %s%s", act.manifest.name, tostring(user and user.id),
    client and (" through client " .. tostring(client)) or ""))
end

-- tools/list for request: each action the caller may call (issue 30: a read token sees only
-- actions that do not write), with its auth in _meta when there is one.
function tools.list(env, request)
  local list = array()
  local to_tool = names_of(env).tool
  local context, checked = nil, false
  for _, name in ipairs(sorted_names(env.actions)) do
    local act = env.actions[name]
    local auth = auth_of(env, act)
    local shown = true
    if auth ~= nil and request ~= nil and env.bridge then
      if not checked then context, checked = caller_context(env, request), true end
      shown = env.bridge:allows(act, context, true)
    end
    if shown then
      list[#list + 1] = tools.entry(env, name, to_tool[name], auth)
    end
  end
  return { tools = list }
end

-- One tools/list entry.
function tools.entry(env, name, tool_name, auth)
  local m = env.actions[name].manifest
  local opts = tool_options(env, name)
  local input = object_schema(m.inputSchema)
  if opts and opts.defs then
    input = with_defs(input, opts.defs)
  end
  return {
    name = tool_name,
    description = m.description,
    inputSchema = input,
    outputSchema = m.outputSchema and object_schema(m.outputSchema),
    annotations = annotations[m.sideEffects](),
    _meta = { ["clank/action"] = name, ["clank/auth"] = auth },
  }
end

--------------------------------------------------------------------------------
-- tools/call: finding the tool and its input

-- The action and its input for tools/call params, or nil, JSON-RPC code, message.
-- Missing arguments mean {}; a wrapped input comes from arguments.value.
function tools.resolve(env, params)
  if type(params) ~= "table" or json.isArray(params) or type(params.name) ~= "string" then
    return nil, -32602, "Invalid params: tools/call needs a tool name."
  end
  local action_name = names_of(env).action[params.name]
  local act = action_name and env.actions[action_name]
  if not act then
    return nil, -32602, "Unknown tool: " .. params.name
  end
  local args = params.arguments
  if args == nil or args == json.null then
    args = {}
  end
  local wrapped = wraps(act.manifest.inputSchema)
  if not wrapped then
    return act, args, false
  end
  if type(args) ~= "table" or json.isArray(args) then
    return act, args, true, true -- not an object: reported as an input issue at the root
  end
  return act, args.value, true
end

--------------------------------------------------------------------------------
-- Results

local function text_result(text, is_error)
  return { content = array { { type = "text", text = text } }, isError = is_error or nil }
end

-- Success: structuredContent is the output when it encodes as an object, else {value = output};
-- the text block holds the same canonical JSON. Encoding follows the output schema (empty arrays).
-- app.mcp.tools[name].text(output) gives the text block's text instead.
function tools.success(act, output, env)
  local text = encode(output, act.output)
  if text:sub(1, 1) ~= "{" then
    text = '{"value":' .. text .. "}"
  end
  local structured = decode(text)
  local opts = env and tool_options(env, act.manifest.name)
  if opts and opts.text then
    local shown = opts.text(output)
    if type(shown) ~= "string" then
      error("app.mcp.tools[" .. act.manifest.name .. "].text must return a string", 0)
    end
    text = shown
  end
  local result = text_result(text)
  result.structuredContent = structured
  return result
end

-- An error result: one text block with {"error":{code, message, details?}}, no structuredContent.
function tools.failure(code, message, details)
  return text_result(encode { error = { code = code, message = message, details = details } }, true)
end

function tools.confirmation_required()
  return tools.failure("CONFIRMATION_REQUIRED", tools.CONFIRMATION_MESSAGE)
end

-- Where a tool's unexpected error goes: the server log (specs may replace it).
function tools.log(message)
  core.log("error", message)
end

-- An error raised by an action (or the app's context) as a tool result, mapped and redacted by
-- the bridge's own rules (SPEC §5 step 9); a wrapped input's issue paths keep their `value` key.
-- An unexpected error is logged with its traceback.
function tools.from_error(err, wrapped, env, name)
  local app_bridge = env.app and env.app.bridge
  local e, log_text = errorEnvelope(err, {
    exposeErrors = app_bridge and app_bridge.exposeErrors or false,
    pathPrefix = wrapped and "value" or nil,
  })
  if log_text then
    tools.log("mcp: tool " .. name .. " failed: " .. log_text)
  end
  return tools.failure(e.code, e.message, e.details)
end

-- INVALID_INPUT for a ValidationError, as from_error words it.
local function invalid_input(err, wrapped)
  local e = errorEnvelope(err, { pathPrefix = wrapped and "value" or nil })
  return tools.failure(e.code, e.message, e.details)
end

-- The input's issues before anything runs (elicit mode asks a person only about valid input).
function tools.check(act, input, wrapped, not_object)
  if not_object then
    return invalid_input(setmetatable({ issues = { { path = {}, message = "Expected an object.",
      expected = "object" } } }, schema.ValidationError), false)
  end
  local parsed = act.input:safeParse(input)
  if not parsed.success then
    return invalid_input(parsed.error, wrapped)
  end
  return nil
end

--------------------------------------------------------------------------------
-- Running

-- ctx as the bridge builds it: the app's context fields, then request and signal.
local function make_ctx(env, request)
  local ctx = bridge.context(env.context, request)
  if not env.run then -- env.run (clank-run) gives the signal itself
    ctx.signal = core.timeout(env.app and env.app.actionTimeout or bridge.DEFAULT_ACTION_TIMEOUT)
  end
  return ctx
end

-- The action as the bridge runs it: clank-run's env.run applies the action
-- timeout and aborts ctx.signal when the client leaves.
local function call(env, act, input, ctx)
  if not env.run then return pcall(act, input, ctx) end
  local ok, value = env.run(act, input, ctx)
  if ok == nil then
    return false, action.ActionError("TIMEOUT", "The action timed out.", 504)
  end
  return ok, value
end

-- Runs the action and answers with a tool result (never raises for the action's own errors).
-- channel (clank.mcp.notify): where ctx.log and ctx.progress go; nil leaves the bridge's.
function tools.run(env, request, act, input, wrapped, not_object, channel)
  if not_object then
    return tools.check(act, input, wrapped, true)
  end
  local name = act.manifest.name
  local ok, ctx = pcall(make_ctx, env, request)
  if not ok then
    return tools.from_error(ctx, wrapped, env, name)
  end
  -- the handler's notifications stream as they come (the action's task may open the request's
  -- stream: SPEC §6)
  if channel then
    channel:install(ctx)
  end
  local done, output = call(env, act, input, ctx)
  if not done then
    return tools.from_error(output, wrapped, env, name)
  end
  local shown_ok, result = pcall(tools.success, act, output, env)
  if not shown_ok then
    return tools.from_error(result, wrapped, env, name)
  end
  return result
end

return tools
