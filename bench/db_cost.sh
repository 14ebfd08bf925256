#!/usr/bin/env bash
# bench/db_cost.sh: what one tasks.list on PostgreSQL costs, on both ends of the connection
# (issue 33), in figures that do not wobble with the machine's load as req/s does:
#   - clank-run's instructions and allocator calls per request, counted by callgrind as
#     bench/instructions.sh counts them: runs answering N and 2N requests (one at a time on one
#     keep-alive connection, bench/instructions/client.lua), (run(2N) - run(N)) / N;
#   - CPU time per request of the server (clank-run, or node) and of the PostgreSQL processes,
#     from /proc/PID/schedstat, under wrk -c4 for BENCH_DURATION seconds after a second of
#     warm-up.
# Each run serves apps/tasks/app.lua (CLANK_TASKS_USER=bench) on a fresh database of a
# throwaway cluster (spec/helpers/postgres.sh) seeded with BENCH_SEED tasks through
# POST /actions/tasks.create, so every list answers that many.
#
#   bench/db_cost.sh                                   # N = 1000, 5 s of wrk
#   BENCH_REQUESTS=500 BENCH_DURATION=3 CLANK_RUN=build-x/clank-run bench/db_cost.sh
#   BENCH_SERVER=node bench/db_cost.sh                 # fastify + pg (bench/db/server.js): CPU only
#   BENCH_CALLGRIND=0 bench/db_cost.sh                 # CPU only
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
clank_run=${CLANK_RUN:-$root/build/clank-run}
server=${BENCH_SERVER:-clank}
n=${BENCH_REQUESTS:-1000}
duration=${BENCH_DURATION:-5}
seed=${BENCH_SEED:-20}
callgrind=${BENCH_CALLGRIND:-1}
[ "$server" = node ] && callgrind=0

for tool in psql curl wrk lua5.4; do
  command -v $tool >/dev/null || { echo "db_cost.sh: $tool is missing" >&2; exit 1; }
done
if [ "$callgrind" = 1 ]; then
  command -v valgrind >/dev/null || { echo "db_cost.sh: valgrind is missing (vendor/deps.sh --bench)" >&2; exit 1; }
fi
[ "$server" = node ] || [ -x "$clank_run" ] || { echo "db_cost.sh: $clank_run is missing" >&2; exit 1; }

tmp=$(mktemp -d)
pgdir=$(mktemp -d /tmp/clank-pg.XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  bash "$root/spec/helpers/postgres.sh" stop "$pgdir" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

url=$(bash "$root/spec/helpers/postgres.sh" start "$pgdir")
echo '{}' >"$tmp/list.json"
echo '{"title":"a task","estimate":1,"tags":["a"]}' >"$tmp/create.json"

# start NAME [PREFIX...]: the server (under PREFIX) on a fresh seeded database bench_NAME; sets
# pid and port.
start() {
  local name=$1 line
  shift
  psql "$url" -X -qAt -v ON_ERROR_STOP=1 -c "CREATE DATABASE bench_$name" >/dev/null
  local target=${url/\/clank_test\?//bench_$name?}
  : >"$tmp/out"
  if [ "$server" = node ]; then
    node "$here/db/server.js" --port 0 --db "$target" --user bench --pool 4 >"$tmp/out" 2>"$tmp/err" &
  else
    env CLANK_TASKS_DB="$target" CLANK_TASKS_USER=bench "$@" "$clank_run" --port 0 --no-watch \
      --quiet "$root/apps/tasks/app.lua" >"$tmp/out" 2>"$tmp/err" &
  fi
  pid=$!
  port=
  for _ in $(seq 600); do
    line=$(grep -o 'http://127\.0\.0\.1:[0-9]*/' "$tmp/out" 2>/dev/null | head -n 1 || true)
    if [ -n "$line" ]; then port=${line#http://127.0.0.1:}; port=${port%/}; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "db_cost.sh: the server did not start" >&2; tail -n 20 "$tmp/err" >&2; exit 1; }
  for _ in $(seq "$seed"); do
    curl -sf -X POST -H 'content-type: application/json' -H 'x-clank-confirmation: confirmed' \
      --data-binary "@$tmp/create.json" "http://127.0.0.1:$port/actions/tasks.create" >/dev/null \
      || { echo "db_cost.sh: tasks.create failed" >&2; exit 1; }
  done
  local listed
  listed=$(curl -sf -X POST -H 'content-type: application/json' --data-binary "@$tmp/list.json" \
    "http://127.0.0.1:$port/actions/tasks.list" | grep -o '"title"' | wc -l)
  [ "$listed" = "$seed" ] || { echo "db_cost.sh: tasks.list lists $listed tasks, not $seed" >&2; exit 1; }
}

stop() {
  kill -TERM "$pid"
  wait "$pid" || true
  pid=
}

# measure COUNT: "instructions allocs" of a whole callgrind run answering COUNT lists.
measure() {
  start "n$1" valgrind --tool=callgrind --callgrind-out-file="$tmp/callgrind.out" \
    --compress-strings=no --compress-pos=no
  lua5.4 "$here/instructions/client.lua" "$port" "$1" 200 POST /actions/tasks.list "$tmp/list.json"
  stop
  awk -f "$here/callgrind_totals.awk" "$tmp/callgrind.out" | cut -d" " -f1,2
}

# CPU ns so far of the cluster's processes (the postmaster and its children), and of the server.
pg_cpu() {
  local postmaster total=0 p
  postmaster=$(head -n 1 "$pgdir/data/postmaster.pid")
  for p in $postmaster $(ps -o pid= --ppid "$postmaster"); do
    [ -r "/proc/$p/schedstat" ] && total=$((total + $(cut -d' ' -f1 "/proc/$p/schedstat")))
  done
  echo "$total"
}
server_cpu() {
  local total=0 t
  for t in /proc/"$pid"/task/*/schedstat; do total=$((total + $(cut -d' ' -f1 "$t"))); done
  echo "$total"
}

echo "tasks.list on PostgreSQL, $seed tasks per list ($([ "$server" = node ] && echo "fastify + pg" || echo "$clank_run"))"
if [ "$callgrind" = 1 ]; then
  read -r i1 a1 < <(measure "$n")
  read -r i2 a2 < <(measure $((2 * n)))
  printf '  clank-run per request: %d instructions, %d allocs (callgrind, N = %d)\n' \
    $(((i2 - i1) / n)) $(((a2 - a1) / n)) "$n"
fi
start wrk
wrk_args=(-t1 -c4 -s "$here/db/wrk.lua" "http://127.0.0.1:$port/actions/tasks.list" -- POST "$tmp/list.json")
wrk -d1s "${wrk_args[@]}" >/dev/null
p0=$(pg_cpu) s0=$(server_cpu)
report=$(wrk -d"${duration}s" "${wrk_args[@]}" | grep '^wrk-report ')
p1=$(pg_cpu) s1=$(server_cpu)
stop
requests=$(grep -o 'requests=[0-9]*' <<<"$report" | cut -d= -f2)
bad=$(grep -o 'bad_status=[0-9]*' <<<"$report" | cut -d= -f2)
if [ "${requests:-0}" -eq 0 ] || [ "$bad" != 0 ]; then
  echo "db_cost.sh: wrk: $report" >&2
  exit 1
fi
printf '  CPU per request under wrk -c4 (%d requests in %d s): PostgreSQL %d us, server %d us\n' \
  "$requests" "$duration" $(((p1 - p0) / requests / 1000)) $(((s1 - s0) / requests / 1000))
