#!/usr/bin/env bash
# CI: the lock-free structures' stress tests under ThreadSanitizer (clang 14, -Wthread-safety).
# Builds the index and events modules and their tests in build/tsan-ci, runs the concurrent cases
# short: the chain index under racing lanes and readers, the lane pool, and event ingestion (real
# ZMQ sockets, event threads and lanes).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=build/tsan-ci
if [[ ! -f $dir/build.ninja ]]; then
  cmake --preset tsan -B "$dir" -DKVGATE_ONLY_MODULES="core;metrics;index;events" -DKVGATE_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$dir" --target chain_index_test lane_pool_test events_ingest_test
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
"$dir/bin/lane_pool_test"
KVGATE_EXACTNESS_EVENTS=40000 "$dir/bin/chain_index_test" --gtest_filter='*Concurrent*:-*TwentyOfTwenty*'
"$dir/bin/events_ingest_test"
echo "tsan: clean"
