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

function tools.list(env)
  local list = array()
  for _, name in ipairs(sorted_names(env.actions)) do
    local m = env.actions[name].manifest
    list[#list + 1] = {
      name = m.name,
      description = m.description,
      inputSchema = object_schema(m.inputSchema),
      outputSchema = m.outputSchema and object_schema(m.outputSchema),
      annotations = annotations[m.sideEffects](),
    }
  end
  return { tools = list }
end

--------------------------------------------------------------------------------
-- tools/call: finding the tool and its input

-- The action and its input for tools/call params, or nil, JSON-RPC code, message.
-- Missing arguments mean {}; a wrapped input comes from arguments.value.
function tools.resolve(env, params)
  if type(params) ~= "table" or json.isArray(params) or type(params.name) ~= "string" then
    return nil, -32602, "Invalid params: tools/call needs a tool name."
  end
  local act = env.actions[params.name]
  if act == nil then
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
function tools.success(act, output)
  local text = encode(output, act.output)
  if text:sub(1, 1) ~= "{" then
    text = '{"value":' .. text .. "}"
  end
  local result = text_result(text)
  result.structuredContent = decode(text)
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
function tools.run(env, request, act, input, wrapped, not_object)
  if not_object then
    return tools.check(act, input, wrapped, true)
  end
  local name = act.manifest.name
  local ok, ctx = pcall(make_ctx, env, request)
  if not ok then
    return tools.from_error(ctx, wrapped, env, name)
  end
  local done, output = call(env, act, input, ctx)
  if not done then
    return tools.from_error(output, wrapped, env, name)
  end
  return tools.success(act, output)
end

return tools
