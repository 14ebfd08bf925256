-- What the MCP endpoint answers (SPEC §6), written out for the specs that drive it in process
-- (spec/unit/lua/mcp_spec) and over HTTP (spec/functional/mcp_spec): JSON-RPC bodies byte for byte,
-- and the initialize exchange both start with.
local assert = require "luassert"
local encode = require("clank.json").encode
local bridge = require "helpers.bridge"

local mcp = {}

function mcp.rpc_error(id, code, message)
  return '{"error":{"code":' .. code .. ',"message":"' .. message .. '"},"id":'
    .. (id == nil and "null" or encode(id)) .. ',"jsonrpc":"2.0"}'
end

function mcp.result_body(id, result_json)
  return '{"id":' .. encode(id) .. ',"jsonrpc":"2.0","result":' .. result_json .. "}"
end

-- A tool result holding one text block; text is the JSON inside it.
function mcp.tool_result(text, is_error)
  local content = '{"content":[{"text":' .. encode(text) .. ',"type":"text"}]'
  if is_error then
    return content .. ',"isError":true}'
  end
  return content .. ',"structuredContent":' .. text .. "}"
end

-- A tool result carrying an action's failure, as the bridge writes its "error" member.
function mcp.tool_error(code, message, details_json)
  return mcp.tool_result("{" .. bridge.error_member(code, message, details_json) .. "}", true)
end

mcp.CONFIRM = mcp.tool_error("CONFIRMATION_REQUIRED", "This action requires explicit confirmation.")

-- Sends initialize through post(target, message) (the spec's own way of posting, in process
-- or over HTTP), requires 200 and returns the session id and the response.
function mcp.initialize(post, target, version, capabilities)
  local res = post(target, { jsonrpc = "2.0", id = 1, method = "initialize",
    params = { protocolVersion = version or "2025-11-25", capabilities = capabilities or {},
               clientInfo = { name = "spec", version = "0" } } })
  assert.are.equal(200, res.status, res.body)
  return res.headers["mcp-session-id"], res
end

return mcp
