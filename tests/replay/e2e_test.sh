#!/usr/bin/env bash
# replay_e2e_test: a short replay end to end. A 4-worker kvgate-mock fleet (20x real time) and
# the kvgate gateway (cache_aware, chain index) run as processes; kvgate-replay sends 300 rows of
# the shipped trace excerpt at 20x (8x under a sanitizer) with short prompts (128 tokens per hash
# id) and outputs (at most 48 tokens); then the report's invariants are checked against its own
# CSV and the mock's request records:
#   the gateway's predicted cached tokens agree with the engines' reports within 2%,
#   every request answered, worker shares sum to 1, cached <= prompt tokens per request,
#   hit/oracle in (0, 1.05], TTFT <= e2e per request, each worker's share equals the requests
#   the mock itself recorded for that worker, and the oracle's event streams had no loss.
# Also: the flags a replay must refuse (--speedup 0 / nan / inf, bad --rows).
#
#   tests/replay/e2e_test.sh BUILD_DIR        (ctest runs it as replay_e2e_test)
set -uo pipefail
build="${1:?usage: e2e_test.sh BUILD_DIR}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
KVG_NAME=replay_e2e_test
# shellcheck source=../../tools/replay/fleet.sh
source "$src/tools/replay/fleet.sh"
kvg_test_begin "$build"
fail() { echo "FAIL: $*"; exit 1; }

replay="$build/bin/kvgate-replay"
trace="$src/tools/replay/testdata/conversation_head.jsonl"
[[ -x "$replay" ]] || fail "$replay is missing"

# Flags a replay must refuse before it sends anything.
# (Two rows at most: a flag wrongly accepted ends quickly, with exit 0, against a closed port.)
for bad in "--speedup 0" "--speedup -2" "--speedup nan" "--speedup inf" "--rows 5:3" \
  "--rows x" "--length-factor 0" "--length-factor 2" "--block-tokens 0" "--block-tokens 1000" \
  "--slo-ttft-ms 0"; do
  # shellcheck disable=SC2086
  if timeout 20 "$replay" --target http://127.0.0.1:9 --trace "$trace" --rows 0:2 $bad \
    --out "$work/bad" >"$work/bad.out" 2>&1; then
    fail "kvgate-replay accepted $bad"
  fi
done
grep -q "positive finite" <(
  "$replay" --target http://127.0.0.1:9 --trace "$trace" --speedup 0 2>&1
) || fail "--speedup 0 is not explained"

kvg_start_mock 4 --speedup 20 --threads 1 || fail "mock fleet did not start"
kvg_start_gateway cache_aware --kv-index chain --threads 1 || fail "gateway did not start"
kvg_wait_routable 4 30 || fail "fleet not routable"

# (Under a sanitizer the gateway and the mock run far slower: at 20x the requests queue for
# seconds, and what other requests store or evict between a decision and the engine's admission
# moves the engines' reports off the prediction by more than the 2% held below. 8x keeps the
# queues short there.)
speedup=20
[[ -z "${KVGATE_SANITIZER:-}" ]] || speedup=8
kvg_run 120 "$replay" --target "$KVG_GATEWAY_URL" --trace "$trace" --rows 0:300 --speedup "$speedup" \
  --block-tokens 128 --max-output-tokens 48 --threads 1 --out "$work/out" --no-progress \
  >"$work/replay.out" 2>"$work/replay.err"
rc=$?
cat "$work/replay.out"
[[ $rc == 0 ]] || { tail -20 "$work/replay.err"; fail "kvgate-replay exited $rc"; }

# The mock's own records, per worker (a fresh fleet: every record is one of ours).
for url in $KVG_WORKER_URLS; do
  curl -sf --max-time 10 "$url/admin/requests?limit=100000" >"$work/records-${url##*:}.json" ||
    fail "cannot read $url/admin/requests"
done

# The gateway's own account: the cached tokens the engines reported against its index's
# prediction, summed over the workers, agree within 2%.
curl -sf --max-time 10 "$KVG_GATEWAY_URL/metrics" >"$work/gateway.metrics" ||
  fail "cannot read the gateway's /metrics"
sum_of() { sed -n "s/^$1{.*} \([0-9.e+]*\)$/\1/p" "$work/gateway.metrics" | awk '{s += $1} END {printf "%d", s}'; }
predicted="$(sum_of kvgate_cached_tokens_predicted_total)"
reported="$(sum_of kvgate_cached_tokens_reported_total)"
"$KVG_PY" -c "
p, r = $predicted, $reported
a = 1 - abs(r - p) / max(p, r, 1)
print(f'cached tokens: predicted {p}, reported {r}, agreement {a:.4f}')
raise SystemExit(0 if r > 0 and a >= 0.98 else 1)" ||
  fail "the gateway's predicted and the engines' reported cached tokens differ by more than 2%"

"$KVG_PY" - "$work" "$KVG_WORKER_URLS" <<'PY' || fail "report invariants"
import csv, glob, json, sys
work, urls = sys.argv[1], sys.argv[2].split()
s = json.load(open(f"{work}/out/summary.json"))
rows = list(csv.DictReader(open(f"{work}/out/requests.csv")))
bad = []
def check(cond, what):
    if not cond:
        bad.append(what)

check(s["requests"] == 300 and len(rows) == 300, f"300 requests, got {s['requests']} / {len(rows)}")
check(s["answered"] == s["requests"], f"every request answered: {s['answered']} of {s['requests']}, errors {s['errors']}")
check(not s["errors"], f"no errors: {s['errors']}")
check(s["config"]["through_gateway"], "the target was seen as a gateway")
shares = [w["share"] for w in s["workers"].values()]
check(sorted(s["workers"]) == sorted(urls), f"workers {sorted(s['workers'])} != fleet {sorted(urls)}")
check(abs(sum(shares) - 1) < 1e-9, f"shares sum to {sum(shares)}")
for r in rows:
    check(r["answered"] == "1", f"row {r['row']} answered")
    check(r["cached_tokens"] != "", f"row {r['row']} reported usage")
    if r["cached_tokens"] != "":
        check(int(r["cached_tokens"]) <= int(r["prompt_tokens"]), f"row {r['row']}: cached {r['cached_tokens']} > prompt {r['prompt_tokens']}")
    check(float(r["ttft_ms"]) <= float(r["e2e_ms"]), f"row {r['row']}: TTFT {r['ttft_ms']} > e2e {r['e2e_ms']}")
    check(int(r["output_tokens"]) == int(r["max_tokens"]), f"row {r['row']}: {r['output_tokens']} of {r['max_tokens']} tokens")
    check(r["worker"] in urls, f"row {r['row']}: worker {r['worker']} not in the fleet")
hit = s["oracle"]["hit_over_oracle"]
check(s["oracle"]["source"] in ("events", "mock"), f"oracle source {s['oracle']['source']}")
check(0 < hit <= 1.05, f"hit/oracle {hit} in (0, 1.05]")
check(s["prefix_reuse"]["cached_tokens"] > 0, "some prefix was reused")
ev = s["oracle"].get("event_streams")
if ev is not None:
    check(ev["holders"] == len(urls), f"oracle followed {ev['holders']} streams")
    check(ev["resyncs"] == 0 and ev["degraded_holders"] == 0,
          f"oracle streams lossless: {ev}")
# Shares against the mock's own counts.
total = 0
for url in urls:
    recs = json.load(open(f"{work}/records-{url.rsplit(':', 1)[1]}.json"))["requests"]
    finished = sum(1 for r in recs if r["status"] == "finished")
    total += finished
    w = s["workers"][url]
    check(w["requests"] == finished, f"{url}: replay counts {w['requests']}, mock recorded {finished}")
    check(w.get("mock_records") == finished, f"{url}: joined {w.get('mock_records')} of {finished} records")
    check(abs(w["share"] - finished / s["answered"]) < 1e-12, f"{url}: share {w['share']}")
check(total == s["answered"], f"the mock recorded {total} requests, the replay {s['answered']}")
print(f"checked: {s['answered']} requests, hit/oracle {hit:.3f}, prefix reuse "
      f"{s['prefix_reuse']['ratio']:.3f}, shares {[round(x, 3) for x in shares]}")
for b in bad[:20]:
    print("  violated:", b)
sys.exit(1 if bad else 0)
PY
kvg_test_passed
