-- bench/pubsub.sh's app: apps/tasks as it is (its list view subscribes to tasks:<user>, its
-- actions publish it; CLANK_TASKS_DB, CLANK_TASKS_USER), plus two routes for the bench:
--   GET /bench/publish?kind=K&n=N  N calls in a loop in this handler → {"kind","n","seconds"}
--                                  (os.clock: CPU seconds of the process, which sits pinned
--                                  to one core). K: publish (clank.publish("bench:none")),
--                                  publish-payload (clank.publish("bench:none", { n = i })),
--                                  and their baselines, the same loops calling an empty Lua
--                                  function: empty, empty-payload. Nobody listens to bench:none.
--   GET /bench/pid                 the pid of the process serving this connection, so that the
--                                  client can tell workers apart (--workers 2)
local clank = require "clank"

-- apps/tasks by an absolute path: it finds its public/ folder from its own path
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
if here:sub(1, 1) ~= "/" then here = os.getenv("PWD") .. "/" .. here end
local tasks_dir = here .. "/../../apps/tasks"
package.path = tasks_dir .. "/?.lua;" .. package.path
local tasks = dofile(tasks_dir .. "/app.lua")

local publish, clock, tonumber = clank.publish, os.clock, tonumber

local function empty() end

-- One loop for both the publish and its baseline: only f differs.
local function run(f, n, payload)
  if payload then
    for i = 1, n do f("bench:none", { n = i }) end
  else
    for _ = 1, n do f("bench:none") end
  end
end

local kinds = {
  empty = { empty, false },
  ["empty-payload"] = { empty, true },
  publish = { publish, false },
  ["publish-payload"] = { publish, true },
}

local pid
local function own_pid()
  if not pid then
    local f = assert(io.open("/proc/self/stat"))
    pid = f:read("n")
    f:close()
  end
  return pid
end

local def = {}
for key, value in pairs(tasks) do
  def[key] = value
end
def.name = "tasks-pubsub-bench"
def.routes = {
  ["GET /bench/publish"] = function(request)
    local kind, n = kinds[request.query.kind], tonumber(request.query.n)
    if not kind or not n or n < 1 then
      return { status = 400, body = "kind=empty|empty-payload|publish|publish-payload&n=N\n" }
    end
    local t0 = clock()
    run(kind[1], n, kind[2])
    local seconds = clock() - t0
    return { status = 200, body = { kind = request.query.kind, n = n, seconds = seconds } }
  end,
  ["GET /bench/pid"] = function()
    return { status = 200, body = { pid = own_pid() } }
  end,
}
return clank.app(def)
