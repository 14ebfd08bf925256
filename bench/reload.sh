#!/usr/bin/env bash
# bench/reload.sh: hot reload (SPEC §14) of a copy of apps/tasks, in two figures:
#   latency  time from writing a new version of app.lua (temp file + rename, as editors save)
#            to the first response served by the new code, over BENCH_RELOADS reloads
#            (default 50): p50 and p99. The copy has one more route, GET /bench-version,
#            whose body is a number bumped at every write; a keep-alive client polls it as
#            fast as it can after each write.
#   memory   VmRSS of clank-run (/proc/PID/status) before and after BENCH_RSS_RELOADS more
#            reloads (default 200), each followed by one tasks.list call (so every
#            generation opens its own SQLite connection), once every old generation has
#            been closed; the growth in %.
# Targets: p99 < 100 ms; RSS growth < 5 %. Loopback only; stops by itself. The exit status
# is 1 when something could not be measured (no build, no start, a version never served,
# clank-run died), else 0 whether or not the targets were met. See bench/README.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
clank_run=${CLANK_RUN:-$root/build/clank-run}
reloads=${BENCH_RELOADS:-50}
rss_reloads=${BENCH_RSS_RELOADS:-200}

tmp=
server_pid=

log() { echo "reload.sh: $*" >&2; }
die() {
  log "$*"
  exit 1
}

cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=
  if [ -n "$tmp" ]; then rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

command -v lua5.4 >/dev/null || die "lua5.4 is missing (apt-get install lua5.4)"
lua5.4 -e 'require "socket"' 2>/dev/null || die "LuaSocket for Lua 5.4 is missing (apt-get install lua-socket)"

# clank-run, built only when missing (as http.sh does): a fresh build dir is Release.
if [ ! -x "$clank_run" ]; then
  build=${clank_run%/*}
  configure=(cmake -S "$root" -B "$build")
  [ -f "$build/CMakeCache.txt" ] || configure+=(-DCMAKE_BUILD_TYPE=Release)
  log "$clank_run is missing; building it"
  { "${configure[@]}" && cmake --build "$build" --target clank-run -j "$(nproc)"; } >&2 \
    || die "could not build $clank_run"
fi
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "${clank_run%/*}/CMakeCache.txt" 2>/dev/null || true)
echo "clank-run: $clank_run (build type: ${build_type:-unknown})"
case ${build_type:-} in
  Release | RelWithDebInfo) ;;
  *) echo "warning: not an optimized build; the figures are pessimistic" ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/clank-reload.XXXXXX")
mkdir "$tmp/app"
cp -r "$root/apps/tasks/app.lua" "$root/apps/tasks/store.lua" "$root/apps/tasks/public" "$tmp/app/"

# The template: apps/tasks plus GET /bench-version answering __BENCH_VERSION__ (it has no
# routes of its own: the line goes after its views).
route='  routes = { ["GET /bench-version"] = function() return { status = 200, body = "__BENCH_VERSION__" } end },'
awk -v route="$route" '{ print } /^  views = \{ TaskList \},$/ { print route; n++ }
  END { exit n == 1 ? 0 : 1 }' "$root/apps/tasks/app.lua" >"$tmp/template.lua" \
  || die "apps/tasks/app.lua has changed: no single '  views = { TaskList },' line to add the route after"
sed 's/__BENCH_VERSION__/0/' "$tmp/template.lua" >"$tmp/app/app.lua"

# one user, no accounts (the app's actions would otherwise need a sign-in)
CLANK_TASKS_DB=$tmp/tasks.db CLANK_TASKS_USER=bench "$clank_run" --host 127.0.0.1 --port 0 \
  --log text "$tmp/app/app.lua" \
  >"$tmp/out" 2>"$tmp/err" &
server_pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's|^clank-run: serving .* at http://127\.0\.0\.1:\([0-9]*\)/$|\1|p' "$tmp/out")
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$port" ] || die "clank-run did not start; stderr:
$(tail -n 20 "$tmp/err")"

# The driver: writes the versions, polls, reads VmRSS, counts closed generations in the log.
cat >"$tmp/driver.lua" <<'LUA'
local socket = require "socket"
local port, pid, dir, reloads, rss_reloads = arg[1], arg[2], arg[3], tonumber(arg[4]), tonumber(arg[5])
local app, err_log = dir .. "/app/app.lua", dir .. "/err"
local template = assert(io.open(dir .. "/template.lua", "rb")):read("a")
local now = socket.gettime

local function fail(msg)
  io.stderr:write("reload.sh: ", msg, "\n")
  os.exit(1)
end

-- One keep-alive connection, reopened when the server closes it.
local conn
local function request(method, path, body)
  for _ = 1, 2 do
    if not conn then
      conn = socket.tcp()
      conn:settimeout(5)
      if not conn:connect("127.0.0.1", port) then
        fail("cannot connect to clank-run on port " .. port)
      end
      conn:setoption("tcp-nodelay", true)
    end
    local req = method .. " " .. path .. " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if body then
      req = req .. "Content-Type: application/json\r\nContent-Length: " .. #body .. "\r\n"
    end
    local ok = conn:send(req .. "\r\n" .. (body or ""))
    local line = ok and conn:receive("*l")
    if line then
      local status = tonumber(line:match("^HTTP/1%.1 (%d%d%d)"))
      local length, close = 0, false
      while true do
        local h = assert(conn:receive("*l"))
        if h == "" then break end
        local name, value = h:match("^([^:]+):%s*(.-)%s*$")
        name = name:lower()
        if name == "content-length" then length = tonumber(value) end
        if name == "connection" and value:lower() == "close" then close = true end
      end
      local data = length > 0 and assert(conn:receive(length)) or ""
      if close then
        conn:close()
        conn = nil
      end
      return status, data
    end
    conn:close()
    conn = nil
  end
  fail(method .. " " .. path .. ": the connection failed twice")
end

local function rss_kib()
  local f = io.open("/proc/" .. pid .. "/status", "r")
  if not f then fail("clank-run (pid " .. pid .. ") is gone") end
  local kib = tonumber(f:read("a"):match("VmRSS:%s*(%d+) kB"))
  f:close()
  return kib
end

local function closed_generations()
  local n = 0
  for _ in assert(io.open(err_log, "rb")):read("a"):gmatch("generation closed; live generations: ") do
    n = n + 1
  end
  return n
end

local version = 0
-- Writes the next version (temp file, then rename) and returns how long it took until
-- GET /bench-version answered it.
local function reload()
  version = version + 1
  local want = tostring(version)
  local tmp = app .. ".new"
  local f = assert(io.open(tmp, "wb"))
  f:write((template:gsub("__BENCH_VERSION__", want)))
  f:close()
  local t0 = now()
  assert(os.rename(tmp, app))
  while true do
    local status, body = request("GET", "/bench-version")
    if status == 200 and body == want then
      return now() - t0
    end
    if now() - t0 > 5 then
      fail(("version %s not served within 5 s of the write (last answer: %s %q)")
        :format(want, tostring(status), body or ""))
    end
  end
end

local function wait_closed(n)
  local deadline = now() + 40 -- the default actionTimeout (30 s) + 5 s, and some
  while closed_generations() < n do
    if now() > deadline then
      fail(("only %d of %d old generations closed"):format(closed_generations(), n))
    end
    socket.sleep(0.05)
  end
end

local function tasks_list()
  local status, body = request("POST", "/actions/tasks.list", "{}")
  if status ~= 200 then fail("tasks.list answered " .. tostring(status) .. ": " .. tostring(body)) end
end

local function percentile(sorted, p) -- nearest rank
  return sorted[math.max(1, math.ceil(p / 100 * #sorted))]
end

assert(request("GET", "/bench-version") == 200)
tasks_list()
local rss_start = rss_kib()

local times = {}
for i = 1, reloads do
  times[i] = reload() * 1000
end
table.sort(times)
local sum = 0
for _, t in ipairs(times) do sum = sum + t end
local p50, p99 = percentile(times, 50), percentile(times, 99)
print(("latency  %d reloads, write to first new response: p50 %.1f ms, p99 %.1f ms "
  .. "(min %.1f, mean %.1f, max %.1f)"):format(reloads, p50, p99, times[1], sum / reloads, times[#times]))

wait_closed(version)
tasks_list()
local rss_before = rss_kib()
for _ = 1, rss_reloads do
  reload()
  tasks_list()
end
wait_closed(version)
local rss_after = rss_kib()
local growth = (rss_after - rss_before) / rss_before * 100
print(("memory   VmRSS %d KiB at start, %d KiB before %d reloads, %d KiB after: growth %.1f %%")
  :format(rss_start, rss_before, rss_reloads, rss_after, growth))

print("")
print(("target   p99 < 100 ms:        %.1f ms  %s"):format(p99, p99 < 100 and "met" or "NOT MET"))
print(("target   RSS growth < 5 %%:    %.1f %%  %s"):format(growth, growth < 5 and "met" or "NOT MET"))
LUA

echo "clank-run pid $server_pid on 127.0.0.1:$port, apps/tasks copied to $tmp/app"
lua5.4 "$tmp/driver.lua" "$port" "$server_pid" "$tmp" "$reloads" "$rss_reloads"
failed=$(grep -c 'reload failed' "$tmp/err" || true)
[ "$failed" = 0 ] || die "$failed reloads failed; stderr:
$(grep 'reload failed' "$tmp/err" | head -n 5)"
