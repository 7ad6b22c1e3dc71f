#!/usr/bin/env bash
# Runs the fault drills (ctest label `drill`) against a build and writes their results as
# docs/drills.md: per drill its pass rule, what it measured, the verdict and the date.
#
#   tools/drills-report.sh [BUILD_DIR]     (default build/release; build it first: make build)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/release}"
rows="$(mktemp)"
trap 'rm -f "$rows"' EXIT
status=0
KVGATE_DRILL_REPORT="$rows" ctest --test-dir "$build" -L drill --output-on-failure || status=$?
{
  echo "# Fault drills"
  echo
  echo "Each drill starts real processes (kvgate, and one kvgate-mock per worker a fault must hit"
  echo "alone), drives streamed traffic on loopback, injects its fault, and judges the pass rule from"
  echo "the timestamps it records (tests/drills/, ctest label \`drill\`, run by \`make test\` and CI)."
  echo "This table is written by \`tools/drills-report.sh\` from one run on the 2-core development"
  echo "machine."
  echo
  echo "| drill | pass rule | measured | verdict | date |"
  echo "|---|---|---|---|---|"
  cat "$rows"
} > docs/drills.md
echo "drills-report: wrote docs/drills.md ($(wc -l < "$rows") drills)"
exit "$status"
