#!/usr/bin/env bash
# bench/metrics.sh: what scraping /__clank/metrics once a second costs under load (SPEC §15,
# issue 17: "cheap enough to scrape every second under load"). clank-run serves bench/app.lua
# pinned to one core; wrk drives GET /hello from another, once alone and once with a second wrk
# scraping /__clank/metrics at 1 request per second (a wrk delay() of 1000 ms, one connection).
# Prints req/s of /hello both ways (medians of interleaved rounds) and the difference, and what
# one scrape costs the server core on its own; the target is a cost < 1 %.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
duration=${BENCH_DURATION:-5}             # seconds per measurement
rounds=${BENCH_ROUNDS:-3}                  # measurements each way
connections=${BENCH_CONNECTIONS:-50}
port=${BENCH_PORT:-18480}

. "$here/lib.sh"

cat > "$tmp/scrape.lua" <<'LUA'
-- one scrape a second; every answer must be a 200
function delay() return 1000 end
local bad = 0
function response(status) if status ~= 200 then bad = bad + 1 end end
function done(summary) io.write(string.format("scrapes: %d, not 200: %d\n", summary.requests, bad)) end
LUA

start_clank "$here/app.lua"

url=http://127.0.0.1:$port

rate() { awk '/Requests\/sec/ {print $2}'; }
hello() { taskset -c "$wrk_cpu" wrk -t1 -c"$connections" -d"${1}s" "$url/hello" | rate; }
scraping() { # hello for $1 s while a second wrk scrapes once a second
  taskset -c "$wrk_cpu" wrk -t1 -c1 -d"$(($1 + 1))s" -s "$tmp/scrape.lua" "$url/__clank/metrics" \
    >> "$tmp/scraper" &
  local scraper=$!
  sleep 0.5
  hello "$1"
  wait "$scraper"
}

hello 3 > /dev/null # warm-up
# Alone and scraped, interleaved, so that drift (CPU clocks, the other core) hits both alike.
: > "$tmp/alone"
: > "$tmp/scraped"
for i in $(seq "$rounds"); do
  hello "$duration" >> "$tmp/alone"
  scraping "$duration" >> "$tmp/scraped"
done
alone=$(median < "$tmp/alone")
scraped=$(median < "$tmp/scraped")
# What one scrape costs the server core: the metrics path alone at full speed.
scrape_rate=$(taskset -c "$wrk_cpu" wrk -t1 -c4 -d3s "$url/__clank/metrics" | rate)

echo "GET /hello, $connections connections, $rounds x ${duration}s each way (interleaved), server on cpu $server_cpu, wrk on cpu $wrk_cpu"
printf '  alone:                     %10.0f req/s (median of: %s)\n' "$alone" "$(paste -sd' ' "$tmp/alone")"
printf '  with a 1/s metrics scrape: %10.0f req/s (median of: %s)\n' "$scraped" "$(paste -sd' ' "$tmp/scraped")"
awk -v a="$alone" -v b="$scraped" 'BEGIN { printf "  measured cost:             %9.2f %% (target < 1 %%; within run-to-run noise)\n", (a - b) / a * 100 }'
awk -v r="$scrape_rate" 'BEGIN { printf "  one scrape alone:          %9.1f us of server CPU (%.0f scrapes/s), so 1/s costs %.3f %% of a core\n", 1e6 / r, r, 100 / r }'
grep scrapes "$tmp/scraper" | paste -sd';' | sed 's/^/  scraper: /'
curl -s "$url/__clank/metrics" | grep -E '^clank_requests_total\{kind="(route|runtime)"' | sed 's/^/  /'
