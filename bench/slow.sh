#!/usr/bin/env bash
# bench/slow.sh: slow clients (SPEC §13, issue 12). Two figures:
#  1. GET /hello latency (wrk --latency, 10 connections) alone and while 500 slowloris
#     connections send their heads a byte a second; the target is p99 < 50 ms beside them.
#  2. The server's RSS with 50 readers that never read an 8 MiB answer (the body is held
#     once, not copied per connection; issue 12 measured 415 MB before).
# Needs wrk and lua5.4 with LuaSocket (vendor/deps.sh --bench --test).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
duration=${BENCH_DURATION:-8} # seconds per wrk run (below the 10 s header deadline)
server_cpu=${BENCH_SERVER_CPU:-0}
wrk_cpu=${BENCH_WRK_CPU:-1}
clank_run=${CLANK_RUN:-$root/build/clank-run}
port=${BENCH_PORT:-18490}

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

cat > "$tmp/app.lua" <<'LUA'
local clank = require "clank"
local big = string.rep("0123456789abcdef", 1024 * 1024 // 2) -- 8 MiB
return clank.app({ name = "slow-bench", routes = {
  ["GET /hello"] = function() return { status = 200, body = "Hello, world!\n" } end,
  ["GET /big"] = function() return { status = 200, body = big } end,
} })
LUA

# Holds N connections that each send one byte of a request head a second (or, with
# "read", N connections that ask for /big and never read), for SECONDS.
cat > "$tmp/clients.lua" <<'LUA'
local socket = require "socket"
local port, n, mode, seconds = tonumber(arg[1]), tonumber(arg[2]), arg[3], tonumber(arg[4])
local head = "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
local conns = {}
local function open()
  local s = socket.tcp()
  s:setoption("tcp-nodelay", true)
  assert(s:connect("127.0.0.1", port))
  s:settimeout(0)
  if mode == "read" then s:send("GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") end
  return s
end
for i = 1, n do conns[i] = open() end
io.write("ready\n"); io.flush()
local t0, sent = socket.gettime(), 0
while socket.gettime() - t0 < seconds do
  if mode == "loris" then
    sent = sent % (#head - 4) + 1 -- never the end of the head
    for i, s in ipairs(conns) do
      local _, err = s:send(head:sub(sent, sent))
      if err == "closed" then s:close(); conns[i] = open() end
    end
  end
  socket.sleep(1)
end
LUA

start() {
  taskset -c "$server_cpu" "$clank_run" --quiet --no-watch --port "$port" "$tmp/app.lua" \
    > "$tmp/out" 2> "$tmp/err" &
  server=$!
  pids+=("$server")
  for _ in $(seq 100); do grep -q "serving" "$tmp/out" 2>/dev/null && break; sleep 0.05; done
  grep -q "serving" "$tmp/out" || { cat "$tmp/err" >&2; exit 1; }
}

p99() { # wrk --latency output → p99 in ms
  awk '$1 == "99%" { v = $2; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v) } else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 }
    printf "%.2f", v }'
}

run_wrk() {
  taskset -c "$wrk_cpu" wrk -t1 -c10 -d"${duration}s" --latency "http://127.0.0.1:$port/hello"
}

start
alone=$(run_wrk | tee "$tmp/alone.txt" | p99)
lua5.4 "$tmp/clients.lua" "$port" 500 loris "$((duration + 4))" > "$tmp/loris.out" &
pids+=("$!")
for _ in $(seq 100); do grep -q ready "$tmp/loris.out" 2>/dev/null && break; sleep 0.05; done
beside=$(run_wrk | tee "$tmp/beside.txt" | p99)
rps_alone=$(awk '/Requests\/sec/ { print $2 }' "$tmp/alone.txt")
rps_beside=$(awk '/Requests\/sec/ { print $2 }' "$tmp/beside.txt")
echo "GET /hello p99: ${alone} ms alone (${rps_alone} req/s), ${beside} ms beside 500 slowloris connections (${rps_beside} req/s); target < 50 ms"

rss() { awk '/VmRSS/ { printf "%d", $2 / 1024 }' "/proc/$server/status"; }
before=$(rss)
lua5.4 "$tmp/clients.lua" "$port" 50 read 3 > "$tmp/read.out" &
pids+=("$!")
for _ in $(seq 100); do grep -q ready "$tmp/read.out" 2>/dev/null && break; sleep 0.05; done
sleep 1.5
echo "RSS: ${before} MB idle, $(rss) MB with 50 readers that never read an 8 MiB answer (copied per connection: ~415 MB)"
