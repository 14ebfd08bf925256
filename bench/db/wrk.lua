-- wrk script for bench/db.sh: bench/wrk-report.lua's figures, with the confirmation header the
-- tasks app's writes need. Arguments (after wrk's "--"):
--   METHOD  GET or POST (default GET)
--   BODY    a file whose bytes are sent as an application/json body, or "-" for none
-- No request or response hook: wrk formats the request once and keeps its fast path.
-- luacheck: globals wrk init done
init = function(args)
  wrk.method = args[1] or "GET"
  local body_file = args[2]
  if body_file and body_file ~= "-" then
    local f = assert(io.open(body_file, "rb"))
    wrk.body = (f:read("*a"):gsub("\n$", ""))
    f:close()
    wrk.headers["Content-Type"] = "application/json"
    wrk.headers["X-Clank-Confirmation"] = "confirmed"
  end
end

done = function(summary, latency)
  local e = summary.errors
  io.write(string.format(
    "wrk-report requests=%d duration_us=%d p50_us=%d p99_us=%d socket_errors=%d bad_status=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
