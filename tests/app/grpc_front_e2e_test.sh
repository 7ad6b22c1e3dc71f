#!/usr/bin/env bash
# The gateway's gRPC front end (--grpc-port) driven by a client no one here wrote
# (tests/app/gateway_grpc_client.py: Debian's python3-grpcio with protoc's Python messages) beside
# plain HTTP to the same gateway: kvgate.v1's API key, streamed and whole generations, the same
# routing both ways, cancellation and deadlines reaching the worker, bad input, the fleet, health
# and reflection; kvgate.v2 checked against what the engine received. Then v2's token ids against
# mock workers in SGLang's personality. Then a drain: health turns NOT_SERVING while a generation
# still runs. Then TLS. Then ten concurrent 100 MB messages: refused, and the gateway's memory stays bounded; bytes that
# are no message get INVALID_ARGUMENT.
#   bash tests/app/grpc_front_e2e_test.sh BUILD_DIR
set -uo pipefail
build="${1:?usage: grpc_front_e2e_test.sh BUILD_DIR}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
KVG_NAME=grpc_front_e2e_test
# shellcheck source=../../tools/replay/fleet.sh
source "$here/tools/replay/fleet.sh"
work="$(mktemp -d)"
kvg_init "$build" "$work"
trap 'kvg_stop_all; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
fail() { echo "grpc_front_e2e_test: FAIL: $*" >&2; exit 1; }

kvg_need kvgate || exit 1
command -v protoc >/dev/null || fail "protoc is missing (tools/setup.sh installs it)"
protoc -I "$here/proto" --python_out="$work" "$here/proto/kvgate/v1/gateway.proto" \
  "$here/proto/kvgate/v2/gateway.proto" || fail "protoc could not compile the gateway's protos"
kvg_start_mock 2 || exit 1
key="grpc-test-key"
kvg_start_gateway cache_aware --grpc-port 0 --api-key "$key" --shutdown-grace-period-secs 20 ||
  exit 1
addr="$(sed -n 's/^kvgate gRPC listening on //p' "$work/gateway.out" | head -1)"
[[ -n "$addr" ]] || fail "kvgate printed no gRPC address: $(cat "$work/gateway.out")"
routable() {
  [[ "$(curl -sf -H "authorization: Bearer $key" "$KVG_GATEWAY_URL/workers" |
    grep -o '"routable":true' | wc -l)" -eq 2 ]]
}
kvg_poll 30 routable || fail "the gateway did not route to both workers within 30 s"
# shellcheck disable=SC2086  # one word per URL
"$KVG_PY" "$here/tests/app/gateway_grpc_client.py" "$work" "$addr" "$KVG_GATEWAY_URL" "$key" \
  $KVG_WORKER_URLS || fail "the client's checks failed (gateway log: $(tail -3 "$work/gateway.err"))"

# kvgate.v2's token ids against mock workers in SGLang's personality: through SGLang's
# /generate (input_ids) and through /v1/completions (the client above covered vLLM's).
vllm_urls="$KVG_WORKER_URLS" main_gateway_pid="$KVG_GATEWAY_PID" main_gateway_url="$KVG_GATEWAY_URL"
KVG_MOCK_NAME=mock-sglang kvg_start_mock 2 --kv-events-wire sglang || exit 1
sglang_urls="$KVG_WORKER_URLS"
KVG_GATEWAY_LOG=gateway-sglang kvg_start_gateway cache_aware --grpc-port 0 || exit 1
sglang_addr="$(sed -n 's/^kvgate gRPC listening on //p' "$work/gateway-sglang.out" | head -1)"
sglang_gateway_pid="$KVG_GATEWAY_PID"
kvg_poll 30 routable || fail "the SGLang fleet's gateway did not route to both workers within 30 s"
# shellcheck disable=SC2086  # one word per URL
KVG_GRPC_ONLY=sglang "$KVG_PY" "$here/tests/app/gateway_grpc_client.py" "$work" "$sglang_addr" \
  "$KVG_GATEWAY_URL" "" $sglang_urls ||
  fail "the SGLang personality's checks failed (gateway log: $(tail -3 "$work/gateway-sglang.err"))"
kill -TERM "$sglang_gateway_pid"
KVG_WORKER_URLS="$vllm_urls" KVG_GATEWAY_PID="$main_gateway_pid" KVG_GATEWAY_URL="$main_gateway_url"

# Drain: a long generation keeps the gateway draining; health says NOT_SERVING meanwhile.
cat >"$work/drain.py" <<PY
import sys, threading, time
sys.path.insert(0, "$work")
import grpc
from kvgate.v1 import gateway_pb2 as pb
ch = grpc.insecure_channel("$addr")
gen = ch.unary_stream("/kvgate.v1.Gateway/Generate", pb.GenerateRequest.SerializeToString,
                      pb.GenerateResponse.FromString)
health = ch.unary_unary("/grpc.health.v1.Health/Check", lambda b: b, lambda b: b)
call = gen(pb.GenerateRequest(token_ids=pb.TokenIds(ids=list(range(300, 400))), max_tokens=3000,
                              stream=True), metadata=[("authorization", "Bearer $key")], timeout=30)
next(call)  # it runs
print("running", flush=True)
for _ in range(100):
    if health(b"", timeout=5) == b"\x08\x02":
        print("not serving", flush=True)
        call.cancel()
        sys.exit(0)
    time.sleep(0.05)
sys.exit("health stayed SERVING while draining")
PY
"$KVG_PY" "$work/drain.py" >"$work/drain.out" 2>&1 &
drain_pid=$!
kvg_poll 10 grep -qs running "$work/drain.out" || fail "the long generation did not start: $(cat "$work/drain.out")"
kill -TERM "$KVG_GATEWAY_PID"
wait "$drain_pid" || fail "draining: $(cat "$work/drain.out")"

# TLS: with the HTTP listener's certificate the gRPC port speaks TLS too; a client trusting the
# certificate is served, a plaintext one is not.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" -days 1 \
  -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" >/dev/null 2>&1 ||
  fail "openssl could not make a certificate"
KVG_GATEWAY_LOG=gateway-tls kvg_start_gateway cache_aware --grpc-port 0 \
  --tls-cert-path "$work/cert.pem" --tls-key-path "$work/key.pem" || exit 1
tls_addr="$(sed -n 's/^kvgate gRPC listening on //p' "$work/gateway-tls.out" | head -1)"
cat >"$work/tls.py" <<PY
import sys
sys.path.insert(0, "$work")
import grpc
from kvgate.v1 import gateway_pb2 as pb
def models(channel):
    call = channel.unary_unary("/kvgate.v1.Gateway/ListModels",
                               pb.ListModelsRequest.SerializeToString,
                               pb.ListModelsResponse.FromString)
    return call(pb.ListModelsRequest(), timeout=5)
creds = grpc.ssl_channel_credentials(root_certificates=open("$work/cert.pem", "rb").read())
print("over TLS:", [m.id for m in models(grpc.secure_channel("$tls_addr", creds)).models])
try:
    models(grpc.insecure_channel("$tls_addr"))
    sys.exit("a plaintext client was served on the TLS port")
except grpc.RpcError as e:
    print("plaintext refused:", e.code())
PY
"$KVG_PY" "$work/tls.py" || fail "TLS on the gRPC port"

# Oversized messages: ten concurrent 100 MB Generate requests are each refused, and the gateway's
# peak RSS grows by less than 100 MB (gRPC's memory quota, --grpc-memory-bytes).
KVG_GATEWAY_LOG=gateway-flood kvg_start_gateway cache_aware --grpc-port 0 || exit 1
flood_addr="$(sed -n 's/^kvgate gRPC listening on //p' "$work/gateway-flood.out" | head -1)"
cat >"$work/flood.py" <<PY
import os, sys, threading
sys.path.insert(0, "$work")
import grpc
from kvgate.v1 import gateway_pb2 as pb
def peak_mb():
    for line in open("/proc/$KVG_GATEWAY_PID/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
before = peak_mb()
request = pb.GenerateRequest(text="x" * (100 << 20), max_tokens=1).SerializeToString()
codes = []
def send():
    channel = grpc.insecure_channel("$flood_addr", options=[("grpc.max_send_message_length", -1)])
    call = channel.unary_stream("/kvgate.v1.Gateway/Generate", lambda b: b, lambda b: b)
    try:
        for _ in call(request, timeout=120):
            pass
        codes.append("OK")
    except grpc.RpcError as e:
        codes.append(e.code().name)
threads = [threading.Thread(target=send) for _ in range(10)]
for t in threads:
    t.start()
for t in threads:
    t.join()
grew = peak_mb() - before
print("10 x 100 MB: %s; peak RSS +%.0f MB" % (sorted(set(codes)), grew))
if codes != ["RESOURCE_EXHAUSTED"] * 10:
    sys.exit("expected ten RESOURCE_EXHAUSTED, got %s" % codes)
# (Under a sanitizer its allocator holds freed memory back: the bound is the release build's.)
if grew >= 100 and not os.environ.get("KVGATE_SANITIZER"):
    sys.exit("peak RSS grew by %.0f MB" % grew)
# Bytes that are no message: INVALID_ARGUMENT on every method (not UNIMPLEMENTED).
channel = grpc.insecure_channel("$flood_addr")
methods = [v + m for v in ("/kvgate.v1.Gateway/", "/kvgate.v2.Gateway/")
           for m in ("Tokenize", "Detokenize", "ListModels", "ListWorkers", "Generate")]
for method in methods + ["/kvgate.v2.Gateway/Embed"]:
    path = method
    call = (channel.unary_stream if method.endswith("Generate") else channel.unary_unary)(
        path, lambda b: b, lambda b: b)
    try:
        result = call(b"\xff\xff\xff\xff not protobuf", timeout=10)
        if method.endswith("Generate"):
            list(result)
        sys.exit(method + " accepted garbage")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
            sys.exit("%s answered garbage with %s" % (method, e.code().name))
print("garbage: INVALID_ARGUMENT on every method")
PY
"$KVG_PY" "$work/flood.py" || fail "oversized gRPC messages"
echo "grpc_front_e2e_test: PASS"
