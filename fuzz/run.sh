#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, -DCLANK_FUZZ=ON, in build-fuzz) and runs each
# for SECONDS on a copy of its seed corpus, one after the other; any crash, sanitizer
# report, leak or broken invariant fails the run and is kept in build-fuzz/fuzz/artifacts.
#   fuzz/run.sh [SECONDS]                    60 by default (./dev test); bench/fuzz.sh: 600
#   CLANK_FUZZERS="render" fuzz/run.sh 30    only some harnesses
#   build-fuzz/fuzz/fuzz_render FILE         replays one input (an artifact, a seed)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=${CLANK_FUZZ_BUILD:-$root/build-fuzz}
harnesses=${CLANK_FUZZERS:-http_request live_frames json_schema render pattern bridge_checks}

CC=clang cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLANK_FUZZ=ON >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target fuzzers >/dev/null

# The committed corpus is never written to: what a run finds stays in the copy.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clank-fuzz.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

status=0
for name in $harnesses; do
  corpus=$tmp/$name
  artifacts=$build/fuzz/artifacts/$name
  mkdir -p "$corpus" "$artifacts"
  cp "$root/fuzz/corpus/$name/"* "$corpus/"
  echo "fuzz: $name for ${seconds}s" >&2
  # -timeout: one input running 10 s is a hang, and a finding.
  if timeout $((seconds + 120)) "$build/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" \
    >"$tmp/$name.log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/$name.log")
    echo "fuzz: $name: ${runs:-?} inputs, no finding; corpus $(find "$corpus" -type f | wc -l) files" >&2
  else
    status=1
    echo "fuzz: $name FAILED (inputs kept in $artifacts):" >&2
    grep -v '^\(#\|"\)' "$tmp/$name.log" | tail -n 80 >&2
  fi
done
exit $status
