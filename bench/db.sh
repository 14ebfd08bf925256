#!/usr/bin/env bash
# bench/db.sh: the tasks app's tasks.create and tasks.list on PostgreSQL and on SQLite, in one
# run, so the ratios compare like with like on this machine today (SPEC §12, issue 13):
#   clank    clank-run serving apps/tasks/app.lua (clank.db: libpq non-blocking, SQLite on
#            threads of its own; a pool of 4)
#   luasql   clank-run serving the same app over the store it had before clank.db
#            (bench/db/app_luasql.lua + store_luasql.lua: LuaSQL, blocking the loop; one
#            connection)
#   node     fastify + ajv with node-postgres (pg, a pool of 4) or better-sqlite3 (synchronous),
#            the same statements (bench/db/server.js)
# Each server gets a fresh database (its own SQLite file; its own PostgreSQL database in a
# throwaway cluster started here, as ./dev test starts one: spec/helpers/postgres.sh) holding
# BENCH_SEED tasks of the user the requests are made for, so every tasks.list answers that many
# (lists are measured before creates). The servers run pinned to one core, wrk to another,
# PostgreSQL unpinned; figures are req/s (the database works in other processes, so they are not
# divided by the server's CPU share, which is printed beside them).
# Then the latency of GET /manifest (wrk -c1) while 20 concurrent slow queries (POST
# /actions/slow: SELECT pg_sleep(0.2), wrk -c20) run, on clank.db (a pool of 20), LuaSQL and node
# (bench/db/slow_app.lua, bench/db/server.js). Targets at the end of the report.
#   BENCH_DURATION=5 BENCH_WARMUP=2 BENCH_CONNECTIONS=50 BENCH_SEED=20
#   BENCH_SERVERS="clank luasql node" BENCH_DBS="postgres sqlite" BENCH_WORKLOADS="list create"
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

warmup=${BENCH_WARMUP:-2}
duration=${BENCH_DURATION:-5}
connections=${BENCH_CONNECTIONS:-50}
threads=${BENCH_THREADS:-1}
seed=${BENCH_SEED:-20}
server_cpu=${BENCH_SERVER_CPU:-0}
wrk_cpu=${BENCH_WRK_CPU:-1}
servers=${BENCH_SERVERS:-clank luasql node}
dbs=${BENCH_DBS:-postgres sqlite}
workloads=${BENCH_WORKLOADS:-list create}
clank_run=${CLANK_RUN:-$root/build/clank-run}
user=bench

declare -A wl_action=([list]=tasks.list [create]=tasks.create)
declare -A wl_body=([list]=list.json [create]=create.json)
declare -A db_label=([postgres]=PostgreSQL [sqlite]=SQLite)
declare -A node_driver=([postgres]="pg" [sqlite]="better-sqlite3")

tmp=
pgdir=
pg_url=
wrk_pids=()
started=()
server_pid='' server_port=''
load_before=
# Keyed by "server/db/workload" or "server/slow".
declare -A rps cpu p99 errors count failure

log() { echo "db.sh: $*" >&2; }

# ------------------------------------------------------------ processes

stop_pid() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local pid
  for pid in "${wrk_pids[@]}" "${started[@]}"; do stop_pid "$pid"; done
  started=()
  if [ -n "$pgdir" ]; then bash "$root/spec/helpers/postgres.sh" stop "$pgdir" || true; fi
  if [ -n "$tmp" ]; then rm -rf "$tmp"; fi
}

# start NAME COMMAND...: the server pinned to the server core; output in $tmp/NAME.out, .err.
start() {
  local name=$1; shift
  : >"$tmp/$name.err"
  taskset -c "$server_cpu" "$@" >"$tmp/$name.out" 2>>"$tmp/$name.err" &
  server_pid=$!
  started+=("$server_pid")
}

stop_started() {
  local pid
  for pid in "${started[@]}"; do stop_pid "$pid"; done
  started=()
}

# wait_url NAME: clank-run and node print "... at http://127.0.0.1:PORT/" once they listen.
wait_url() {
  local name=$1 line
  for _ in $(seq 100); do
    line=$(grep -o 'http://127\.0\.0\.1:[0-9]*/' "$tmp/$name.out" 2>/dev/null | head -n 1 || true)
    if [ -n "$line" ]; then
      server_port=${line#http://127.0.0.1:}
      server_port=${server_port%/}
      return 0
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
      log "$name exited before serving:"; tail -n 15 "$tmp/$name.err" | sed 's/^/  /' >&2
      return 1
    fi
    sleep 0.1
  done
  log "$name printed no URL line within 10 s"
  return 1
}

# ------------------------------------------------------------ databases

# A database of its own for one server: prints the target (a path or a URL).
fresh_db() {
  local db=$1 name=$2
  case $db in
    sqlite) echo "$tmp/$name.db" ;;
    postgres)
      psql "$pg_url" -X -qAt -v ON_ERROR_STOP=1 -c "CREATE DATABASE bench_$name" >/dev/null
      echo "${pg_url/\/clank_test\?//bench_$name?}"
      ;;
  esac
}

start_server() { # NAME DB TARGET
  local name=$1 db=$2 target=$3
  case $name in
    clank)
      start "$name" env CLANK_TASKS_DB="$target" CLANK_TASKS_USER=$user \
        "$clank_run" --port 0 --no-watch --quiet "$root/apps/tasks/app.lua" ;;
    luasql)
      start "$name" env CLANK_TASKS_DB="$target" CLANK_TASKS_USER=$user \
        "$clank_run" --port 0 --no-watch --quiet "$here/db/app_luasql.lua" ;;
    node)
      start "$name" node "$here/db/server.js" --port 0 --db "$target" --user $user --pool 4 ;;
  esac
  wait_url "$name"
}

# post PORT ACTION BODYFILE: the response body; fails unless 200 with "ok": true.
post() {
  local port=$1 action=$2 body=$3 out
  out=$(curl -s --max-time 10 -w '\n%{http_code}' -X POST -H 'content-type: application/json' \
    -H 'x-clank-confirmation: confirmed' --data-binary "@$body" "http://127.0.0.1:$port/actions/$action")
  [ "${out##*$'\n'}" = 200 ] && jq -e '.ok == true' >/dev/null <<<"${out%$'\n'*}" || {
    log "POST /actions/$action answered: ${out:0:300}"
    return 1
  }
  printf '%s\n' "${out%$'\n'*}"
}

# seed_and_check NAME: BENCH_SEED tasks, then a list that holds them all.
seed_and_check() {
  local name=$1 n
  for _ in $(seq "$seed"); do post "$server_port" tasks.create "$tmp/create.json" >/dev/null || return 1; done
  n=$(post "$server_port" tasks.list "$tmp/list.json" | jq '.output.tasks | length') || return 1
  if [ "$n" != "$seed" ]; then
    log "$name: tasks.list lists $n tasks, not $seed"
    return 1
  fi
}

# ------------------------------------------------------------ measuring

cpu_ticks() {
  local pid=$1 stat fields child total=0
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || { echo 0; return; }
  read -r -a fields <<<"${stat##*) }"
  total=$((fields[11] + fields[12]))
  # shellcheck disable=SC2013 # the children files hold space-separated pids
  for child in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
    total=$((total + $(cpu_ticks "$child")))
  done
  echo "$total"
}

# run_wrk CPU CONNECTIONS SECONDS URL METHOD BODY OUT: in the background (wrk_pids) so that a
# signal to this script stops it at once; wait for it with wait_wrk.
run_wrk() {
  local cpu=$1 conns=$2 seconds=$3 url=$4 method=$5 body=$6 out=$7
  timeout $((seconds + 30)) taskset -c "$cpu" \
    wrk -t"$threads" -c"$conns" -d"${seconds}s" --timeout 10s \
    -s "$here/db/wrk.lua" "$url" -- "$method" "$body" >"$out" 2>&1 &
  wrk_pids+=("$!")
}

wait_wrk() {
  local status=0 pid
  for pid in "${wrk_pids[@]}"; do wait "$pid" || status=$?; done
  wrk_pids=()
  return "$status"
}

report_field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$2"; }

# record KEY OUT: req/s, p99 and errors from wrk's report line in OUT.
record() {
  local key=$1 out=$2 report requests duration_us
  report=$(grep '^wrk-report ' "$out") || { failure[$key]="no wrk report"; sed 's/^/  /' "$out" >&2; return 1; }
  requests=$(report_field requests "$report"); duration_us=$(report_field duration_us "$report")
  count[$key]=$requests
  rps[$key]=$(awk -v r="$requests" -v d="$duration_us" 'BEGIN { printf "%.0f", r / (d / 1e6) }')
  p99[$key]=$(awk -v us="$(report_field p99_us "$report")" 'BEGIN { printf "%.2f", us / 1000 }')
  errors[$key]=$(($(report_field socket_errors "$report") + $(report_field bad_status "$report")))
}

# measure NAME DB WORKLOAD
measure() {
  local name=$1 db=$2 wl=$3 key=$1/$2/$3 url ticks0 ticks1 t0 t1
  url="http://127.0.0.1:$server_port/actions/${wl_action[$wl]}"
  run_wrk "$wrk_cpu" "$connections" "$warmup" "$url" POST "$tmp/${wl_body[$wl]}" "$tmp/warmup.wrk"
  wait_wrk || { failure[$key]="wrk failed during warm-up"; return 1; }
  ticks0=$(cpu_ticks "$server_pid"); t0=$EPOCHREALTIME
  run_wrk "$wrk_cpu" "$connections" "$duration" "$url" POST "$tmp/${wl_body[$wl]}" "$tmp/$name.wrk"
  wait_wrk || { failure[$key]="wrk failed"; sed 's/^/  /' "$tmp/$name.wrk" >&2; return 1; }
  t1=$EPOCHREALTIME; ticks1=$(cpu_ticks "$server_pid")
  kill -0 "$server_pid" 2>/dev/null || { failure[$key]="died during the run"; return 1; }
  record "$key" "$tmp/$name.wrk" || return 1
  cpu[$key]=$(awk -v dt=$((ticks1 - ticks0)) -v hz="$(getconf CLK_TCK)" -v t0="$t0" -v t1="$t1" \
    'BEGIN { printf "%.2f", dt / hz / (t1 - t0) }')
  log "$key: ${rps[$key]} req/s, p99 ${p99[$key]} ms, ${errors[$key]} errors, server at ${cpu[$key]} of a core"
}

bench() { # NAME DB
  local name=$1 db=$2 target wl
  log "$name on $db: starting"
  if ! target=$(fresh_db "$db" "${name}_$db") || ! start_server "$name" "$db" "$target" \
     || ! seed_and_check "$name"; then
    for wl in $workloads; do failure[$name/$db/$wl]="did not start or answered wrongly"; done
    stop_started
    return
  fi
  for wl in $workloads; do measure "$name" "$db" "$wl" || true; done
  stop_started
}

# GET /manifest (wrk -c1 on the wrk core) while wrk -c20 keeps 20 slow queries running (on the
# other core, unpinned): its p99.
bench_slow() { # NAME
  local name=$1 key=$1/slow url
  log "$name: manifest under 20 slow queries"
  case $name in
    clank | luasql)
      start "$name-slow" env BENCH_DB_URL="$pg_url" BENCH_DB_DRIVER="$name" \
        "$clank_run" --port 0 --no-watch --quiet "$here/db/slow_app.lua" ;;
    node) start "$name-slow" node "$here/db/server.js" --port 0 --db "$pg_url" --pool 20 ;;
  esac
  if ! wait_url "$name-slow" || ! post "$server_port" slow "$tmp/list.json" >/dev/null; then
    failure[$key]="did not start or answered wrongly"
    stop_started
    return
  fi
  url="http://127.0.0.1:$server_port"
  run_wrk "$server_cpu,$wrk_cpu" 20 $((duration + 2)) "$url/actions/slow" POST "$tmp/list.json" "$tmp/slow.wrk"
  sleep 1
  run_wrk "$wrk_cpu" 1 "$duration" "$url/manifest" GET - "$tmp/manifest.wrk"
  if wait_wrk && record "$key" "$tmp/manifest.wrk" && record "$key/load" "$tmp/slow.wrk"; then
    log "$key: GET /manifest p99 ${p99[$key]} ms (${rps[$key]} req/s); slow queries ${rps[$key/load]}/s"
  else
    failure[$key]=${failure[$key]:-"wrk failed"}
  fi
  stop_started
}

# ------------------------------------------------------------ report

ratio() {
  if [ -n "${1:-}" ] && [ -n "${2:-}" ] && [ "${2:-0}" != 0 ]; then
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'
  else
    echo -
  fi
}

print_report() {
  local db wl name key
  echo
  echo "wrk -t$threads -c$connections -d${duration}s per workload (after ${warmup}s warm-up), $seed tasks per list;"
  echo "servers on CPU $server_cpu, wrk on CPU $wrk_cpu, PostgreSQL unpinned"
  for db in $dbs; do
    for wl in $workloads; do
      echo
      echo "${wl_action[$wl]} on ${db_label[$db]}:"
      printf '  %-22s %9s %8s %7s %7s %10s %9s\n' server req/s 'p99 ms' errors CPU 'vs luasql' 'vs node'
      for name in $servers; do
        key=$name/$db/$wl
        local label=$name
        case $name in
          clank) label="clank (clank.db)" ;;
          luasql) label="clank (LuaSQL)" ;;
          node) label="fastify + ${node_driver[$db]}" ;;
        esac
        if [ -n "${failure[$key]:-}" ] || [ -z "${rps[$key]:-}" ]; then
          printf '  %-22s not measured: %s\n' "$label" "${failure[$key]:-no figures}"
          continue
        fi
        printf '  %-22s %9s %8s %7s %7s %10s %9s\n' "$label" "${rps[$key]}" "${p99[$key]}" \
          "${errors[$key]}" "${cpu[$key]}" "$(ratio "${rps[$key]}" "${rps[luasql/$db/$wl]:-}")" \
          "$(ratio "${rps[$key]}" "${rps[node/$db/$wl]:-}")"
      done
    done
  done
  if [[ " $dbs " == *" postgres "* ]]; then
    echo
    echo "GET /manifest (wrk -c1, ${duration}s, 10 s timeout) while 20 concurrent SELECT pg_sleep(0.2)"
    echo "run (wrk -c20):"
    printf '  %-22s %9s %9s %12s %7s\n' server 'p99 ms' answered 'timed out' 'slow/s'
    for name in $servers; do
      key=$name/slow
      local label=$name
      case $name in
        clank) label="clank (clank.db)" ;;
        luasql) label="clank (LuaSQL)" ;;
        node) label="fastify + pg" ;;
      esac
      if [ -n "${failure[$key]:-}" ] || [ -z "${p99[$key]:-}" ]; then
        printf '  %-22s not measured: %s\n' "$label" "${failure[$key]:-no figures}"
        continue
      fi
      local shown=${p99[$key]}
      [ "${count[$key]}" != 0 ] || shown="> $((duration * 1000))"
      printf '  %-22s %9s %9s %12s %7s\n' "$label" "$shown" "${count[$key]}" "${errors[$key]}" \
        "${rps[$key/load]}"
    done
  fi
}

# target LABEL VALUE OP LIMIT
target() {
  local label=$1 value=$2 op=$3 limit=$4 verdict=met
  if [ -z "$value" ] || [ "$value" = - ]; then
    printf '  %-52s not measured\n' "$label"
    return
  fi
  awk -v v="${value%x}" -v l="$limit" -v op="$op" 'BEGIN { exit !(op == ">=" ? v >= l : v < l) }' \
    || verdict='NOT met'
  printf '  %-52s %s, %s\n' "$label" "$value" "$verdict"
}

print_targets() {
  local wl
  echo
  echo "targets:"
  for wl in $workloads; do
    target "${wl_action[$wl]} on PostgreSQL: clank.db >= 2x LuaSQL" \
      "$(ratio "${rps[clank/postgres/$wl]:-}" "${rps[luasql/postgres/$wl]:-}")" ">=" 2
  done
  local slow_p99=${p99[clank/slow]:-}
  [ "${count[clank/slow]:-0}" != 0 ] || slow_p99=
  target "GET /manifest p99 under 20 slow queries (clank.db) < 5 ms" "$slow_p99" "<" 5
}

print_setup() {
  local cache=${clank_run%/*}/CMakeCache.txt
  echo
  echo "$(nproc) CPUs: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
  echo "PostgreSQL $(psql "$pg_url" -X -qAt -c 'SHOW server_version' 2>/dev/null || echo '?')," \
    "libpq $(pkg-config --modversion libpq 2>/dev/null || echo '?')," \
    "SQLite $(pkg-config --modversion sqlite3 2>/dev/null || echo '?')," \
    "lua-sql $(dpkg-query -W -f='${Version}' lua-sql-postgres 2>/dev/null || echo '?')"
  echo "node $(node -v 2>/dev/null || echo none), fastify $(pkg_version fastify)," \
    "pg $(pkg_version pg), better-sqlite3 $(pkg_version better-sqlite3) (its own SQLite)"
  if [ -f "$cache" ]; then
    echo "clank-run: $clank_run (build type $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")," \
      "sanitizers $(sed -n 's/^CLANK_SANITIZE:[A-Z]*=//p' "$cache"))"
  fi
  echo "load average: $load_before before the run, $(cut -d' ' -f1-3 /proc/loadavg) after"
}

pkg_version() {
  sed -n 's/^  "version": "\(.*\)",$/\1/p' "$here/node_modules/$1/package.json" 2>/dev/null || echo '?'
}

# ------------------------------------------------------------ main

main() {
  local name db
  for name in $servers; do
    case $name in clank | luasql | node) ;; *) log "unknown server '$name' in BENCH_SERVERS"; exit 2 ;; esac
  done
  for db in $dbs; do
    case $db in postgres | sqlite) ;; *) log "unknown database '$db' in BENCH_DBS"; exit 2 ;; esac
  done
  "$root/vendor/deps.sh" --bench
  if [ ! -x "$clank_run" ]; then log "$clank_run is missing: build it first (cmake --build build)"; exit 1; fi
  if [[ " $servers " == *" node "* ]] && [ ! -d "$here/node_modules/pg" ]; then
    # better-sqlite3 built here from its sources against the system's Node headers: no
    # prebuilt binary is downloaded
    log "node: installing bench/package-lock.json (npm ci, better-sqlite3 built from source)"
    (cd "$here" && npm_config_build_from_source=true npm_config_nodedir=/usr \
      npm ci --no-audit --no-fund) >&2
  fi

  local base=${TMPDIR:-/tmp}
  [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
  tmp=$(mktemp -d "$base/clank-bench-db.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)

  printf '%s' '{"title":"Bench task","priority":"normal","estimate":1.5,"tags":["bench","db"]}' \
    >"$tmp/create.json"
  printf '%s' '{}' >"$tmp/list.json"
  pgdir=$(mktemp -d /tmp/clank-pg.XXXXXX)
  pg_url=$(bash "$root/spec/helpers/postgres.sh" start "$pgdir")

  for db in $dbs; do
    for name in $servers; do bench "$name" "$db"; done
  done
  if [[ " $dbs " == *" postgres "* ]]; then
    for name in $servers; do bench_slow "$name"; done
  fi
  print_setup
  print_report
  print_targets
}

main "$@"
