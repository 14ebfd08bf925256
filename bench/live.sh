#!/usr/bin/env bash
# Live views (issue 11): a live event's round trip (a WebSocket frame in, a 100-row list's
# HTML out) beside an action call returning the same 100 rows, on the same server in the same
# run; then 10,000 open live sessions (of a small view, then of the 100-row list): memory per
# session and the event round trip while they are open. The server runs on core 0, the client (Node, ws) on core 1.
#   bench/live.sh                              # about a minute
#   BENCH_SECONDS=10 BENCH_SESSIONS=10000 bench/live.sh
#   CLANK_RUN=build-bench/clank-run bench/live.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash vendor/deps.sh --bench
seconds=${BENCH_SECONDS:-5}
sessions=${BENCH_SESSIONS:-10000}
connections=${BENCH_CONNECTIONS:-4}
clank_run=${CLANK_RUN:-build/clank-run}
[ -x "$clank_run" ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build -j"$(nproc)"; }
[ -d bench/node_modules ] || (cd bench && npm ci --no-audit --no-fund --loglevel=error)
ulimit -n "$(ulimit -Hn)"

log=$(mktemp /tmp/clank-live-bench.XXXXXX)
pid=
stop() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=; }
trap 'stop; rm -f "$log"' EXIT

start() { # start LIMITS
  local out
  out=$(mktemp)
  # 10,000 sessions of the 100-row list keep ~4.5 GB of Lua memory: over the 512 MiB default
  CLANK_TEST_LIMITS="$1" taskset -c 0 "$clank_run" --quiet --no-watch --port 0 --memory-limit 8192 \
    bench/live/app.lua >"$out" 2>>"$log" &
  pid=$!
  for _ in $(seq 100); do grep -q serving "$out" && break; sleep 0.05; done
  base=$(sed -n 's/.* at \(http:[^ ]*\)$/\1/p' "$out")
  rm -f "$out"
  [ -n "$base" ] || { echo "live.sh: clank-run did not start:"; cat "$log"; exit 1; }
}

client() { taskset -c 1 node bench/live/bench.mjs "$base" "$pid" "$@"; }

echo "== round trips ($connections connections, ${seconds}s each)"
start ""
client roundtrip "$seconds" "$connections" | tee /tmp/clank-live-roundtrip.json
stop
: > /tmp/clank-live-scale.json
for view in /views/small /; do
  echo "== $sessions open sessions of $view (pinged every 5 s)"
  # One worker's connection cap is 10,000: the measuring client's own connections need room.
  start "max_connections=$((sessions + 100)),ping_ms=5000"
  client scale "$sessions" "$seconds" "$view" | tee -a /tmp/clank-live-scale.json
  stop
done

node -e '
const fs = require("fs");
const rows = fs.readFileSync("/tmp/clank-live-roundtrip.json", "utf8").trim().split("\n").map(JSON.parse);
const [call, ev] = rows;
console.log("\n| measure | p50 ms | p99 ms | per s | per core-s |\n|---|---|---|---|---|");
for (const r of rows) console.log(`| ${r.name} | ${r.p50_ms} | ${r.p99_ms} | ${r.per_s} | ${r.per_core_s} |`);
console.log(`\nevent / action cost (server CPU per round trip): ${(call.per_core_s / ev.per_core_s).toFixed(2)}x (target <= 2x)`);
console.log(`event / action p50: ${(ev.p50_ms / call.p50_ms).toFixed(2)}x`);
const scale = fs.readFileSync("/tmp/clank-live-scale.json", "utf8").trim().split("\n").map(JSON.parse);
for (const r of scale) {
  if (r.per_session_kib !== undefined)
    console.log(`${r.name}: ${r.per_session_kib} KiB per session (RSS ${r.rss_before_kib} -> ${r.rss_after_kib} KiB; target < 50 KiB)`);
  else console.log(`${r.name}: p50 ${r.p50_ms} ms, p99 ${r.p99_ms} ms`);
}'
