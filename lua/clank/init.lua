-- require "clank": the public API of the runtime, with the seed's names.
local core = require "clank.core"
local action = require "clank.action"
local bridge = require "clank.bridge"

local clank = {
  version = core.version,
  null = core.null,
  sleep = core.sleep,
  timeout = core.timeout,
  spawn = core.spawn,
  defineAction = action.defineAction,
  ActionError = action.ActionError,
  isActionError = action.isActionError,
  createAgentBridge = bridge.createAgentBridge,
  schema = require "clank.schema",
  json = require "clank.json",
  app = require "clank.app",
}

return clank
