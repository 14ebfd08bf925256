#!/usr/bin/env bash
# Topics (issue 28), three figures on the tasks app (bench/pubsub/app.lua: apps/tasks as it is,
# plus two bench routes), each part on its own server(s) and a fresh SQLite file:
#   cost    clank.publish with nobody listening, in a handler: ns per call minus the same loop
#           calling an empty Lua function, measured in the same run (target < 2 µs)
#   fanout  1,000 WebSocket sessions of the list (20 rows), all watching tasks:bench; a
#           tasks.create or tasks.archive through the bridge publishes it: time from the POST
#           until every session has its push, and GET /__clank/health's latency meanwhile from a
#           hammering client (targets: within 1 s on one core; health p99 < 50 ms)
#   dom     Chromium (playwright-core) on the page; tasks.create / tasks.archive through the
#           bridge; time from the POST until the page's DOM shows the row / lost it, reported by
#           a MutationObserver through an exposed binding (target p99 < 100 ms on one worker)
# BENCH_PUBSUB_SCALE picks where the page and the publish are:
#   one        (default) one clank-run
#   workers    clank-run --workers 2; each publish goes on a fresh connection, so the kernel
#              puts some on the page's worker and some on the other; figures are split so
#   instances  two clank-runs on the same app and database, both --pubsub on a throwaway
#              PostgreSQL: pages on A, publishes to B
# A delivery that never comes times out (BENCH_FANOUT_TIMEOUT_MS, BENCH_DOM_TIMEOUT_MS) and is
# reported as lost; a part where nothing arrives at all gives up with a message. The servers run
# on core 0, the clients (Node with ws, Chromium) on core 1, on 127.0.0.1 only.
#   bench/pubsub.sh                                          # about 70 s
#   BENCH_SESSIONS=200 BENCH_ROUNDS=4 BENCH_DOM_ROUNDS=20 bench/pubsub.sh
#   BENCH_PUBSUB_SCALE=instances bench/pubsub.sh
# Exit status: 1 when a part could not run or gave up (nothing delivered), else 0 whether or not
# the targets were met. See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bash vendor/deps.sh --bench

scale=${BENCH_PUBSUB_SCALE:-one}
parts=${BENCH_PARTS:-cost fanout dom}
publishes=${BENCH_PUBLISHES:-200000}        # calls per request of the cost part
publish_rounds=${BENCH_PUBLISH_ROUNDS:-5}   # requests per kind (plus one to warm up)
sessions=${BENCH_SESSIONS:-1000}
rows=${BENCH_ROWS:-20}
rounds=${BENCH_ROUNDS:-10}
fanout_timeout=${BENCH_FANOUT_TIMEOUT_MS:-10000}
dom_rounds=${BENCH_DOM_ROUNDS:-100}         # creates, each followed by its archive
dom_timeout=${BENCH_DOM_TIMEOUT_MS:-1000}
# A session pushes at most every 50 ms (PUSH_MS, lua/clank/live/init.lua): a change less than
# that after the previous push waits for the rest of it. 0 measures back-to-back changes.
dom_gap=${BENCH_DOM_GAP_MS:-100}
# Every publish leaves one more tree per session until the browser sends an event (keep_tree,
# lua/clank/live/init.lua): 1,000 sessions of the list reach ~2 GB of Lua memory in 10 rounds,
# so the default 512 MiB would make clank-run load the app afresh in the middle of a round.
memory=${BENCH_MEMORY_LIMIT:-8192}
server_cpu=${BENCH_SERVER_CPU:-0}
client_cpu=${BENCH_CLIENT_CPU:-1}
clank_run=${CLANK_RUN:-build/clank-run}
chromium=${CLANK_CHROMIUM:-/usr/bin/chromium}
case $scale in
  one) workers=1 ;;
  workers) workers=2 ;;
  instances) workers=1 ;;
  *) echo "pubsub.sh: BENCH_PUBSUB_SCALE must be one, workers or instances, not $scale" >&2; exit 2 ;;
esac

[ -x "$clank_run" ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build -j"$(nproc)"; }
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$(dirname "$clank_run")/CMakeCache.txt" 2>/dev/null || true)
echo "clank-run: $clank_run (build type: ${build_type:-unknown}), BENCH_PUBSUB_SCALE=$scale"
case ${build_type:-} in
  Release | RelWithDebInfo) ;;
  *) echo "warning: not an optimized build; the figures are pessimistic" ;;
esac
[ -d bench/node_modules ] || (cd bench && npm ci --no-audit --no-fund --loglevel=error)
if [[ " $parts " == *" dom "* ]]; then
  [ -d spec/browser/node_modules/playwright-core ] || (cd spec/browser && npm ci --no-audit --no-fund --loglevel=error)
  [ -x "$chromium" ] || { echo "pubsub.sh: no Chromium at $chromium (vendor/deps.sh --test installs it)" >&2; exit 1; }
fi
ulimit -n "$(ulimit -Hn)"

tmp=$(mktemp -d /tmp/clank-pubsub-bench.XXXXXX)
servers=()
pgdir=
stop_servers() {
  local p
  for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${servers[@]}"; do wait "$p" 2>/dev/null || true; done
  servers=()
}
cleanup() {
  stop_servers
  [ -z "$pgdir" ] || bash spec/helpers/postgres.sh stop "$pgdir" || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# instances: a throwaway PostgreSQL carries the publishes between them
pubsub_args=()
if [ "$scale" = instances ]; then
  pgdir=$(mktemp -d /tmp/clank-pg.XXXXXX)
  url=$(bash spec/helpers/postgres.sh start "$pgdir")
  if "$clank_run" --help 2>&1 | grep -q -- '--pubsub'; then
    pubsub_args=(--pubsub "$url")
  else
    echo "warning: $clank_run has no --pubsub option: the instances run without it, and nothing" \
      "published on B can reach A (expect the fan-out and DOM parts to time out)"
  fi
fi

# start DB [ARGS...]: clank-run serving bench/pubsub/app.lua on a free port; sets started_base,
# started_pids (the process and its workers) and started_workers (the workers' pids in index
# order: runtime/host/master.c forks them in that order; "-" without workers).
start() {
  local db=$1 out=$tmp/out.${#servers[@]} p
  shift
  CLANK_TASKS_DB=$db CLANK_TASKS_USER=bench taskset -c "$server_cpu" "$clank_run" --quiet \
    --no-watch --port 0 --memory-limit "$memory" "$@" bench/pubsub/app.lua \
    >"$out" 2>>"$tmp/server.log" &
  p=$!
  servers+=("$p")
  for _ in $(seq 200); do
    grep -q serving "$out" 2>/dev/null && break
    kill -0 "$p" 2>/dev/null || break
    sleep 0.05
  done
  started_base=$(sed -n 's/.* at \(http:[^ ]*\)$/\1/p' "$out")
  [ -n "$started_base" ] || { echo "pubsub.sh: clank-run $* did not start:" >&2; tail -20 "$tmp/server.log" >&2; exit 1; }
  for _ in $(seq 100); do # its workers, once they are all there
    [ "$(pgrep -P "$p" | wc -l)" -ge "$((workers > 1 ? workers : 0))" ] && break
    sleep 0.05
  done
  started_workers=$(pgrep -P "$p" | sort -n | paste -sd, || true)
  started_pids=$p${started_workers:+,$started_workers}
  started_workers=${started_workers:--}
}

# servers_up NAME: the scale's server(s) on a fresh database; sets page_base, publish_base, pids
servers_up() {
  local db=$tmp/$1.db
  case $scale in
    one | workers)
      start "$db" --workers "$workers"
      page_base=$started_base publish_base=$started_base pids=$started_pids
      worker_pids=$started_workers
      ;;
    instances)
      start "$db" "${pubsub_args[@]}"
      page_base=$started_base pids=$started_pids worker_pids=-
      start "$db" "${pubsub_args[@]}"
      publish_base=$started_base pids=$pids,$started_pids
      ;;
  esac
}

results=$tmp/results.jsonl
: >"$results"
failed=0
client() { # client PART ARGS...: one part of bench/pubsub/client.mjs on the client core
  if ! taskset -c "$client_cpu" node bench/pubsub/client.mjs "$@" | tee -a "$results"; then
    echo "pubsub.sh: the $1 part failed (server log: $(tail -5 "$tmp/server.log" | tr '\n' ' '))" >&2
    failed=1
  fi
}

for part in $parts; do
  servers_up "$part"
  case $part in
    cost)
      echo "== publish with nobody listening: $publish_rounds × $publishes calls per kind"
      client cost "$page_base" "$publishes" "$publish_rounds"
      ;;
    fanout)
      echo "== fan-out: $sessions sessions × $rows rows, $rounds publishes"
      client fanout "$page_base" "$publish_base" "$pids" "$worker_pids" "$sessions" "$rows" "$rounds" "$fanout_timeout"
      ;;
    dom)
      echo "== publish → DOM in Chromium: $dom_rounds creates and as many archives"
      client dom "$page_base" "$publish_base" "$worker_pids" "$rows" "$dom_rounds" "$dom_timeout" "$dom_gap" "$chromium"
      ;;
    *) echo "pubsub.sh: unknown part $part (cost, fanout, dom)" >&2; exit 2 ;;
  esac
  stop_servers
done

node bench/pubsub/client.mjs report "$results" "$scale"
grep -q '"part":"gave-up"' "$results" && failed=1
if grep -qv ' info ' "$tmp/server.log"; then
  echo -e "\nserver log (warnings and errors):"
  grep -v ' info ' "$tmp/server.log" | cut -d' ' -f2- | sort | uniq -c | sort -rn | head -20
fi
exit "$failed"
