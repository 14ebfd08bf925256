#!/usr/bin/env bash
# bench/workers.sh: what --workers 2 costs per request against --workers 1 (SPEC §13, issue 15:
# "the server's total CPU per request within 5 % of one worker's, and requests spread over both
# workers"). clank-run serves bench/app.lua; wrk POSTs a valid tasks.create body. For each worker
# count, interleaved over rounds: req/s, and the server's CPU per request (utime + stime of the
# master and its workers, from /proc, around the run). With 2 workers it also prints the split
# over the workers: of their CPU time, and of wrk's connections (ss, sampled mid-run). The server
# runs on BENCH_SERVER_CPUS (default "0": both counts on the same one core, so that CPU per
# request compares like with like; "0,1" lets 2 workers use both cores), wrk on BENCH_WRK_CPU.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
duration=${BENCH_DURATION:-5}   # seconds per measurement
rounds=${BENCH_ROUNDS:-3}       # measurements per worker count
connections=${BENCH_CONNECTIONS:-50}
port=${BENCH_PORT:-18481}
server_cpus=${BENCH_SERVER_CPUS:-0}

. "$here/lib.sh"

url=http://127.0.0.1:$port
body=$tmp/valid.json
text=$(<"$here/fixtures/valid.request.json")
printf '%s' "$text" > "$body"

start_workers() { # start_workers N
  : > "$tmp/out" # before the start: the last run's line must not count
  taskset -c "$server_cpus" "$clank_run" --quiet --no-watch --workers "$1" --port "$port" \
    "$here/app.lua" > "$tmp/out" 2> "$tmp/err" &
  pid=$!
  for _ in $(seq 200); do grep -q "serving" "$tmp/out" 2>/dev/null && return 0; sleep 0.05; done
  cat "$tmp/err" >&2
  exit 1
}

workers_of() { pgrep -P "$pid" | sort -n || true; }
ticks_of() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# run N: one measurement; appends "req/s cpu_us_per_request" to $tmp/rN, and for N > 1 the
# workers' CPU shares and connection counts to $tmp/splitN.
run() {
  local n=$1 before after requests rate w
  local -A wt0
  for w in $(workers_of); do wt0[$w]=$(ticks_of "$w"); done
  before=$(cpu_ticks)
  taskset -c "$wrk_cpu" wrk -t1 -c"$connections" -d"${duration}s" --timeout 5s \
    -s "$here/wrk-report.lua" "$url/actions/tasks.create" -- POST "$body" 1 > "$tmp/wrk" 2>&1 &
  local wrk=$!
  sleep "$(awk -v d="$duration" 'BEGIN { print d / 2 }')"
  local conns=""
  for w in $(workers_of); do
    conns+="$(ss -Htnp state established "( sport = :$port )" | grep -c "pid=$w," || true) "
  done
  wait "$wrk"
  after=$(cpu_ticks)
  requests=$(sed -n 's/.* requests=\([0-9]*\).*/\1/p' "$tmp/wrk")
  bad=$(sed -n 's/.* bad_status=\([0-9]*\).*/\1/p' "$tmp/wrk")
  [ "${bad:-1}" = 0 ] || { echo "wrk saw non-200 answers:" >&2; cat "$tmp/wrk" >&2; exit 1; }
  rate=$(awk -v r="$requests" -v d="$duration" 'BEGIN { printf "%.0f", r / d }')
  echo "$rate $(awk -v t=$((after - before)) -v hz="$hz" -v r="$requests" \
    'BEGIN { printf "%.2f", t / hz * 1e6 / r }')" >> "$tmp/r$n"
  if [ "$n" -gt 1 ]; then
    local shares="" total=0 d
    local -A dt
    for w in "${!wt0[@]}"; do dt[$w]=$(( $(ticks_of "$w") - wt0[$w] )); total=$((total + dt[$w])); done
    for w in $(printf '%s\n' "${!dt[@]}" | sort -n); do
      shares+="$(awk -v a="${dt[$w]}" -v t="$total" 'BEGIN { printf "%.0f%%", t ? a * 100 / t : 0 }') "
    done
    echo "cpu ${shares}connections ${conns}" >> "$tmp/split$n"
  fi
}

for n in 1 2; do : > "$tmp/r$n"; : > "$tmp/split$n"; done
for i in $(seq "$rounds"); do
  for n in 1 2; do
    start_workers "$n"
    taskset -c "$wrk_cpu" wrk -t1 -c"$connections" -d1s -s "$here/wrk-report.lua" \
      "$url/actions/tasks.create" -- POST "$body" 1 > /dev/null # warm-up
    run "$n"
    stop_server
  done
done

col() { awk -v c="$1" '{ print $c }' "$2" | median; }
r1=$(col 1 "$tmp/r1"); c1=$(col 2 "$tmp/r1")
r2=$(col 1 "$tmp/r2"); c2=$(col 2 "$tmp/r2")
echo "POST /actions/tasks.create (valid), $connections connections, $rounds x ${duration}s per count (interleaved),"
echo "server on cpus $server_cpus, wrk on cpu $wrk_cpu; medians"
printf '  %-12s %10s %16s\n' workers req/s "CPU us/request"
printf '  %-12s %10.0f %16.2f\n' 1 "$r1" "$c1"
printf '  %-12s %10.0f %16.2f\n' 2 "$r2" "$c2"
awk -v a="$c1" -v b="$c2" 'BEGIN { printf "  CPU per request, 2 workers / 1: %.3f (target <= 1.05)\n", b / a }'
echo "  split over the 2 workers (per round): "
sed 's/^/    /' "$tmp/split2"
