-- require "clank": the public API of the runtime, with the seed's names.
local core = require "clank.core"

local clank = {
  version = core.version,
  null = core.null,
  sleep = core.sleep,
  schema = require "clank.schema",
  json = require "clank.json",
  app = require "clank.app",
}

return clank
