-- clank.app { ... }: checks an app's definition and marks it for clank-run (SPEC §2).
local bridge = require "clank.bridge"

local type, pairs, ipairs, error, setmetatable, getmetatable, tostring, pcall =
  type, pairs, ipairs, error, setmetatable, getmetatable, tostring, pcall
local format, concat = string.format, table.concat
local isReservedPath, actionsByName = bridge.isReservedPath, bridge.actionsByName

local App = { __name = "clank.App" }

-- What an app with accounts serves at the root, besides /__clank/ (issue 31's discovery).
local AUTH_PATHS = { "/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server",
  "/.well-known/openid-configuration" }

local fields = {
  name = "string", description = "string", version = "string", actions = "table",
  views = "table", context = "function", allowedOrigins = "table", bridge = "table",
  actionTimeout = "number", cpuLimit = "number", mcp = "table", routes = "table",
  page = "table", principal = "function", static = "table", pubsub = "string", auth = "table",
  jobs = "table", jobsDb = "any", jobConcurrency = "number", jobLease = "number", jobRetention = "number",
  jobQueues = "table", schedules = "table",
}

-- The route rules (method, pattern syntax, bodyLimit) live here alone: the host's router
-- (runtime/host/router.c) reads the routes this accepted and checks none of them again.
local methods = { GET = true, HEAD = true, POST = true, PUT = true, DELETE = true,
                  PATCH = true, OPTIONS = true }

local function check_origin(origin)
  return type(origin) == "string" and origin:find("^https?://[%w%.%-]+:?%d*$") ~= nil
     and not origin:find(":$")
end

-- A route's path as a pattern (SPEC §15): a segment ":name" is a parameter, a
-- last segment "*name" the rest of the path. Returns the literal prefix (up to
-- the first parameter) and the shape (the names left out), nothing for an exact
-- path, or false and the problem.
local function pattern(path)
  local segs, shape, names, prefix = {}, {}, {}, nil
  for seg in path:gmatch("/([^/]*)") do
    segs[#segs + 1] = seg
  end
  local pos = 1 -- where segment i's slash is
  for i, seg in ipairs(segs) do
    local sigil, name = seg:sub(1, 1), seg:sub(2)
    if sigil == ":" or sigil == "*" then
      if name == "" then
        return false, "has an empty parameter name"
      elseif not name:find("^[%w_]+$") then
        return false, format("has a parameter name '%s' that is not letters, digits and _", name)
      elseif names[name] then
        return false, format("names the parameter '%s' twice", name)
      elseif sigil == "*" and i < #segs then
        return false, format("has *%s before its last segment", name)
      end
      names[name] = true
      prefix = prefix or path:sub(1, pos)
      shape[i] = sigil
    elseif seg:find("*", 1, true) then
      return false, "has a * that does not start the last segment"
    else
      shape[i] = seg
    end
    pos = pos + #seg + 1
  end
  if prefix then
    return prefix, "/" .. concat(shape, "/")
  end
end

-- A route as a table (SPEC §15): { handler = fn, bodyLimit = BYTES?, crossSite = bool? }.
local ROUTE_BODY_MAX = 64 * 1024 * 1024
local routeFields = { handler = true, bodyLimit = true, crossSite = true }

local function routeOptionsProblem(route)
  for k in pairs(route) do
    if not routeFields[k] then
      return format("unknown field '%s' (handler, bodyLimit, crossSite)", tostring(k))
    end
  end
  if type(route.handler) ~= "function" then
    return "handler must be a function, got " .. type(route.handler)
  end
  local limit = route.bodyLimit
  if limit ~= nil and (math.type(limit) ~= "integer" or limit < 1 or limit > ROUTE_BODY_MAX) then
    return format("bodyLimit must be an integer from 1 to %d (64 MiB), got %s", ROUTE_BODY_MAX,
      tostring(limit))
  end
  if route.crossSite ~= nil and type(route.crossSite) ~= "boolean" then
    return "crossSite must be a boolean"
  end
  return nil
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
    if want ~= "any" and type(value) ~= want then
      error(format("clank.app: field '%s' must be a %s, got %s", key, want, type(value)), 2)
    end
    out[key] = value
  end
  local has_views = def.views ~= nil and #def.views > 0
  if def.routes then
    local routes, shapes = {}, {}
    for key, handler in pairs(def.routes) do
      local method, path
      if type(key) == "string" then method, path = key:match("^(%u+) (/%S*)$") end
      if not method or not methods[method] then
        error(format("clank.app: route '%s' must be \"METHOD /path\" with METHOD one of "
          .. "GET HEAD POST PUT DELETE PATCH OPTIONS", tostring(key)), 2)
      end
      if type(handler) == "table" then
        local problem = routeOptionsProblem(handler)
        if problem then
          error(format("clank.app: route '%s': %s", key, problem), 2)
        end
      elseif type(handler) ~= "function" then
        error(format("clank.app: route '%s' must be a function, got %s", key, type(handler)), 2)
      end
      local prefix, shape = pattern(path)
      if prefix == false then
        error(format("clank.app: route '%s' is not a valid pattern: it %s", key, shape), 2)
      end
      -- the runtime answers there itself; a pattern by the literal part before its first parameter
      if def.auth ~= nil and (prefix or path):find("^/%.well%-known/") then
        local literal = prefix or path
        for _, own in ipairs(AUTH_PATHS) do
          if literal:sub(1, #own) == own or own:sub(1, #literal) == literal then
            error(format("clank.app: route '%s' collides with the reserved path %s", key, own), 2)
          end
        end
      end
      if isReservedPath(prefix or path, has_views) then
        error(format("clank.app: route '%s' collides with the reserved path %s", key, prefix or path), 2)
      end
      if shape then
        local other = shapes[method .. " " .. shape]
        if other then
          local a, b = other, key
          if b < a then a, b = b, a end
          error(format("clank.app: routes '%s' and '%s' can never be told apart", a, b), 2)
        end
        shapes[method .. " " .. shape] = key
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
  if def.auth ~= nil then
    local mt = getmetatable(def.auth)
    if not (type(mt) == "table" and mt.__name == "clank.Auth") then
      error("clank.app: field 'auth' must be made by clank.auth { db = ... }", 2)
    end
    require("clank.auth.bind").app(out, def)
  end
  if def.jobs ~= nil or def.schedules ~= nil then
    local ok, problem = pcall(require("clank.jobs.app").bind, out, def)
    if not ok then error("clank.app: " .. tostring(problem), 2) end
  end
  -- not (x > 0), not x <= 0: NaN is refused too
  if def.actionTimeout and not (def.actionTimeout > 0) then -- luacheck: ignore 581
    error("clank.app: actionTimeout must be a positive number of milliseconds", 2)
  end
  if def.cpuLimit and not (def.cpuLimit > 0) then -- luacheck: ignore 581
    error("clank.app: cpuLimit must be a positive number of milliseconds", 2)
  end
  return setmetatable(out, App)
end

return app
