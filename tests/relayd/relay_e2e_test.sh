#!/usr/bin/env bash
# `kvgate relay` in front of live engines (kvgate-mock), read by a client no one here wrote
# (tests/relayd/relay_client.py: Debian's python3-grpcio with protoc's Python messages): the relay
# discovers the engines, relays their batches in order, resumes, moves another epoch to a
# snapshot, refuses bad requests, answers health and reflection. Then a gateway reading its KV
# events through the relay (--kv-events-relay) routes a repeated prompt to the engine holding it.
#   bash tests/relayd/relay_e2e_test.sh BUILD_DIR
set -uo pipefail
build="${1:?usage: relay_e2e_test.sh BUILD_DIR}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
KVG_NAME=relay_e2e_test
# shellcheck source=../../tools/replay/fleet.sh
source "$here/tools/replay/fleet.sh"
work="$(mktemp -d)"
kvg_init "$build" "$work"
trap 'kvg_stop_all; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
fail() { echo "relay_e2e_test: FAIL: $*" >&2; exit 1; }

kvg_need kvgate || exit 1
command -v protoc >/dev/null || fail "protoc is missing (tools/setup.sh installs it)"
protoc -I "$here/proto" --python_out="$work" "$here/proto/kvgate/relay/v1/relay.proto" ||
  fail "protoc could not compile the relay's proto"
kvg_start_mock 2 || exit 1
url="${KVG_WORKER_URLS%% *}"
engines=()
for u in $KVG_WORKER_URLS; do engines+=(--engine "$u"); done

"$KVG_BIN/kvgate" relay "${engines[@]}" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --heartbeat-secs 0.3 \
  --log-level info >"$work/relay.out" 2>"$work/relay.err" &
KVG_PIDS+=("$!")
kvg_poll 15 grep -qs "kvgate relay metrics on" "$work/relay.out" ||
  fail "the relay did not start: $(tail -3 "$work/relay.err")"
addr="$(sed -n 's/^kvgate relay listening on //p' "$work/relay.out" | head -1)"
kvg_poll 15 bash -c "test \"\$(grep -c relaying '$work/relay.err')\" -ge 2" ||
  fail "the relay did not subscribe to both engines: $(tail -3 "$work/relay.err")"

cat >"$work/complete.sh" <<SH
#!/usr/bin/env bash
words=\$(printf 'word%d ' \$(seq 1 120))
exec curl -sf --max-time 10 -H 'content-type: application/json' \
  -d "{\"model\":\"mock-8b\",\"prompt\":\"request \$1 at \$(date +%s%N): \$words\",\"max_tokens\":1}" \
  "$url/v1/completions" -o /dev/null
SH
chmod +x "$work/complete.sh"
"$KVG_PY" "$here/tests/relayd/relay_client.py" "$work" "$addr" "$url" "$work/complete.sh" ||
  fail "the client's checks failed (relay log: $(tail -3 "$work/relay.err"))"

# The relay's /metrics: what it relayed per engine rank, as Prometheus's own linter reads it.
metrics_addr="$(sed -n 's/^kvgate relay metrics on //p' "$work/relay.out" | head -1)"
curl -sf "http://$metrics_addr/metrics" >"$work/relay.metrics" || fail "the relay's /metrics did not answer"
relayed="$(sed -n 's/^kvgate_relay_engine_batches_total{.*disposition="applied".*} \([0-9.]*\)$/\1/p' \
  "$work/relay.metrics" | awk '{s += $1} END {print s + 0}')"
[[ "${relayed%.*}" -ge 1 ]] || fail "the relay's /metrics counts no relayed batch"
grep -q '^kvgate_relay_snapshots_total [1-9]' "$work/relay.metrics" ||
  fail "the relay's /metrics counts no snapshot (the client was moved to one)"
if command -v promtool >/dev/null; then
  lint="$(promtool check metrics <"$work/relay.metrics" 2>&1)" || fail "promtool: $lint"
fi

# A gateway fed by the relay: the first request of a prompt lands anywhere and its blocks reach
# the gateway's index through the relay; the repeats go where they are (affinity decisions).
# Warm-up may send a share of hits to the thinner engine (the checks above filled the first one):
# off for hits here, where every repeat must go where its blocks are.
kvg_start_gateway cache_aware --kv-events-relay "grpc://$addr" --warmup-hit-share 0 || exit 1
kvg_wait_routable 2 30 || exit 1
follow_state() {
  grep '^kvgate_relay_follow_' "$work/gateway.metrics" | grep -v apply_lag | tr '\n' ' '
  tail -5 "$work/gateway.err" | tr '\n' ' '
}
# Both streams are up: a stream counts once it delivered something, which for an engine with
# nothing new is the relay's first heartbeat (0.3 s). Waited for before the first request, so
# its blocks come down a stream as a batch (a stream started later would get them in a snapshot,
# which measures no apply lag).
streams_up() {
  curl -sf "$KVG_GATEWAY_URL/metrics" >"$work/gateway.metrics" &&
    [[ "$(grep -c '^kvgate_relay_follow_connected{.*} 1$' "$work/gateway.metrics")" -eq 2 ]]
}
kvg_poll 5 streams_up || fail "the gateway's /metrics shows no stream from the relay up: $(follow_state)"
# The client's checks above already left blocks on the first engine, so the index is not empty
# now: the prompt's blocks have arrived once the count grew past this.
memberships() {
  curl -sf "$KVG_GATEWAY_URL/metrics" | sed -n 's/^kvgate_index_memberships \([0-9.]*\)$/\1/p'
}
before="$(memberships)"
before="${before%.*}"
body='{"model":"mock-8b","prompt":"'"$(printf 'shared prefix %d ' $(seq 1 150))"'","max_tokens":1}'
curl -sf --max-time 10 -H 'content-type: application/json' -d "$body" \
  "$KVG_GATEWAY_URL/v1/completions" -o /dev/null || fail "the gateway did not answer"
affinity() {
  curl -sf "$KVG_GATEWAY_URL/metrics" |
    sed -n 's/^kvgate_router_decisions_total{branch="affinity"[^}]*} \([0-9.]*\)$/\1/p' |
    awk '{s += $1} END {print s + 0}'
}
grown() { local now; now="$(memberships)"; [[ "${now%.*}" -gt "${before:-0}" ]]; }
kvg_poll 10 grown || fail "the prompt's blocks did not reach the gateway's index through the relay"
# The count grows with the first batch of the prompt's blocks, or with a late one of the checks
# above: the repeats wait until the gateway would route the prompt by its blocks.
by_blocks() {
  curl -sf --max-time 5 -H 'content-type: application/json' -d "$body" \
    "$KVG_GATEWAY_URL/debug/route" | grep -q '"branch":"affinity"'
}
kvg_poll 10 by_blocks || fail "the gateway never routed the prompt by the relay's events"
for i in 1 2 3 4 5; do
  curl -sf --max-time 10 -H 'content-type: application/json' -d "$body" \
    "$KVG_GATEWAY_URL/v1/completions" -o /dev/null || fail "the gateway did not answer"
done
hits="$(affinity)"
decisions() { curl -sf "$KVG_GATEWAY_URL/metrics" | grep '^kvgate_router_decisions_total' | tr '\n' ' '; }
[[ "${hits%.*}" -ge 5 ]] ||
  fail "$hits of 5 repeats were routed to the engine holding the prompt; decisions: $(decisions); $(follow_state)"
echo "relay_e2e_test: the gateway routed $hits of 5 repeats by the relay's events"
curl -sf "$KVG_GATEWAY_URL/metrics" >"$work/gateway.metrics" || fail "no /metrics"
grep -q '^kvgate_relay_follow_restarts_total{.*} [1-9]' "$work/gateway.metrics" &&
  fail "a stream from the relay started over: $(follow_state)"
kvg_poll 5 bash -c "curl -sf '$KVG_GATEWAY_URL/metrics' |
  grep -q '^kvgate_relay_follow_apply_lag_seconds_count [1-9]'" ||
  fail "the gateway's /metrics measured no apply lag through the relay: $(follow_state)"
echo "relay_e2e_test: PASS"
