# bench/lib.sh: what the single-server benches (metrics.sh, preempt.sh, static.sh) share.
# Source it after setting `root`; it sets `tmp` (removed on exit) and stops the server in `pid`.
#   start_clank APP [ENV=VALUE...]  clank-run pinned to $server_cpu on $port; waits for its line
#   stop_server                      SIGTERM and wait
#   cpu_ticks                        utime + stime of $pid and its children, in clock ticks
#   median                           the median of the numbers on stdin, one per line

server_cpu=${BENCH_SERVER_CPU:-0}
wrk_cpu=${BENCH_WRK_CPU:-1}
clank_run=${CLANK_RUN:-$root/build/clank-run}
hz=$(getconf CLK_TCK)

tmp=$(mktemp -d)
pid=
bench_cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap bench_cleanup EXIT

start_clank() { # start_clank APP [ENV=VALUE...]
  local app=$1
  shift
  env "$@" taskset -c "$server_cpu" "$clank_run" --quiet --no-watch --port "$port" "$app" \
    > "$tmp/out" 2> "$tmp/err" &
  pid=$!
  for _ in $(seq 100); do grep -q "serving" "$tmp/out" 2>/dev/null && return 0; sleep 0.05; done
  cat "$tmp/err" >&2
  exit 1
}

stop_server() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
}

cpu_ticks() {
  local t=0 p
  for p in "$pid" $(pgrep -P "$pid" || true); do
    t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
  done
  echo "$t"
}

median() {
  sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
