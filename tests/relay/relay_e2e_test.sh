#!/usr/bin/env bash
# `kvgate relay` in front of a live engine (kvgate-mock), read by a client no one here wrote
# (tests/relay/relay_client.py: Debian's python3-grpcio with protoc's Python messages): the relay
# discovers the engine, relays its batches in order, resumes, moves another epoch to a snapshot,
# refuses bad requests, answers health and reflection.
#   bash tests/relay/relay_e2e_test.sh BUILD_DIR
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
kvg_start_mock 1 || exit 1
url="${KVG_WORKER_URLS%% *}"

"$KVG_BIN/kvgate" relay --engine "$url" --listen 127.0.0.1:0 --heartbeat-secs 0.3 \
  --log-level info >"$work/relay.out" 2>"$work/relay.err" &
KVG_PIDS+=("$!")
kvg_poll 15 grep -qs "kvgate relay listening on" "$work/relay.out" ||
  fail "the relay did not start: $(tail -3 "$work/relay.err")"
addr="$(sed -n 's/^kvgate relay listening on //p' "$work/relay.out" | head -1)"
kvg_poll 15 grep -qs "relaying" "$work/relay.err" ||
  fail "the relay did not subscribe to the engine: $(tail -3 "$work/relay.err")"

cat >"$work/complete.sh" <<SH
#!/usr/bin/env bash
words=\$(printf 'word%d ' \$(seq 1 120))
exec curl -sf --max-time 10 -H 'content-type: application/json' \
  -d "{\"model\":\"mock-8b\",\"prompt\":\"request \$1 at \$(date +%s%N): \$words\",\"max_tokens\":1}" \
  "$url/v1/completions" -o /dev/null
SH
chmod +x "$work/complete.sh"
"$KVG_PY" "$here/tests/relay/relay_client.py" "$work" "$addr" "$url" "$work/complete.sh" ||
  fail "the client's checks failed (relay log: $(tail -3 "$work/relay.err"))"
echo "relay_e2e_test: PASS"
