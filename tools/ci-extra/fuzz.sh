#!/usr/bin/env bash
# CI fuzz step: the KV-event batch decoder under libFuzzer + ASan + UBSan.
#
#   tools/ci-extra/fuzz.sh            configure the `fuzz` preset, build only events_decode_fuzz,
#                                     run it FUZZ_SECONDS (default 60) from the seed corpus
#   FUZZ_SECONDS=300 tools/ci-extra/fuzz.sh
#   KVGATE_FUZZ_BUILD_DIR=build/x ... build somewhere else (default build/fuzz-events; CI uses
#                                     build/asan, whose preset builds the fuzz targets too)
#
# Exits non-zero on a finding (libFuzzer writes the crashing input as crash-* / leak-* /
# timeout-* in FUZZ_ARTIFACTS, default build/fuzz-artifacts) or on a build failure. Two cores:
# about 2-3 minutes of build (less with a warm ccache) and the run itself.
set -euo pipefail

cd "$(dirname "$0")/../.."
seconds="${FUZZ_SECONDS:-60}"
build_dir="${KVGATE_FUZZ_BUILD_DIR:-build/fuzz-events}"
artifacts="${FUZZ_ARTIFACTS:-build/fuzz-artifacts}"
jobs="${FUZZ_BUILD_JOBS:-2}"

# Its own directory, configured with only the modules the fuzzer links (faster on two cores, and
# independent of the rest of the tree); `make fuzz` keeps the preset's build/fuzz.
if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake --preset fuzz -B "$build_dir" -DKVGATE_ONLY_MODULES="core;metrics;index;events" >/dev/null
fi
cmake --build "$build_dir" --target events_decode_fuzz -j "$jobs"

# libFuzzer adds what it finds to the first corpus directory: work on a copy of the seeds.
corpus="$(mktemp -d)"
trap 'rm -rf "$corpus"' EXIT
cp tests/events/fuzz/corpus/* "$corpus"/
mkdir -p "$artifacts"

echo "fuzz: events_decode_fuzz for ${seconds}s"
"$build_dir/bin/events_decode_fuzz" \
  -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus"
echo "fuzz: no finding"
