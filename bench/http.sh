#!/usr/bin/env bash
# bench/http.sh: wrk against three servers answering GET /hello with the same
# body, in one run, so the ratios compare like with like on this machine today:
#   bare   bench/bare/bare.c, libuv + llhttp and a fixed answer: the floor
#   nginx  nginx with content_by_lua, one worker
#   clank  clank-run serving bench/app.lua
# Each server runs alone, pinned to one core, wrk pinned to another. Figures
# are per server core (req/s divided by the server's CPU share), so a load
# generator that cannot quite saturate the server does not skew the ratios.
# Target: clank >= 90 % of bare per core. See bench/README.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

warmup=${BENCH_WARMUP:-5}             # seconds of wrk before each measurement
duration=${BENCH_DURATION:-15}        # seconds measured per server
connections=${BENCH_CONNECTIONS:-50}
threads=${BENCH_THREADS:-1}
server_cpu=${BENCH_SERVER_CPU:-0}
wrk_cpu=${BENCH_WRK_CPU:-1}
servers=${BENCH_SERVERS:-bare nginx clank}
clank_run=${CLANK_RUN:-$root/build/clank-run}
target_percent=90

expected_body=$'Hello, world!\n'
expected_type='text/plain; charset=utf-8'

tmp=
wrk_pid=          # the wrk running now, for the trap
started=()        # pids of the servers still running, for the trap
declare -A rps cpu core per_core p99 errors failure

log() { echo "http.sh: $*" >&2; }

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
# $tmp/NAME.out and .err; sets server_pid.
start() {
  local name=$1; shift
  taskset -c "$server_cpu" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
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

# wait_url NAME: clank-run and bare print one "... at http://127.0.0.1:PORT/"
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

# ------------------------------------------------------------ servers

# The floor, compiled fresh into the temp dir with the project's warnings.
start_bare() {
  local flags
  read -r -a flags <<<"$(pkg-config --cflags --libs libuv libllhttp)"
  if ! cc -O2 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
      "$here/bare/bare.c" "${flags[@]}" -o "$tmp/bare" 2>"$tmp/bare.err"; then
    startup_failure bare "bench/bare/bare.c does not build"
    return 1
  fi
  start bare "$tmp/bare" --port 0
  wait_url bare
}

# nginx as its own process: generated config, prefix in the temp dir, one
# worker, no access log, the Debian ndk and lua modules (their .conf files
# name the modules relative to the prefix, hence the modules symlink).
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
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  server {
    listen 127.0.0.1:$port;
    location = /hello {
      content_by_lua_block {
        ngx.header["Content-Type"] = "text/plain; charset=utf-8"
        ngx.header["Content-Length"] = 14
        ngx.print("Hello, world!\\n")
      }
    }
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

# clank-run from the project's build, built only when missing: an existing
# binary belongs to whoever is working in build/. A fresh build/ is configured
# as Release; an existing one keeps its build type (print_setup shows it).
start_clank() {
  local configure=(cmake -S "$root" -B "$root/build")
  [ -f "$root/build/CMakeCache.txt" ] || configure+=(-DCMAKE_BUILD_TYPE=Release)
  if [ ! -x "$clank_run" ]; then
    log "clank: $clank_run is missing; building it"
    if ! { "${configure[@]}" && cmake --build "$root/build" --target clank-run -j "$(nproc)"; } \
         >"$tmp/clank.err" 2>&1 || [ ! -x "$clank_run" ]; then
      startup_failure clank "could not build $clank_run"
      return 1
    fi
  fi
  start clank "$clank_run" --port 0 "$here/app.lua"
  wait_url clank
}

# ------------------------------------------------------------ measuring

# check_response NAME PORT: one GET /hello by hand; the comparison only means
# something if all three send the same status, content type and body.
check_response() {
  local name=$1 port=$2 raw='' head body type
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$port" &&
        printf 'GET /hello HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nConnection: close\r\n\r\n' "$port" >&3 &&
        timeout 5 cat <&3) >"$tmp/$name.response" 2>/dev/null; then
    failure[$name]="GET /hello failed"
    log "$name: GET /hello failed"
    return 1
  fi
  IFS= read -r -d '' raw <"$tmp/$name.response" || true
  head=${raw%%$'\r\n\r\n'*}
  body=${raw#*$'\r\n\r\n'}
  type=$(printf '%s\n' "$head" | tr -d '\r' | sed -n 's/^[Cc]ontent-[Tt]ype: *//p')
  if [[ $head != "HTTP/1.1 200 "* || $type != "$expected_type" || $body != "$expected_body" ]]; then
    failure[$name]="GET /hello answers differently"
    log "$name: GET /hello should be 200, $expected_type, \"Hello, world!\\n\"; it answered:"
    sed 's/^/  /' "$tmp/$name.response" | head -n 20 >&2
    return 1
  fi
  log "$name: GET /hello ok, $(wc -c <"$tmp/$name.response") bytes with headers"
}

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

# run_wrk SECONDS PORT OUT: wrk on its own core, killed if it overruns. It
# runs in the background so that a signal to this script is handled at once
# (the trap stops it) instead of after the run.
run_wrk() {
  local seconds=$1 port=$2 out=$3 status=0
  timeout $((seconds + 30)) taskset -c "$wrk_cpu" \
    wrk -t"$threads" -c"$connections" -d"${seconds}s" --timeout 5s \
    -s "$here/wrk-report.lua" "http://127.0.0.1:$port/hello" >"$out" 2>&1 &
  wrk_pid=$!
  wait "$wrk_pid" || status=$?
  wrk_pid=
  return "$status"
}

# report_field KEY LINE: a number from the line bench/wrk-report.lua prints.
report_field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$2"; }

# measure NAME PORT: warm-up, then the measured run with the server's CPU
# time read around it.
measure() {
  local name=$1 port=$2 ticks0 ticks1 core0 core1 t0 t1 report
  if ! run_wrk "$warmup" "$port" "$tmp/$name.warmup"; then
    failure[$name]="wrk failed during warm-up"
    log "$name: wrk failed during warm-up:"; sed 's/^/  /' "$tmp/$name.warmup" >&2
    return 1
  fi
  core0=$(core_ticks "$server_cpu"); ticks0=$(cpu_ticks "$server_pid"); t0=$EPOCHREALTIME
  if ! run_wrk "$duration" "$port" "$tmp/$name.wrk"; then
    failure[$name]="wrk failed"
    log "$name: wrk failed:"; sed 's/^/  /' "$tmp/$name.wrk" >&2
    return 1
  fi
  t1=$EPOCHREALTIME; ticks1=$(cpu_ticks "$server_pid"); core1=$(core_ticks "$server_cpu")
  kill -0 "$server_pid" 2>/dev/null || { startup_failure "$name" "died during the run"; return 1; }

  report=$(grep '^wrk-report ' "$tmp/$name.wrk") || { failure[$name]="no wrk report"; return 1; }
  local requests duration_us p99_us socket_errors bad_status
  requests=$(report_field requests "$report"); duration_us=$(report_field duration_us "$report")
  p99_us=$(report_field p99_us "$report")
  socket_errors=$(report_field socket_errors "$report"); bad_status=$(report_field bad_status "$report")
  rps[$name]=$(awk -v r="$requests" -v d="$duration_us" 'BEGIN { printf "%.0f", r / (d / 1e6) }')
  cpu[$name]=$(awk -v dt=$((ticks1 - ticks0)) -v hz="$(getconf CLK_TCK)" -v t0="$t0" -v t1="$t1" \
    'BEGIN { printf "%.3f", dt / hz / (t1 - t0) }')
  core[$name]=$(awk -v dt=$((core1 - core0)) -v hz="$(getconf CLK_TCK)" -v t0="$t0" -v t1="$t1" \
    'BEGIN { printf "%.3f", dt / hz / (t1 - t0) }')
  per_core[$name]=$(awk -v r="${rps[$name]}" -v c="${cpu[$name]}" \
    'BEGIN { if (c > 0) printf "%.0f", r / c; else print 0 }')
  p99[$name]=$(awk -v us="$p99_us" 'BEGIN { printf "%.2f", us / 1000 }')
  errors[$name]=$((socket_errors + bad_status))
  log "$name: ${rps[$name]} req/s at ${cpu[$name]} of a core"
}

# bench NAME: start, check, measure, stop; a failure is recorded, not fatal.
bench() {
  local name=$1
  server_pid='' server_port=''
  log "$name: starting"
  if "start_$name" && check_response "$name" "$server_port"; then
    measure "$name" "$server_port" || true
  fi
  stop_started
}

# ------------------------------------------------------------ report

# percent A B: A as a percentage of B, or "-" when either is missing.
percent() {
  if [ -n "${1:-}" ] && [ -n "${2:-}" ] && [ "${2:-0}" != 0 ]; then
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f %%", 100 * a / b }'
  else
    echo -
  fi
}

print_table() {
  local name
  echo
  echo "wrk -t$threads -c$connections -d${duration}s (after ${warmup}s warm-up), server on CPU $server_cpu, wrk on CPU $wrk_cpu"
  printf '%-6s %10s %6s %6s %12s %8s %7s %14s %15s\n' \
    server req/s CPU core req/s/core 'p99 ms' errors 'vs bare/core' 'vs nginx/core'
  for name in $servers; do
    if [ -n "${failure[$name]:-}" ]; then
      printf '%-6s  failed: %s\n' "$name" "${failure[$name]}"
      continue
    fi
    printf '%-6s %10s %6s %6s %12s %8s %7s %14s %15s\n' "$name" "${rps[$name]}" "${cpu[$name]}" \
      "${core[$name]}" "${per_core[$name]}" "${p99[$name]}" "${errors[$name]}" \
      "$(percent "${per_core[$name]}" "${per_core[bare]:-}")" \
      "$(percent "${per_core[$name]}" "${per_core[nginx]:-}")"
  done
  echo
  for name in $servers; do
    if [ -z "${failure[$name]:-}" ] && awk -v c="${cpu[$name]}" 'BEGIN { exit !(c < 0.9) }'; then
      echo "note: $name used only ${cpu[$name]} of its core (wrk or other work was the limit): compare per core"
    fi
    if [ -z "${failure[$name]:-}" ] && [ "${errors[$name]}" != 0 ]; then
      echo "note: $name had ${errors[$name]} socket errors or non-2xx answers (see wrk output)"
    fi
  done
  if [ -n "${per_core[clank]:-}" ] && [ -n "${per_core[bare]:-}" ]; then
    local verdict=met
    awk -v a="${per_core[clank]}" -v b="${per_core[bare]}" -v t="$target_percent" \
      'BEGIN { exit !(100 * a / b >= t) }' || verdict='NOT met'
    echo "clank per core: $(percent "${per_core[clank]}" "${per_core[bare]}") of bare (target >= $target_percent %): $verdict"
  fi
}

# Build facts that change the figures, printed with them.
print_setup() {
  local cache=$root/build/CMakeCache.txt type sanitize
  echo "$(nproc) CPUs: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
  echo "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), llhttp $(pkg-config --modversion libllhttp), libuv $(pkg-config --modversion libuv)"
  case " $servers " in *" clank "*) ;; *) return 0 ;; esac
  if [ -f "$cache" ]; then
    type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")
    sanitize=$(sed -n 's/^CLANK_SANITIZE:[A-Z]*=//p' "$cache")
    echo "clank-run: $clank_run (build type ${type:-unset}, sanitizers ${sanitize:-unset})"
    case "$type" in Release | RelWithDebInfo) ;; *) echo "warning: clank-run is not an optimized build" ;; esac
    [ "${sanitize:-OFF}" = OFF ] || echo "warning: clank-run is built with sanitizers"
  fi
}

# ------------------------------------------------------------ main

main() {
  "$root/vendor/deps.sh" --bench
  local name
  for name in $servers; do
    case $name in bare | nginx | clank) ;; *) log "unknown server '$name' in BENCH_SERVERS"; exit 2 ;; esac
  done
  if [ "$server_cpu" = "$wrk_cpu" ]; then
    log "BENCH_SERVER_CPU and BENCH_WRK_CPU must differ"; exit 2
  fi
  # In memory when possible: clank-run's access log (one line per request)
  # must not stall on a disk the other servers never write to.
  local base=${TMPDIR:-/tmp}
  [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
  tmp=$(mktemp -d "$base/clank-bench.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  for name in $servers; do bench "$name"; done
  print_setup
  print_table

  for name in $servers; do [ -z "${failure[$name]:-}" ] || exit 1; done
}

main "$@"
