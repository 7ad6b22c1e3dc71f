#!/usr/bin/env bash
# make demo: an 8-worker kvgate-mock fleet behind the kvgate gateway (cache_aware routing on the
# chain index), a slice of the Mooncake conversation trace replayed through it in about two
# minutes, and a compact report: hit rate over the oracle, TTFT p50/p99, goodput, per-worker
# share. Stops everything it started, also on failure or Ctrl-C.
#
#   tools/demo.sh [BUILD_DIR]        (the Makefile's demo target passes build/<preset>)
#
# The trace: the Mooncake conversation trace, rows 0-699 at 2x, from $KVGATE_TRACES_DIR, else
# from the build's traces/ folder (the build unpacks bench/traces/ there). A machine too slow or
# busy for the bounded waits gets a clear message, never a failed `make demo`; a missing binary or
# a process that cannot start is a real failure (exit 1).
set -uo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build/release}"
[[ "$build" = /* ]] || build="$src/$build"
KVG_NAME=demo
# shellcheck source=replay/fleet.sh
source "$src/tools/replay/fleet.sh"

work=$(mktemp -d /tmp/kvgate-demo.XXXXXX)
kvg_init "$build" "$work"
cleanup() {
  kvg_stop_all
  echo "demo: stopped the fleet and the gateway; logs and the replay's outputs in $work"
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted"; exit 130' INT TERM

echo "kvgate demo (build: $build)"
kvg_need kvgate kvgate-mock kvgate-replay || exit 1

trace="${KVGATE_TRACES_DIR:-$build/traces}/conversation_trace.jsonl" rows="0:700" speedup=2
if [[ ! -f "$trace" ]]; then
  echo "demo: no trace at $trace (the build unpacks bench/traces/ into $build/traces)"
  exit 1
fi

workers=8
echo "demo: starting kvgate-mock ($workers workers) and kvgate (cache_aware, --kv-index chain)"
kvg_start_mock "$workers" || exit 1
kvg_start_gateway cache_aware --kv-index chain || exit 1
if ! kvg_wait_routable "$workers" 60; then
  echo "demo: the fleet did not become routable in time (a busy machine?); nothing replayed"
  exit 0
fi
echo "demo: gateway $KVG_GATEWAY_URL routes to $workers workers"
echo "demo: replaying rows $rows of $(basename "$trace") at ${speedup}x (about two minutes)"

kvg_run 420 "$build/bin/kvgate-replay" --target "$KVG_GATEWAY_URL" --trace "$trace" \
  --rows "$rows" --speedup "$speedup" --out "$work/replay" >"$work/report.txt"
rc=$?
if [[ $rc == 124 ]]; then
  echo "demo: the replay did not finish within 7 minutes (a busy machine?); stopped it"
  exit 0
fi
if [[ $rc != 0 || ! -s "$work/replay/summary.json" ]]; then
  echo "demo: the replay failed (exit $rc)"
  exit 1
fi
echo
cat "$work/report.txt"
/usr/bin/python3 - "$work/replay/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
o = s["oracle"]
print()
print(f"In short: {s['answered']} of {s['requests']} requests answered; the router reused "
      f"{o['hit_over_oracle']:.1%} of the prefix tokens the best possible routing could have "
      f"(hit/oracle {o['hit_over_oracle']:.3f});")
print(f"TTFT p50 {s['ttft_ms']['p50']:.0f} ms, p99 {s['ttft_ms']['p99']:.0f} ms; goodput "
      f"{s['goodput']['requests_per_s']:.2f} req/s ({s['goodput']['fraction']:.1%} within "
      f"TTFT <= {s['config']['slo_ttft_ms']:g} ms and ITL <= {s['config']['slo_itl_ms']:g} ms);")
shares = ", ".join(f"{u.rsplit(':', 1)[1]} {w['share']:.2f}" for u, w in s["workers"].items())
print(f"per-worker share (by port): {shares}.")
PY
exit 0
