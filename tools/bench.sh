#!/usr/bin/env bash
# Runs every micro benchmark binary briefly and writes JSON results to bench-out/.
# For the figures in docs/benchmarks.md use the exact commands written there instead.
set -euo pipefail
build_dir="${1:-build/release}"
out="bench-out"
mkdir -p "$out"
for b in "$build_dir"/bin/kvgate-bench-*; do
  [[ -x "$b" ]] || continue
  name=$(basename "$b")
  case "$name" in
    kvgate-bench-index) continue ;;  # the Mooncake harness needs a corpus: see docs/benchmarks.md
  esac
  echo "== $name"
  "$b" --benchmark_min_time=0.2 --benchmark_out="$out/$name.json" --benchmark_out_format=json
done
echo "bench: results in $out/"
