-- defineView and mount (SPEC §8): a component with a manifest and validated props, and a
-- mounted view that re-renders when the signals its render read change.
local schema = require "clank.schema"
local memo = require "clank.ui.memo"
local signal = require "clank.signal"

local type, error, setmetatable, getmetatable, pairs, tostring =
  type, error, setmetatable, getmetatable, pairs, tostring

local M = {}

local VIEW_KEYS = { name = true, description = true, props = true, render = true, load = true,
  topics = true, auth = true }

local View = { __name = "clank.View" }
View.__index = View

-- Raises when props (children set aside, and key unless the view's props declare it) are not
-- what view takes.
local function validate(view, props)
  if not view.props then return end
  local children, key = props.children, props.key
  props.children = nil
  if not view.takesKey then props.key = nil end
  view.props:parse(props)
  props.children, props.key = children, key
end

-- View(props, data): props validated with their children set aside (and key, unless the
-- props declare it), then rendered with the data load returned (SPEC §11). Called without
-- data inside a mounted view's render, a call with the same props as last time whose signals
-- did not change returns its last tree (clank.ui.memo).
local EMPTY = {}

local function copy_props(props)
  local copy = {}
  for k, v in pairs(props) do copy[k] = v end
  return copy
end

local function call(self, props, data)
  local copy = copy_props(props or EMPTY)
  validate(self, copy)
  return self.render(copy, data)
end

local memo_call = memo.call

-- (A render of a list calls this once per row: memo.call is reached in one call.)
function View.__call(self, props, data)
  if props ~= nil and type(props) ~= "table" then
    error("view " .. self.viewManifest.name .. ": props must be a table", 2)
  end
  if data == nil then
    local tree, memoized = memo_call(self, props or EMPTY, copy_props, validate)
    if memoized then return tree end
  end
  return call(self, props, data)
end

-- The view a mount renders, rendered (never a call memo matches: it renders again whenever
-- its mount does, setData's "render again" among them).
local function render_mounted(view, props, data)
  if getmetatable(view) == View then
    if props ~= nil and type(props) ~= "table" then
      error("view " .. view.viewManifest.name .. ": props must be a table", 2)
    end
    return call(view, props, data)
  end
  return view(props, data)
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
  if def.load ~= nil and type(def.load) ~= "function" then
    error("clank.defineView: load must be a function", 2)
  end
  if def.topics ~= nil and type(def.topics) ~= "function" then
    error("clank.defineView: topics must be a function", 2)
  end
  if def.props ~= nil and not schema.isSchema(def.props) then
    error("clank.defineView: props must be a schema", 2)
  end
  if def.auth ~= nil and def.auth ~= "public" and def.auth ~= "user" then
    error("clank.defineView: auth must be \"public\" or \"user\"", 2)
  end
  local manifest = { name = def.name, description = def.description }
  if def.props then manifest.propsSchema = def.props:toJSONSchema() end
  local properties = manifest.propsSchema and manifest.propsSchema.properties
  return setmetatable({ viewManifest = manifest, props = def.props, render = def.render,
    load = def.load, topics = def.topics, auth = def.auth,
    takesKey = type(properties) == "table" and properties.key ~= nil }, View)
end

local Mounted = { __name = "clank.MountedView" }
Mounted.__index = Mounted

function Mounted:tree() return self.current end

-- Replaces render's second argument (a re-load's data), and renders again even when it is the
-- same value (what render reads besides its signals may have changed: a publish said so). The
-- components it calls with equal props keep their trees (clank.ui.memo).
function Mounted:setData(data)
  signal.batch(function()
    self.data.value = data
    self.tick.value = self.tick.value + 1
  end)
end

function Mounted:dispose()
  if self.stop then
    self.stop()
    self.stop = nil
  end
  if self.watch then
    self.watch()
    self.watch = nil
  end
end

local function trace(err) return memo.traceback(err, 2) end

-- Renders now (the version after `version`) and again after each change of a signal the
-- render read.
function Mounted:start(version)
  local view, props, on_render, on_error = self.view, self.props, self.onRender, self.onError
  self.version = version
  self.stop = signal.effect(function()
    if self.current ~= nil and not self.failed and self.tick:peek() == self.renderedTick then
      -- no setData since the last render, which did not fail: when only components' trees
      -- changed, they go where the old ones are, and the render does not run (what this run
      -- reads is then what the last one did: memo.swapChanged keeps it, untracked until then)
      local swapped, tree, olds, news = pcall(memo.swapChanged, self.scope, self.current)
      if swapped and tree ~= nil then
        self.current = tree
        self.version = self.version + 1
        self.swap = { version = self.version, olds = olds, news = news }
        if on_render then on_render(tree, self.version) end
        return
      end
    end
    self.swap = false
    local data = self.data.value
    local tick = self.tick.value -- setData's "render again" (data changes only with it)
    local before = self.current
    if not self.rendered or not on_error then -- the first render raises; a woken one does not
      self.current = memo.within(self.scope, render_mounted, view, props, data)
    else
      local ok, tree = xpcall(memo.within, trace, self.scope, render_mounted, view, props, data)
      if not ok then
        self.failed = true
        on_error(tree)
        return
      end
      self.current = tree
    end
    self.failed, self.rendered, self.renderedTick = false, true, tick
    self.version = self.version + 1
    -- a render that made components (a list of rows) and gave the last tree again but for some
    -- of their trees is, for the page, the update a swap is (a list read again, one row changed)
    if before ~= nil and memo.madeCalls(self.scope) then
      local olds, news = memo.treeSwaps(before, self.current)
      if olds and #olds > 0 then self.swap = { version = self.version, olds = olds, news = news } end
    end
    if self.version > 1 and on_render then on_render(self.current, self.version) end
  end)
end

-- Lets go of the tree and of what made it (its components' trees and computeds): only the
-- signals the render read are watched. Their first change calls woken() (it must not wait) and
-- wakes the view; so does wake(). → false when it was not rendering (asleep, disposed).
function Mounted:hibernate(woken)
  if not self.stop then return false end
  local sources = signal.sources(self.stop)
  self.stop()
  self.stop, self.current, self.scope = nil, nil, memo.scope()
  local first = true
  self.watch = signal.effect(function()
    for i = 1, #sources do local _ = sources[i].value end
    if first then
      first = false
    elseif self.watch then
      self:wake(true) -- from inside this run: disposing it now is safe (signal.lua)
      woken()
    end
  end)
  return true
end

-- Renders again after hibernate: as a new version when changed (a signal it read changed),
-- else as the version it was (the same tree it let go of).
function Mounted:wake(changed)
  if not self.watch then return end
  self.watch()
  self.watch = nil
  self:start(changed and self.version or self.version - 1)
end

function Mounted:asleep() return self.watch ~= nil end

-- mount(View, props, options): renders now and again after each change of a signal the render
-- read. options (all optional): data (render's second argument), onRender(tree, version) after
-- each re-render, and onError(err): a re-render that raises then keeps the previous tree and
-- passes the error (with a traceback when it is a string) there instead of raising to the
-- writer. The first render always raises.
function M.mount(view, props, options)
  local callable = type(view) == "function" or (type(view) == "table" and getmetatable(view)
    and getmetatable(view).__call)
  if not callable then error("clank.mount: expected a view", 2) end
  if options ~= nil and type(options) ~= "table" then error("clank.mount: options must be a table", 2) end
  options = options or {}
  -- data is a signal so that setData renders again; a new table is always a change
  local m = setmetatable({ version = 0, data = signal.signal(options.data), tick = signal.signal(0),
    scope = memo.scope(), view = view, props = props, onRender = options.onRender,
    onError = options.onError }, Mounted)
  m:start(0)
  return m
end

return M
