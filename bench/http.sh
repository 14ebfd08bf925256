#!/usr/bin/env bash
# bench/http.sh: wrk against four servers answering the same routes with the
# same statuses and equivalent bodies, in one run, so the ratios compare like
# with like on this machine today:
#   bare     bench/bare/bare.c, libuv + llhttp and fixed bytes: the floor
#   nginx    nginx + ngx_lua (LuaJIT), lua-cjson and a hand-written validator
#   fastify  Node with fastify + ajv (bench/node/server.js)
#   clank    clank-run serving bench/app.lua
# Workloads: GET /hello, GET /manifest, POST /actions/tasks.create with a valid
# and with an invalid body, and the last three again with 16 requests per write
# (pipelined). Each server runs alone, pinned to one core, wrk pinned to
# another. Figures are per server core (req/s divided by the server's CPU
# share), so a load generator that cannot quite saturate the server does not
# skew the ratios. Targets at the end of the report; see bench/README.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
fixtures=$here/fixtures

warmup=${BENCH_WARMUP:-2}             # seconds of wrk before each measurement
duration=${BENCH_DURATION:-5}         # seconds measured per server and workload
connections=${BENCH_CONNECTIONS:-50}
threads=${BENCH_THREADS:-1}
server_cpu=${BENCH_SERVER_CPU:-0}
wrk_cpu=${BENCH_WRK_CPU:-1}
servers=${BENCH_SERVERS:-bare nginx fastify clank}
workloads=${BENCH_WORKLOADS:-hello manifest valid invalid manifest-p16 valid-p16 invalid-p16}
clank_run=${CLANK_RUN:-$root/build/clank-run}

# The routes the workloads use: a workload is a route, or ROUTE-pN for N
# requests per write. Every server must answer each with route_status, a
# content type of route_type and a body equal to route_answer (byte for byte
# for hello, as parsed JSON for the others).
declare -A route_method=([hello]=GET [manifest]=GET [valid]=POST [invalid]=POST)
declare -A route_path=([hello]=/hello [manifest]=/manifest
  [valid]=/actions/tasks.create [invalid]=/actions/tasks.create)
declare -A route_body=([hello]=- [manifest]=- [valid]=valid.request.json [invalid]=invalid.request.json)
declare -A route_status=([hello]=200 [manifest]=200 [valid]=200 [invalid]=422)
declare -A route_type=([hello]='text/plain; charset=utf-8' [manifest]=application/json
  [valid]=application/json [invalid]=application/json)
declare -A route_answer=([hello]=hello.answer.txt [manifest]=manifest.json
  [valid]=valid.answer.json [invalid]=invalid.answer.json)
declare -A reason=([200]=OK [422]='Unprocessable Entity')

# Targets: workload, server, baseline, least ratio of req/s per core.
targets=(
  "hello clank bare 0.90"
  "valid clank nginx 1.3"
  "valid clank fastify 4"
  "valid-p16 clank nginx 4"
)

tmp=
wrk_pid=          # the wrk running now, for the trap
started=()        # pids of the servers still running, for the trap
server_pid='' server_port=''
load_before=
# Keyed by server or "server/workload"; refused by "server/route": why its answer was wrong.
declare -A rps cpu core per_core p99 errors failure refused

log() { echo "http.sh: $*" >&2; }

# route_of WORKLOAD and depth_of WORKLOAD: "valid-p16" is route valid, 16 deep.
route_of() { echo "${1%-p[0-9]*}"; }
depth_of() {
  case $1 in *-p[0-9]*) echo "${1##*-p}" ;; *) echo 1 ;; esac
}

# ------------------------------------------------------------ processes

# Stops a process we started: SIGTERM, then SIGKILL if it outlives 5 s.
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
  [ -z "$wrk_pid" ] || stop_pid "$wrk_pid"
  for pid in "${started[@]}"; do stop_pid "$pid"; done
  started=()
  if [ -n "$tmp" ]; then rm -rf "$tmp"; fi
}

# start NAME COMMAND...: runs the server pinned to the server core, output in
# $tmp/NAME.out and .err (appended to, so that the log can be emptied between
# workloads while the server writes to it); sets server_pid.
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

# Why a server did not come up, with the end of what it said.
startup_failure() {
  local name=$1 why=$2
  failure[$name]=$why
  log "$name: $why"
  if [ -s "$tmp/$name.err" ]; then
    tail -n 15 "$tmp/$name.err" | sed "s/^/  $name stderr: /" >&2
  fi
}

# wait_url NAME: clank-run, bare and node print one "... at http://127.0.0.1:PORT/"
# line once they listen; sets server_port from it.
wait_url() {
  local name=$1 line
  for _ in $(seq 100); do
    line=$(grep -o 'http://127\.0\.0\.1:[0-9]*/' "$tmp/$name.out" 2>/dev/null | head -n 1 || true)
    if [ -n "$line" ]; then
      server_port=${line#http://127.0.0.1:}
      server_port=${server_port%/}
      return 0
    fi
    kill -0 "$server_pid" 2>/dev/null || { startup_failure "$name" "exited before serving"; return 1; }
    sleep 0.1
  done
  startup_failure "$name" "printed no URL line within 10 s"
  return 1
}

# wait_port NAME PORT: for nginx, which prints nothing; polls until it accepts.
wait_port() {
  local name=$1 port=$2
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    kill -0 "$server_pid" 2>/dev/null || { startup_failure "$name" "exited before serving"; return 1; }
    sleep 0.1
  done
  startup_failure "$name" "did not accept on 127.0.0.1:$port within 10 s"
  return 1
}

# A port nobody listens on, for nginx (which cannot report a port it picked).
free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
}

# ------------------------------------------------------------ fixtures

# The body of a route's answer: hello's file as it is, a JSON file less its
# final newline (the bytes clank sends).
answer_body() {
  local file=$fixtures/${route_answer[$1]} text
  if [ "$1" = hello ]; then cat "$file"; return; fi
  text=$(<"$file")
  printf '%s' "$text"
}

# Request bodies without their final newline, shared by curl and wrk.
prepare_fixtures() {
  local route text
  for route in "${!route_body[@]}"; do
    [ "${route_body[$route]}" = - ] && continue
    text=$(<"$fixtures/${route_body[$route]}")
    printf '%s' "$text" >"$tmp/${route_body[$route]}"
  done
  answer_body manifest >"$tmp/manifest.json"
}

# The manifest's etag as clank computes it: 16 hex digits of its SHA-256.
manifest_etag() {
  local sum
  sum=$(sha256sum "$tmp/manifest.json")
  echo "\"${sum:0:16}\""
}

# ------------------------------------------------------------ servers

# The floor, compiled once into the temp dir with the project's warnings.
build_bare() {
  [ -x "$tmp/bare" ] && return 0
  local flags
  read -r -a flags <<<"$(pkg-config --cflags --libs libuv libllhttp)"
  cc -O2 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
    "$here/bare/bare.c" "${flags[@]}" -o "$tmp/bare" 2>"$tmp/bare.build"
}

# start_bare ROUTE: bare answers every request with the bytes of this route's
# answer, so it is started once per workload.
start_bare() {
  local route=$1 status=${route_status[$1]} response=$tmp/bare.$1.http body
  if ! build_bare; then
    cp "$tmp/bare.build" "$tmp/bare.err"
    startup_failure bare "bench/bare/bare.c does not build"
    return 1
  fi
  body=$tmp/bare.$route.body
  answer_body "$route" >"$body"
  {
    printf 'HTTP/1.1 %s %s\r\n' "$status" "${reason[$status]}"
    printf 'content-type: %s\r\ncontent-length: %s\r\n\r\n' "${route_type[$route]}" "$(wc -c <"$body")"
    cat "$body"
  } >"$response"
  start bare "$tmp/bare" --port 0 --response "$response"
  wait_url bare
}

# nginx as its own process: generated config, prefix in the temp dir, one
# worker, no access log, the Debian ndk and lua modules (their .conf files
# name the modules relative to the prefix, hence the modules symlink). The
# handlers are bench/nginx/bench.lua. keepalive_requests is raised from 1000
# so that nginx, like the others, keeps wrk's connections for the whole run.
start_nginx() {
  local dir=$tmp/nginx port
  port=$(free_port)
  mkdir -p "$dir"
  ln -s /usr/lib/nginx/modules "$dir/modules"
  cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
error_log $dir/error.log warn;
pid $dir/nginx.pid;
include /usr/share/nginx/modules-available/mod-http-ndk.conf;
include /usr/share/nginx/modules-available/mod-http-lua.conf;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  client_body_buffer_size 64k;
  client_max_body_size 64k;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  lua_package_path "$here/nginx/?.lua;;";
  init_by_lua_block {
    bench = require "bench"
    bench.init("$tmp/manifest.json", '$(manifest_etag)')
  }
  server {
    listen 127.0.0.1:$port;
    location = /hello { content_by_lua_block { bench.hello() } }
    location = /manifest { content_by_lua_block { bench.manifest() } }
    location = /actions/tasks.create { content_by_lua_block { bench.create() } }
  }
}
EOF
  start nginx nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" -g 'daemon off;'
  if ! wait_port nginx "$port"; then
    [ -s "$dir/error.log" ] && tail -n 5 "$dir/error.log" | sed 's/^/  nginx error.log: /' >&2
    return 1
  fi
  server_port=$port
}

# fastify on Node >= 20; its packages are installed from bench/package-lock.json
# when bench/node_modules is missing.
start_fastify() {
  local major
  major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if [ "$major" -lt 20 ]; then
    startup_failure fastify "needs Node >= 20 (node -v: $(node -v 2>/dev/null || echo none))"
    return 1
  fi
  if [ ! -d "$here/node_modules" ]; then
    log "fastify: installing bench/package-lock.json (npm ci)"
    if ! (cd "$here" && npm ci --no-audit --no-fund) >"$tmp/fastify.err" 2>&1; then
      startup_failure fastify "npm ci failed in bench/"
      return 1
    fi
  fi
  start fastify node "$here/node/server.js" --port 0 --manifest "$tmp/manifest.json"
  wait_url fastify
}

# clank-run, built only when missing: an existing binary belongs to whoever is
# working in its build dir. A fresh build dir is configured as Release; an
# existing one keeps its build type (print_setup shows it).
start_clank() {
  local build=${clank_run%/*} configure
  configure=(cmake -S "$root" -B "$build")
  [ -f "$build/CMakeCache.txt" ] || configure+=(-DCMAKE_BUILD_TYPE=Release)
  if [ ! -x "$clank_run" ]; then
    log "clank: $clank_run is missing; building it"
    if ! { "${configure[@]}" && cmake --build "$build" --target clank-run -j "$(nproc)"; } \
         >"$tmp/clank.err" 2>&1 || [ ! -x "$clank_run" ]; then
      startup_failure clank "could not build $clank_run"
      return 1
    fi
  fi
  start clank "$clank_run" --port 0 "$here/app.lua"
  wait_url clank
}

# ------------------------------------------------------------ checking answers

# media_type "application/json; charset=utf-8" -> application/json
media_type() {
  local t=${1%%;*}
  t=${t,,}
  echo "${t//[[:space:]]/}"
}

# check_route NAME ROUTE PORT: one request by hand (curl); the comparison only
# means something if every server sends the same status, content type and an
# equivalent body. A server that answers differently is not measured there.
check_route() {
  local name=$1 route=$2 port=$3 out status type ok=1 body=$tmp/$1.$2.body
  local args=(-s --max-time 5 -o "$body" -w '%{http_code}\n%{content_type}' -X "${route_method[$route]}")
  if [ "${route_body[$route]}" != - ]; then
    args+=(-H 'Content-Type: application/json' --data-binary "@$tmp/${route_body[$route]}")
  fi
  if ! out=$(curl "${args[@]}" "http://127.0.0.1:$port${route_path[$route]}"); then
    refused[$name/$route]="${route_method[$route]} ${route_path[$route]} failed"
    log "$name: ${refused[$name/$route]}"
    return 1
  fi
  status=${out%%$'\n'*}
  type=${out#*$'\n'}
  answer_body "$route" >"$tmp/expected.$route"
  [ "$status" = "${route_status[$route]}" ] || ok=0
  if [ "$route" = hello ]; then
    [ "$type" = "${route_type[$route]}" ] || ok=0
    cmp -s "$body" "$tmp/expected.$route" || ok=0
  else
    [ "$(media_type "$type")" = "${route_type[$route]}" ] || ok=0
    jq -e -n --slurpfile a "$body" --slurpfile b "$tmp/expected.$route" '$a == $b' \
      >/dev/null 2>&1 || ok=0
  fi
  local what="${route_method[$route]} ${route_path[$route]} ($route)"
  if [ "$ok" = 0 ]; then
    refused[$name/$route]="answers $what differently"
    log "$name: $what should be ${route_status[$route]} ${route_type[$route]} with fixtures/${route_answer[$route]}; it answered $status $type:"
    head -c 600 "$body" | sed 's/^/  /' >&2
    echo >&2
    return 1
  fi
  if cmp -s "$body" "$tmp/expected.$route"; then
    log "$name: $what ok (same bytes)"
  else
    log "$name: $what ok (equivalent JSON)"
  fi
}

# ------------------------------------------------------------ measuring

# CPU ticks (utime + stime) of a process and all its descendants: nginx
# serves from a worker, its master's child. A process's stat counts all its
# threads. Fields 14 and 15, counted after the ")" closing the command name.
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

# Busy ticks of one CPU from /proc/stat (user nice system irq softirq steal).
# Shown beside the server's own share: the difference is other processes, VM
# steal, and interrupt work done while the server slept (not charged to it).
core_ticks() {
  local name user nice system irq softirq steal
  while read -r name user nice system _ _ irq softirq steal _; do
    if [ "$name" = "cpu$1" ]; then
      echo $((user + nice + system + irq + softirq + steal))
      return
    fi
  done </proc/stat
  echo 0
}

# run_wrk SECONDS PORT WORKLOAD OUT: wrk on its own core, killed if it
# overruns. It runs in the background so that a signal to this script is
# handled at once (the trap stops it) instead of after the run.
run_wrk() {
  local seconds=$1 port=$2 workload=$3 out=$4 status=0 route body
  route=$(route_of "$workload")
  body=${route_body[$route]}
  [ "$body" = - ] || body=$tmp/$body
  timeout $((seconds + 30)) taskset -c "$wrk_cpu" \
    wrk -t"$threads" -c"$connections" -d"${seconds}s" --timeout 5s \
    -s "$here/wrk-report.lua" "http://127.0.0.1:$port${route_path[$route]}" \
    -- "${route_method[$route]}" "$body" "$(depth_of "$workload")" >"$out" 2>&1 &
  wrk_pid=$!
  wait "$wrk_pid" || status=$?
  wrk_pid=
  return "$status"
}

# report_field KEY LINE: a number from the line bench/wrk-report.lua prints.
report_field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$2"; }

# ratio A B: A / B as "1.23x", or "-" when either is missing.
ratio() {
  if [ -n "${1:-}" ] && [ -n "${2:-}" ] && [ "${2:-0}" != 0 ]; then
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'
  else
    echo -
  fi
}

# measure NAME WORKLOAD: warm-up, then the measured run with the server's CPU
# time read around it. A failure is recorded under NAME/WORKLOAD.
measure() {
  local name=$1 wl=$2 key=$1/$2 port=$server_port ticks0 ticks1 core0 core1 t0 t1 report
  : >"$tmp/$name.err"   # clank-run's access log: only this workload's
  if ! run_wrk "$warmup" "$port" "$wl" "$tmp/$name.warmup"; then
    failure[$key]="wrk failed during warm-up"
    log "$key: wrk failed during warm-up:"; sed 's/^/  /' "$tmp/$name.warmup" >&2
    return 1
  fi
  core0=$(core_ticks "$server_cpu"); ticks0=$(cpu_ticks "$server_pid"); t0=$EPOCHREALTIME
  if ! run_wrk "$duration" "$port" "$wl" "$tmp/$name.wrk"; then
    failure[$key]="wrk failed"
    log "$key: wrk failed:"; sed 's/^/  /' "$tmp/$name.wrk" >&2
    return 1
  fi
  t1=$EPOCHREALTIME; ticks1=$(cpu_ticks "$server_pid"); core1=$(core_ticks "$server_cpu")
  if ! kill -0 "$server_pid" 2>/dev/null; then
    startup_failure "$name" "died during the run"
    failure[$key]="died during the run"
    return 1
  fi

  report=$(grep '^wrk-report ' "$tmp/$name.wrk") || { failure[$key]="no wrk report"; return 1; }
  local requests duration_us p99_us socket_errors bad_status unexpected hz
  requests=$(report_field requests "$report"); duration_us=$(report_field duration_us "$report")
  p99_us=$(report_field p99_us "$report")
  socket_errors=$(report_field socket_errors "$report"); bad_status=$(report_field bad_status "$report")
  # wrk counts every status >= 400 as an error; the invalid route expects them.
  unexpected=$bad_status
  [ "${route_status[$(route_of "$wl")]}" -lt 400 ] || unexpected=$((requests - bad_status))
  hz=$(getconf CLK_TCK)
  rps[$key]=$(awk -v r="$requests" -v d="$duration_us" 'BEGIN { printf "%.0f", r / (d / 1e6) }')
  cpu[$key]=$(awk -v dt=$((ticks1 - ticks0)) -v hz="$hz" -v t0="$t0" -v t1="$t1" \
    'BEGIN { printf "%.3f", dt / hz / (t1 - t0) }')
  core[$key]=$(awk -v dt=$((core1 - core0)) -v hz="$hz" -v t0="$t0" -v t1="$t1" \
    'BEGIN { printf "%.3f", dt / hz / (t1 - t0) }')
  per_core[$key]=$(awk -v r="${rps[$key]}" -v c="${cpu[$key]}" \
    'BEGIN { if (c > 0) printf "%.0f", r / c; else print 0 }')
  p99[$key]=$(awk -v us="$p99_us" 'BEGIN { printf "%.2f", us / 1000 }')
  errors[$key]=$((socket_errors + unexpected))
  log "$key: ${rps[$key]} req/s at ${cpu[$key]} of a core"
}

# bench_bare: bare is started anew for each workload, since its answer is fixed.
bench_bare() {
  local wl route
  for wl in $workloads; do
    route=$(route_of "$wl")
    log "bare: starting for $wl"
    if start_bare "$route" && check_route bare "$route" "$server_port"; then
      measure bare "$wl" || true
    else
      failure[bare/$wl]=${refused[bare/$route]:-${failure[bare]:-did not start}}
    fi
    stop_started
  done
}

# bench NAME: start, check every route, measure every workload whose route was
# answered right, stop. Failures are recorded, not fatal.
bench() {
  local name=$1 wl route
  declare -A checked=()
  if [ "$name" = bare ]; then bench_bare; return; fi
  log "$name: starting"
  if ! "start_$name"; then
    for wl in $workloads; do failure[$name/$wl]=${failure[$name]}; done
    stop_started
    return
  fi
  for wl in $workloads; do
    route=$(route_of "$wl")
    if [ -z "${checked[$route]:-}" ]; then
      checked[$route]=1
      check_route "$name" "$route" "$server_port" || true
    fi
    if [ -n "${refused[$name/$route]:-}" ]; then
      failure[$name/$wl]="refused: ${refused[$name/$route]}"
    elif [ -n "${failure[$name]:-}" ]; then
      failure[$name/$wl]=${failure[$name]}
    else
      measure "$name" "$wl" || true
    fi
  done
  stop_started
}

# ------------------------------------------------------------ report

describe() {
  local route depth
  route=$(route_of "$1"); depth=$(depth_of "$1")
  printf '%s %s' "${route_method[$route]}" "${route_path[$route]}"
  case $route in valid) printf ' (valid body)' ;; invalid) printf ' (invalid body)' ;; esac
  printf ' -> %s' "${route_status[$route]}"
  [ "$depth" = 1 ] || printf ', %s requests per write' "$depth"
}

print_workload() {
  local wl=$1 name key
  echo
  echo "$wl: $(describe "$wl")"
  printf '  %-8s %9s %6s %6s %11s %7s %7s %8s %9s %9s\n' \
    server req/s CPU core req/s/core 'p99 ms' errors 'vs bare' 'vs nginx' 'vs fastify'
  for name in $servers; do
    key=$name/$wl
    if [ -n "${failure[$key]:-}" ] || [ -z "${per_core[$key]:-}" ]; then
      printf '  %-8s not measured: %s\n' "$name" "${failure[$key]:-${failure[$name]:-no figures}}"
      continue
    fi
    printf '  %-8s %9s %6s %6s %11s %7s %7s %8s %9s %9s\n' "$name" "${rps[$key]}" "${cpu[$key]}" \
      "${core[$key]}" "${per_core[$key]}" "${p99[$key]}" "${errors[$key]}" \
      "$(ratio "${per_core[$key]}" "${per_core[bare/$wl]:-}")" \
      "$(ratio "${per_core[$key]}" "${per_core[nginx/$wl]:-}")" \
      "$(ratio "${per_core[$key]}" "${per_core[fastify/$wl]:-}")"
  done
}

# join A B ...: "A, B, ..."
join() {
  local out='' item
  for item in "$@"; do out+="${out:+, }$item"; done
  echo "$out"
}

print_notes() {
  local wl name key idle=() failed=()
  for wl in $workloads; do
    for name in $servers; do
      key=$name/$wl
      [ -n "${per_core[$key]:-}" ] || continue
      if awk -v c="${cpu[$key]}" 'BEGIN { exit !(c < 0.9) }'; then idle+=("$key ${cpu[$key]}"); fi
      [ "${errors[$key]}" = 0 ] || failed+=("$key ${errors[$key]}")
    done
  done
  if [ ${#idle[@]} -gt 0 ]; then
    echo "note: below 0.9 of a core (wrk or other work was the limit; compare per core):"
    join "${idle[@]}" | fold -s -w 96 | sed 's/^/  /'
  fi
  if [ ${#failed[@]} -gt 0 ]; then
    echo "note: socket errors or unexpected statuses (see the wrk output): $(join "${failed[@]}")"
  fi
  echo "load average: $load_before before the run, $(cut -d' ' -f1-3 /proc/loadavg) after"
}

print_targets() {
  local target wl name base least got verdict
  echo
  echo "targets (req/s per server core):"
  for target in "${targets[@]}"; do
    read -r wl name base least <<<"$target"
    case " $workloads " in *" $wl "*) ;; *) continue ;; esac
    if [ -z "${per_core[$name/$wl]:-}" ] || [ -z "${per_core[$base/$wl]:-}" ]; then
      printf '  %-12s %s >= %sx %s: not measured\n' "$wl" "$name" "$least" "$base"
      continue
    fi
    got=$(ratio "${per_core[$name/$wl]}" "${per_core[$base/$wl]}")
    verdict=met
    awk -v a="${per_core[$name/$wl]}" -v b="${per_core[$base/$wl]}" -v t="$least" \
      'BEGIN { exit !(a / b >= t) }' || verdict='NOT met'
    printf '  %-12s %s >= %sx %s: %s, %s\n' "$wl" "$name" "$least" "$base" "$got" "$verdict"
  done
}

print_report() {
  local wl
  echo
  echo "wrk -t$threads -c$connections -d${duration}s per workload (after ${warmup}s warm-up), server on CPU $server_cpu, wrk on CPU $wrk_cpu"
  for wl in $workloads; do print_workload "$wl"; done
  echo
  print_notes
  print_targets
}

# Versions and build facts that change the figures, printed with them.
print_setup() {
  local cache=${clank_run%/*}/CMakeCache.txt type sanitize pkg
  echo "$(nproc) CPUs: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
  echo "llhttp $(pkg-config --modversion libllhttp), libuv $(pkg-config --modversion libuv)"
  for pkg in nginx libnginx-mod-http-lua libluajit2-5.1-2 lua-cjson; do
    printf '%s %s  ' "$pkg" "$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || echo '?')"
  done
  echo
  case " $servers " in
    *" fastify "*)
      echo "node $(node -v 2>/dev/null || echo none), fastify $(pkg_version fastify), ajv $(pkg_version ajv)" ;;
  esac
  case " $servers " in *" clank "*) ;; *) return 0 ;; esac
  if [ -f "$cache" ]; then
    type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")
    sanitize=$(sed -n 's/^CLANK_SANITIZE:[A-Z]*=//p' "$cache")
    echo "clank-run: $clank_run (build type ${type:-unset}, sanitizers ${sanitize:-unset})"
    case "$type" in Release | RelWithDebInfo) ;; *) echo "warning: clank-run is not an optimized build" ;; esac
    [ "${sanitize:-OFF}" = OFF ] || echo "warning: clank-run is built with sanitizers"
  fi
}

# pkg_version NAME: the version of an installed npm package in bench/.
pkg_version() {
  sed -n 's/^  "version": "\(.*\)",$/\1/p' "$here/node_modules/$1/package.json" 2>/dev/null || echo '?'
}

# ------------------------------------------------------------ main

check_settings() {
  local name wl route
  for name in $servers; do
    case $name in bare | nginx | fastify | clank) ;; *) log "unknown server '$name' in BENCH_SERVERS"; exit 2 ;; esac
  done
  for wl in $workloads; do
    route=$(route_of "$wl")
    if [ -z "${route_path[$route]:-}" ] || ! [[ $(depth_of "$wl") =~ ^[1-9][0-9]*$ ]]; then
      log "unknown workload '$wl' in BENCH_WORKLOADS (routes: ${!route_path[*]}, each optionally -pN)"
      exit 2
    fi
  done
  if [ "$server_cpu" = "$wrk_cpu" ]; then
    log "BENCH_SERVER_CPU and BENCH_WRK_CPU must differ"; exit 2
  fi
}

main() {
  check_settings
  "$root/vendor/deps.sh" --bench
  # In memory when possible: clank-run's access log (one line per request)
  # must not stall on a disk the other servers never write to.
  local base=${TMPDIR:-/tmp} name wl
  [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
  tmp=$(mktemp -d "$base/clank-bench.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  prepare_fixtures
  for name in $servers; do bench "$name"; done
  print_setup
  print_report

  for name in $servers; do
    for wl in $workloads; do [ -z "${failure[$name/$wl]:-}" ] || exit 1; done
  done
}

main "$@"
