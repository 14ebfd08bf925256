-- The app's actions as MCP tools: tools/list entries and tools/call results (SPEC §6).
local core = require "clank.core"
local json = require "clank.json"
local schema = require "clank.schema"
local action = require "clank.action"

local array, encode, decode = json.array, json.encode, json.decode
local pairs, ipairs, type, pcall, tostring = pairs, ipairs, type, pcall, tostring
local mtype = math.type
local sort, concat = table.sort, table.concat

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

local function path_string(path)
  if #path == 0 then
    return "value"
  end
  local parts = {}
  for i, key in ipairs(path) do
    parts[i] = tostring(key)
  end
  return concat(parts, ".")
end

-- INVALID_INPUT as the bridge words it, from 0-based paths (prefixed by `value` when wrapped).
function tools.invalid_input(issues, wrapped)
  local details, lines = array(), {}
  for i, issue in ipairs(issues) do
    local path = array()
    if wrapped then
      path[1] = "value"
    end
    for _, key in ipairs(issue.path or {}) do
      path[#path + 1] = mtype(key) == "integer" and key - 1 or key
    end
    details[i] = { path = path, message = issue.message, expected = issue.expected }
    lines[i] = path_string(path) .. ": " .. tostring(issue.message)
  end
  return tools.failure("INVALID_INPUT", concat(lines, "; "), details)
end

-- Where a tool's unexpected error goes (the server log; specs may replace it).
function tools.log(message)
  if core.log then
    core.log("error", message)
  else
    io.stderr:write("clank-run: error: ", message, "\n")
    io.stderr:flush()
  end
end

-- An error raised by an action (or the app's context) as a tool result, redacted as the bridge does.
function tools.from_error(err, wrapped, env, name)
  if schema.isValidationError(err) then
    return tools.invalid_input(err.issues, wrapped)
  end
  if action.isActionError(err) then
    return tools.failure(err.code or "ACTION_FAILED", err.message or "", err.details)
  end
  local message = tostring(err)
  tools.log("mcp: tool " .. name .. " failed: " .. message)
  local bridge = env.app and env.app.bridge
  return tools.failure("ACTION_FAILED", bridge and bridge.exposeErrors and message
    or "The action failed.")
end

-- The input's issues before anything runs (elicit mode asks a person only about valid input).
function tools.check(act, input, wrapped, not_object)
  if not_object then
    return tools.invalid_input({ { path = {}, message = "Expected an object.",
                                   expected = "object" } }, false)
  end
  local parsed = act.input:safeParse(input)
  if not parsed.success then
    return tools.invalid_input(parsed.error.issues, wrapped)
  end
  return nil
end

--------------------------------------------------------------------------------
-- Running

-- ctx as the bridge builds it: the app's context fields, then request and signal.
local function make_ctx(env, request)
  local ctx = {}
  if env.context then
    local fields = env.context(request)
    if type(fields) == "table" then
      for k, v in pairs(fields) do
        ctx[k] = v
      end
    end
  end
  ctx.request = request
  if not env.run then -- env.run (clank-run) gives the signal itself
    ctx.signal = core.timeout(env.app and env.app.actionTimeout or 30000)
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
