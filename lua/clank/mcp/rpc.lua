-- JSON-RPC 2.0 messages and the HTTP answers that carry them (SPEC §6).
local json = require "clank.json"

local encode, null = json.encode, json.null
local pairs = pairs

local rpc = {
  PARSE_ERROR = -32700,
  INVALID_REQUEST = -32600,
  METHOD_NOT_FOUND = -32601,
  INVALID_PARAMS = -32602,
  SESSION_NOT_FOUND = -32001, -- as the TypeScript SDK's server answers an unknown session
  TRANSPORT = -32000,         -- HTTP-level refusals (method, media type), as the SDK's server
}

-- A success response, as canonical JSON.
function rpc.result(id, result)
  return encode { jsonrpc = "2.0", id = id, result = result }
end

-- An error response; id nil means the request's id is unknown (JSON null).
function rpc.error(id, code, message)
  if id == nil then
    id = null
  end
  return encode { jsonrpc = "2.0", id = id, error = { code = code, message = message } }
end

-- An HTTP answer: { status, headers, body }. extra: more headers (may be nil).
function rpc.answer(status, body, extra, content_type)
  local headers = {}
  if body ~= "" then
    headers["content-type"] = content_type or "application/json"
  end
  if status >= 400 then
    headers["cache-control"] = "no-store"
  end
  for name, value in pairs(extra or {}) do
    headers[name] = value
  end
  return { status = status, headers = headers, body = body }
end

function rpc.fail(status, id, code, message, extra)
  return rpc.answer(status, rpc.error(id, code, message), extra)
end

-- One Server-Sent Events message carrying a JSON-RPC message.
function rpc.event(data)
  return "event: message\ndata: " .. data .. "\n\n"
end

return rpc
