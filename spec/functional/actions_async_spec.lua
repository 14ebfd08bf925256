-- Waiting in every place user code runs, over HTTP, and the abort signal when
-- the client goes away (SPEC §1, §4, §12, §13).
local server = require "helpers.server"
local http = require "helpers.http"
local socket = require "socket"

local function post(port, target, body)
  return assert(http.request(port, "POST", target, { ["Content-Type"] = "application/json" }, body))
end

local assert_ok = require("helpers.bridge").assert_ok

describe("clank-run async actions", function()
  local s = server.for_describe(server.fixture("bridge_async"))

  it("lets authorize wait", function()
    assert_ok(post(s.port, "/actions/wait.authorize", '{"allow":true}'), '{"allowed":true}')
    local res = post(s.port, "/actions/wait.authorize", '{"allow":false}')
    assert.are.equal(403, res.status)
    assert.are.equal('{"error":{"code":"FORBIDDEN","message":"Action is not authorized."},"ok":false}', res.body)
  end)

  it("lets a handler wait", function()
    local t0 = socket.gettime()
    assert_ok(post(s.port, "/actions/wait.handler", '{"ms":100}'), '{"slept":100}')
    assert.is_true(socket.gettime() - t0 >= 0.09)
  end)

  it("lets context wait", function()
    assert_ok(post(s.port, "/actions/wait.context", "{}"), '{"user":"ann"}')
  end)

  it("lets a route (and its context) wait", function()
    local res = assert(http.get(s.port, "/wait-route"))
    assert.are.equal(200, res.status)
    assert.are.equal("waited for ann", res.body)
  end)

  it("lets a handler call another action that waits", function()
    assert_ok(post(s.port, "/actions/wait.nested", '{"n":3}'), '{"n":7}')
  end)

  it("serves other requests while handlers wait", function()
    local conns = {}
    local h = { ["Content-Type"] = "application/json" }
    local t0 = socket.gettime()
    for i = 1, 3 do
      conns[i] = assert(http.connect(s.port))
      assert(conns[i]:send(http.build("POST", "/actions/wait.handler", h, '{"ms":400}')))
    end
    local quick = assert(http.get(s.port, "/wait-route"))
    assert.are.equal("waited for ann", quick.body)
    assert.is_true(socket.gettime() - t0 < 0.35, "a route waited for the sleeping handlers")
    for i = 1, 3 do
      assert_ok(assert(conns[i]:read_response()), '{"slept":400}')
      conns[i]:close()
    end
    local elapsed = socket.gettime() - t0
    assert.is_true(elapsed < 1.0, "three 400 ms handlers took " .. elapsed .. " s: they did not overlap")
  end)

  it("aborts the signal with reason disconnected when the client goes away, and keeps serving", function()
    assert.are.equal("none onabort=none", assert(http.get(s.port, "/hang")).body)
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("POST", "/actions/hang", { ["Content-Type"] = "application/json" }, "{}")))
    local state
    for _ = 1, 100 do
      state = assert(http.get(s.port, "/hang")).body
      if state ~= "none onabort=none" then break end
      http.sleep(0.01)
    end
    assert.are.equal("running onabort=none", state)
    conn:reset() -- gone: a reset, not a half-close
    local deadline = socket.gettime() + 3
    repeat
      http.sleep(0.05)
      state = assert(http.get(s.port, "/hang")).body
    until state:find("^aborted=") or socket.gettime() > deadline
    assert.are.equal("aborted=true reason=disconnected onabort=disconnected", state)
    assert_ok(post(s.port, "/actions/wait.handler", '{"ms":1}'), '{"slept":1}')
  end)
end)
