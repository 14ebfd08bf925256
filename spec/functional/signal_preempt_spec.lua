-- Effects and computeds (SPEC §7) run by requests at once, each longer than a preemption slice
-- (SPEC §13): every request is answered, none fails. Signal tracking belongs to the Lua state,
-- so a tracked run is not preempted, and a wait inside one fails instead of suspending it.
local server = require "helpers.server"
local http = require "helpers.http"

describe("signal tracking under preemption in clank-run", function()
  local s = server.for_describe(server.fixture("signal_preempt"))

  it("answers 8 concurrent requests whose effects each run longer than a slice", function()
    local conns = {}
    for i = 1, 8 do
      conns[i] = assert(http.connect(s.port))
      assert(conns[i]:send("GET /spin HTTP/1.1\r\nHost: 127.0.0.1:" .. s.port .. "\r\n\r\n"))
    end
    for i = 1, 8 do
      local res = assert(conns[i]:read_response({ timeout = 20 }))
      assert.are.equal(200, res.status, res.body .. "\n" .. s:stderr())
      assert.are.equal("spun", res.body)
      conns[i]:close()
    end
  end)

  it("refuses a wait inside an effect instead of suspending it mid-tracking", function()
    local res = assert(http.get(s.port, "/wait-in-effect"))
    assert.are.equal(200, res.status)
    assert.are_not.equal("waited", res.body)
    assert.truthy(res.body:find("cannot wait here", 1, true), res.body)
  end)
end)
