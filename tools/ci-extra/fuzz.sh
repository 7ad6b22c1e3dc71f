#!/usr/bin/env bash
# CI fuzz step: the libFuzzer targets under ASan + UBSan, each for FUZZ_SECONDS from its seeds.
#
#   events_decode_fuzz    the KV-event batch decoder (what engines send), tests/events/fuzz/
#   request_model_fuzz    a client's request body as routing reads it, tests/app/fuzz/
#   engine_answers_fuzz   engines' answers: models, server info, load reports, /metrics
#   quick_head_fuzz       the quick HTTP/1.1 head parser against Beast's, tests/http/fuzz/
#
#   tools/ci-extra/fuzz.sh            configure the `fuzz` preset in build/fuzz, build the targets,
#                                     run each FUZZ_SECONDS (default 60)
#   FUZZ_SECONDS=300 tools/ci-extra/fuzz.sh
#   FUZZ_TARGETS=events_decode_fuzz tools/ci-extra/fuzz.sh     only some of them
#   KVGATE_FUZZ_BUILD_DIR=build/x ... build somewhere else (CI uses build/asan, whose preset
#                                     builds the fuzz targets too)
#
# Exits non-zero on a finding (libFuzzer writes the crashing input as crash-* / leak-* /
# timeout-* in FUZZ_ARTIFACTS, default build/fuzz-artifacts) or on a build failure. On two cores a
# fresh build/fuzz takes several minutes (the request model links the gateway's library).
set -euo pipefail

cd "$(dirname "$0")/../.."
seconds="${FUZZ_SECONDS:-60}"
build_dir="${KVGATE_FUZZ_BUILD_DIR:-build/fuzz}"
artifacts="${FUZZ_ARTIFACTS:-build/fuzz-artifacts}"
jobs="${FUZZ_BUILD_JOBS:-2}"
targets="${FUZZ_TARGETS:-events_decode_fuzz request_model_fuzz engine_answers_fuzz quick_head_fuzz}"

# Each target: its seed corpus and the largest input worth trying.
declare -A seeds=(
  [events_decode_fuzz]=tests/events/fuzz/corpus
  [request_model_fuzz]=tests/app/fuzz/corpus
  [engine_answers_fuzz]=tests/app/fuzz/engine_corpus
  [quick_head_fuzz]=tests/http/fuzz/corpus
)
declare -A max_len=([events_decode_fuzz]=8192 [request_model_fuzz]=4096 [engine_answers_fuzz]=4096
  [quick_head_fuzz]=2048)
for target in $targets; do
  [[ -n "${seeds[$target]:-}" ]] || { echo "fuzz: unknown target $target" >&2; exit 2; }
done

if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake --preset fuzz -B "$build_dir" >/dev/null
fi
# shellcheck disable=SC2086  # the targets are words
cmake --build "$build_dir" --target $targets -j "$jobs"
mkdir -p "$artifacts"

for target in $targets; do
  # libFuzzer adds what it finds to the first corpus directory: work on a copy of the seeds.
  corpus="$(mktemp -d)"
  cp "${seeds[$target]}"/* "$corpus"/
  echo "fuzz: $target for ${seconds}s"
  status=0
  "$build_dir/bin/$target" \
    -max_total_time="$seconds" -max_len="${max_len[$target]}" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" || status=$?
  rm -rf "$corpus"
  if [[ $status -ne 0 ]]; then
    echo "fuzz: $target found a failing input (see $artifacts/)"
    exit "$status"
  fi
done
echo "fuzz: no finding"
