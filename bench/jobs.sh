#!/usr/bin/env bash
# bench/jobs.sh: durable jobs (issue 32): how many trivial jobs a second go from enqueue to done,
# and how long an idle worker takes to pick one up, on PostgreSQL and on SQLite, in one run
# beside a Node baseline, so the ratios compare like with like on this machine today:
#   clank       clank-run --workers 1 serving bench/jobs/app.lua: one job, noop, its jobsDb the
#               database (clank.db), jobConcurrency BENCH_JOB_CONCURRENCY
#   node        graphile-worker on Node (bench/jobs/node-graphile.js), PostgreSQL only (there is
#               no comparable Node job queue on SQLite), concurrentJobs the same, its defaults
#   node-batch  the same with graphile's batching on (localQueue, completeJobBatchDelay 0)
# Each server runs the job and answers POST /enqueue {"n","t"}, GET /done and GET /latencies in
# one process (see bench/jobs/app.lua), pinned to BENCH_SERVER_CPU; the clients (curl) run on
# BENCH_CLIENT_CPU, PostgreSQL unpinned, all on 127.0.0.1 (PostgreSQL on a unix socket only).
# Each server gets a fresh database: its own SQLite file, its own database in a throwaway
# PostgreSQL cluster started here (spec/helpers/postgres.sh). Per server and database:
#   throughput  BENCH_WARMUP_JOBS jobs to warm up, then BENCH_JOBS jobs in batches of BENCH_BATCH
#               (one enqueue request each) from BENCH_CLIENTS concurrent clients while the
#               worker runs: jobs/s from the first enqueue to the last job's run (the server's
#               clock, GET /done), the enqueue rate alone, and the CPU seconds per 1000 jobs of
#               the server (/proc, its processes and threads) and of PostgreSQL (the cluster's
#               processes, exited backends included)
#   latency     then, idle: BENCH_PROBES single jobs, one every BENCH_PROBE_GAP_MS, each stamped
#               with the wall clock when enqueued; the handler's run minus that stamp, p50/p99/max
#   churn       only when BENCH_CHURN is set (e.g. 1000000) and BENCH_SERVERS has clank: clank
#               alone, with jobRetention = 0, pushes that many jobs through, waits until the
#               runtime's pruning has emptied clank_jobs, and prints the table's size before, at
#               its peak and after
#               (PostgreSQL: pg_total_relation_size after a plain VACUUM, the peak sampled every
#               second without one; SQLite: (page_count - freelist_count) x page_size of the file)
# Targets at the end: >= 5,000 jobs/s on PostgreSQL, >= 2,000 on SQLite, pickup p99 < 50 ms on
# PostgreSQL (clank). Every wait is bounded; a server that does not start, answers wrongly or
# does not finish in time is reported "not measured" and the exit status is 1; else 0, whether
# or not the targets were met.
#   BENCH_JOBS=20000 BENCH_BATCH=1000 BENCH_CLIENTS=4 BENCH_WARMUP_JOBS=1000
#   BENCH_PROBES=200 BENCH_PROBE_GAP_MS=20 BENCH_JOB_CONCURRENCY=10
#   BENCH_SERVERS="clank node node-batch" BENCH_DBS="postgres sqlite"
#   BENCH_TIMEOUT (s, default 30 + jobs/200) for the jobs of one measure to be done
#   BENCH_CHURN (jobs; unset: no churn) BENCH_PRUNE_TIMEOUT=600 (s, for the table to empty)
#   BENCH_SQLITE_DIR (default: the temp dir; where the SQLite files go, a disk or a tmpfs)
#   BENCH_SERVER_CPU=0 BENCH_CLIENT_CPU=1 CLANK_RUN=build/clank-run
#   BENCH_JOBS_APP=bench/jobs/app.lua (another app with the same routes and environment)
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

# shellcheck source=lib.sh
. "$here/lib.sh" # tmp (removed on exit), clank_run, server_cpu, hz, pid, cpu_ticks, median

jobs=${BENCH_JOBS:-20000}
batch=${BENCH_BATCH:-1000}
clients=${BENCH_CLIENTS:-4}
warmup_jobs=${BENCH_WARMUP_JOBS:-1000}
probes=${BENCH_PROBES:-200}
probe_gap_ms=${BENCH_PROBE_GAP_MS:-20}
concurrency=${BENCH_JOB_CONCURRENCY:-10}
servers=${BENCH_SERVERS:-clank node node-batch}
dbs=${BENCH_DBS:-postgres sqlite}
churn=${BENCH_CHURN:-}
prune_timeout=${BENCH_PRUNE_TIMEOUT:-600}
client_cpu=${BENCH_CLIENT_CPU:-1}
sqlite_dir=${BENCH_SQLITE_DIR:-$tmp}
clank_app=${BENCH_JOBS_APP:-$here/jobs/app.lua}

declare -A db_label=([postgres]=PostgreSQL [sqlite]=SQLite)
declare -A server_label=([clank]="clank" [node]="graphile-worker" [node-batch]="graphile-worker, batched")

pgdir=
pg_url=
server_port=
current= # the name of the server running (its log is $tmp/$current.err)
last_ms= # GET /done's lastMs, set by wait_done
client_pids=()
load_before=
# Keyed by "server/db" (throughput and latency) or "churn/db".
declare -A rate enq_rate seconds cpu_k db_cpu_k p50 p99 pmax failure
declare -A churn_before churn_peak churn_peak_rows churn_after churn_rate churn_prune_s

log() { echo "jobs.sh: $*" >&2; }

for n in "$jobs" "$batch" "$clients" "$warmup_jobs" "$probes" "$probe_gap_ms" "$concurrency" \
         "$prune_timeout" ${churn:+"$churn"}; do
  [[ $n =~ ^[0-9]+$ ]] || { log "expected a whole number, got '$n' (BENCH_* variables)"; exit 2; }
done
if [ "$batch" -lt 1 ] || [ "$clients" -lt 1 ]; then log "BENCH_BATCH and BENCH_CLIENTS must be >= 1"; exit 2; fi

# ------------------------------------------------------------ processes

stop_pid() { # SIGTERM, at most 5 s, then SIGKILL
  local p=$1
  kill -TERM "$p" 2>/dev/null || return 0
  for _ in $(seq 50); do
    kill -0 "$p" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
}

stop_clients() {
  local p
  for p in "${client_pids[@]}"; do stop_pid "$p"; done
  client_pids=()
}

stop_current() {
  if [ -n "$pid" ]; then stop_pid "$pid"; fi
  pid=
}

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  stop_clients
  stop_current
  if [ -n "$pgdir" ]; then bash "$root/spec/helpers/postgres.sh" stop "$pgdir" || true; fi
  rm -f "$sqlite_dir/clank-bench-jobs.$$".*
  bench_cleanup
}

# start NAME TARGET [ENV=VALUE...]: the server pinned to the server core, its output in
# $tmp/NAME.out and .err; waits (at most 15 s) for its "... at http://127.0.0.1:PORT/" line and
# sets server_port, or says why not.
start() {
  local name=$1 target=$2 line flags=()
  shift 2
  if [ "$name" = node-batch ]; then flags=(--batch); fi
  current=$name
  : >"$tmp/$name.out"
  case $name in
    clank)
      env BENCH_JOBS_DB="$target" BENCH_JOBS_CONCURRENCY="$concurrency" "$@" \
        taskset -c "$server_cpu" "$clank_run" --port 0 --workers 1 --no-watch --quiet \
        "$clank_app" >"$tmp/$name.out" 2>"$tmp/$name.err" & ;;
    node | node-batch)
      env "$@" taskset -c "$server_cpu" node "$here/jobs/node-graphile.js" --port 0 --db "$target" \
        --concurrency "$concurrency" "${flags[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err" & ;;
  esac
  pid=$!
  for _ in $(seq 150); do
    line=$(grep -o 'http://127\.0\.0\.1:[0-9]*/' "$tmp/$name.out" 2>/dev/null | head -n 1 || true)
    if [ -n "$line" ]; then
      server_port=${line#http://127.0.0.1:}
      server_port=${server_port%/}
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || true
      pid=
      log "$name exited before serving:"
      tail -n 15 "$tmp/$name.err" | sed 's/^/  /' >&2
      return 1
    fi
    sleep 0.1
  done
  log "$name printed no URL line within 15 s:"
  tail -n 15 "$tmp/$name.err" | sed 's/^/  /' >&2
  stop_current
  return 1
}

# ------------------------------------------------------------ databases

# A database of its own for one server: prints the target (a path or a URL).
fresh_db() {
  local db=$1 name=${2//-/_}
  case $db in
    sqlite) echo "$sqlite_dir/clank-bench-jobs.$$.$name.db" ;;
    postgres)
      psql "$pg_url" -X -qAt -v ON_ERROR_STOP=1 -c "CREATE DATABASE bench_$name" >/dev/null
      echo "${pg_url/\/clank_test\?//bench_$name?}"
      ;;
  esac
}

# sql DB TARGET STATEMENT: the rows, one a line, columns separated by a space (SQLite through
# LuaSQL, which deps.sh --bench installs; it reads beside clank-run's writer, WAL).
sql() {
  local db=$1 target=$2 statement=$3
  case $db in
    postgres) psql "$target" -X -qAt -F ' ' -v ON_ERROR_STOP=1 -c "$statement" ;;
    sqlite)
      lua5.4 - "$target" "$statement" <<'EOF'
local env = require("luasql.sqlite3").sqlite3()
local conn = assert(env:connect(arg[1]))
assert(conn:execute("PRAGMA busy_timeout = 5000")):close()
local cur = assert(conn:execute(arg[2]))
if type(cur) == "userdata" then
  local row = cur:fetch({}, "n")
  while row do
    print(table.concat(row, " "))
    row = cur:fetch({}, "n")
  end
  cur:close()
end
conn:close()
env:close()
EOF
      ;;
  esac
}

# The bytes clank_jobs holds, as issue 32 measures them; VACUUM first unless "peak" (a sample
# taken while it runs).
table_bytes() { # DB TARGET [peak]
  local db=$1 target=$2 mode=${3:-}
  case $db in
    postgres)
      [ "$mode" = peak ] || sql "$db" "$target" "VACUUM clank_jobs" >/dev/null
      sql "$db" "$target" "SELECT pg_total_relation_size('clank_jobs')" ;;
    sqlite)
      echo $(($(sql "$db" "$target" "PRAGMA page_count") - $(sql "$db" "$target" "PRAGMA freelist_count"))) \
        "$(sql "$db" "$target" "PRAGMA page_size")" | awk '{ print $1 * $2 }' ;;
  esac
}

# CPU ticks of the PostgreSQL cluster: the postmaster (with the backends it reaped) and the
# processes it runs now; nothing when they cannot be read (the data folder is the postgres
# user's).
pg_ticks() {
  local pm child total
  pm=$(head -n 1 "$pgdir/data/postmaster.pid" 2>/dev/null) || return 0
  total=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pm/stat" 2>/dev/null) || return 0
  for child in $(pgrep -P "$pm" || true); do
    total=$((total + $(awk '{ print $14 + $15 }' "/proc/$child/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}

# ------------------------------------------------------------ the routes

# enqueue N TIMED: one POST /enqueue; fails unless 200 with "enqueued": N.
enqueue() {
  local n=$1 timed=$2 out body
  out=$(curl -s --max-time 60 -w '\n%{http_code}' -X POST -H 'content-type: application/json' \
    --data-binary "{\"n\":$n,\"t\":$timed}" "http://127.0.0.1:$server_port/enqueue") || true
  if [ "${out##*$'\n'}" != 200 ] || ! jq -e --argjson n "$n" '.enqueued == $n' >/dev/null 2>&1 <<<"${out%$'\n'*}"; then
    body=${out%$'\n'*}
    log "POST /enqueue {\"n\":$n} answered ${out##*$'\n'}: ${body:0:300}"
    return 1
  fi
}

# done_now: "DONE LASTMS" from GET /done.
done_now() {
  curl -s --max-time 10 "http://127.0.0.1:$server_port/done" \
    | jq -er 'if (.done | type) == "number" and (.lastMs | type) == "number"
              then "\(.done) \(.lastMs)" else error("GET /done: \(.)") end'
}

# wait_done COUNT DEADLINE_US: polls GET /done (every 50 ms) until it reaches COUNT; sets
# last_ms (so not run in a $(...), where a signal to this script would wait for it). Fails at
# the deadline (EPOCHREALTIME in µs), when the server dies, or when a client failed.
wait_done() {
  local want=$1 deadline=$2 answer
  while :; do
    answer=$(done_now) || answer=
    if [ -n "$answer" ] && [ "${answer% *}" -ge "$want" ]; then
      last_ms=${answer#* }
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then log "$current died"; return 1; fi
    if compgen -G "$tmp/client.*.failed" >/dev/null; then log "an enqueue failed"; return 1; fi
    if [ "${EPOCHREALTIME/./}" -gt "$deadline" ]; then
      log "timed out: ${answer% *} of $want jobs done"
      return 1
    fi
    sleep 0.05
  done
}

# push N: N jobs in batches of BENCH_BATCH (the last one smaller) from BENCH_CLIENTS clients in
# the background (client_pids), each writing its end time (µs) to $tmp/client.C.end.
push() {
  local total=$1 batches i c
  batches=$(((total + batch - 1) / batch))
  rm -f "$tmp"/client.*.failed "$tmp"/client.*.end
  for ((c = 0; c < clients; c++)); do
    (
      for ((i = c; i < batches; i += clients)); do
        n=$batch
        if [ $(((i + 1) * batch)) -gt "$total" ]; then n=$((total - i * batch)); fi
        enqueue "$n" false || { touch "$tmp/client.$c.failed"; exit 1; }
      done
      echo "${EPOCHREALTIME/./}" >"$tmp/client.$c.end"
    ) &
    client_pids+=("$!")
  done
}

wait_clients() {
  local p status=0
  for p in "${client_pids[@]}"; do wait "$p" || status=1; done
  client_pids=()
  return "$status"
}

deadline_for() { # JOBS → EPOCHREALTIME in µs, BENCH_TIMEOUT (or 30 s + 1 s per 200 jobs) from now
  echo $((${EPOCHREALTIME/./} + ${BENCH_TIMEOUT:-$((30 + $1 / 200))} * 1000000))
}

# ------------------------------------------------------------ measuring

# check: GET /done answers, and one enqueued job runs within 10 s.
check() {
  local before
  before=$(done_now) || { log "GET /done did not answer {\"done\": N, \"lastMs\": T}"; return 1; }
  enqueue 1 false || return 1
  wait_done $((${before% *} + 1)) $((${EPOCHREALTIME/./} + 10000000)) \
    || { log "one job enqueued, none ran within 10 s"; return 1; }
}

# throughput KEY DB: the warm-up, then BENCH_JOBS jobs; sets rate, enq_rate, seconds, cpu_k and
# db_cpu_k (PostgreSQL).
throughput() {
  local key=$1 db=$2 d0 t0 t_enq ticks0 ticks1 pg0 pg1
  if [ "$warmup_jobs" -gt 0 ]; then
    if ! d0=$(done_now) || ! push "$warmup_jobs" \
       || ! wait_done $((${d0% *} + warmup_jobs)) "$(deadline_for "$warmup_jobs")" \
       || ! wait_clients; then
      failure[$key]="the warm-up's jobs were not all done"
      stop_clients
      return 1
    fi
  fi
  d0=$(done_now) || { failure[$key]="GET /done did not answer"; return 1; }
  ticks0=$(cpu_ticks); pg0=$(pg_ticks); t0=${EPOCHREALTIME/./}
  push "$jobs"
  if ! wait_done $((${d0% *} + jobs)) "$(deadline_for "$jobs")"; then
    failure[$key]="the jobs were not all done"
    stop_clients
    return 1
  fi
  ticks1=$(cpu_ticks); pg1=$(pg_ticks)
  wait_clients || { failure[$key]="an enqueue failed"; return 1; }
  t_enq=$(cat "$tmp"/client.*.end | sort -n | tail -n 1)
  # t0 and t_enq: this script's wall clock (µs); last_ms: the server's, at the last job's run
  read -r "rate[$key]" "seconds[$key]" "enq_rate[$key]" < <(awk -v n="$jobs" -v t0="$t0" \
    -v last="$last_ms" -v te="$t_enq" \
    'BEGIN { s = (last * 1000 - t0) / 1e6; printf "%.0f %.2f %.0f\n", n / s, s, n / ((te - t0) / 1e6) }')
  cpu_k[$key]=$(awk -v t=$((ticks1 - ticks0)) -v hz="$hz" -v n="$jobs" \
    'BEGIN { printf "%.3f", t / hz / n * 1000 }')
  if [ "$db" = postgres ] && [ -n "$pg0" ] && [ -n "$pg1" ]; then
    db_cpu_k[$key]=$(awk -v t=$((pg1 - pg0)) -v hz="$hz" -v n="$jobs" \
      'BEGIN { printf "%.3f", t / hz / n * 1000 }')
  fi
  log "$key: $jobs jobs in ${seconds[$key]} s: ${rate[$key]} jobs/s (enqueued at" \
    "${enq_rate[$key]}/s); CPU s per 1000 jobs: server ${cpu_k[$key]}, PostgreSQL ${db_cpu_k[$key]:--}"
}

# latency KEY: BENCH_PROBES single jobs stamped with the wall clock, one every
# BENCH_PROBE_GAP_MS (paced from the start, not after each answer), on an idle server; sets p50,
# p99, pmax from GET /latencies.
latency() {
  local key=$1 d0 t0 now next i n
  sleep 1 # the throughput's last completions settle
  if ! curl -sf --max-time 10 "http://127.0.0.1:$server_port/latencies" >/dev/null || ! d0=$(done_now); then
    failure[$key/latency]="GET /done or /latencies did not answer"
    return 1
  fi
  t0=${EPOCHREALTIME/./}
  for ((i = 0; i < probes; i++)); do
    next=$((t0 + i * probe_gap_ms * 1000))
    now=${EPOCHREALTIME/./}
    if [ "$now" -lt "$next" ]; then
      sleep "$(printf '%d.%06d' $(((next - now) / 1000000)) $(((next - now) % 1000000)))"
    fi
    enqueue 1 true || { failure[$key/latency]="an enqueue failed"; return 1; }
  done
  wait_done $((${d0% *} + probes)) $((${EPOCHREALTIME/./} + 10000000)) \
    || { failure[$key/latency]="the probes were not all run within 10 s of the last"; return 1; }
  curl -s --max-time 10 "http://127.0.0.1:$server_port/latencies" | jq -r '.[]' | sort -g >"$tmp/latencies"
  n=$(wc -l <"$tmp/latencies")
  if [ "$n" != "$probes" ]; then
    failure[$key/latency]="GET /latencies gave $n figures for $probes probes"
    return 1
  fi
  read -r "p50[$key]" "p99[$key]" "pmax[$key]" < <(awk '{ v[NR] = $1 } END {
    i50 = int(NR * 0.50); if (i50 < NR * 0.50) i50++
    i99 = int(NR * 0.99); if (i99 < NR * 0.99) i99++
    printf "%d %d %d\n", v[i50], v[i99], v[NR] }' "$tmp/latencies")
  log "$key: pickup p50 ${p50[$key]} ms, p99 ${p99[$key]} ms, max ${pmax[$key]} ms"
}

# jobs_left KEY DB TARGET: what the jobs table holds once the server is idle (a check: no job
# lost, none left running), into the log.
jobs_left() {
  local name=${1%/*} db=$2 target=$3 states
  case $name in
    clank) states=$(sql "$db" "$target" "SELECT state, count(*) FROM clank_jobs GROUP BY state ORDER BY state" \
      2>/dev/null | paste -sd ',' | sed 's/,/, /g') || states="? (clank_jobs could not be read)" ;;
    node*) states="$(sql "$db" "$target" "SELECT count(*) FROM graphile_worker._private_jobs" 2>/dev/null \
      || echo '?') jobs (graphile deletes done ones)" ;;
  esac
  log "$1: the jobs table holds ${states:-nothing}"
}

# server_log: the tail of the running server's stderr, into the log (after a failure).
server_log() {
  if [ -s "$tmp/$current.err" ]; then
    log "$current's log ends with:"
    tail -n 15 "$tmp/$current.err" | cut -c 1-400 | sed 's/^/  /' >&2
  fi
}

bench() { # NAME DB
  local name=$1 db=$2 key=$1/$2 target
  log "$name on $db: starting"
  if ! target=$(fresh_db "$db" "${name}_$db") || ! start "$name" "$target"; then
    failure[$key]="did not start (log above)"
    return
  fi
  if ! check; then
    failure[$key]="answered wrongly or ran no job (log above)"
    server_log
    jobs_left "$key" "$db" "$target"
    stop_current
    return
  fi
  if ! throughput "$key" "$db" || ! latency "$key"; then server_log; fi
  jobs_left "$key" "$db" "$target"
  stop_current
}

# churn DB: BENCH_CHURN jobs through clank with jobRetention = 0, clank_jobs' size before, at
# its peak (sampled every second) and once pruning has emptied it.
churn() {
  local db=$1 key=churn/$1 target d0 t0 last answer rows bytes peak=0 peak_rows=0 deadline t_done t_empty
  log "churn on $db: starting ($churn jobs, jobRetention = 0)"
  if ! target=$(fresh_db "$db" "churn_$db") || ! start clank "$target" BENCH_JOBS_RETENTION=0; then
    failure[$key]="did not start (log above)"
    return
  fi
  if ! check; then
    failure[$key]="answered wrongly or ran no job (log above)"
    server_log
    stop_current
    return
  fi
  if ! churn_before[$key]=$(table_bytes "$db" "$target"); then
    failure[$key]="could not read clank_jobs' size"
    stop_current
    return
  fi
  d0=$(done_now) || { failure[$key]="GET /done did not answer"; stop_current; return; }
  t0=${EPOCHREALTIME/./}
  last=$d0
  deadline=$(deadline_for "$churn")
  push "$churn"
  # sample the table every second until every job ran
  while :; do
    if answer=$(done_now); then last=$answer; fi
    if [ "${last% *}" -ge $((${d0% *} + churn)) ]; then break; fi
    rows=$(sql "$db" "$target" "SELECT count(*) FROM clank_jobs" 2>/dev/null) || rows=0
    bytes=$(table_bytes "$db" "$target" peak 2>/dev/null) || bytes=0
    [ "$bytes" -gt "$peak" ] && peak=$bytes
    [ "$rows" -gt "$peak_rows" ] && peak_rows=$rows
    if ! kill -0 "$pid" 2>/dev/null || compgen -G "$tmp/client.*.failed" >/dev/null \
       || [ "${EPOCHREALTIME/./}" -gt "$deadline" ]; then
      failure[$key]="the jobs were not all done (${last% *} of $((${d0% *} + churn)))"
      stop_clients
      server_log
      stop_current
      return
    fi
    sleep 1
  done
  t_done=${EPOCHREALTIME/./}
  wait_clients || { failure[$key]="an enqueue failed"; stop_current; return; }
  churn_rate[$key]=$(awk -v n="$churn" -v t0="$t0" -v last="${last#* }" \
    'BEGIN { printf "%.0f", n / ((last * 1000 - t0) / 1e6) }')
  log "churn on $db: $churn jobs done (${churn_rate[$key]} jobs/s); waiting for pruning"
  deadline=$((${EPOCHREALTIME/./} + prune_timeout * 1000000))
  while :; do
    rows=$(sql "$db" "$target" "SELECT count(*) FROM clank_jobs" 2>/dev/null) || rows=-1
    if [ "$rows" = 0 ]; then break; fi
    bytes=$(table_bytes "$db" "$target" peak 2>/dev/null) || bytes=0
    [ "$bytes" -gt "$peak" ] && peak=$bytes
    [ "$rows" -gt "$peak_rows" ] && peak_rows=$rows
    if ! kill -0 "$pid" 2>/dev/null || [ "${EPOCHREALTIME/./}" -gt "$deadline" ]; then
      failure[$key]="clank_jobs still holds $rows rows ${prune_timeout} s after the last job ran"
      server_log
      stop_current
      return
    fi
    sleep 1
  done
  t_empty=${EPOCHREALTIME/./}
  churn_prune_s[$key]=$(awk -v a="$t_done" -v b="$t_empty" 'BEGIN { printf "%.0f", (b - a) / 1e6 }')
  churn_peak[$key]=$peak
  churn_peak_rows[$key]=$peak_rows
  churn_after[$key]=$(table_bytes "$db" "$target") || failure[$key]="could not read clank_jobs' size"
  log "churn on $db: clank_jobs ${churn_before[$key]} bytes before, ${churn_peak[$key]} at the peak" \
    "($peak_rows rows), ${churn_after[$key]} after (empty ${churn_prune_s[$key]} s after the last job)"
  stop_current
}

# ------------------------------------------------------------ report

ratio() {
  if [ -n "${1:-}" ] && [ -n "${2:-}" ] && [ "${2:-0}" != 0 ]; then
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'
  else
    echo -
  fi
}

size() { awk -v b="$1" 'BEGIN { if (b < 1048576) printf "%.0f KiB", b / 1024; else printf "%.1f MiB", b / 1048576 }'; }

print_report() {
  local db name key label
  echo
  echo "throughput: $jobs jobs in batches of $batch from $clients clients (after $warmup_jobs to warm up),"
  echo "job concurrency $concurrency; servers on CPU $server_cpu, clients on CPU $client_cpu, PostgreSQL unpinned"
  printf '  %-11s %-25s %8s %11s %8s %11s %11s %8s %11s\n' database server jobs/s enqueued/s seconds \
    'CPU/1000' 'PG CPU/1000' 'vs node' 'vs batched'
  for db in $dbs; do
    for name in $servers; do
      key=$name/$db
      label=${server_label[$name]}
      if [ "$db" = sqlite ] && [ "$name" != clank ]; then continue; fi
      if [ -n "${failure[$key]:-}" ] || [ -z "${rate[$key]:-}" ]; then
        printf '  %-11s %-25s not measured: %s\n' "${db_label[$db]}" "$label" "${failure[$key]:-no figures}"
        continue
      fi
      printf '  %-11s %-25s %8s %11s %8s %11s %11s %8s %11s\n' "${db_label[$db]}" "$label" \
        "${rate[$key]}" "${enq_rate[$key]}" "${seconds[$key]}" "${cpu_k[$key]}" "${db_cpu_k[$key]:--}" \
        "$(ratio "${rate[$key]}" "${rate[node/$db]:-}")" "$(ratio "${rate[$key]}" "${rate[node-batch/$db]:-}")"
    done
  done
  echo "  (jobs/s: from the first enqueue to the last job's run; CPU/1000: CPU seconds per 1000 jobs,"
  echo "  the server's own processes, and PostgreSQL's; graphile-worker has no SQLite queue)"
  echo
  echo "pickup latency: $probes single jobs, one every $probe_gap_ms ms, on an idle server:"
  echo "the job's run minus its enqueue, both on the wall clock (ms)"
  printf '  %-11s %-25s %6s %6s %6s %12s %15s\n' database server p50 p99 max 'p99 vs node' 'p99 vs batched'
  for db in $dbs; do
    for name in $servers; do
      key=$name/$db
      label=${server_label[$name]}
      if [ "$db" = sqlite ] && [ "$name" != clank ]; then continue; fi
      if [ -n "${failure[$key]:-}" ] || [ -n "${failure[$key/latency]:-}" ] || [ -z "${p99[$key]:-}" ]; then
        printf '  %-11s %-25s not measured: %s\n' "${db_label[$db]}" "$label" \
          "${failure[$key]:-${failure[$key/latency]:-no figures}}"
        continue
      fi
      printf '  %-11s %-25s %6s %6s %6s %12s %15s\n' "${db_label[$db]}" "$label" "${p50[$key]}" \
        "${p99[$key]}" "${pmax[$key]}" "$(ratio "${p99[$key]}" "${p99[node/$db]:-}")" \
        "$(ratio "${p99[$key]}" "${p99[node-batch/$db]:-}")"
    done
  done
  if [ -n "$churn" ] && [[ " $servers " == *" clank "* ]]; then
    echo
    echo "churn: $churn jobs through clank with jobRetention = 0; clank_jobs' size (PostgreSQL:"
    echo "pg_total_relation_size after VACUUM; SQLite: the file's used pages), the peak sampled each second"
    printf '  %-11s %8s %12s %12s %12s %12s %16s\n' database jobs/s before peak 'peak rows' after 'emptied after'
    for db in $dbs; do
      key=churn/$db
      if [ -n "${failure[$key]:-}" ] || [ -z "${churn_after[$key]:-}" ]; then
        printf '  %-11s not measured: %s\n' "${db_label[$db]}" "${failure[$key]:-no figures}"
        continue
      fi
      printf '  %-11s %8s %12s %12s %12s %12s %16s\n' "${db_label[$db]}" "${churn_rate[$key]}" \
        "$(size "${churn_before[$key]}")" "$(size "${churn_peak[$key]}")" "${churn_peak_rows[$key]}" \
        "$(size "${churn_after[$key]}")" "${churn_prune_s[$key]} s"
    done
  fi
}

# target LABEL VALUE OP LIMIT
target() {
  local label=$1 value=$2 op=$3 limit=$4 verdict=met
  if [ -z "$value" ]; then
    printf '  %-52s not measured\n' "$label"
    return
  fi
  awk -v v="$value" -v l="$limit" -v op="$op" 'BEGIN { exit !(op == ">=" ? v >= l : v < l) }' \
    || verdict='NOT met'
  printf '  %-52s %s, %s\n' "$label" "$value" "$verdict"
}

print_targets() {
  [[ " $servers " == *" clank "* ]] || return 0
  echo
  echo "targets (issue 32):"
  if [[ " $dbs " == *" postgres "* ]]; then
    target "throughput on PostgreSQL >= 5000 jobs/s" "${rate[clank/postgres]:-}" ">=" 5000
    target "pickup p99 on PostgreSQL < 50 ms" "${p99[clank/postgres]:-}" "<" 50
  fi
  if [[ " $dbs " == *" sqlite "* ]]; then
    target "throughput on SQLite >= 2000 jobs/s" "${rate[clank/sqlite]:-}" ">=" 2000
  fi
}

pkg_version() {
  sed -n 's/^  "version": "\(.*\)",$/\1/p' "$here/node_modules/$1/package.json" 2>/dev/null || echo '?'
}

print_setup() {
  local cache=${clank_run%/*}/CMakeCache.txt
  echo
  echo "$(nproc --all) CPUs: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
  echo "PostgreSQL $(psql "$pg_url" -X -qAt -c 'SHOW server_version' 2>/dev/null || echo '?')" \
    "(fsync off, synchronous_commit off: spec/helpers/postgres.sh)," \
    "SQLite $(pkg-config --modversion sqlite3 2>/dev/null || echo '?')," \
    "node $(node -v 2>/dev/null || echo none), graphile-worker $(pkg_version graphile-worker)"
  echo "SQLite files in $sqlite_dir ($(df --output=fstype "$sqlite_dir" 2>/dev/null | tail -n 1 || echo '?');" \
    "clank.db's SQLite: WAL, synchronous as built, FULL by default: a sync per commit)"
  if [ -f "$cache" ]; then
    echo "clank-run: $clank_run (build type $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")," \
      "sanitizers $(sed -n 's/^CLANK_SANITIZE:[A-Z]*=//p' "$cache"))"
  fi
  echo "load average: $load_before before the run, $(cut -d' ' -f1-3 /proc/loadavg) after"
}

# ------------------------------------------------------------ main

main() {
  local name db status=0
  for name in $servers; do
    case $name in clank | node | node-batch) ;; *) log "unknown server '$name' in BENCH_SERVERS"; exit 2 ;; esac
  done
  for db in $dbs; do
    case $db in postgres | sqlite) ;; *) log "unknown database '$db' in BENCH_DBS"; exit 2 ;; esac
  done
  "$root/vendor/deps.sh" --bench
  if [[ " $servers " == *" clank "* ]] && [ ! -x "$clank_run" ]; then
    log "$clank_run is missing: build it first (cmake --build build)"
    exit 1
  fi
  if [[ " $servers " == *" node"* ]] && [ ! -d "$here/node_modules/graphile-worker" ]; then
    # better-sqlite3 (bench/db.sh's) built here from its sources against the system's Node
    # headers: no prebuilt binary is downloaded
    log "node: installing bench/package-lock.json (npm ci, better-sqlite3 built from source)"
    (cd "$here" && npm_config_build_from_source=true npm_config_nodedir=/usr \
      npm ci --no-audit --no-fund) >&2
  fi

  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  pgdir=$(mktemp -d /tmp/clank-pg.XXXXXX)
  pg_url=$(bash "$root/spec/helpers/postgres.sh" start "$pgdir")
  # this script and all it runs from now on (the clients, curl, psql) on the client core;
  # PostgreSQL, started above, stays unpinned and the servers are pinned where they start
  taskset -pc "$client_cpu" $$ >/dev/null

  for db in $dbs; do
    for name in $servers; do
      if [ "$db" = sqlite ] && [ "$name" != clank ]; then continue; fi
      bench "$name" "$db" || true
    done
  done
  if [ -n "$churn" ] && [[ " $servers " == *" clank "* ]]; then
    for db in $dbs; do churn "$db" || true; done
  fi
  print_setup
  print_report
  print_targets
  for name in "${!failure[@]}"; do status=1; done
  exit "$status"
}

main "$@"
