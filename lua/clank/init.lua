-- require "clank": the public API of the runtime, with the seed's names.
local core = require "clank.core"
local action = require "clank.action"
local bridge = require "clank.bridge"
local ui = require "clank.ui"

local clank = {
  version = core.version,
  null = core.null,
  sleep = core.sleep,
  timeout = core.timeout,
  spawn = core.spawn,
  publish = require("clank.pubsub").publish,
  subscribe = require("clank.pubsub").subscribe,
  defineAction = action.defineAction,
  ActionError = action.ActionError,
  isActionError = action.isActionError,
  createAgentBridge = bridge.createAgentBridge,
  actionRunner = require("clank.runner").actionRunner,
  signal = require "clank.signal",
  schema = require "clank.schema",
  json = require "clank.json",
  cookies = require "clank.cookies",
  sse = require "clank.sse",
  db = require "clank.db",
  fetch = require "clank.fetch",
  app = require "clank.app",
  h = ui.h,
  raw = ui.raw,
  render = ui.render,
  defineView = ui.defineView,
  mount = ui.mount,
  createAgentSurface = ui.createAgentSurface,
  createForm = ui.createForm,
}

-- Loaded on first use: clank.auth (sign-in, issue 30) pulls in clank.password and the pages.
-- clank.jobs and clank.defineJob (durable jobs, issue 32) likewise.
local lazy = { auth = "clank.auth", jobs = "clank.jobs" }

return setmetatable(clank, {
  __index = function(t, key)
    if key == "defineJob" then return t.jobs.defineJob end
    local name = lazy[key]
    if name == nil then return nil end
    local module = require(name)
    rawset(t, key, module)
    return module
  end,
})
