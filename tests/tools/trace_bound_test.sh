#!/usr/bin/env bash
# tools/trace-bound.py on a trace worked by hand (20,000 prompt tokens/s, 2x, 6 ms steps):
# row 0 is fresh and short (within the SLO); row 1 reuses both of row 0's 512-token blocks
# (39,976 tokens left: 1.999 s, within; 2.05 s without the reuse); row 2 is fresh and 50,000
# tokens long (2.5 s: not within) and ends last, at 1.0 + 2.5 + 100 x 0.006 = 4.1 s. So 2
# within, goodput at most 2 / 4.1 = 0.49 req/s.
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
trace=$(mktemp)
trap 'rm -f "$trace"' EXIT
cat >"$trace" <<'JSONL'
{"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]}
{"timestamp": 1000, "input_length": 41000, "output_length": 10, "hash_ids": [1, 2, 3]}
{"timestamp": 2000, "input_length": 50000, "output_length": 100, "hash_ids": [7, 8, 9]}
JSONL
out=$(/usr/bin/python3 "$src/tools/trace-bound.py" "$trace" --rows 0:3 --baseline-goodput 0.25)
echo "$out"
for want in "3 requests, 2 (0.667) can be within the 2000 ms TTFT SLO" "lasts at least 4.1 s" \
  "goodput at most 0.49 req/s = 1.951x 0.25 req/s"; do
  [[ "$out" == *"$want"* ]] || { echo "FAIL: missing: $want"; exit 1; }
done
echo PASS
