-- Confirmation by elicitation (SPEC §6, app.mcp.confirmation = "elicit"): the tools/call POST is
-- answered as text/event-stream carrying an elicitation/create request; the client's answer
-- comes on a separate POST, handed over through `waiting`, which the streaming task polls.
local core = require "clank.core"
local json = require "clank.json"
local rpc = require "clank.mcp.rpc"
local session = require "clank.mcp.session"
local tools = require "clank.mcp.tools"

local encode = json.encode
local format = string.format
local pcall, error, type, pairs = pcall, error, type, pairs

local elicit = {
  poll_ms = 10,             -- how often the waiting call looks for the answer
  limit_ms = 300000,        -- how long a person may take to answer
  keepalive_ms = 15000,     -- an SSE comment this often, to notice a client that left
}

-- session id .. "\0" .. JSON of the elicitation request's id → { response = <client's message> }
local waiting = {}
-- session id .. "\0" .. JSON of the tools/call id → the same slot, for notifications/cancelled
local calls = {}

local function key(session_id, id)
  return session_id .. "\0" .. encode(id)
end

-- A JSON-RPC response arrived on its own POST: hand it to the call waiting for it, if any.
-- Returns true when one was waiting.
function elicit.deliver(session_id, message)
  local slot = waiting[key(session_id, message.id)]
  if slot and not slot.response then
    slot.response = message
    return true
  end
  return false
end

-- What the person is asked about a call with this (valid) input: the action's own words for it
-- (defineAction's confirm, issue 34), else which tool, its side effects and its description.
-- Raises when the action's confirm(input) does.
function elicit.message(act, input)
  if act.confirm ~= nil then return act:confirmText(input) end
  local m = act.manifest
  return format('Allow the tool "%s" to run? It has %s side effects: %s', m.name, m.sideEffects,
    m.description)
end

local function request_for(sess, message)
  local params = {
    message = message,
    requestedSchema = { type = "object", properties = {} },
  }
  if sess.version == "2025-11-25" then
    params.mode = "form"
  end
  return params
end

-- The client cancelled tools/call `request_id` (notifications/cancelled): stop waiting for it.
function elicit.cancel(session_id, request_id)
  local slot = calls[key(session_id, request_id)]
  if slot then
    slot.cancelled = true
  end
end

-- Waits for the client's answer; returns it, or nil, "gone" (the client left) or nil, "timeout".
local function wait_for(writer, slot)
  local waited, quiet = 0, 0
  while not slot.response and not slot.cancelled and waited < elicit.limit_ms do
    core.sleep(elicit.poll_ms)
    waited = waited + elicit.poll_ms
    quiet = quiet + elicit.poll_ms
    if quiet >= elicit.keepalive_ms then
      quiet = 0
      if not writer:write(": waiting for confirmation\n\n") then
        return nil, "gone"
      end
    end
  end
  if slot.cancelled then
    return nil, "gone"
  end
  if not slot.response then
    return nil, "timeout"
  end
  return slot.response
end

local function accepted(response)
  local result = response and response.result
  return type(result) == "table" and result.action == "accept"
end

-- Streams the whole exchange for tools/call `call_id`; returns nil (the answer went out streamed).
-- channel (clank.mcp.notify, may be nil): the call's ctx.log/ctx.progress, sent on this stream.
-- message: what the person is asked (elicit.message).
function elicit.run(env, request, sess, call_id, act, input, wrapped, channel, message)
  local writer = env.stream(200, { ["content-type"] = "text/event-stream",
                                   ["cache-control"] = "no-cache" })
  if channel then
    channel.writer = writer
  end
  local id = "clank-confirm-" .. session.randomHex(8)
  local k = key(sess.id, id)
  local call_key = key(sess.id, call_id)
  local slot = {}
  waiting[k] = slot
  calls[call_key] = slot
  local ok, result = pcall(function()
    local ask = encode { jsonrpc = "2.0", id = id, method = "elicitation/create",
                         params = request_for(sess, message) }
    if not writer:write(rpc.event(ask)) then
      return nil
    end
    local response, why = wait_for(writer, slot)
    waiting[k], calls[call_key] = nil, nil
    if why == "gone" then
      return nil
    end
    if accepted(response) then
      return tools.run(env, request, act, input, wrapped, false, channel)
    end
    return tools.confirmation_required()
  end)
  waiting[k], calls[call_key] = nil, nil
  if not ok then
    writer:close()
    error(result, 0)
  end
  if result then
    require("clank.runner").countCall(act, not result.isError) -- clank_action_calls_total
  end
  if result and not (channel and channel.gone) then
    writer:write(rpc.event(rpc.result(call_id, result)))
  end
  writer:close()
  return nil
end

-- How many entries the hand-over tables hold (0 when no call waits; for specs).
function elicit.pending()
  local n = 0
  for _ in pairs(waiting) do
    n = n + 1
  end
  for _ in pairs(calls) do
    n = n + 1
  end
  return n
end

return elicit
