#!/usr/bin/env bash
# bench/preempt.sh: what preemption (SPEC §13: the watchdog thread, the per-resume bookkeeping and
# the CPU accounting) costs on the request path. The same clank-run build serves bench/app.lua
# twice, pinned to one core, once as shipped and once with the watchdog off
# (CLANK_TEST_LIMITS=preempt=0, which exists only for this measurement); wrk drives
# POST /actions/tasks.create with the valid body (and GET /hello) from another core, in
# interleaved rounds. Prints req/s per server CPU-second both ways (medians) and the cost;
# the target (issue 12) is at most 2 %.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
duration=${BENCH_DURATION:-5}
rounds=${BENCH_ROUNDS:-3}
connections=${BENCH_CONNECTIONS:-50}
port=${BENCH_PORT:-18490}

command -v wrk >/dev/null || bash "$root/vendor/deps.sh" --bench
. "$here/lib.sh"

body=$(cat "$here/fixtures/valid.request.json")
cat > "$tmp/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.body = [==[$body]==]
LUA


# per_cpu WORKLOAD: requests per CPU-second of the server over one wrk run
per_cpu() {
  local args=() path=/hello
  [ "$1" = valid ] && args=(-s "$tmp/post.lua") && path=/actions/tasks.create
  local t0 t1 rps
  t0=$(cpu_ticks)
  rps=$(taskset -c "$wrk_cpu" wrk -t1 -c"$connections" -d"${duration}s" "${args[@]}" \
    "http://127.0.0.1:$port$path" | awk '/Requests\/sec/ {print $2}')
  t1=$(cpu_ticks)
  awk -v r="$rps" -v d="$duration" -v c="$((t1 - t0))" -v hz="$hz" \
    'BEGIN { printf "%.0f\n", r * d / (c / hz) }'
}

for w in valid hello; do
  : > "$tmp/on.$w"
  : > "$tmp/off.$w"
done
for i in $(seq "$rounds"); do
  # the order alternates, so that whatever drifts within a round (clocks, the other core) hits
  # both modes alike
  order="off on"
  [ $((i % 2)) = 0 ] && order="on off"
  for mode in $order; do
    start_clank "$here/app.lua" "CLANK_TEST_LIMITS=preempt=$([ $mode = on ] && echo 1 || echo 0)"
    taskset -c "$wrk_cpu" wrk -t1 -c"$connections" -d2s "http://127.0.0.1:$port/hello" > /dev/null
    for w in valid hello; do per_cpu "$w" >> "$tmp/$mode.$w"; done
    stop_server
  done
done

printf '%-8s %14s %14s %8s\n' workload "off (req/cpu-s)" "on (req/cpu-s)" cost
for w in valid hello; do
  off=$(median < "$tmp/off.$w")
  on=$(median < "$tmp/on.$w")
  printf '%-8s %14s %14s %7.1f%%\n' "$w" "$off" "$on" "$(awk -v a="$off" -v b="$on" 'BEGIN { print (a - b) / a * 100 }')"
done
echo "target: a cost of at most 2 % (issue 12)"
