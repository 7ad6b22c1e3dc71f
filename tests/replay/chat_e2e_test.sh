#!/usr/bin/env bash
# replay_chat_e2e_test: multi-turn chat through the gateway onto engines that render and tokenize
# with a real model's files, and what the gateway's tokenizer is worth.
#
# A 4-worker kvgate-mock fleet loads Qwen3's tokenizer.json and chat template (--tokenizer), as a
# vLLM fleet serving the model would. kvgate-replay sends 200 rows of the shipped conversation
# trace as /v1/chat/completions (--chat: one message per hash id, so each turn resends and
# extends the conversation). Twice, against a fresh fleet each time:
#   the gateway with the same --tokenizer    hit/oracle >= 0.98 (it hashes the engines' ids);
#   the gateway with its test tokenizer      hit/oracle at least 0.1 below (it routes blind: 0.6-0.8
#                                            here, only sticky picks of fresh prefixes hit), which
#                                            proves the tokenizer is what routes the chats.
#   tests/replay/chat_e2e_test.sh BUILD_DIR   (ctest runs it as replay_chat_e2e_test)
set -uo pipefail
build="${1:?usage: chat_e2e_test.sh BUILD_DIR}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
KVG_NAME=replay_chat_e2e_test
# shellcheck source=../../tools/replay/fleet.sh
source "$src/tools/replay/fleet.sh"
kvg_test_begin "$build"
fail() { echo "FAIL: $*"; exit 1; }

model="${KVGATE_TOKENIZER_DIR:-$HOME/.cache/kvgate/tokenizers}/qwen3"
[[ -f "$model/tokenizer_config.json" ]] || fail "$model is missing: run tools/setup.sh"
trace="$src/tools/replay/testdata/conversation_head.jsonl"

# hit/oracle of one replay against a fresh fleet; the gateway's flags follow.
run() {  # name gateway-flags...
  local name=$1
  shift
  kvg_start_mock 4 --speedup 20 --threads 1 --tokenizer "$model" || fail "$name: mock fleet"
  kvg_start_gateway cache_aware --kv-index chain --threads 1 "$@" || fail "$name: gateway"
  kvg_wait_routable 4 30 || fail "$name: fleet not routable"
  kvg_run 150 "$build/bin/kvgate-replay" --target "$KVG_GATEWAY_URL" --trace "$trace" \
    --rows 0:200 --speedup 20 --chat --tokenizer "$model" --chat-words-per-id 40 \
    --max-output-tokens 16 --threads 1 --out "$work/$name" --no-progress \
    >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  [[ $rc == 0 ]] || { tail -20 "$work/$name.err"; fail "$name: kvgate-replay exited $rc"; }
  kvg_stop_all
  "$KVG_PY" - "$work/$name/summary.json" "$name" <<'PY' || fail "$name: summary"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["answered"] == s["requests"] == 200, (s["answered"], s["requests"], s["errors"])
assert s["oracle"]["source"] in ("events", "mock"), s["oracle"]["source"]
print(f"{sys.argv[2]}: hit/oracle {s['oracle']['hit_over_oracle']:.3f}, "
      f"prefix reuse {s['prefix_reuse']['ratio']:.3f}")
PY
}

run seeing --tokenizer "$model" | tee "$work/seeing.txt"
run blind | tee "$work/blind.txt"
seeing=$(sed -n 's/.*hit\/oracle \([0-9.]*\),.*/\1/p' "$work/seeing.txt")
blind=$(sed -n 's/.*hit\/oracle \([0-9.]*\),.*/\1/p' "$work/blind.txt")
[[ -n "$seeing" && -n "$blind" ]] || fail "no hit/oracle figures"
"$KVG_PY" -c "import sys; sys.exit(0 if float('$seeing') >= 0.98 else 1)" ||
  fail "hit/oracle $seeing with the engines' tokenizer, under 0.98"
"$KVG_PY" -c "import sys; sys.exit(0 if float('$blind') <= float('$seeing') - 0.1 else 1)" ||
  fail "hit/oracle $blind with the test tokenizer is not well below $seeing"
KVG_KEEP=0
echo "PASS: hit/oracle $seeing with the engines' tokenizer, $blind with the test tokenizer"
