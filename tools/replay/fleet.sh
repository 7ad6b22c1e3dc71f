# Shell helpers that start a kvgate-mock fleet and a kvgate gateway for a replay, wait for them
# with bounded waits, and stop everything they started. Sourced by tools/demo.sh,
# tools/compare-policies and tests/replay/e2e_test.sh:
#
#   source tools/replay/fleet.sh
#   kvg_init BUILD_DIR WORK_DIR          # binaries from BUILD_DIR/bin, logs into WORK_DIR
#   trap kvg_stop_all EXIT; trap 'exit 130' INT TERM
#   kvg_start_mock 8 [kvgate-mock flags]  || exit   # sets KVG_WORKER_URLS (space-separated)
#   kvg_start_pd_fleet sglang 4 4 [flags] || exit   # or: a prefill and a decode kvgate-mock,
#                                                   # KVG_PD_ARGS the gateway's --prefill/--decode
#   kvg_start_gateway cache_aware [flags] || exit   # sets KVG_GATEWAY_URL
#   kvg_start_redis                       || exit   # sets KVG_REDIS_URL (for --state-sync)
#   kvg_wait_routable 8 60                || exit
#   kvg_run REPLAY_TIMEOUT_S build/x/bin/kvgate-replay --target "$KVG_GATEWAY_URL" ...
#   kvg_stop_all                                    # also what the EXIT trap does
#
# A test script instead starts with `kvg_test_begin BUILD_DIR` (a work directory in $work, kept
# only when the test fails, and the traps) and ends with `kvg_test_passed`.
#
# Every process is started in the background and remembered; kvg_run waits for its child with
# `wait`, which a trapped signal interrupts, so Ctrl-C or SIGTERM stop everything at once. A
# function that fails prints why (prefixed with $KVG_NAME) and returns 1; nothing here exits.

KVG_NAME="${KVG_NAME:-kvgate}"
KVG_PIDS=()
KVG_PY=/usr/bin/python3

kvg_init() {  # BUILD_DIR WORK_DIR
  KVG_BIN="$1/bin"
  KVG_WORK="$2"
  mkdir -p "$KVG_WORK"
}

kvg_test_begin() {  # BUILD_DIR; KVG_NAME names the test
  work=$(mktemp -d "/tmp/kvgate-$KVG_NAME.XXXXXX")
  kvg_init "$1" "$work"
  KVG_KEEP=1
  trap kvg_test_end EXIT
  trap 'exit 130' INT TERM
}

kvg_test_end() {
  kvg_stop_all
  if [[ "$KVG_KEEP" == 1 ]]; then echo "logs kept in $work"; else rm -rf "$work"; fi
}

kvg_test_passed() {
  KVG_KEEP=0
  echo "PASS"
}

kvg_say() { echo "$KVG_NAME: $*" >&2; }

kvg_need() {  # binary names
  local b
  for b in "$@"; do
    if [[ ! -x "$KVG_BIN/$b" ]]; then
      kvg_say "$KVG_BIN/$b is missing (build it first)"
      return 1
    fi
  done
}

# Polls `cmd...` every 0.1 s until it succeeds or `secs` pass.
kvg_poll() {  # secs cmd...
  local secs="$1"
  shift
  local deadline=$((SECONDS + secs))
  while ((SECONDS < deadline)); do
    "$@" && return 0
    sleep 0.1
  done
  "$@"
}

kvg_alive() { kill -0 "$1" 2>/dev/null; }

kvg_start_mock() {  # workers [flags...]; files named $KVG_MOCK_NAME (default mock) in $KVG_WORK
  local workers="$1"
  shift
  kvg_need kvgate-mock || return 1
  local name="${KVG_MOCK_NAME:-mock}"
  local pf="$KVG_WORK/$name-ports.json"
  rm -f "$pf"
  "$KVG_BIN/kvgate-mock" --workers "$workers" --http-port 0 --kv-port 0 --port-file "$pf" \
    --log-level warn "$@" >"$KVG_WORK/$name.out" 2>"$KVG_WORK/$name.err" &
  KVG_MOCK_PID=$!
  KVG_PIDS+=("$KVG_MOCK_PID")
  if ! kvg_poll 30 test -s "$pf"; then
    kvg_alive "$KVG_MOCK_PID" && kvg_say "kvgate-mock wrote no port file within 30 s" ||
      kvg_say "kvgate-mock exited at start: $(tail -3 "$KVG_WORK/$name.err")"
    return 1
  fi
  KVG_WORKER_URLS=$("$KVG_PY" -c 'import json,sys
print(" ".join(w["url"] for w in json.load(open(sys.argv[1]))["workers"]))' "$pf") || return 1
}

# A disaggregated fleet: one kvgate-mock of `prefill` workers (--pd-role prefill, bootstrap
# servers on free ports) and one of `decode` workers. Sets KVG_PD_ARGS (the gateway's --prefill
# URL [BOOTSTRAP_PORT] and --decode URL flags; the ports for SGLang's protocol only),
# KVG_PREFILL_URLS and KVG_DECODE_URLS, and empties KVG_WORKER_URLS.
kvg_start_pd_fleet() {  # sglang|vllm prefill decode [flags...]
  local protocol="$1" prefill="$2" decode="$3"
  shift 3
  KVG_MOCK_NAME=mock-prefill kvg_start_mock "$prefill" --pd-role prefill --bootstrap-port 0 "$@" ||
    return 1
  KVG_PREFILL_URLS="$KVG_WORKER_URLS"
  KVG_MOCK_NAME=mock-decode kvg_start_mock "$decode" --pd-role decode "$@" || return 1
  KVG_DECODE_URLS="$KVG_WORKER_URLS"
  KVG_WORKER_URLS=""
  local line
  line=$("$KVG_PY" -c 'import json,sys
ports = sys.argv[1] == "sglang"
out = []
for w in json.load(open(sys.argv[2]))["workers"]:
    out += ["--prefill", w["url"]] + ([str(w["bootstrap_port"])] if ports else [])
for w in json.load(open(sys.argv[3]))["workers"]:
    out += ["--decode", w["url"]]
print(" ".join(out))' "$protocol" "$KVG_WORK/mock-prefill-ports.json" \
    "$KVG_WORK/mock-decode-ports.json") || return 1
  read -r -a KVG_PD_ARGS <<<"$line"
}

kvg_start_gateway() {  # policy [flags...]; logs to $KVG_WORK/${KVG_GATEWAY_LOG:-gateway}.out|err
  local policy="$1"
  shift
  kvg_need kvgate || return 1
  local log="$KVG_WORK/${KVG_GATEWAY_LOG:-gateway}"
  local urls=()
  # shellcheck disable=SC2206  # the URLs are one word each
  [[ -n "${KVG_WORKER_URLS:-}" ]] && urls=(--worker-urls $KVG_WORKER_URLS)
  # (Answers name their worker: kvgate-replay and the tests count requests per worker.)
  "$KVG_BIN/kvgate" --host 127.0.0.1 --port 0 --policy "$policy" --log-level warn \
    --expose-worker-header "$@" \
    "${urls[@]}" >"$log.out" 2>"$log.err" &
  KVG_GATEWAY_PID=$!
  KVG_PIDS+=("$KVG_GATEWAY_PID")
  if ! kvg_poll 30 grep -qs "kvgate listening on" "$log.out"; then
    kvg_alive "$KVG_GATEWAY_PID" && kvg_say "kvgate did not report its port within 30 s" ||
      kvg_say "kvgate exited at start: $(tail -3 "$log.err")"
    return 1
  fi
  KVG_GATEWAY_URL="http://$(grep -o 'kvgate listening on [^ ]*' "$log.out" |
    head -1 | cut -d' ' -f4)"
}

kvg_start_redis() {  # sets KVG_REDIS_URL: a redis-server on a free loopback port, no persistence
  local port
  port=$("$KVG_PY" -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') || return 1
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$KVG_WORK" \
    >"$KVG_WORK/redis.out" 2>&1 &
  KVG_PIDS+=("$!")
  if ! kvg_poll 10 redis-cli -p "$port" ping >/dev/null 2>&1; then
    kvg_say "redis-server did not answer on port $port within 10 s: $(tail -3 "$KVG_WORK/redis.out")"
    return 1
  fi
  KVG_REDIS_URL="redis://127.0.0.1:$port"
}

kvg_routable() {  # url: prints the number of routable workers
  curl -sf --max-time 2 "$1/workers" 2>/dev/null |
    "$KVG_PY" -c 'import json,sys
print(sum(1 for w in json.load(sys.stdin)["workers"] if w["routable"]))' 2>/dev/null
}

kvg_wait_routable() {  # workers secs
  local want="$1" secs="$2"
  if ! kvg_poll "$secs" curl -sf --max-time 2 -o /dev/null "$KVG_GATEWAY_URL/readiness"; then
    kvg_say "the gateway's /readiness was not 200 within $secs s"
    return 1
  fi
  local have=""
  check() { have=$(kvg_routable "$KVG_GATEWAY_URL"); [[ "$have" == "$want" ]]; }
  if ! kvg_poll "$secs" check; then
    kvg_say "GET /workers shows ${have:-no} routable workers of $want after $secs s"
    return 1
  fi
}

# Runs a command in the background with a time limit and waits for it (interruptibly).
# Returns its exit code, or 124 when it ran out of time.
kvg_run() {  # secs cmd...
  local secs="$1"
  shift
  "$@" &
  local pid=$!
  KVG_PIDS+=("$pid")
  local deadline=$((SECONDS + secs))
  while kvg_alive "$pid"; do
    if ((SECONDS >= deadline)); then
      kvg_say "$(basename "$1") did not finish within $secs s: stopping it"
      kill -TERM "$pid" 2>/dev/null
      sleep 1
      kill -KILL "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      return 124
    fi
    sleep 0.2
  done
  wait "$pid"
}

# Stops every process started here: SIGTERM, up to 10 s to exit, then SIGKILL.
kvg_stop_all() {
  local p
  for p in "${KVG_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  local deadline=$((SECONDS + 10))
  for p in "${KVG_PIDS[@]}"; do
    while kvg_alive "$p" && ((SECONDS < deadline)); do sleep 0.1; done
    if kvg_alive "$p"; then
      kvg_say "process $p ignored SIGTERM for 10 s: killing it"
      kill -KILL "$p" 2>/dev/null
    fi
    wait "$p" 2>/dev/null
  done
  KVG_PIDS=()
}
