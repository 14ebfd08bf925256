-- wrk script for bench/http.sh: no request or response hooks, so wrk keeps its
-- fast path; done() prints one line of key=value figures for the shell to read.
-- Latencies are in microseconds, the duration too.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "wrk-report requests=%d duration_us=%d p50_us=%d p99_us=%d socket_errors=%d bad_status=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
