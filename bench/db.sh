#!/usr/bin/env bash
# bench/db.sh: the tasks app's tasks.list and tasks.create on PostgreSQL and on SQLite, in one
# run, so the ratios compare like with like on this machine today (SPEC §12, issues 13 and 33):
#   clank    clank-run serving apps/tasks/app.lua (clank.db: libpq non-blocking, SQLite on
#            threads of its own; a pool of 4)
#   luasql   clank-run serving the same app over the store it had before clank.db
#            (bench/db/app_luasql.lua + store_luasql.lua: LuaSQL, blocking the loop; one
#            connection)
#   node     fastify + ajv with node-postgres (pg, a pool of 4) or better-sqlite3 (synchronous),
#            the same statements (bench/db/server.js)
# Each server gets a fresh database (its own SQLite file; its own PostgreSQL database in a
# throwaway cluster started here, as ./dev test starts one: spec/helpers/postgres.sh). Each
# server answers for one user (CLANK_TASKS_USER, node's --user), so it is started once per user:
#   list     tasks.list of user "bench", seeded with BENCH_SEED (20) tasks
#   list100  tasks.list of user "bench100", seeded with 100 tasks (a server started for it)
#   mixed    user "bench" again: of every 5 requests, 4 tasks.list and 1 tasks.create, in that
#            order per wrk thread (bench/db/wrk_mixed.lua, a request() hook: wrk loses its fast
#            path, the same for every server). Its creates would grow the list it reads, by more
#            rows the faster the server: so for this run only the bench adds a trigger to that
#            server's database that gives each new row to another owner (PostgreSQL: BEFORE
#            INSERT, setting the owner; SQLite: AFTER INSERT, an UPDATE of the new row, which the
#            server pays for, every server alike: a few µs, against some 80 for a create). Every
#            create still inserts its row, and every list reads and answers the same BENCH_SEED
#            rows however many creates a server completes; the list is checked before and after,
#            and the log says how many tasks the trigger moved. It is dropped before create.
#   create   tasks.create for user "bench" (measured last: it grows that user's list)
# Workloads run in that order whatever BENCH_WORKLOADS's order, so every list answers as many
# rows as its name says (checked before each workload). The servers run pinned to one core, wrk
# to another, PostgreSQL unpinned; figures are req/s (the database works in other processes, so
# they are not divided by the server's CPU share) and, beside them, the server's CPU: its share
# of a core (utime + stime of the process, its threads and its children over the run) and its
# CPU time per request in µs (that CPU time over the requests answered: CPU × 1e6 ÷ req/s).
# Then the latency of GET /manifest (wrk -c1) while 20 concurrent slow queries (POST
# /actions/slow: SELECT pg_sleep(0.2), wrk -c20) run, on clank.db (a pool of 20), LuaSQL and node
# (bench/db/slow_app.lua, bench/db/server.js). Targets at the end of the report (issue 33: clank
# ≥ 1.5x node's req/s on every workload and database, ≤ 30 µs of server CPU per 20-row list).
# All of that but the slow queries runs BENCH_ROUNDS times, each round on fresh databases and
# servers, the servers' order reversed every other round; each figure is the round with the
# median req/s (its CPU and p99 beside it), and the report gives the lowest and highest req/s.
# A minute in which the machine runs slow (a shared host's) then costs one round of one server,
# not a ratio: in one round, a server's workloads run a minute apart from the other servers'.
#   BENCH_ROUNDS=3 BENCH_DURATION=5 BENCH_WARMUP=2 BENCH_CONNECTIONS=50 BENCH_SEED=20
#   BENCH_SERVERS="clank luasql node" BENCH_DBS="postgres sqlite"
#   BENCH_WORKLOADS="list list100 mixed create"
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

rounds=${BENCH_ROUNDS:-3}
warmup=${BENCH_WARMUP:-2}
duration=${BENCH_DURATION:-5}
connections=${BENCH_CONNECTIONS:-50}
threads=${BENCH_THREADS:-1}
seed=${BENCH_SEED:-20}
server_cpu=${BENCH_SERVER_CPU:-0}
wrk_cpu=${BENCH_WRK_CPU:-1}
servers=${BENCH_SERVERS:-clank luasql node}
dbs=${BENCH_DBS:-postgres sqlite}
workloads=${BENCH_WORKLOADS:-list list100 mixed create}
clank_run=${CLANK_RUN:-$root/build/clank-run}

# The order they run in (see above), and what each one asks for, as whom.
all_workloads="list list100 mixed create"
declare -A wl_label=([list]="tasks.list ($seed rows)" [list100]="tasks.list (100 rows)"
  [mixed]="mixed (80 % tasks.list of $seed rows, 20 % tasks.create)" [create]=tasks.create)
declare -A wl_short=([list]="tasks.list ($seed rows)" [list100]="tasks.list (100 rows)"
  [mixed]="mixed (80/20)" [create]=tasks.create)
declare -A wl_user=([list]=bench [list100]=bench100 [mixed]=bench [create]=bench)
declare -A user_seed=([bench]=$seed [bench100]=100)
# The owner the mixed run's trigger gives its new rows to.
moved_owner=bench-mixed-created
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
declare -A rps cpu cpu_us p99 errors count failure
# Keyed by "server/db/workload": each round's figures ("rps cpu_us cpu p99 errors count" lines),
# and the lowest and highest req/s of them.
declare -A samples rps_range

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

# sql DB TARGET SQL: runs SQL on that server's database (while the server runs: both databases
# let its open connections see the change on their next statement); prints what it selects.
sql() {
  local db=$1 target=$2 text=$3
  case $db in
    postgres) psql "$target" -X -qAt -v ON_ERROR_STOP=1 -c "$text" ;;
    sqlite) sqlite3 -bail -cmd '.timeout 5000' "$target" "$text" ;;
  esac
}

# mixed_trigger on|off|count DB TARGET: while on, every task inserted is given to $moved_owner, so
# the mixed run's creates leave the list it reads as it was (see the header); count prints how
# many tasks it moved.
mixed_trigger() {
  local what=$1 db=$2 target=$3
  case $what/$db in
    count/*) sql "$db" "$target" "SELECT count(*) FROM tasks WHERE owner = '$moved_owner'" ;;
    on/postgres) sql "$db" "$target" "CREATE FUNCTION bench_mixed_move() RETURNS trigger
      LANGUAGE plpgsql AS \$\$ BEGIN NEW.owner := '$moved_owner'; RETURN NEW; END \$\$;
      CREATE TRIGGER bench_mixed BEFORE INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION bench_mixed_move()" ;;
    on/sqlite) sql "$db" "$target" "CREATE TRIGGER bench_mixed AFTER INSERT ON tasks BEGIN
      UPDATE tasks SET owner = '$moved_owner' WHERE id = NEW.id; END" ;;
    off/postgres) sql "$db" "$target" "DROP TRIGGER bench_mixed ON tasks; DROP FUNCTION bench_mixed_move()" ;;
    off/sqlite) sql "$db" "$target" "DROP TRIGGER bench_mixed" ;;
  esac
}

start_server() { # NAME DB TARGET USER
  local name=$1 db=$2 target=$3 user=$4
  case $name in
    clank)
      start "$name" env CLANK_TASKS_DB="$target" CLANK_TASKS_USER="$user" \
        "$clank_run" --port 0 --no-watch --quiet "$root/apps/tasks/app.lua" ;;
    luasql)
      start "$name" env CLANK_TASKS_DB="$target" CLANK_TASKS_USER="$user" \
        "$clank_run" --port 0 --no-watch --quiet "$here/db/app_luasql.lua" ;;
    node)
      start "$name" node "$here/db/server.js" --port 0 --db "$target" --user "$user" --pool 4 ;;
  esac
  wait_url "$name"
}

# post PORT ACTION BODYFILE: the response body; fails unless 200 with "ok": true.
post() {
  local port=$1 action=$2 body=$3 out
  out=$(curl -s --max-time 10 -w '\n%{http_code}' -X POST -H 'content-type: application/json' \
    -H 'x-clank-confirmation: confirmed' --data-binary "@$body" "http://127.0.0.1:$port/actions/$action")
  if [ "${out##*$'\n'}" != 200 ] || ! jq -e '.ok == true' >/dev/null <<<"${out%$'\n'*}"; then
    log "POST /actions/$action answered: ${out:0:300}"
    return 1
  fi
  printf '%s\n' "${out%$'\n'*}"
}

# check_list NAME N: the running server's tasks.list answers N tasks.
check_list() {
  local name=$1 want=$2 n
  n=$(post "$server_port" tasks.list "$tmp/list.json" | jq '.output.tasks | length') || return 1
  if [ "$n" != "$want" ]; then
    log "$name: tasks.list lists $n tasks, not $want"
    return 1
  fi
}

# seed NAME N: N tasks for the running server's user, then a list that holds them all.
seed() {
  local name=$1 n=$2
  for _ in $(seq "$n"); do post "$server_port" tasks.create "$tmp/create.json" >/dev/null || return 1; done
  check_list "$name" "$n"
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

# run_wrk CORES CONNECTIONS SECONDS OUT URL SCRIPT ARGS...: in the background (wrk_pids) so that a
# signal to this script stops it at once; wait for it with wait_wrk.
run_wrk() {
  local core=$1 conns=$2 seconds=$3 out=$4 url=$5 script=$6
  shift 6
  timeout $((seconds + 30)) taskset -c "$core" \
    wrk -t"$threads" -c"$conns" -d"${seconds}s" --timeout 10s \
    -s "$here/db/$script" "$url" -- "$@" >"$out" 2>&1 &
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
  local name=$1 db=$2 wl=$3 key=$1/$2/$3 url args ticks0 ticks1 t0 t1
  url="http://127.0.0.1:$server_port"
  case $wl in
    list | list100) args=(wrk.lua POST "$tmp/list.json"); url+=/actions/tasks.list ;;
    create) args=(wrk.lua POST "$tmp/create.json"); url+=/actions/tasks.create ;;
    mixed) args=(wrk_mixed.lua "$tmp/list.json" "$tmp/create.json" 5) ;;
  esac
  run_wrk "$wrk_cpu" "$connections" "$warmup" "$tmp/warmup.wrk" "$url" "${args[@]}"
  wait_wrk || { failure[$key]="wrk failed during warm-up"; sed 's/^/  /' "$tmp/warmup.wrk" >&2; return 1; }
  ticks0=$(cpu_ticks "$server_pid"); t0=$EPOCHREALTIME
  run_wrk "$wrk_cpu" "$connections" "$duration" "$tmp/$name.wrk" "$url" "${args[@]}"
  wait_wrk || { failure[$key]="wrk failed"; sed 's/^/  /' "$tmp/$name.wrk" >&2; return 1; }
  t1=$EPOCHREALTIME; ticks1=$(cpu_ticks "$server_pid")
  kill -0 "$server_pid" 2>/dev/null || { failure[$key]="died during the run"; return 1; }
  record "$key" "$tmp/$name.wrk" || return 1
  cpu[$key]=$(awk -v dt=$((ticks1 - ticks0)) -v hz="$(getconf CLK_TCK)" -v t0="$t0" -v t1="$t1" \
    'BEGIN { printf "%.2f", dt / hz / (t1 - t0) }')
  # the CPU time of the run over the requests it answered: CPU x 1e6 / req/s
  cpu_us[$key]=$(awk -v dt=$((ticks1 - ticks0)) -v hz="$(getconf CLK_TCK)" -v n="${count[$key]}" \
    'BEGIN { if (n > 0) printf "%.1f", dt / hz * 1e6 / n }')
  log "$key: ${rps[$key]} req/s, p99 ${p99[$key]} ms, ${errors[$key]} errors, server at ${cpu[$key]}" \
    "of a core, ${cpu_us[$key]:-?} µs per request"
  samples[$key]+="${rps[$key]} ${cpu_us[$key]:--} ${cpu[$key]} ${p99[$key]} ${errors[$key]} ${count[$key]}"$'\n'
}

# The figures of each workload's median round (by req/s; the lower of the two middle ones when
# the rounds are even), and the range of its req/s. A workload that failed in any round stays
# failed: a server that answered wrongly once is not measured.
pick_medians() {
  local key sorted n line
  for key in "${!samples[@]}"; do
    [ -z "${failure[$key]:-}" ] || continue
    sorted=$(printf '%s' "${samples[$key]}" | sort -n -k1,1)
    n=$(wc -l <<<"$sorted")
    line=$(sed -n "$(((n + 1) / 2))p" <<<"$sorted")
    read -r "rps[$key]" "cpu_us[$key]" "cpu[$key]" "p99[$key]" "errors[$key]" "count[$key]" <<<"$line"
    [ "${cpu_us[$key]}" != - ] || cpu_us[$key]=
    rps_range[$key]="$(head -n 1 <<<"$sorted" | cut -d' ' -f1)-$(tail -n 1 <<<"$sorted" | cut -d' ' -f1)"
  done
}

selected() { [[ " $workloads " == *" $1 "* ]]; }

# bench NAME DB ROUND: the selected workloads in their order, a server started for each user (kept
# running across workloads of the same user), each user seeded once.
bench() {
  local name=$1 db=$2 round=$3 target wl user running='' key
  local -A seeded=()
  log "$name on $db, round $round of $rounds: starting"
  if ! target=$(fresh_db "$db" "${name}_${db}_$round"); then
    for wl in $workloads; do failure[$name/$db/$wl]="could not make its database"; done
    return
  fi
  for wl in $all_workloads; do
    selected "$wl" || continue
    key=$name/$db/$wl user=${wl_user[$wl]}
    if [ "$running" != "$user" ]; then
      stop_started
      running=$user
      if ! start_server "$name" "$db" "$target" "$user"; then
        failure[$key]="did not start"
        running=
        continue
      fi
    fi
    # the list answers what its user was seeded with (mixed's creates were moved away)
    if [ -z "${seeded[$user]:-}" ]; then
      seeded[$user]=1 # once only: after a failure here, the check below fails the next ones
      seed "$name" "${user_seed[$user]}" || { failure[$key]="answered wrongly"; continue; }
    elif ! check_list "$name" "${user_seed[$user]}"; then
      failure[$key]="its list is not as seeded"
      continue
    fi
    if [ "$wl" = mixed ]; then
      if ! mixed_trigger on "$db" "$target" >/dev/null; then failure[$key]="could not add the trigger"; continue; fi
      measure "$name" "$db" "$wl" || true
      if ! check_list "$name" "${user_seed[$user]}"; then
        failure[$key]="its list grew during the run"
      fi
      log "$key: $(mixed_trigger count "$db" "$target" || echo ?) tasks created in all by the mixed" \
        "runs (warm-up included), moved to $moved_owner"
      mixed_trigger off "$db" "$target" >/dev/null || { log "could not drop the trigger"; running=; stop_started; return; }
    else
      measure "$name" "$db" "$wl" || true
    fi
  done
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
  run_wrk "$server_cpu,$wrk_cpu" 20 $((duration + 2)) "$tmp/slow.wrk" "$url/actions/slow" wrk.lua POST "$tmp/list.json"
  sleep 1
  run_wrk "$wrk_cpu" 1 "$duration" "$tmp/manifest.wrk" "$url/manifest" wrk.lua GET -
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

# pad WIDTH TEXT: TEXT and spaces up to WIDTH characters (printf pads bytes; µ is two).
pad() {
  local width=$1 text=$2 plain=${2//µ/u}
  printf '%s%*s' "$text" $((width > ${#plain} ? width - ${#plain} : 0)) ''
}

server_label() { # NAME DB
  case $1 in
    clank) echo "clank (clank.db)" ;;
    luasql) echo "clank (LuaSQL)" ;;
    node) echo "fastify + ${node_driver[$2]}" ;;
  esac
}

print_report() {
  local db wl name key label
  echo
  echo "wrk -t$threads -c$connections -d${duration}s per workload (after ${warmup}s warm-up);"
  echo "servers on CPU $server_cpu, wrk on CPU $wrk_cpu, PostgreSQL unpinned. CPU: the server's share of a"
  echo "core; CPU µs/req: its CPU time per request answered (CPU x 1e6 / req/s). mixed: its creates"
  echo "are moved to another owner by a trigger, so its lists stay at $seed rows (see db.sh's header)."
  echo "Each figure is the round with the median req/s, of $rounds (req/s range: the lowest and highest)."
  for db in $dbs; do
    for wl in $all_workloads; do
      selected "$wl" || continue
      echo
      echo "${wl_label[$wl]} on ${db_label[$db]}:"
      printf '  %-24s %9s %13s %10s %8s %7s %7s %10s %9s\n' server req/s 'req/s range' 'CPU us/req' \
        'p99 ms' errors CPU 'vs luasql' 'vs node' | sed 's/CPU us/CPU µs/'
      for name in $servers; do
        key=$name/$db/$wl
        label=$(server_label "$name" "$db")
        if [ -n "${failure[$key]:-}" ] || [ -z "${rps[$key]:-}" ]; then
          printf '  %-24s not measured: %s\n' "$label" "${failure[$key]:-no figures}"
          continue
        fi
        printf '  %-24s %9s %13s %10s %8s %7s %7s %10s %9s\n' "$label" "${rps[$key]}" \
          "${rps_range[$key]}" "${cpu_us[$key]:--}" "${p99[$key]}" "${errors[$key]}" "${cpu[$key]}" \
          "$(ratio "${rps[$key]}" "${rps[luasql/$db/$wl]:-}")" "$(ratio "${rps[$key]}" "${rps[node/$db/$wl]:-}")"
      done
    done
  done
  if [[ " $dbs " == *" postgres "* ]]; then
    echo
    echo "GET /manifest (wrk -c1, ${duration}s, 10 s timeout) while 20 concurrent SELECT pg_sleep(0.2)"
    echo "run (wrk -c20):"
    printf '  %-24s %9s %9s %12s %7s\n' server 'p99 ms' answered 'timed out' 'slow/s'
    for name in $servers; do
      key=$name/slow
      label=$(server_label "$name" postgres)
      if [ -n "${failure[$key]:-}" ] || [ -z "${p99[$key]:-}" ]; then
        printf '  %-24s not measured: %s\n' "$label" "${failure[$key]:-no figures}"
        continue
      fi
      local shown=${p99[$key]}
      [ "${count[$key]}" != 0 ] || shown="> $((duration * 1000))"
      printf '  %-24s %9s %9s %12s %7s\n' "$label" "$shown" "${count[$key]}" "${errors[$key]}" \
        "${rps[$key/load]}"
    done
  fi
}

# target LABEL VALUE OP LIMIT [UNIT]: "met" or "missed", OP one of >= <= <.
target() {
  local label=$1 value=$2 op=$3 limit=$4 unit=${5:-} verdict=met
  if [ -z "$value" ] || [ "$value" = - ]; then
    printf '  %s not measured\n' "$(pad 66 "$label")"
    return
  fi
  awk -v v="${value%x}" -v l="$limit" -v op="$op" \
    'BEGIN { exit !(op == ">=" ? v >= l : op == "<=" ? v <= l : v < l) }' || verdict=missed
  printf '  %s %s%s, %s\n' "$(pad 66 "$label")" "$value" "$unit" "$verdict"
}

print_targets() {
  local db wl
  echo
  echo "targets:"
  for db in $dbs; do
    for wl in $all_workloads; do
      selected "$wl" || continue
      target "${wl_short[$wl]} on ${db_label[$db]}: clank >= 1.5x node" \
        "$(ratio "${rps[clank/$db/$wl]:-}" "${rps[node/$db/$wl]:-}")" ">=" 1.5
    done
    if selected list; then
      target "tasks.list ($seed rows) on ${db_label[$db]}: clank's CPU <= 30 µs/request" \
        "${cpu_us[clank/$db/list]:-}" "<=" 30 " µs"
    fi
  done
  if [[ " $servers " == *" luasql "* ]] && [[ " $dbs " == *" postgres "* ]]; then
    for wl in list create; do
      selected "$wl" || continue
      target "${wl_label[$wl]} on PostgreSQL: clank.db >= 2x LuaSQL" \
        "$(ratio "${rps[clank/postgres/$wl]:-}" "${rps[luasql/postgres/$wl]:-}")" ">=" 2
    done
  fi
  if [[ " $dbs " == *" postgres "* ]]; then
    local slow_p99=${p99[clank/slow]:-}
    [ "${count[clank/slow]:-0}" != 0 ] || slow_p99=
    target "GET /manifest p99 under 20 slow queries (clank.db) < 5 ms" "$slow_p99" "<" 5 " ms"
  fi
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
  local name db wl
  for name in $servers; do
    case $name in clank | luasql | node) ;; *) log "unknown server '$name' in BENCH_SERVERS"; exit 2 ;; esac
  done
  for db in $dbs; do
    case $db in postgres | sqlite) ;; *) log "unknown database '$db' in BENCH_DBS"; exit 2 ;; esac
  done
  for wl in $workloads; do
    case " $all_workloads " in *" $wl "*) ;; *) log "unknown workload '$wl' in BENCH_WORKLOADS"; exit 2 ;; esac
  done
  if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then log "BENCH_ROUNDS must be a whole number of at least 1"; exit 2; fi
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

  local round order
  for round in $(seq "$rounds"); do
    order=$servers
    ((round % 2)) || order=$(tr ' ' '\n' <<<"$servers" | tac | xargs)
    for db in $dbs; do
      for name in $order; do bench "$name" "$db" "$round"; done
    done
  done
  pick_medians
  if [[ " $dbs " == *" postgres "* ]]; then
    for name in $servers; do bench_slow "$name"; done
  fi
  print_setup
  print_report
  print_targets
}

main "$@"
