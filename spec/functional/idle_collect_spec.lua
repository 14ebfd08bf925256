-- Collection in idle time (issue 29, doc/deploy.md "Memory"): Lua collects as it allocates, so
-- garbage a burst of work left in the heap stays there, counted by the memory cap, until
-- something allocates as much again; and a cycle that a burst meets is paid for inside it.
-- The host runs a cycle in slices while its loop has nothing else to do, once the heap grew
-- half again over what the last cycle left (runtime/host/idle_gc.c). Against the real
-- clank-run serving spec/fixtures/apps/idle_collect.
local server = require "helpers.server"
local http = require "helpers.http"
local socket = require "socket"

local function counter(s, name) return http.metric(s.port, name) end

local function get(s, path)
  local res = assert(http.get(s.port, path))
  assert.are.equal(200, res.status, res.body)
  return res.body
end

describe("a quiet server whose heap grew half again", function()
  local s = server.for_describe(server.fixture("idle_collect"))

  it("collects the garbage in idle time, with no request making it", function()
    local kept_kib = tonumber(get(s, "/keep"))
    -- the host's tick (every second) takes what the heap holds now as its base
    socket.sleep(2.5)
    local cycles = counter(s, "clank_lua_idle_collections_total")
    local grown_kib = tonumber(get(s, "/garbage"))
    assert.is_true(grown_kib > kept_kib * 1.5 and grown_kib < kept_kib * 2,
      ("the fixture's heap: %d KiB kept, %d with the garbage"):format(kept_kib, grown_kib))
    -- Lua's own next cycle would start at twice what it kept: without the host's, the heap
    -- keeps the garbage however long the server stays quiet
    local deadline, bytes = socket.gettime() + 20
    repeat
      socket.sleep(0.5)
      bytes = counter(s, "clank_lua_memory_bytes")
    until bytes < (kept_kib + 8 * 1024) * 1024 or socket.gettime() > deadline
    assert.is_true(bytes < (kept_kib + 8 * 1024) * 1024,
      ("the heap holds %d KiB: %d kept, %d with the garbage"):format(bytes // 1024, kept_kib,
        grown_kib))
    assert.is_true(counter(s, "clank_lua_idle_collections_total") > cycles)
    assert.are.equal("pong", get(s, "/ping"))
  end)

  it("does not collect again while the heap stays as it is", function()
    local cycles = counter(s, "clank_lua_idle_collections_total")
    for _ = 1, 6 do
      socket.sleep(0.5)
      get(s, "/ping")
    end
    assert.are.equal(cycles, counter(s, "clank_lua_idle_collections_total"))
  end)
end)
