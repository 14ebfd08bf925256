#!/usr/bin/env bash
# bench/fuzz.sh: every libFuzzer harness in fuzz/ for 10 minutes each (fuzz/run.sh).
#   bench/fuzz.sh                          600 s each, about half an hour in all
#   FUZZ_SECONDS=1800 bench/fuzz.sh        longer
#   CLANK_FUZZERS=http_request bench/fuzz.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../fuzz/run.sh" "${FUZZ_SECONDS:-600}"
