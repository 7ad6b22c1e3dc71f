#!/usr/bin/env bash
# The gateway's added latency and its request rate, as ratios measured in one run:
#   direct  wrk -> kvgate-mock worker
#   kvgate  wrk -> kvgate -> the same worker (cache_aware, chain index, KV events on)
#   nginx   wrk -> nginx (proxy_pass, keep-alive upstream) -> the same worker
# Each leg runs `rounds` times, interleaved; the table reports medians of p50 / p99 latency and
# requests per second, and each proxy's ratio to the direct leg.
#
#   tools/bench-proxy.sh [BUILD_DIR] [--seconds S] [--rounds N] [--connections C] [--max-tokens T]
#                        [--stream] [--kvgate-threads N] [--numa-topology SPEC]
# --stream asks for an SSE answer (one event per token, then [DONE]), so the legs also compare
# relaying a stream chunk by chunk; wrk's latency is then the whole stream's.
# --kvgate-threads gives kvgate N executor threads and nginx as many worker processes (default
# 1), so both proxies have the same cores. --numa-topology adds a leg: a
# second kvgate with the same threads laid out on the described NUMA nodes (e.g. "0;1").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="build/release"
seconds=10
rounds=3
conns=16
max_tokens=1
stream=false
kvgate_threads=1
numa_topology=""
if [[ $# -gt 0 && "$1" != --* ]]; then build="$1"; shift; fi
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --connections) conns="$2"; shift 2 ;;
    --max-tokens) max_tokens="$2"; shift 2 ;;
    --stream) stream=true; shift ;;
    --kvgate-threads) kvgate_threads="$2"; shift 2 ;;
    --numa-topology) numa_topology="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v wrk >/dev/null || { echo "bench-proxy: wrk is missing (tools/setup.sh installs it)" >&2; exit 1; }
command -v nginx >/dev/null || { echo "bench-proxy: nginx is missing (tools/setup.sh installs it)" >&2; exit 1; }

work=$(mktemp -d /tmp/kvgate-bench-proxy.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [[ -f "$work/nginx.pid" ]] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

source "$here/proxy-bench-lib.sh"
wait_up() { wait_http bench-proxy "$1" 200 0.05; }  # url

worker_port=$(free_port)
"$build/bin/kvgate-mock" --workers 1 --http-port "$worker_port" --kv-port 0 --threads 1 --speedup 1000 \
  >"$work/mock.log" 2>&1 &
pids+=($!)
wait_up "http://127.0.0.1:$worker_port/health"

gw_port=$(free_port)
"$build/bin/kvgate" --host 127.0.0.1 --port "$gw_port" --threads "$kvgate_threads" --log-level warn \
  --numa off --worker-urls "http://127.0.0.1:$worker_port" >"$work/gw.log" 2>&1 &
pids+=($!)
wait_up "http://127.0.0.1:$gw_port/readiness"
legs="direct kvgate nginx"
if [[ -n "$numa_topology" ]]; then
  numa_port=$(free_port)
  "$build/bin/kvgate" --host 127.0.0.1 --port "$numa_port" --threads "$kvgate_threads" \
    --log-level warn --numa-topology "$numa_topology" \
    --worker-urls "http://127.0.0.1:$worker_port" >"$work/gw-numa.log" 2>&1 &
  pids+=($!)
  wait_up "http://127.0.0.1:$numa_port/readiness"
  legs="direct kvgate kvgate-numa nginx"
fi

ngx_port=$(free_port)
mkdir -p "$work/nginx"
cat >"$work/nginx.conf" <<CONF
worker_processes $kvgate_threads;
pid $work/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi;
  uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  upstream worker { server 127.0.0.1:$worker_port; keepalive 64; }
  server {
    listen 127.0.0.1:$ngx_port;
    location / {
      proxy_pass http://worker;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
CONF
nginx -c "$work/nginx.conf" -e "$work/nginx/error.log"
wait_up "http://127.0.0.1:$ngx_port/health"

write_completion_lua "$work/post.lua" "$max_tokens" "$stream"

# One wrk leg: prints "p50_ms p99_ms rps". A leg that fails (errors, non-2xx answers, output that
# does not parse) says which leg it was and what wrk printed, and stops the run.
leg() {  # name port
  local out rc=0
  out=$(wrk -t1 -c"$conns" -d"${seconds}s" --latency -s "$work/post.lua" \
    "http://127.0.0.1:$2/v1/completions" 2>&1) || rc=$?
  if [[ $rc != 0 ]]; then
    echo "bench-proxy: the $1 leg: wrk exited $rc; it printed:" >&2
    echo "$out" >&2
    return 1
  fi
  /usr/bin/python3 "$here/parse-wrk.py" "$1" <<<"$out"
}

echo "bench-proxy: $rounds rounds of ${seconds}s per leg, $conns connections, max_tokens $max_tokens," \
  "stream $stream, kvgate threads $kvgate_threads${numa_topology:+, NUMA nodes \"$numa_topology\"}" \
  "($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
declare -A results
for r in $(seq 1 "$rounds"); do
  for name in $legs; do
    case $name in
      direct) port=$worker_port ;; kvgate) port=$gw_port ;; kvgate-numa) port=$numa_port ;;
      nginx) port=$ngx_port ;;
    esac
    figures=$(leg "$name" "$port") || exit 1
    results[$name]+="$figures;"
  done
done
/usr/bin/python3 - "${results[direct]}" "${results[kvgate]}" "${results[nginx]}" \
  "${results[kvgate-numa]:-}" "$numa_topology" <<'PY'
import statistics, sys
def parse(s):
    rows = [list(map(float, x.split())) for x in s.split(";") if x.strip()]
    return [statistics.median(r[i] for r in rows) for i in range(3)]
d, k, n = (parse(a) for a in sys.argv[1:4])
legs = [("direct to the worker", d), ("through kvgate", k)]
if sys.argv[4]:
    m = parse(sys.argv[4])
    legs.append((f"through kvgate, NUMA nodes {sys.argv[5]}", m))
legs.append(("through nginx", n))
print("| path | p50 (ms) | p99 (ms) | requests/s | p50 / direct | p99 / direct | rate / direct |")
print("|---|---|---|---|---|---|---|")
for name, v in legs:
    print(f"| {name} | {v[0]:.3f} | {v[1]:.3f} | {v[2]:.0f} | {v[0]/d[0]:.2f} | {v[1]/d[1]:.2f} | {v[2]/d[2]:.2f} |")
print(f"\nadded latency p50: kvgate +{(k[0]-d[0])*1000:.0f} us, nginx +{(n[0]-d[0])*1000:.0f} us; "
      f"kvgate/nginx rate {k[2]/n[2]:.2f}")
if sys.argv[4]:
    print(f"NUMA layout against one pool: rate {m[2]/k[2]:.2f}, p50 {m[0]/k[0]:.2f}")
PY
