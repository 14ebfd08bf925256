-- wrk script for bench/db.sh's mixed workload: of every EVERY requests a thread sends, EVERY - 1
-- are POST /actions/tasks.list and the last one POST /actions/tasks.create (a fixed pattern, the
-- same for every server), with the confirmation header the tasks app's writes need; the figures
-- are bench/db/wrk.lua's. Arguments (after wrk's "--"):
--   LIST    a file whose bytes are tasks.list's application/json body
--   CREATE  the same for tasks.create
--   EVERY   one create in this many requests (default 5: 80 % lists, 20 % creates)
-- Its request() hook costs wrk its fast path (the request is handed over per call), which every
-- server measured with this script pays alike.
-- luacheck: globals wrk init request done
local list_request, create_request
local every, sent = 5, 0

local function read(path)
  local f = assert(io.open(path, "rb"))
  local bytes = (f:read("*a"):gsub("\n$", ""))
  f:close()
  return bytes
end

-- A request formatted once; wrk.headers.Host is set (host:port) before init runs.
local function post(path, body)
  return wrk.format("POST", path, {
    Host = wrk.headers["Host"],
    ["Content-Type"] = "application/json",
    ["X-Clank-Confirmation"] = "confirmed",
  }, body)
end

init = function(args)
  list_request = post("/actions/tasks.list", read(assert(args[1], "LIST body file")))
  create_request = post("/actions/tasks.create", read(assert(args[2], "CREATE body file")))
  every = tonumber(args[3]) or every
end

request = function()
  sent = sent + 1
  if sent % every == 0 then
    return create_request
  end
  return list_request
end

done = function(summary, latency)
  local e = summary.errors
  io.write(string.format(
    "wrk-report requests=%d duration_us=%d p50_us=%d p99_us=%d socket_errors=%d bad_status=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
