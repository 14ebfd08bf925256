-- The answers of the OAuth endpoints: JSON (no-store; with access-control-allow-origin: * on
-- the endpoints browser-based clients call from another origin, which use no cookies), OAuth
-- errors (RFC 6749 §5.2), CORS preflights and 303 redirects.
local json = require "clank.json"

local pairs = pairs

local M = {}

M.ALLOW_HEADERS = "authorization, content-type, mcp-protocol-version"

-- json(status, value, cors, headers?) → the answer.
function M.json(status, value, cors, more)
  local headers = { ["content-type"] = "application/json", ["cache-control"] = "no-store" }
  if cors then headers["access-control-allow-origin"] = "*" end
  for k, v in pairs(more or {}) do headers[k] = v end
  return { status = status, headers = headers, body = json.encode(value) }
end

-- error(status, code, description, cors, headers?) → { error, error_description }.
function M.error(status, code, description, cors, more)
  return M.json(status, { error = code, error_description = description }, cors, more)
end

-- preflight(methods) → 204 for an OPTIONS request: any origin, these methods, the headers
-- MCP clients send.
function M.preflight(methods)
  return { status = 204, body = "", headers = {
    ["access-control-allow-origin"] = "*",
    ["access-control-allow-methods"] = methods,
    ["access-control-allow-headers"] = M.ALLOW_HEADERS,
    ["access-control-max-age"] = "86400",
  } }
end

-- redirect(location) → 303 to it.
function M.redirect(location)
  return { status = 303, headers = { location = location, ["cache-control"] = "no-store" }, body = "" }
end

return M
