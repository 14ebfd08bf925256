#!/usr/bin/env bash
# bench/instructions.sh: instructions and allocator calls per request on the action path and
# on a plain route, counted by callgrind, so the figure does not wobble with the machine's load
# as req/s does.
#
# For each of the valid and the invalid (422) body of bench/http.sh's `tasks.create`, and for
# `GET /hello` (a route: 200, "Hello, world!\n"),
# clank-run serving bench/app.lua runs under `valgrind --tool=callgrind` twice: once
# answering N requests and once 2N, sent one at a time on one keep-alive connection by a
# fixed LuaSocket client (instructions/client.lua). Start-up, warm-up and shutdown are the
# same in both runs, so (run(2N) - run(N)) / N is what one request costs the server: every
# instruction of the process (all threads), and its calls to malloc, calloc and realloc
# (the Lua allocator reallocs) and free.
#
#   bench/instructions.sh                               # N=2000, about a minute
#   BENCH_REQUESTS=500 CLANK_RUN=build-bench/clank-run bench/instructions.sh
#   BENCH_ROWS=hello bench/instructions.sh              # only some rows
#
# Rows list0, list20 and list100 (not run unless named in BENCH_ROWS) serve apps/tasks/app.lua
# instead (SQLite in a temporary folder, one user: CLANK_TASKS_USER), its database seeded
# beforehand, outside valgrind, with 0, 20 or 100 tasks by tasks.create; each request is POST
# /actions/tasks.list with {}. (list100 - list0) / 100 is what one row of the answer costs.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
clank_run=${CLANK_RUN:-$root/build/clank-run}
n=${BENCH_REQUESTS:-2000}

command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is missing (vendor/deps.sh --bench)" >&2; exit 1; }
lua5.4 -e 'require "socket"' 2>/dev/null || { echo "instructions.sh: lua5.4 with LuaSocket is missing" >&2; exit 1; }
[ -x "$clank_run" ] || { echo "instructions.sh: $clank_run is missing (build it, or set CLANK_RUN)" >&2; exit 1; }

tmp=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# The app served, and the environment it is served with (set per row below).
app=$here/app.lua
app_env=()

# start [COMMAND...]: runs COMMAND clank-run --port 0 $app in the background (pid) and sets
# port to the port it serves on.
start() {
  local line
  : >"$tmp/out"
  env "${app_env[@]}" "$@" "$clank_run" --port 0 "$app" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  port=
  for _ in $(seq 600); do
    line=$(grep -o 'http://127\.0\.0\.1:[0-9]*/' "$tmp/out" 2>/dev/null | head -n 1 || true)
    if [ -n "$line" ]; then port=${line#http://127.0.0.1:}; port=${port%/}; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "instructions.sh: clank-run did not start${1:+ under $1}" >&2
    tail -n 20 "$tmp/err" >&2
    exit 1
  fi
}

stop() {
  kill -TERM "$pid"
  wait "$pid" || true
  pid=
}

# seed ROWS: a fresh tasks database for apps/tasks/app.lua holding ROWS tasks of the bench user.
seed() {
  rm -rf "$tmp/db"
  mkdir "$tmp/db"
  start
  lua5.4 "$here/instructions/client.lua" "$port" "$1" 200 POST /actions/tasks.create \
    "$here/fixtures/list.create.json" "X-Clank-Confirmation: confirmed"
  stop
}

# measure STATUS COUNT METHOD PATH [BODY]: prints "instructions allocs frees" of a whole run.
measure() {
  local status=$1 count=$2 method=$3 path=$4 body=${5:-} out=$tmp/callgrind.out
  start valgrind --tool=callgrind --callgrind-out-file="$out" --compress-strings=no --compress-pos=no
  lua5.4 "$here/instructions/client.lua" "$port" "$count" "$status" "$method" "$path" \
    ${body:+"$here/fixtures/$body"}
  stop
  awk -f "$here/callgrind_totals.awk" "$out"
}

printf '%-8s %14s %10s %10s   (N = %d, %s)\n' request instructions allocs frees "$n" "$clank_run"
rows=${BENCH_ROWS:-valid invalid hello}
for kind in valid:200 invalid:422 hello:200 list0:200 list20:200 list100:200; do
  name=${kind%%:*} status=${kind##*:}
  case " $rows " in *" $name "*) ;; *) continue ;; esac
  app=$here/app.lua app_env=()
  case $name in
    hello) set -- GET /hello ;;
    list*)
      app=$root/apps/tasks/app.lua
      app_env=(CLANK_TASKS_DB="$tmp/db/tasks.db" CLANK_TASKS_USER=bench)
      seed "${name#list}"
      set -- POST /actions/tasks.list list.request.json
      ;;
    *) set -- POST /actions/tasks.create "$name.request.json" ;;
  esac
  read -r i1 a1 f1 < <(measure "$status" "$n" "$@")
  read -r i2 a2 f2 < <(measure "$status" $((2 * n)) "$@")
  awk -v name="$name" -v n="$n" -v i1="$i1" -v i2="$i2" -v a1="$a1" -v a2="$a2" -v f1="$f1" -v f2="$f2" \
    'BEGIN { printf "%-8s %14.0f %10.1f %10.1f\n", name, (i2 - i1) / n, (a2 - a1) / n, (f2 - f1) / n }'
done
