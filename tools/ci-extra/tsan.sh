#!/usr/bin/env bash
# CI: the lock-free structures' stress tests under ThreadSanitizer (clang 14, -Wthread-safety).
# Builds the core, index, events and workers modules and their tests in build/tsan-ci, runs the
# concurrent cases short: the chain index under racing lanes and readers, the lane pool, event
# ingestion (real ZMQ sockets, event threads and lanes), the worker registry's snapshots read while
# the control path republishes, and the logger that never blocks. (`make tsan` runs every test.)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=build/tsan-ci
cmake --preset tsan -B "$dir" -DKVGATE_ONLY_MODULES="core;metrics;index;events;workers" \
  -DKVGATE_BUILD_BENCH=OFF >/dev/null
cmake --build "$dir" --target chain_index_test lane_pool_test events_ingest_test workers_test \
  core_log_test
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
"$dir/bin/lane_pool_test"
KVGATE_EXACTNESS_EVENTS=40000 "$dir/bin/chain_index_test" --gtest_filter='*Concurrent*:-*TwentyOfTwenty*'
"$dir/bin/events_ingest_test"
"$dir/bin/workers_test"
"$dir/bin/core_log_test"
echo "tsan: clean"
