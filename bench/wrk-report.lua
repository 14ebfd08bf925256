-- wrk script for bench/http.sh. Arguments (after wrk's "--"):
--   METHOD  GET or POST (default GET)
--   BODY    a file whose bytes (less one final newline) are sent as an
--           application/json body, or "-" for none
--   DEPTH   requests per write (default 1): above 1, DEPTH copies of the request
--           go out in one write, as wrk's own pipeline.lua example does
-- With DEPTH 1 no request or response hook is defined, so wrk formats the
-- request once and keeps its fast path. done() prints one line of key=value
-- figures for the shell to read; latencies and the duration are in microseconds.
-- luacheck: globals wrk init request done
init = function(args)
  wrk.method = args[1] or "GET"
  local body_file, depth = args[2], tonumber(args[3] or "1")
  if body_file and body_file ~= "-" then
    local f = assert(io.open(body_file, "rb"))
    wrk.body = (f:read("*a"):gsub("\n$", ""))
    f:close()
    wrk.headers["Content-Type"] = "application/json"
  end
  if depth > 1 then
    local batch = string.rep(wrk.format(), depth)
    request = function() return batch end
  end
end

done = function(summary, latency)
  local e = summary.errors
  io.write(string.format(
    "wrk-report requests=%d duration_us=%d p50_us=%d p99_us=%d socket_errors=%d bad_status=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
