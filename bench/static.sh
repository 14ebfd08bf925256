#!/usr/bin/env bash
# bench/static.sh: a 1 MiB static file (SPEC §15's app.static, sent with uv_fs_sendfile) beside
# nginx's sendfile on the same file, in one run (issue 17's target: at least 0.8x nginx per core).
# Each server runs alone, pinned to one core (nginx: one worker, access log off, sendfile on);
# wrk fetches the file over keep-alive from another core. Prints req/s, MiB/s and requests per
# server CPU-second (medians of interleaved rounds) and the ratio.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
duration=${BENCH_DURATION:-5}
rounds=${BENCH_ROUNDS:-3}
connections=${BENCH_CONNECTIONS:-10}
port=${BENCH_PORT:-18500}

command -v wrk >/dev/null && command -v nginx >/dev/null || bash "$root/vendor/deps.sh" --bench
. "$here/lib.sh"

mkdir -p "$tmp/app/public" "$tmp/nginx"
head -c 1048576 /dev/urandom > "$tmp/app/public/file.bin"
cat > "$tmp/app/app.lua" <<'LUA'
local clank = require "clank"
return clank.app { name = "static", static = { ["/assets"] = "public" } }
LUA
cat > "$tmp/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
error_log $tmp/nginx/error.log;
pid $tmp/nginx/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  types { application/octet-stream bin; }
  server {
    listen 127.0.0.1:$port;
    location /assets/ { alias $tmp/app/public/; }
  }
}
CONF

# nginx's worker runs as another user: it must be able to read the file (mktemp -d is 0700)
chmod -R a+rX "$tmp"

wait_up() {
  for _ in $(seq 100); do
    curl -fso /dev/null "http://127.0.0.1:$port/assets/file.bin" && return 0
    sleep 0.05
  done
  echo "static.sh: the server did not come up" >&2
  exit 1
}
start() { # start clank|nginx
  if [ "$1" = clank ]; then
    start_clank "$tmp/app/app.lua"
  else
    taskset -c "$server_cpu" nginx -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" 2> "$tmp/err" &
    pid=$!
  fi
  wait_up
  # the same bytes from both
  curl -fs "http://127.0.0.1:$port/assets/file.bin" | cmp -s - "$tmp/app/public/file.bin" \
    || { echo "static.sh: $1 served other bytes" >&2; exit 1; }
}

measure() { # prints: req/s MiB/s req-per-cpu-second
  local t0 t1 out rps
  t0=$(cpu_ticks)
  out=$(taskset -c "$wrk_cpu" wrk -t1 -c"$connections" -d"${duration}s" "http://127.0.0.1:$port/assets/file.bin")
  t1=$(cpu_ticks)
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  awk -v r="$rps" -v d="$duration" -v c="$((t1 - t0))" -v hz="$hz" \
    'BEGIN { printf "%.0f %.0f %.0f\n", r, r, (c > 0 ? r * d / (c / hz) : 0) }'
}
median_col() { awk -v k="$1" '{ print $k }' | median; }

: > "$tmp/clank.r"
: > "$tmp/nginx.r"
for i in $(seq "$rounds"); do
  for s in nginx clank; do
    start "$s"
    taskset -c "$wrk_cpu" wrk -t1 -c"$connections" -d1s "http://127.0.0.1:$port/assets/file.bin" > /dev/null
    measure >> "$tmp/$s.r"
    stop_server
  done
done

printf '%-7s %10s %10s %16s\n' server "req/s" "MiB/s" "req/cpu-second"
for s in nginx clank; do
  printf '%-7s %10s %10s %16s\n' "$s" "$(median_col 1 < "$tmp/$s.r")" "$(median_col 2 < "$tmp/$s.r")" \
    "$(median_col 3 < "$tmp/$s.r")"
done
n=$(median_col 3 < "$tmp/nginx.r")
c=$(median_col 3 < "$tmp/clank.r")
awk -v n="$n" -v c="$c" 'BEGIN { printf "clank / nginx per core: %.2f (target >= 0.8)\n", c / n }'
