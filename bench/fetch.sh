#!/usr/bin/env bash
# bench/fetch.sh: sequential keep-alive GETs of a small file from one local
# nginx, by three clients in one run, so the figures compare like with like:
#   wrk     wrk -t1 -c1: the floor of a client (C, no parsing beyond framing)
#   node    Node's fetch (undici), bench/fetch/client.mjs
#   clank   clank.fetch from a runtime coroutine in lua5.4, bench/fetch/client.lua
# One request at a time on one connection: the figure is the client's cost per
# exchange. nginx is pinned to one core, the client to the other; req/s per
# core is requests divided by the client's CPU seconds (user + system).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
duration=${BENCH_DURATION:-5}
server_cpu=${BENCH_SERVER_CPU:-0}
client_cpu=${BENCH_CLIENT_CPU:-1}
build=${CLANK_BUILD:-$root/build}

log() { echo "fetch.sh: $*" >&2; }

"$root/vendor/deps.sh" --bench
[ -f "$build/clank.so" ] || { log "no $build/clank.so: build first (CLANK_BUILD picks another build)"; exit 2; }

tmp=$(mktemp -d)
chmod 755 "$tmp" # nginx workers run as another user when started by root
nginx_pid=
cleanup() {
  if [ -n "$nginx_pid" ]; then kill -TERM "$nginx_pid" 2>/dev/null || true; wait "$nginx_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# a port the kernel just gave out (nginx cannot report one it picked)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$tmp/www"
printf 'Hello, world!\n' >"$tmp/www/hello.txt"
cat >"$tmp/nginx.conf" <<CONF
worker_processes 1;
error_log $tmp/error.log warn;
pid $tmp/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 60s;
  client_body_temp_path $tmp/body;
  proxy_temp_path $tmp/proxy;
  fastcgi_temp_path $tmp/fastcgi;
  uwsgi_temp_path $tmp/uwsgi;
  scgi_temp_path $tmp/scgi;
  server {
    listen 127.0.0.1:$port;
    root $tmp/www;
  }
}
CONF
taskset -c "$server_cpu" nginx -p "$tmp" -e "$tmp/error.log" -c "$tmp/nginx.conf" -g 'daemon off;' &
nginx_pid=$!
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  kill -0 "$nginx_pid" 2>/dev/null || break
  sleep 0.1
done
url=http://127.0.0.1:$port/hello.txt
curl -sf "$url" >/dev/null || { log "nginx does not answer $url"; cat "$tmp/error.log" >&2; exit 1; }

export LUA_PATH="$root/lua/?.lua;$root/lua/?/init.lua;;" LUA_CPATH="$build/?.so;;"
declare -A cmd=(
  [wrk]="wrk -t1 -c1 -d${duration}s $url"
  [node]="node $here/fetch/client.mjs $url $duration"
  [clank]="lua5.4 $here/fetch/client.lua $url $duration"
)
declare -A rps per_core
for name in wrk node clank; do
  # a short run first (JIT, connection, page cache), then the measured one
  warm=${cmd[$name]//${duration}/1}
  taskset -c "$client_cpu" $warm >/dev/null 2>&1 || true
  /usr/bin/time -f '%U %S' -o "$tmp/$name.time" taskset -c "$client_cpu" ${cmd[$name]} >"$tmp/$name.out" 2>"$tmp/$name.err" ||
    { log "$name failed:"; cat "$tmp/$name.err" >&2; exit 1; }
  if [ "$name" = wrk ]; then
    n=$(awk '/requests in/ {print $1}' "$tmp/wrk.out")
    secs=$(awk '/requests in/ {sub(/s,$/, "", $4); print $4}' "$tmp/wrk.out")
  else
    read -r n secs <"$tmp/$name.out"
  fi
  read -r user sys <"$tmp/$name.time"
  rps[$name]=$(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')
  per_core[$name]=$(awk -v n="$n" -v u="$user" -v s="$sys" 'BEGIN {c = u + s; printf "%.0f", (c > 0 ? n / c : 0)}')
  log "$name: $n requests in $secs s, client CPU ${user}s user ${sys}s system"
done

printf '\nsequential keep-alive GET of a 14-byte file from nginx, %s s per client\n\n' "$duration"
printf '%-6s %10s %14s %10s %10s\n' client req/s req/s/core 'vs wrk' 'vs node'
for name in wrk node clank; do
  printf '%-6s %10s %14s %10s %10s\n' "$name" "${rps[$name]}" "${per_core[$name]}" \
    "$(awk -v a="${per_core[$name]}" -v b="${per_core[wrk]}" 'BEGIN {printf "%.2f", a / b}')" \
    "$(awk -v a="${per_core[$name]}" -v b="${per_core[node]}" 'BEGIN {printf "%.2f", a / b}')"
done
