#!/usr/bin/env bash
# bench/soak.sh: a long mixed load with hot reloads under it (issue 12). clank-run serves a
# copy of fuzz/app/app.lua; wrk (bench/soak.lua) sends SOAK_REQUESTS requests in a fixed mix
# (6 valid in 10 → 200; then 422 invalid input, 428 missing confirmation, 413 too large,
# 404 unknown), each answer checked against its own request; meanwhile the app file is
# rewritten and SIGHUP sent SOAK_RELOADS times, spread over the expected run time. RSS is
# sampled every SOAK_SAMPLE_SECONDS.
#   bench/soak.sh                                         1,000,000 requests, 1,000 reloads
#   SOAK_REQUESTS=50000 SOAK_RELOADS=50 bench/soak.sh     under a minute
#   CLANK_RUN=build-h3/clank-run bench/soak.sh            another build
# Other knobs: SOAK_CONNECTIONS (32), SOAK_THREADS (2), SOAK_WARMUP (20000 requests, not
# counted; its rate paces the reloads), SOAK_WARMUP_RELOADS (20: reloads under a second
# warm-up of as many requests, also not counted), SOAK_CHUNK_SECONDS (60: the length of one
# wrk run, whose p99 is one line).
# RSS at start is read after both warm-ups: the first reloads under load take RSS one step up,
# to where the run then stays (the reload path's code pages read for the first time, the
# allocator's pages once two generations have overlapped under requests), and that step is not
# growth over the run; the RSS after the first warm-up alone is printed too, with the growth
# from it.
# Prints RSS at start and end and the growth, answers by status, failed valid requests (a
# valid request answered other than 200, or any socket error) and p99 per minute (wrk runs in
# chunks of at most SOAK_CHUNK_SECONDS). Targets: RSS growth < 5 %, no failed valid request,
# no failed reload. Exit status: 0 when all are met, 1 otherwise or when something could not
# be measured.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
clank_run=${CLANK_RUN:-$root/build/clank-run}
requests=${SOAK_REQUESTS:-1000000}
reloads=${SOAK_RELOADS:-1000}
connections=${SOAK_CONNECTIONS:-32}
threads=${SOAK_THREADS:-2}
warmup=${SOAK_WARMUP:-20000}
warmup_reloads=${SOAK_WARMUP_RELOADS:-20}
expected_rps=15000 # until the warm-up measured it
sample=${SOAK_SAMPLE_SECONDS:-2}
chunk=${SOAK_CHUNK_SECONDS:-60} # one wrk run, one p99 line ("minute")

tmp=
server_pid=
reloader_pid=
sampler_pid=

log() { echo "soak.sh: $*" >&2; }
die() {
  log "$*"
  exit 1
}

stop_pid() { # stop_pid PID: TERM, then KILL after 5 s
  local pid=$1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  stop_pid "$reloader_pid"
  stop_pid "$sampler_pid"
  stop_pid "$server_pid"
  [ -z "$tmp" ] || rm -rf "$tmp"
}

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$server_pid/status" 2>/dev/null || echo 0; }

# run_wrk SECONDS ANSWERS OUT: one wrk run that stops after ANSWERS answers or SECONDS. Each
# thread marks its share done; wrk is then interrupted (SIGINT: it reports and exits).
run_wrk() {
  local marks=$tmp/done.$RANDOM. pid status=0 i
  rm -f "$marks"*
  timeout $(($1 + 30)) wrk -t"$threads" -c"$connections" -d"$1s" --timeout 5s \
    -s "$here/soak.lua" "http://127.0.0.1:$port/" -- "$2" "$threads" "$marks" >"$3" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for ((i = 1; i <= threads; i++)); do [ -e "$marks$i" ] || break; done
    if [ "$i" -gt "$threads" ]; then
      kill -INT "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.05
  done
  wait "$pid" || status=$?
  rm -f "$marks"*
  return "$status"
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

# Rewrites the app (a new first line, renamed into place as editors save) and sends SIGHUP,
# every GAP seconds; a reload that fails shows in the log.
reload_loop() {
  local gap=$1 i
  for i in $(seq "$reloads"); do
    { echo "-- soak reload $i"; cat "$tmp/app.orig.lua"; } >"$tmp/app.next.lua"
    mv "$tmp/app.next.lua" "$tmp/app.lua"
    kill -HUP "$server_pid" 2>/dev/null || return 0
    echo "$i" >"$tmp/reloads.sent"
    sleep "$gap"
  done
}

# The second warm-up's reloads, one every GAP seconds while its requests run.
warmup_reload_loop() {
  local gap=$1 i
  for i in $(seq "$warmup_reloads"); do
    { echo "-- soak warm-up reload $i"; cat "$tmp/app.orig.lua"; } >"$tmp/app.next.lua"
    mv "$tmp/app.next.lua" "$tmp/app.lua"
    kill -HUP "$server_pid" 2>/dev/null || return 0
    sleep "$gap"
  done
}

sample_loop() {
  while kill -0 "$server_pid" 2>/dev/null; do
    echo "$(date +%s) $(rss_kb)" >>"$tmp/rss"
    sleep "$sample"
  done
}

main() {
  command -v wrk >/dev/null || "$root/vendor/deps.sh" --bench
  [ -x "$clank_run" ] || die "$clank_run is missing: build it (cmake --build build) or set CLANK_RUN"
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/clank-soak.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cp "$root/fuzz/app/app.lua" "$tmp/app.orig.lua"
  cp "$tmp/app.orig.lua" "$tmp/app.lua"

  # --quiet: no access log line per request; reloads are still logged.
  "$clank_run" --quiet --no-watch --port 0 "$tmp/app.lua" >"$tmp/out" 2>"$tmp/err" &
  server_pid=$!
  port=
  for _ in $(seq 100); do
    port=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$tmp/out")
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$tmp/err" >&2; die "clank-run did not start"; }
  log "clank-run $server_pid on port $port; warm-up: $warmup requests"
  run_wrk 60 "$warmup" "$tmp/warmup" || { cat "$tmp/warmup" >&2; die "wrk failed in the warm-up"; }
  sleep 1
  local rss_first rss_start rss_end rss_max warm_pid warmed=0
  rss_first=$(rss_kb)
  if [ "$warmup_reloads" -gt 0 ]; then
    log "warm-up with reloads: $warmup requests, $warmup_reloads reloads"
    warmup_reload_loop 0.03 &
    warm_pid=$!
    run_wrk 60 "$warmup" "$tmp/warmup2" || { cat "$tmp/warmup2" >&2; die "wrk failed in the warm-up"; }
    wait "$warm_pid" || true
    # as at the end: the last reload finished and retired generations closed
    sleep 3
    warmed=$(grep -c 'reloaded in' "$tmp/err" || true)
  fi
  rss_start=$(rss_kb)

  # The reloads are spread over the run as long as the warm-up's rate says it will last.
  local gap report
  report=$(grep '^soak-report ' "$tmp/warmup") || die "no wrk report in the warm-up"
  expected_rps=$(awk -v n="$(field requests "$report")" -v d="$(field duration_us "$report")" \
    -v dflt="$expected_rps" 'BEGIN { r = (d > 0) ? n / (d / 1e6) : dflt; printf "%.0f", (r > 0) ? r : dflt }')
  gap=$(awk -v n="$requests" -v r="$reloads" -v rps="$expected_rps" \
    'BEGIN { g = (r > 0) ? n / rps / r : 1; if (g < 0.02) g = 0.02; printf "%.3f", g }')
  log "$requests requests, $reloads reloads (one every ${gap}s), $connections connections"
  echo 0 >"$tmp/reloads.sent"
  sample_loop &
  sampler_pid=$!
  if [ "$reloads" -gt 0 ]; then
    reload_loop "$gap" &
    reloader_pid=$!
  fi

  local left=$requests minute=0 total=0 failed=0 socket=0 odd=0 t0 t1
  local -a minutes=()
  declare -A by_status=()
  t0=$EPOCHREALTIME
  while [ "$left" -gt 0 ]; do
    minute=$((minute + 1))
    run_wrk "$chunk" "$left" "$tmp/wrk.$minute" || { cat "$tmp/wrk.$minute" >&2; die "wrk failed"; }
    report=$(grep '^soak-report ' "$tmp/wrk.$minute") || { cat "$tmp/wrk.$minute" >&2; die "no wrk report"; }
    local n p99 f s u st pair
    n=$(field requests "$report"); p99=$(field p99_us "$report")
    f=$(field failed_valid "$report"); s=$(field socket_errors "$report")
    u=$(field unexpected "$report"); st=$(field statuses "$report")
    [ "$n" -gt 0 ] || die "wrk got no answer (minute $minute)"
    total=$((total + n)); failed=$((failed + f)); socket=$((socket + s)); odd=$((odd + u))
    left=$((left - n))
    for pair in ${st//,/ }; do
      by_status[${pair%%:*}]=$((${by_status[${pair%%:*}]:-0} + ${pair##*:}))
    done
    minutes+=("$(printf 'minute %d: %d answers, %.0f req/s, p99 %.2f ms, failed valid %d, socket errors %d' \
      "$minute" "$n" "$(awk -v n="$n" -v d="$(field duration_us "$report")" 'BEGIN { print n / (d / 1e6) }')" \
      "$(awk -v us="$p99" 'BEGIN { print us / 1000 }')" "$f" "$s")")
    log "${minutes[-1]}"
    kill -0 "$server_pid" 2>/dev/null || die "clank-run died"
  done
  t1=$EPOCHREALTIME
  local sent during
  during=$(cat "$tmp/reloads.sent")
  if [ -n "$reloader_pid" ]; then
    [ "$during" -ge "$reloads" ] || log "the load ended after $during reloads; waiting for the rest"
    wait "$reloader_pid" || true
    reloader_pid=
  fi
  sent=$(cat "$tmp/reloads.sent")
  # Let the last reload finish and retired generations close before the end figure.
  sleep 3
  rss_end=$(rss_kb)
  stop_pid "$sampler_pid"
  sampler_pid=
  rss_max=$(awk 'BEGIN { m = 0 } $2 > m { m = $2 } END { print m }' "$tmp/rss")
  local reloaded reload_failed
  reloaded=$(($(grep -c 'reloaded in' "$tmp/err" || true) - warmed))
  reload_failed=$(grep -c 'reload failed' "$tmp/err" || true)
  kill -0 "$server_pid" 2>/dev/null || die "clank-run died"

  local growth statuses='' code
  growth=$(awk -v a="$rss_start" -v b="$rss_end" 'BEGIN { printf "%.2f", (b - a) * 100 / a }')
  local first_growth
  first_growth=$(awk -v a="$rss_first" -v b="$rss_end" 'BEGIN { printf "%.2f", (b - a) * 100 / a }')
  for code in $(printf '%s\n' "${!by_status[@]}" | sort -n); do
    statuses+="${statuses:+, }$code: ${by_status[$code]}"
  done
  echo
  echo "soak: $total answers in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s," \
    "$connections connections, $threads wrk threads; clank-run $clank_run"
  echo "  by status: $statuses"
  echo "  failed valid requests: $((failed + socket)) ($failed answered other than 200, $socket socket errors); unexpected statuses: $odd"
  echo "  reloads: $sent sent ($during during the load), $reloaded done, $reload_failed failed" \
    "(SIGHUP + rewritten app.lua)"
  echo "  RSS: $rss_start KiB after the warm-ups, $rss_end KiB at the end (max $rss_max KiB): growth $growth %"
  echo "  RSS after the first warm-up (requests only, no reload yet): $rss_first KiB; growth from it" \
    "$first_growth % (the one step the first reloads under load take; $warmed reloads in the warm-up)"
  printf '  %s\n' "${minutes[@]}"
  local met=1
  awk -v g="$growth" 'BEGIN { exit !(g < 5) }' || met=0
  [ $((failed + socket)) -eq 0 ] || met=0
  [ "$reload_failed" -eq 0 ] || met=0
  if [ $met = 1 ]; then
    echo "  targets (RSS growth < 5 %, no failed valid request, no failed reload): met"
  else
    echo "  targets (RSS growth < 5 %, no failed valid request, no failed reload): NOT met"
    return 1
  fi
}

main "$@"
