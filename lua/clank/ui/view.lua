-- defineView and mount (SPEC §8): a component with a manifest and validated props, and a
-- mounted view that re-renders when the signals its render read change.
local schema = require "clank.schema"

local type, error, setmetatable, getmetatable, pairs, tostring =
  type, error, setmetatable, getmetatable, pairs, tostring

local M = {}

local VIEW_KEYS = { name = true, description = true, props = true, render = true }

local View = { __name = "clank.View" }
View.__index = View

-- View(props): props validated with their children set aside, then rendered.
function View.__call(self, props)
  if props ~= nil and type(props) ~= "table" then
    error("view " .. self.viewManifest.name .. ": props must be a table", 2)
  end
  local copy = {}
  for k, v in pairs(props or {}) do copy[k] = v end
  local children = copy.children
  copy.children = nil
  if self.props then self.props:parse(copy) end
  copy.children = children
  return self.render(copy)
end

function M.defineView(def)
  if type(def) ~= "table" then error("clank.defineView: expected a table", 2) end
  for k in pairs(def) do
    if not VIEW_KEYS[k] then error("clank.defineView: unknown option " .. tostring(k), 2) end
  end
  if type(def.name) ~= "string" or def.name == "" then
    error("clank.defineView: name must be a non-empty string", 2)
  end
  if def.description ~= nil and type(def.description) ~= "string" then
    error("clank.defineView: description must be a string", 2)
  end
  if type(def.render) ~= "function" then error("clank.defineView: render must be a function", 2) end
  if def.props ~= nil and not schema.isSchema(def.props) then
    error("clank.defineView: props must be a schema", 2)
  end
  local manifest = { name = def.name, description = def.description }
  if def.props then manifest.propsSchema = def.props:toJSONSchema() end
  return setmetatable({ viewManifest = manifest, props = def.props, render = def.render }, View)
end

local Mounted = { __name = "clank.MountedView" }
Mounted.__index = Mounted

function Mounted:tree() return self.current end

function Mounted:dispose()
  if self.stop then
    self.stop()
    self.stop = nil
  end
end

-- mount(View, props): renders now and again after each change of a signal the render read.
function M.mount(view, props)
  local callable = type(view) == "function" or (type(view) == "table" and getmetatable(view)
    and getmetatable(view).__call)
  if not callable then error("clank.mount: expected a view", 2) end
  local signal = require "clank.signal"
  local m = setmetatable({}, Mounted)
  m.stop = signal.effect(function() m.current = view(props) end)
  return m
end

return M
