#!/usr/bin/env bash
# User-space instructions the gateway executes per proxied request, counted by callgrind: a
# figure that does not move with the machine's load, for comparing two builds of the request
# path (tools/bench-proxy.sh gives the rate and latency, which share the cores with wrk and the
# worker and move by several percent from run to run).
#
#   tools/proxy-instructions.sh [BUILD_DIR...] [--seconds S] [--stream] [--out DIR]
#
# For each build: a kvgate-mock worker, kvgate (one executor thread) under callgrind, a warm-up
# of 3 s with wrk, then S seconds (default 8) with wrk's 4 connections while callgrind counts.
# Prints instructions per request for the whole gateway process (the control threads' periodic
# work included: a few hundred instructions per request at this rate). With --out the profile
# is kept (DIR/BUILD.callgrind) for callgrind_annotate.
set -euo pipefail
builds=()
seconds=8
stream=false
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --stream) stream=true; shift ;;
    --out) out="$2"; shift 2 ;;
    --*) echo "unknown option $1" >&2; exit 2 ;;
    *) builds+=("$1"); shift ;;
  esac
done
[[ ${#builds[@]} -eq 0 ]] && builds=(build/release)
for tool in wrk valgrind callgrind_control; do
  command -v "$tool" >/dev/null || { echo "proxy-instructions: $tool is missing" >&2; exit 1; }
done

work=$(mktemp -d /tmp/kvgate-proxy-instructions.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

source "$(cd "$(dirname "$0")" && pwd)/proxy-bench-lib.sh"
write_completion_lua "$work/post.lua" 1 "$stream"

for build in "${builds[@]}"; do
  worker_port=$(free_port)
  "$build/bin/kvgate-mock" --workers 1 --http-port "$worker_port" --kv-port 0 --threads 1 \
    --speedup 1000 >"$work/mock.log" 2>&1 &
  mock_pid=$!
  pids+=("$mock_pid")
  wait_http proxy-instructions "http://127.0.0.1:$worker_port/health" 100 0.1
  gw_port=$(free_port)
  profile="$work/gateway.callgrind"
  valgrind --tool=callgrind --callgrind-out-file="$profile" "$build/bin/kvgate" --host 127.0.0.1 \
    --port "$gw_port" --threads 1 --log-level warn --numa off \
    --worker-urls "http://127.0.0.1:$worker_port" >"$work/gw.log" 2>&1 &
  gw_pid=$!
  pids+=("$gw_pid")
  wait_http proxy-instructions "http://127.0.0.1:$gw_port/readiness" 600 0.1
  url="http://127.0.0.1:$gw_port/v1/completions"
  wrk -t1 -c4 -d3s -s "$work/post.lua" "$url" >/dev/null
  callgrind_control --zero "$gw_pid" >"$work/control.log" 2>&1 ||
    { echo "proxy-instructions: callgrind_control --zero failed:" >&2; cat "$work/control.log" >&2; exit 1; }
  requests=$(wrk -t1 -c4 -d"${seconds}s" -s "$work/post.lua" "$url" | awk '/requests in/ {print $1}')
  callgrind_control --dump "$gw_pid" >"$work/control.log" 2>&1 ||
    { echo "proxy-instructions: callgrind_control --dump failed:" >&2; cat "$work/control.log" >&2; exit 1; }
  # The dump is written asynchronously, next to the file named on the command line.
  dump=""
  for _ in $(seq 1 100); do
    dump=$(ls "$profile".* 2>/dev/null | head -1 || true)
    [[ -n "$dump" ]] && grep -q '^summary:' "$dump" 2>/dev/null && break
    dump=""
    sleep 0.1
  done
  [[ -n "$dump" ]] || { echo "proxy-instructions: callgrind wrote no profile for $build" >&2; exit 1; }
  [[ "${requests:-0}" =~ ^[1-9][0-9]*$ ]] ||
    { echo "proxy-instructions: wrk completed no request through $build's gateway" >&2; exit 1; }
  total=$(awk '/^summary:/ {print $2}' "$dump")
  kill "$gw_pid" "$mock_pid" 2>/dev/null || true
  wait "$gw_pid" "$mock_pid" 2>/dev/null || true
  pids=()  # both reaped: their numbers may be reused
  if [[ -n "$out" ]]; then
    mkdir -p "$out"
    cp "$dump" "$out/$(echo "$build" | tr '/' '_').callgrind"
  fi
  rm -f "$profile".*
  printf '%s: %d requests, %d instructions per request\n' "$build" "$requests" \
    "$(( (total + requests / 2) / requests ))"
done
