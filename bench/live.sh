#!/usr/bin/env bash
# Live views (issues 11 and 29), each beside an action call in the same run:
#   round trips  an action call (POST /actions/tasks.list, 100 rows), a live event on the
#                unkeyed 100-row list (/: the whole html back, the historical baseline) and one
#                on the keyed list (/views/rows, rows a component, ?diffs=1: one row changes, a
#                diff back): server CPU per round trip, p50/p99, the update frame's bytes
#   fan-out      BENCH_FANOUT sessions of /views/rows watching rows:bench; once the server is
#                quiet after opening them (the collection cycle the opening started has run in
#                its idle time), rows.rename changes one row and publishes, BENCH_ROUNDS times:
#                the time from the POST until every session has its push
#   scale        BENCH_SESSIONS open live sessions of /views/small, of / and of /views/rows:
#                RSS per session and a probe's event round trip while they are open
# then a table: measure | value | target | met?. The server runs on core 0, the client (Node,
# ws) on core 1.
#   bench/live.sh                              # about three to four minutes
#   BENCH_SECONDS=3 BENCH_SESSIONS=2000 BENCH_FANOUT=200 bench/live.sh
#   BENCH_PARTS="roundtrip fanout" bench/live.sh
#   BENCH_PARTS=roundtrip BENCH_KINDS=keyed bench/live.sh   # action, unkeyed, keyed: which round trips are timed
#   CLANK_RUN=build-bench/clank-run bench/live.sh
# Exit status: 1 when a part failed (the client's checks included: a diff that does not give
# the server's html, a push without the change), else 0 whether or not the targets were met.
set -euo pipefail
cd "$(dirname "$0")/.."
bash vendor/deps.sh --bench
seconds=${BENCH_SECONDS:-5}
sessions=${BENCH_SESSIONS:-10000}
connections=${BENCH_CONNECTIONS:-4}
fanout=${BENCH_FANOUT:-1000}
rounds=${BENCH_ROUNDS:-10}
fanout_timeout=${BENCH_FANOUT_TIMEOUT_MS:-10000}
parts=${BENCH_PARTS:-roundtrip fanout scale}
scale_views=${BENCH_SCALE_VIEWS:-/views/small / /views/rows}
clank_run=${CLANK_RUN:-build/clank-run}
[ -x "$clank_run" ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build -j"$(nproc)"; }
[ -d bench/node_modules ] || (cd bench && npm ci --no-audit --no-fund --loglevel=error)
ulimit -n "$(ulimit -Hn)"

tmp=$(mktemp -d /tmp/clank-live-bench.XXXXXX)
log=$tmp/server.log
results=$tmp/results.jsonl
: >"$results"
pid=
stop() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=; }
# a run in which the server closed sessions under an event keeps the server's log: it says why
finish() {
  stop
  if grep -q '"closes":{"' "$results" 2>/dev/null; then
    local kept
    kept=$(mktemp /tmp/clank-live-bench-server.XXXXXX)
    cp "$log" "$kept" && echo "live.sh: the server closed sessions under an event; its log is $kept" >&2
  fi
  rm -rf "$tmp"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start() { # start LIMITS
  local out=$tmp/out
  # 10,000 sessions of a 100-row list keep several GB of Lua memory: over the 512 MiB default
  CLANK_TEST_LIMITS="$1" taskset -c 0 "$clank_run" --quiet --no-watch --port 0 --memory-limit 8192 \
    bench/live/app.lua >"$out" 2>>"$log" &
  pid=$!
  for _ in $(seq 100); do grep -q serving "$out" && break; sleep 0.05; done
  base=$(sed -n 's/.* at \(http:[^ ]*\)$/\1/p' "$out")
  [ -n "$base" ] || { echo "live.sh: clank-run did not start:"; cat "$log"; exit 1; }
}

failed=0
client() { # client MODE ARGS...: bench/live/bench.mjs on the client core, its lines kept
  if ! taskset -c 1 node bench/live/bench.mjs "$base" "$pid" "$@" | tee -a "$results"; then
    echo "live.sh: the $1 part failed (server log: $(tail -3 "$log" | tr '\n' ' '))" >&2
    failed=1
  fi
}

for part in $parts; do
  case $part in
    roundtrip)
      echo "== round trips ($connections connections, ${seconds}s each)"
      start ""
      client roundtrip "$seconds" "$connections"
      stop
      ;;
    fanout)
      echo "== fan-out: $fanout sessions of /views/rows, $rounds publishes"
      start "max_connections=$((fanout + 100))"
      client fanout "$fanout" "$rounds" "$fanout_timeout"
      stop
      ;;
    scale)
      for view in $scale_views; do
        echo "== $sessions open sessions of $view (pinged every 5 s)"
        # One worker's connection cap is 10,000: the measuring client's own connections need room.
        start "max_connections=$((sessions + 100)),ping_ms=5000"
        client scale "$sessions" "$seconds" "$view"
        stop
      done
      ;;
    *) echo "live.sh: unknown part $part (roundtrip, fanout, scale)" >&2; exit 2 ;;
  esac
done

node bench/live/bench.mjs - 0 report "$results"
if grep -qv ' info ' "$log"; then
  echo -e "\nserver log (warnings and errors):"
  grep -v ' info ' "$log" | cut -d' ' -f2- | cut -c1-200 | sort | uniq -c | sort -rn | head -10
fi
exit "$failed"
