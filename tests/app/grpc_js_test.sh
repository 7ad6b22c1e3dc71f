#!/usr/bin/env bash
# kvgate.v2 from grpc-js (tests/app/clients/gateway_grpc.cjs: Node 20 with @grpc/grpc-js and
# @grpc/proto-loader, installed by tools/setup.sh into KVGATE_NPM_DIR outside the repository)
# against a gateway over two mock workers: Generate streamed and whole, ListWorkers, and the
# services listed through server reflection v1.
#   bash tests/app/grpc_js_test.sh BUILD_DIR
set -uo pipefail
build="${1:?usage: grpc_js_test.sh BUILD_DIR}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
KVG_NAME=grpc_js_test
# shellcheck source=../../tools/replay/fleet.sh
source "$here/tools/replay/fleet.sh"
work="$(mktemp -d)"
kvg_init "$build" "$work"
trap 'kvg_stop_all; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
fail() { echo "grpc_js_test: FAIL: $*" >&2; exit 1; }

modules="${KVGATE_NPM_DIR:-${HOME:-/root}/.cache/kvgate/npm}/node_modules"
command -v node >/dev/null || fail "node is missing (tools/setup.sh installs it)"
[[ -f "$modules/@grpc/grpc-js/package.json" && -f "$modules/@grpc/proto-loader/package.json" ]] ||
  fail "@grpc/grpc-js or @grpc/proto-loader is not in $modules: run tools/setup.sh (make setup)"
kvg_need kvgate || exit 1
kvg_start_mock 2 || exit 1
key="grpc-js-key"
kvg_start_gateway cache_aware --grpc-port 0 --api-key "$key" || exit 1
addr="$(sed -n 's/^kvgate gRPC listening on //p' "$work/gateway.out" | head -1)"
[[ -n "$addr" ]] || fail "kvgate printed no gRPC address: $(cat "$work/gateway.out")"
routable() {
  [[ "$(curl -sf -H "authorization: Bearer $key" "$KVG_GATEWAY_URL/workers" |
    grep -o '"routable":true' | wc -l)" -eq 2 ]]
}
kvg_poll 30 routable || fail "the gateway did not route to both workers within 30 s"
# shellcheck disable=SC2086  # one word per URL
NODE_PATH="$modules" node "$here/tests/app/clients/gateway_grpc.cjs" "$here/proto" "$addr" "$key" \
  $KVG_WORKER_URLS || fail "the grpc-js client's checks failed (gateway log: $(tail -3 "$work/gateway.err"))"
echo "grpc_js_test: PASS"
