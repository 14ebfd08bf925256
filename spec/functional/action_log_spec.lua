-- ctx.log and ctx.progress of an action called over the bridge, through the real clank-run
-- (SPEC §6: "Outside MCP both go to the log."; §13: a request's id is in every log line about
-- it). ctx.progress was written at debug level, which the log drops unless CLANK_DEBUG is set:
-- outside MCP it was lost. Now each call is one info line with the request's id, as ctx.log's.
local server = require "helpers.server"
local http = require "helpers.http"
local files = require "helpers.files"
local cjson = require "cjson"

-- The JSON log lines whose msg starts with prefix, once there are n (or what there is after 5 s).
local function lines_of(s, prefix, n)
  local found
  files.eventually(5, function()
    found = {}
    for line in s:stderr():gmatch("[^\n]+") do
      local ok, entry = pcall(cjson.decode, line)
      if ok and type(entry) == "table" and type(entry.msg) == "string" and entry.msg:sub(1, #prefix) == prefix then
        found[#found + 1] = { level = entry.level, requestId = entry.requestId, msg = entry.msg }
      end
    end
    return #found >= n
  end)
  return found
end

local function call(s, name, id)
  local res = assert(http.request(s.port, "POST", "/actions/" .. name,
    { ["content-type"] = "application/json", ["x-request-id"] = id }, "{}"))
  assert.are.equal(200, res.status, res.body)
end

describe("an action's ctx.log and ctx.progress outside MCP", function()
  local s
  setup(function()
    s = server.start(server.fixture("mcp_notify"), { args = { "--log", "json" } })
  end)
  teardown(server.kill_all)

  it("writes each ctx.progress as one info line with the request id", function()
    call(s, "notify.progress", "progress-1")
    assert.are.same({
      { level = "info", requestId = "progress-1", msg = "action notify.progress: progress 1/3 step 1" },
      { level = "info", requestId = "progress-1", msg = "action notify.progress: progress 2/3 step 2" },
      { level = "info", requestId = "progress-1", msg = "action notify.progress: progress 3/3 step 3" },
    }, lines_of(s, "action notify.progress:", 3))
  end)

  it("writes ctx.log at its level with the request id (debug only with CLANK_DEBUG)", function()
    call(s, "notify.logs", "logs-1")
    assert.are.same({
      { level = "info", requestId = "logs-1", msg = "action notify.logs: info line" },
      { level = "warn", requestId = "logs-1", msg = "action notify.logs: warning line" },
      { level = "error", requestId = "logs-1", msg = 'action notify.logs: error line {"code":7}' },
    }, lines_of(s, "action notify.logs:", 3))
  end)
end)
