-- clank.password in clank-run: a hash or verify waits under the running task's own signal (no
-- signal passed), so the action timeout (100 ms in the fixture) and a client that goes away end
-- the wait at once with nil, ABORTED, while the hash (about 450 ms) finishes on its thread. The
-- server then stops cleanly with hashes still running (under the sanitizer build: no leak, no
-- report). The spec in process is spec/unit/io/password_spec.lua.
local server = require "helpers.server"
local http = require "helpers.http"

local JSON = { ["Content-Type"] = "application/json" }

-- Polls GET /seen?tag=tag until it says something else than "none", for up to 3 s; returns it
-- and how long after `since` it came.
local function seen(port, tag, since)
  local deadline, body = http.now() + 3
  repeat
    body = assert(http.get(port, "/seen?tag=" .. tag)).body
    if body ~= "none" then return body, http.now() - since end
    http.sleep(0.01)
  until http.now() > deadline
  return body, http.now() - since
end

describe("clank.password in clank-run", function()
  local s = server.for_describe(server.fixture("password"))

  it("hashes and verifies in a route", function()
    local res = assert(http.get(s.port, "/check?pw=hunter2"))
    assert.are.equal(200, res.status, res.body)
    assert.are.equal("true false false", res.body) -- verified, the wrong one, needsRehash
  end)

  it("ends the wait at the action timeout with ABORTED, not when the hash is done", function()
    local t0 = http.now()
    local res = assert(http.request(s.port, "POST", "/actions/slowHash", JSON, '{"tag":"timeout"}'))
    assert.are.equal(504, res.status, res.body)
    local body, after = seen(s.port, "timeout", t0)
    assert.are.equal("nil ABORTED aborted: timeout", body)
    assert.is_true(after < 0.3, "the handler went on " .. after .. " s after the request")
  end)

  it("ends a route's wait when its client goes away", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("GET", "/slow?tag=gone", {})))
    http.sleep(0.03)
    local t0 = http.now()
    conn:reset() -- gone: a reset, not a half-close
    local body, after = seen(s.port, "gone", t0)
    assert.are.equal("nil ABORTED aborted: disconnected", body)
    assert.is_true(after < 0.25, "the handler went on " .. after .. " s after the reset")
    -- and the server goes on answering, hashes included
    local res = assert(http.get(s.port, "/check?pw="))
    assert.are.equal(200, res.status, res.body)
    assert.are.equal("true false false", res.body)
  end)

  it("stops cleanly while abandoned hashes still run", function()
    for i = 1, 3 do
      local res = assert(http.request(s.port, "POST", "/actions/slowHash", JSON, '{"tag":"stop' .. i .. '"}'))
      assert.are.equal(504, res.status, res.body)
    end
    -- for_describe's teardown stops the server now: exit 0, and no sanitizer report
  end)
end)
