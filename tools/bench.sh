#!/usr/bin/env bash
# make bench: every benchmark briefly, results in bench-out/ (a smoke run of each, a few minutes in
# all). The figures in docs/benchmarks.md come from the exact, longer commands written there.
#
#   tools/bench.sh [BUILD_DIR]    (default build/release)
set -euo pipefail
build_dir="${1:-build/release}"
out="bench-out"
mkdir -p "$out"
bin="$build_dir/bin"

# Google Benchmark micro benches.
for name in kvgate-bench-core kvgate-bench-index-micro kvgate-bench-metrics; do
  echo "== $name"
  "$bin/$name" --benchmark_min_time=0.2 --benchmark_out="$out/$name.json" \
    --benchmark_out_format=json
done

# The harnesses, shortened.
echo "== kvgate-bench-decision (128 workers, 5,000 decisions)"
"$bin/kvgate-bench-decision" --workers 128 --decisions 5000 | tee "$out/kvgate-bench-decision.txt"
echo "== kvgate-bench-churn (20 s)"
"$bin/kvgate-bench-churn" --seconds 20 --window 10 | tee "$out/kvgate-bench-churn.txt"
echo "== kvgate-bench-relay (20,000 batches, 16,384-block snapshot, 20 subscribers, 400 lag batches)"
"$bin/kvgate-bench-relay" --batches 20000 --subscribers 20 --fanout-batches 100 --lag-batches 400 |
  tee "$out/kvgate-bench-relay.txt"
echo "== kvgate-bench-index: needs a Mooncake corpus (kvgate-corpus build); see docs/benchmarks.md"
echo "bench: results in $out/"
