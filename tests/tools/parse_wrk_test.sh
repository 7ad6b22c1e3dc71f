#!/usr/bin/env bash
# tools/parse-wrk.py on wrk outputs of the shapes wrk prints: a clean run (latencies in us, ms and
# s), and runs that must fail loudly, naming the leg: non-2xx answers, socket errors, a run that
# printed no figures (wrk could not connect).
set -uo pipefail
parse="$(dirname "$0")/../../tools/parse-wrk.py"
failures=0
check() {  # description expected-exit expected-text input
  local out rc
  out=$(/usr/bin/python3 "$parse" kvgate 2>&1 <<<"$4")
  rc=$?
  if [[ $rc != "$2" || "$out" != *"$3"* ]]; then
    echo "FAIL: $1: exit $rc, output: $out"
    failures=$((failures + 1))
  else
    echo "ok: $1"
  fi
}

clean='Running 10s test @ http://127.0.0.1:40000/v1/completions
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   412.33us  120.01us   4.20ms   91.20%
    Req/Sec    38.11k     1.20k   40.02k    70.00%
  Latency Distribution
     50%  398.00us
     75%  450.00us
     90%  520.00us
     99%    1.02ms
  379301 requests in 10.00s, 101.27MB read
Requests/sec:  37929.51
Transfer/sec:     10.13MB'
check "a clean run" 0 "0.3980 1.0200 37929.5" "$clean"
check "seconds as a unit" 0 "1500.0000" "${clean/1.02ms/1.50s}"
check "non-2xx answers" 1 "the kvgate leg: 12 answers were not 2xx" \
  "$clean
  Non-2xx or 3xx responses: 12"
check "socket errors" 1 "the kvgate leg: socket errors" \
  "$clean
  Socket errors: connect 0, read 3, write 0, timeout 0"
check "no figures" 1 "the kvgate leg: no p50 latency in the output" \
  "unable to connect to 127.0.0.1:40000 Connection refused"
check "an unknown unit" 1 "cannot read the latency" "${clean/398.00us/398.00xx}"
exit $((failures > 0))
