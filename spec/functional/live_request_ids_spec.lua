-- Request ids on live views (SPEC §11: each live event and each surface call is a request; §13:
-- its id is in every log line about it): a line a click handler logs carries the event's own id
-- (neither the page's nor the WebSocket upgrade's), and one logged during a surface call the
-- x-request-id of that HTTP request.
local server = require "helpers.server"
local http = require "helpers.http"
local ws = require "helpers.websocket"
local cjson = require "cjson"
local socket = require "socket"

local function clicked_lines(s, n)
  local deadline = socket.gettime() + 5
  while true do
    local lines = {}
    for line in s:stderr():gmatch("[^\n]+") do
      local ok, entry = pcall(cjson.decode, line)
      if ok and entry.msg == "clicked" then lines[#lines + 1] = entry end
    end
    if #lines >= n or socket.gettime() > deadline then return lines end
    socket.sleep(0.02)
  end
end

describe("live views' log lines", function()
  after_each(server.kill_all)

  it("carry the id of the event or surface call that wrote them", function()
    local s = server.start(server.fixture("live_logs"), { args = { "--log", "json" } })
    local origin = "127.0.0.1:" .. s.port
    local page = assert(http.get(s.port, "/", { ["x-request-id"] = "page-1" }))
    local id = assert(page.body:match('data%-clank%-session="([^"]+)"'), page.body)
    local key = assert(page.body:match('data%-clank%-key="([^"]+)"'), page.body)
    local live = assert(ws.connect(s.port, "/__clank/sessions/" .. id .. "/live",
      { Host = origin, Origin = "http://" .. origin, ["x-request-id"] = "upgrade-1" }))
    local first = assert(live:next_json())
    for seq = 1, 2 do
      live:send_json { t = "event", seq = seq, v = first.v, key = key, type = "click" }
      assert.are.equal("html", assert(live:next_json()).t)
    end
    local res = assert(http.request(s.port, "POST", "/__clank/sessions/" .. id .. "/surface/activate",
      { ["content-type"] = "application/json", ["x-request-id"] = "surface-1" }, '{"id":"go"}'))
    assert.are.equal(200, res.status, res.body)
    local lines = clicked_lines(s, 3)
    assert.are.equal(3, #lines)
    local a, b = lines[1].requestId, lines[2].requestId
    assert.is_string(a)
    assert.is_string(b)
    for _, other in ipairs { "page-1", "upgrade-1", "surface-1", b } do assert.are_not.equal(other, a) end
    assert.truthy(a:match("^[%w._-]+$") and #a <= 64, a)
    assert.are.equal("surface-1", lines[3].requestId)
    live:close()
    assert.are.equal(0, s:stop())
  end)
end)
