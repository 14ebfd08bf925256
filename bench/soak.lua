-- wrk script for bench/soak.sh: a fixed mix of requests to fuzz/app/app.lua, each marked with
-- an x-request-id naming its kind (clank-run echoes it), so that every answer is checked
-- against what its own request expects, whatever the order answers arrive in.
-- Arguments (after wrk's "--"): the number of answers this run stops after (all threads), the
-- number of threads, and a path prefix: a thread that has its share writes PREFIX<n> and stops
-- (wrk itself would sleep out its -d; bench/soak.sh interrupts it once every thread is done).
-- done() prints one line of key=value figures for the shell; latencies are in microseconds.
-- luacheck: globals wrk setup init request response done soak_counts soak_failed soak_unexpected
-- luacheck: globals soak_id
local kinds = {
  -- id, expected status, method, path, headers, body
  { "v", 200, "POST", "/actions/notes.find", {}, '{"q":"soak test","limit":3}' },
  { "w", 200, "POST", "/actions/notes.add", { ["x-clank-confirmation"] = "confirmed" },
    '{"title":"soak","tags":["a"],"size":1}' },
  { "i", 422, "POST", "/actions/notes.find", {}, '{"q":5,"extra":true}' },
  { "c", 428, "POST", "/actions/notes.add", {}, '{"title":"soak","size":null}' },
  { "l", 413, "POST", "/actions/notes.find", {}, '{"q":"' .. string.rep("a", 2000) .. '"}' },
  { "n", 404, "GET", "/soak/nowhere", {}, nil },
}
-- Of every 10 requests: 5 valid (4 find, 1 add), then one of each failure, and one more valid.
local mix = { 1, 3, 1, 4, 2, 5, 1, 6, 1, 1 }

local threads = {}
function setup(thread)
  threads[#threads + 1] = thread
  thread:set("soak_id", #threads)
end

-- Per thread; done() reads them from each thread (thread:get reads globals).
soak_counts, soak_failed, soak_unexpected = {}, 0, 0
local formatted, expected, quota, answered, next_one, marker = {}, {}, 0, 0, 0, nil

function init(args)
  local total = tonumber(args[1] or "1000")
  local nthreads = tonumber(args[2] or "1")
  quota = math.ceil(total / nthreads)
  marker = args[3]
  for i, k in ipairs(kinds) do
    local headers = { ["x-request-id"] = "soak-" .. k[1] }
    for name, value in pairs(k[5]) do headers[name] = value end
    if k[6] then headers["content-type"] = "application/json" end
    formatted[i] = wrk.format(k[3], k[4], headers, k[6])
    expected["soak-" .. k[1]] = k[2]
  end
end

function request()
  next_one = next_one % #mix + 1
  return formatted[mix[next_one]]
end

function response(status, headers)
  local id = headers["x-request-id"]
  local want = expected[id]
  if want == nil or status ~= want then
    soak_unexpected = soak_unexpected + 1
    if want == 200 or want == nil then soak_failed = soak_failed + 1 end
  end
  soak_counts[status] = (soak_counts[status] or 0) + 1
  answered = answered + 1
  if answered == quota then
    if marker then
      local f = io.open(marker .. soak_id, "w")
      if f then f:close() end
    end
    wrk.thread:stop()
  end
end

function done(summary, latency)
  local by_status, failed, odd = {}, 0, 0
  for _, t in ipairs(threads) do
    failed = failed + t:get("soak_failed")
    odd = odd + t:get("soak_unexpected")
    for k, v in pairs(t:get("soak_counts")) do by_status[k] = (by_status[k] or 0) + v end
  end
  local parts = {}
  for k, v in pairs(by_status) do parts[#parts + 1] = k .. ":" .. math.floor(v) end
  table.sort(parts)
  local e = summary.errors
  io.write(string.format(
    "soak-report requests=%d duration_us=%d p50_us=%d p99_us=%d socket_errors=%d failed_valid=%d"
      .. " unexpected=%d statuses=%s\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, failed, odd, table.concat(parts, ",")))
end
