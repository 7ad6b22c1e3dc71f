#!/usr/bin/env bash
# replay_pd_e2e_test: a short replay through a disaggregated fleet, end to end. Two kvgate-mock
# processes (2 prefill and 2 decode workers, 20x real time) behind the kvgate gateway; kvgate-replay
# sends 120 rows of the shipped trace excerpt with short prompts and outputs. Checked against the
# mock's own records:
#   SGLang's protocol: every answer came from a pair (pairs = answered, none computed by a decode
#   alone), from a decode worker, naming a prefill worker; the report's cached tokens are the
#   prefill workers' records' (joined by request id; the decodes count received blocks as cached),
#   its oracle is the prefill process's, shares are over the prefill workers and match their
#   records, and the routing split (routed/oracle) covers every pair.
#   vLLM's protocol with the decider (--decode-policy cache_aware, --pd-local-prefill-share 0.5,
#   --pd-local-prefill-wait-ratio 1): pairs + computed alone = answered, the gateway's kvgate_pd_local_prefills_total and the decode
#   workers' own records agree with the replay's count, the decode workers made one KV
#   transfer per pair, and the routing split covers the pairs only.
#
#   tests/replay/pd_e2e_test.sh BUILD_DIR        (ctest runs it as replay_pd_e2e_test)
set -uo pipefail
build="${1:?usage: pd_e2e_test.sh BUILD_DIR}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
KVG_NAME=replay_pd_e2e_test
# shellcheck source=../../tools/replay/fleet.sh
source "$src/tools/replay/fleet.sh"
kvg_test_begin "$build"
fail() { echo "FAIL: $*"; exit 1; }

replay="$build/bin/kvgate-replay"
trace="$src/tools/replay/testdata/conversation_head.jsonl"
[[ -x "$replay" ]] || fail "$replay is missing"

# One leg: a fresh PD fleet of `protocol`, the gateway with `flags`, 120 rows replayed, the
# workers' records and the gateway's metrics saved in $work/<name>.
leg() {  # name protocol gateway-flags...
  local name="$1" protocol="$2"
  shift 2
  local pd_flag=--pd-disaggregation
  [[ "$protocol" == vllm ]] && pd_flag=--vllm-pd-disaggregation
  KVG_WORK="$work/$name"
  mkdir -p "$KVG_WORK"
  # (The PD waits are scaled by --speedup like every engine time: 10 s would be 0.5 s of wall
  # time, which a prefill queued behind others can pass on a slow machine or under a sanitizer.)
  kvg_start_pd_fleet "$protocol" 2 2 --speedup 20 --threads 1 --pd-transfer-timeout-ms 600000 \
    --pd-room-timeout-ms 600000 || fail "$name: fleet did not start"
  kvg_start_gateway cache_aware --kv-index chain --threads 1 "$pd_flag" "${KVG_PD_ARGS[@]}" "$@" ||
    fail "$name: gateway did not start"
  kvg_wait_routable 4 30 || fail "$name: fleet not routable"
  kvg_run 120 "$replay" --target "$KVG_GATEWAY_URL" --trace "$trace" --rows 0:120 --speedup 20 \
    --block-tokens 128 --max-output-tokens 24 --threads 1 --out "$KVG_WORK/out" --no-progress \
    >"$KVG_WORK/replay.out" 2>"$KVG_WORK/replay.err"
  local rc=$?
  cat "$KVG_WORK/replay.out"
  [[ $rc == 0 ]] || { tail -20 "$KVG_WORK/replay.err"; fail "$name: kvgate-replay exited $rc"; }
  local url role
  for role in prefill decode; do
    local urls=KVG_${role^^}_URLS
    echo "${!urls}" >"$KVG_WORK/$role-urls"
    for url in ${!urls}; do
      curl -sf --max-time 10 "$url/admin/requests?limit=100000" \
        >"$KVG_WORK/$role-records-${url##*:}.json" || fail "cannot read $url/admin/requests"
      curl -sf --max-time 10 "$url/admin/pd" >"$KVG_WORK/$role-pd-${url##*:}.json" ||
        fail "cannot read $url/admin/pd"
    done
  done
  curl -sf --max-time 10 "$KVG_GATEWAY_URL/metrics" >"$KVG_WORK/gateway.metrics" ||
    fail "cannot read the gateway's /metrics"
  kvg_stop_all
}

leg sglang sglang
leg vllm vllm --decode-policy cache_aware --pd-local-prefill-share 0.5 \
  --pd-local-prefill-wait-ratio 1

"$KVG_PY" - "$work" <<'PY' || fail "report invariants"
import csv, json, re, sys
work = sys.argv[1]
bad = []
def check(cond, what):
    if not cond:
        bad.append(what)

def load(name):
    d = f"{work}/{name}"
    s = json.load(open(f"{d}/out/summary.json"))
    rows = list(csv.DictReader(open(f"{d}/out/requests.csv")))
    urls = {r: open(f"{d}/{r}-urls").read().split() for r in ("prefill", "decode")}
    recs = {r: {u: json.load(open(f"{d}/{r}-records-{u.rsplit(':', 1)[1]}.json"))["requests"]
                for u in urls[r]} for r in urls}
    pd = {u: json.load(open(f"{d}/decode-pd-{u.rsplit(':', 1)[1]}.json")) for u in urls["decode"]}
    metrics = open(f"{d}/gateway.metrics").read()
    return s, rows, urls, recs, pd, metrics

def metric(text, name):
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))

# SGLang: every answer a pair's.
s, rows, urls, recs, pd, metrics = load("sglang")
check(s["answered"] == s["requests"] == 120, f"sglang: every request answered: {s['answered']}, {s['errors']}")
check(s["config"]["through_gateway"], "sglang: the target was seen as a gateway")
check(s.get("pd") == {"pairs": 120, "decode_alone": 0}, f"sglang: pd {s.get('pd')}")
check(all(r["worker"] in urls["decode"] for r in rows), "sglang: every answer from a decode worker")
prefill_recs = [m for u in urls["prefill"] for m in recs["prefill"][u] if m["status"] == "finished"]
ours = [m for m in prefill_recs if m.get("request_id", "").startswith("replay-")]
check(len(ours) == 120, f"sglang: the prefill workers recorded {len(ours)} of our request ids")
cached = sum(m["cached_tokens"] for m in ours)
check(s["prefix_reuse"]["cached_tokens"] == cached,
      f"sglang: cached tokens {s['prefix_reuse']['cached_tokens']} are the prefills' {cached}")
decode_cached = sum(m["cached_tokens"] for u in urls["decode"] for m in recs["decode"][u])
check(decode_cached > cached, f"sglang: the decodes count received blocks ({decode_cached} > {cached})")
check(cached > 0, "sglang: some prefix was reused")
check(s["oracle"]["source"] == "mock", f"sglang: oracle source {s['oracle']['source']}")
hit = s["oracle"]["hit_over_oracle"]
# (Small figures on this excerpt: a prefix computed between a request's arrival and its
# admission is cached but not in the oracle, which moves the ratio by several percent.)
check(0 < hit <= 1.2, f"sglang: hit/oracle {hit} in (0, 1.2]")
check(sorted(s["workers"]) == sorted(urls["prefill"]), f"sglang: shares over {sorted(s['workers'])}")
for u in urls["prefill"]:
    # (Ours only: a worker the gateway judged wedged on a slow machine also gets its one-token
    # probes, which carry no request id.)
    n = sum(1 for m in recs["prefill"][u]
            if m["status"] == "finished" and m.get("request_id", "").startswith("replay-"))
    check(s["workers"][u]["requests"] == n, f"sglang: {u} computed {s['workers'][u]['requests']}, recorded {n}")
check(metric(metrics, "kvgate_pd_pairs_total") == 120, "sglang: the gateway counted 120 pairs")
routing = s["oracle"].get("routing", {})
check(routing.get("requests") == 120, f"sglang: the routing split covers every pair: {routing}")
print(f"sglang: 120 pairs, hit/oracle {hit:.3f}, prefix reuse {s['prefix_reuse']['ratio']:.3f}")

# vLLM with the decider.
s, rows, urls, recs, pd, metrics = load("vllm")
check(s["answered"] == s["requests"] == 120, f"vllm: every request answered: {s['answered']}, {s['errors']}")
p = s.get("pd", {})
check(p.get("pairs", 0) + p.get("decode_alone", 0) == 120, f"vllm: pd {p}")
alone = metric(metrics, "kvgate_pd_local_prefills_total")
check(p.get("decode_alone") == alone, f"vllm: {p.get('decode_alone')} alone, the gateway counted {alone}")
check(alone > 0, "vllm: the decider sent some request to its decode worker alone")
transfers = sum(x["transfers"] for x in pd.values())
check(transfers == p.get("pairs"), f"vllm: {transfers} KV transfers for {p.get('pairs')} pairs")
# (Only a pair ran on a worker the event oracle follows: a decode worker's own figure is not
# comparable to the prefill workers' oracle.)
routing = s["oracle"].get("routing", {})
check(routing.get("requests") == p.get("pairs"),
      f"vllm: the routing split covers the {p.get('pairs')} pairs only: {routing}")
held = metric(metrics, r'kvgate_pd_local_prefills_total\{reason="held"\}')
print(f"vllm: {p.get('pairs')} pairs, {p.get('decode_alone')} computed by a decode alone "
      f"({held:.0f} holding most of the prompt, {alone - held:.0f} sooner), {transfers} transfers")
for b in bad[:20]:
    print("  violated:", b)
sys.exit(1 if bad else 0)
PY
kvg_test_passed
