# Shared by tools/bench-proxy.sh and tools/proxy-instructions.sh (sourced, not run): a free
# loopback port, waiting for an HTTP endpoint, and wrk's completion request against kvgate-mock.

# A TCP port free on 127.0.0.1 now.
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_http NAME URL TRIES PAUSE: until URL answers 2xx, at most TRIES times PAUSE seconds apart;
# says which endpoint did not come up (NAME: the calling tool) and fails otherwise.
wait_http() {
  for _ in $(seq 1 "$3"); do curl -sf "$2" >/dev/null 2>&1 && return 0; sleep "$4"; done
  echo "$1: $2 did not come up" >&2; return 1
}

# write_completion_lua FILE MAX_TOKENS STREAM: a wrk script posting one mock-8b completion.
write_completion_lua() {
  cat >"$1" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"mock-8b","prompt":"The quick brown fox jumps over the lazy dog and keeps running","max_tokens":$2,"stream":$3}'
LUA
}
