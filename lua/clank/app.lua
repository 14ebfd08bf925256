-- clank.app { ... }: checks an app's definition and marks it for clank-run (SPEC §2).
local bridge = require "clank.bridge"

local type, pairs, ipairs, error, setmetatable, tostring = type, pairs, ipairs, error, setmetatable, tostring
local format = string.format
local isReservedPath, actionsByName = bridge.isReservedPath, bridge.actionsByName

local App = { __name = "clank.App" }

local fields = {
  name = "string", description = "string", version = "string", actions = "table",
  views = "table", context = "function", allowedOrigins = "table", bridge = "table",
  actionTimeout = "number", mcp = "table", routes = "table",
  page = "table", principal = "function", static = "table",
}

local methods = { GET = true, HEAD = true, POST = true, PUT = true, DELETE = true,
                  PATCH = true, OPTIONS = true }

local function check_origin(origin)
  return type(origin) == "string" and origin:find("^https?://[%w%.%-]+:?%d*$") ~= nil
     and not origin:find(":$")
end

local function app(def)
  if type(def) ~= "table" then
    error("clank.app: expected a table, got " .. type(def), 2)
  end
  local out = {}
  for key, value in pairs(def) do
    local want = fields[key]
    if not want then
      error(format("clank.app: unknown field '%s'", tostring(key)), 2)
    end
    if type(value) ~= want then
      error(format("clank.app: field '%s' must be a %s, got %s", key, want, type(value)), 2)
    end
    out[key] = value
  end
  local has_views = def.views ~= nil and #def.views > 0
  if def.routes then
    local routes = {}
    for key, handler in pairs(def.routes) do
      local method, path
      if type(key) == "string" then method, path = key:match("^(%u+) (/%S*)$") end
      if not method or not methods[method] then
        error(format("clank.app: route '%s' must be \"METHOD /path\" with METHOD one of "
          .. "GET HEAD POST PUT DELETE PATCH OPTIONS", tostring(key)), 2)
      end
      if type(handler) ~= "function" then
        error(format("clank.app: route '%s' must be a function, got %s", key, type(handler)), 2)
      end
      if isReservedPath(path, has_views) then -- the runtime answers there itself
        error(format("clank.app: route '%s' collides with the reserved path %s", key, path), 2)
      end
      routes[key] = handler
    end
    out.routes = routes
  end
  if def.actions then
    local ok, problem = actionsByName(def.actions)
    if not ok then
      error("clank.app: " .. problem, 2)
    end
  end
  if def.allowedOrigins then
    local origins = {}
    for i, origin in ipairs(def.allowedOrigins) do
      if not check_origin(origin) then
        error(format("clank.app: allowedOrigins[%d] must be an origin like "
          .. "\"http://localhost:5173\", got %s", i, tostring(origin)), 2)
      end
      origins[i] = origin
    end
    out.allowedOrigins = origins
  end
  -- not (x > 0), not x <= 0: NaN is refused too
  if def.actionTimeout and not (def.actionTimeout > 0) then -- luacheck: ignore 581
    error("clank.app: actionTimeout must be a positive number of milliseconds", 2)
  end
  return setmetatable(out, App)
end

return app
