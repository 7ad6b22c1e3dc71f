#!/usr/bin/env bash
# tools/compare-policies end to end on a small slice of the shipped trace excerpt: two labelled
# variants, one of whose labels holds a comma, each run once on a fresh 2-worker mock fleet
# behind the gateway. The medians table has a row per label with its own figures, the per-run
# lines name both, and a label that could not name a run folder ('/') is refused before any
# fleet starts.
#
#   tests/tools/compare_policies_test.sh BUILD_DIR   (ctest runs it as tools_compare_policies_test)
set -uo pipefail
build="${1:?usage: compare_policies_test.sh BUILD_DIR}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
KVG_NAME=tools_compare_policies_test
# shellcheck source=../../tools/replay/fleet.sh
source "$src/tools/replay/fleet.sh"
kvg_test_begin "$build"
fail() { echo "FAIL: $*"; exit 1; }

compare() {
  "$src/tools/compare-policies" "$build" --trace "$src/tools/replay/testdata/conversation_head.jsonl" \
    --rows 0:30 --speedup 20 --runs 1 --workers 2 \
    --replay-flags "--block-tokens 128 --max-output-tokens 8 --threads 1" "$@"
}

compare --out "$work/bad" --variant 'a/b|round_robin|' >"$work/bad.log" 2>&1
rc=$?
[[ $rc == 2 ]] || fail "a label with '/' exited $rc, not 2"
grep -q "no '/' in 'a/b'" "$work/bad.log" || fail "no reason for refusing 'a/b': $(cat "$work/bad.log")"
[[ ! -e "$work/bad" ]] || fail "a refused label still made $work/bad"

kvg_run 300 compare --out "$work/out" --variant 'plain|round_robin|' \
  --variant 'aware, cached|cache_aware|' >"$work/compare.log" 2>&1 ||
  { tail -30 "$work/compare.log"; fail "compare-policies exited non-zero"; }
table="$work/out/table.md"
[[ -f "$table" ]] || fail "no $table"
cat "$table"
# A row per label: the label, 1 run, then a hit/oracle figure.
for label in "plain" "aware, cached"; do
  grep -Eq "^\| $label \| 1 \| [0-9]+\.[0-9]{3} \|" "$table" || fail "no table row for '$label'"
  grep -q "^- $label: [0-9]" "$table" || fail "no per-run line for '$label'"
  [[ -f "$work/out/$label-1/summary.json" ]] || fail "no run folder for '$label'"
done
[[ $(grep -c '^| ' "$table") == 3 ]] || fail "the table has other rows than its head and the two labels"
kvg_test_passed
