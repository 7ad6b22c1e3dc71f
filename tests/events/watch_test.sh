#!/usr/bin/env bash
# kvgate-events watch against a live engine (kvgate-mock): what the engine published before the
# watch started comes through the replay socket, what it publishes after comes live, in order,
# with no gap, and the closing summary says so.
#   bash tests/events/watch_test.sh BUILD_DIR
set -uo pipefail
build="${1:?usage: watch_test.sh BUILD_DIR}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
KVG_NAME=watch_test
# shellcheck source=../../tools/replay/fleet.sh
source "$here/tools/replay/fleet.sh"
work="$(mktemp -d)"
kvg_init "$build" "$work"
trap 'kvg_stop_all; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
fail() { echo "watch_test: FAIL: $*" >&2; exit 1; }

kvg_need kvgate-events || exit 1
kvg_start_mock 1 || exit 1
read -r url pub replay < <("$KVG_PY" -c 'import json,sys
w = json.load(open(sys.argv[1]))["workers"][0]
r = w["ranks"][0]
print(w["url"], r["endpoint"], r["replay_endpoint"])' "$work/mock-ports.json")
[[ -n "$replay" ]] || fail "no endpoints in the mock's port file"

complete() {  # prompt: one completion, which stores the prompt's blocks (one event batch)
  curl -sf --max-time 10 -H 'content-type: application/json' \
    -d "{\"model\":\"mock-8b\",\"prompt\":\"$1\",\"max_tokens\":1}" "$url/v1/completions" >/dev/null
}
prompt() { printf 'conversation %s: %s' "$1" "$(printf 'word%d ' $(seq 1 200))"; }

for i in 1 2 3; do complete "$(prompt "before $i")" || fail "the mock did not answer"; done

"$KVG_BIN/kvgate-events" watch "$pub" --replay "$replay" --seconds 6 \
  >"$work/watch.out" 2>"$work/watch.err" &
watcher=$!
KVG_PIDS+=("$watcher")
kvg_poll 10 grep -qs '"source":"replay"' "$work/watch.out" ||
  fail "nothing replayed within 10 s: $(cat "$work/watch.err")"
sleep 0.5  # the subscription is live by now (the replay is asked for after it subscribes)
for i in 1 2; do complete "$(prompt "after $i")" || fail "the mock did not answer"; done
wait "$watcher"
status=$?
[[ $status -eq 0 ]] || fail "kvgate-events watch exited with $status: $(cat "$work/watch.err")"

cat "$work/watch.out" "$work/watch.err"
"$KVG_PY" - "$work/watch.out" "$work/watch.err" <<'PY' || exit 1
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
summary = open(sys.argv[2]).read()
batches = [l for l in lines if l.get("events", 0) > 0]
replayed = [l for l in batches if l["source"] == "replay"]
live = [l for l in batches if l["source"] == "live"]
seqs = [l["seq"] for l in batches if "seq" in l]
problems = []
if len(replayed) < 3:
    problems.append(f"{len(replayed)} batches replayed, want the 3 published before the watch")
if len(live) < 2:
    problems.append(f"{len(live)} batches live, want the 2 published during it")
if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
    problems.append(f"sequence numbers out of order or repeated: {seqs}")
m = re.search(r"applied (\d+), replayed (\d+), duplicates (\d+), gaps (\d+)", summary)
if not m:
    problems.append("no summary line")
elif int(m.group(4)) != 0 or int(m.group(2)) < 3 or int(m.group(1)) < 2:
    problems.append("summary: " + m.group(0))
if problems:
    print("watch_test: FAIL: " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"watch_test: ok: {len(replayed)} replayed, {len(live)} live, seq {seqs[0]}..{seqs[-1]}")
PY
