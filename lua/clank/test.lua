-- require "clank.test" (SPEC §16): an app loaded into the running process for its specs, served
-- by the same bridge and live views clank-run uses, with nothing listening on a port.
--
--   local t = test.app("app.lua", { context = { user = "ann" } })  -- context: overrides app.context
--   local answer, status, headers = t:call("greet", { name = "Ada" }, { confirmed = true })
--   local status, html, headers = t:page("/")
--   local surface = t:surface("home", props)   -- surface:inspect(), :find(id), :input(id, v), :activate(id)
local clank = require "clank"
local core = require "clank.core"
local json = require "clank.json"

local type, error, pairs, ipairs, next, tostring, setmetatable, getmetatable =
  type, error, pairs, ipairs, next, tostring, setmetatable, getmetatable
local pack, unpack = table.pack, table.unpack

local M = {}

local HOST = "127.0.0.1"

-- Runs fn(...) as a runtime task (handlers, loads and events may wait: clank.sleep, clank.db,
-- runners), driving the loop until it is done; its errors are raised again here.
local runner = clank.defineAction {
  name = "clank.test.run", description = "Runs a function as a task.",
  input = clank.schema.object {}, sideEffects = "none",
  handler = function(_, ctx) return { r = pack(pcall(ctx.fn, unpack(ctx.args, 1, ctx.args.n))) } end,
}

local function run(fn, ...)
  local r = runner({}, { fn = fn, args = pack(...) }).r
  if not r[1] then error(r[2], 0) end
  return unpack(r, 2, r.n)
end
M.run = run

local function request(method, target, body, extra)
  local path, query = target:match("^([^?]*)%??(.*)$")
  local q = {}
  for k, v in query:gmatch("([^&=]+)=([^&]*)") do q[k] = v end
  local headers = { host = HOST }
  if body then
    headers["content-type"] = "application/json"
    headers["content-length"] = tostring(#body)
  end
  for k, v in pairs(extra or {}) do headers[k] = v end
  return { method = method, url = target, path = path, query = q, headers = headers, body = body,
    scheme = "http" }
end

local function folder_of(path)
  return path:match("^(.*)/[^/]*$") or "."
end

-- The app's folder on package.path first, as clank-run puts it (its own modules: store.lua).
local function add_path(dir)
  local entry = dir .. "/?.lua;" .. dir .. "/?/init.lua;"
  if package.path:sub(1, #entry) ~= entry then package.path = entry .. package.path end
end

local App = {}
App.__index = App

-- test.app(path, opts?) → t. opts.context (a table, or a function of the request) replaces the
-- app's context for every call, page and surface.
function M.app(path, opts)
  if type(path) ~= "string" then error("clank.test.app: expected the path of app.lua", 2) end
  opts = opts or {}
  add_path(folder_of(path))
  local chunk, err = loadfile(path)
  if not chunk then error("clank.test.app: " .. tostring(err), 2) end
  local app = run(chunk) -- as clank-run loads it: its top-level code may wait (clank.db)
  local mt = type(app) == "table" and getmetatable(app)
  if not (mt and mt.__name == "clank.App") then
    error("clank.test.app: " .. path .. " must return clank.app { ... }", 2)
  end
  local reg = debug.getregistry()
  if reg["clank.app_secret"] == nil then reg["clank.app_secret"] = core.randomBytes(32) end
  local context = app.context
  if opts.context ~= nil then
    local given = opts.context
    context = type(given) == "function" and given or function() return given end
    local copy = setmetatable({}, mt)
    for k, v in pairs(app) do copy[k] = v end
    copy.context = context
    app = copy
  end
  local bridge_opts = {}
  for k, v in pairs(app.bridge or {}) do bridge_opts[k] = v end
  for _, k in ipairs { "name", "description", "views", "allowedOrigins", "actionTimeout" } do
    bridge_opts[k] = app[k]
  end
  bridge_opts.auth = app.auth ~= nil
  local bridge = clank.createAgentBridge(app.actions or {}, bridge_opts)
  local live
  if app.views and #app.views > 0 then
    live = require("clank.live").new { app = app, bridge = bridge, secret = reg["clank.app_secret"] }
  end
  return setmetatable({ app = app, bridge = bridge, live = live, context = context }, App)
end

-- t:call(name, input, { confirmed?, context? }) → answer, status, headers: what POST
-- /actions/<name> answers ({ ok = true, output = ... } or { ok = false, error = {...} }).
function App:call(name, input, opts)
  opts = opts or {}
  if input == nil then input = {} end
  -- an empty table is an object here, as a JSON body {} would be
  local body = (type(input) == "table" and next(input) == nil and not json.isArray(input)) and "{}"
    or json.encode(input)
  local req = request("POST", "/actions/" .. name, body,
    { ["x-clank-confirmation"] = opts.confirmed and "confirmed" or nil })
  local context = self.context
  if opts.context ~= nil then
    local given = opts.context
    context = type(given) == "function" and given or function() return given end
  end
  local res = run(function() return self.bridge:handle(req, context) end)
  local answer = res.body and res.body ~= "" and json.decode(res.body) or nil
  return answer, res.status, res.headers or {}
end

-- t:page(path) → status, html, headers: GET / or /views/<name>?props as a browser loads it.
function App:page(path)
  if not self.live then return 404, "Not found.", {} end
  local res = run(function() return self.live:page(request("GET", path or "/")) end)
  return res.status, res.body, res.headers or {}
end

local Surface = {}
Surface.__index = Surface

local function answer_of(res)
  local value = res.body and json.decode(res.body)
  if res.status >= 300 then
    local e = type(value) == "table" and value.error or {}
    error("clank.test: " .. tostring(e.code or res.status) .. ": " .. tostring(e.message or res.body), 0)
  end
  return value
end

-- t:surface(viewName, props?) → a surface (SPEC §9) on a view session mounted as an agent's
-- POST /__clank/views/<name>/sessions mounts one.
function App:surface(name, props)
  if not self.live then error("clank.test: the app has no views", 2) end
  local live = self.live
  local res = run(function()
    return live:http(request("POST", "/__clank/views/" .. name .. "/sessions", json.encode(props or {})))
  end)
  local value = answer_of(res)
  return setmetatable({ live = live, id = value.id, nodes = value.nodes }, Surface)
end

function Surface:http(method, rest, body, confirmed)
  local req = request(method, "/__clank/sessions/" .. self.id .. "/surface" .. rest,
    body and json.encode(body), { ["x-clank-confirmation"] = confirmed and "confirmed" or nil })
  local value = answer_of(run(function() return self.live:http(req) end))
  self.nodes = value.nodes
  return value
end

-- The nodes of the view now (inspect() of SPEC §9).
function Surface:inspect()
  return self:http("GET", "").nodes
end

-- The node whose id is id, or nil.
function Surface:find(id)
  local function walk(nodes)
    for _, n in ipairs(nodes or {}) do
      if n.id == id then return n end
      local found = walk(n.children)
      if found then return found end
    end
  end
  return walk(self:inspect())
end

-- input(id, value, { confirmed? }) → false when the control cannot take it (SPEC §9).
function Surface:input(id, value, opts)
  return self:http("POST", "/input", { id = id, value = value }, opts and opts.confirmed).ok
end

-- activate(id, { confirmed? }) → false when missing or disabled (SPEC §9).
function Surface:activate(id, opts)
  return self:http("POST", "/activate", { id = id }, opts and opts.confirmed).ok
end

return M
