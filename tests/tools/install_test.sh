#!/usr/bin/env bash
# `cmake --install` gives an operator what kvgate.service needs: the binaries, a unit whose
# ExecStart names the installed kvgate, and the example environment file it reads.
# Usage: install_test.sh BUILD_DIR
set -euo pipefail
build="$1"
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > "$prefix.log" 2>&1 || { cat "$prefix.log"; exit 1; }
rm -f "$prefix.log"
fail() { echo "install_test: $*" >&2; exit 1; }
for b in kvgate kvgate-mock kvgate-replay kvgate-events kvgate-corpus; do
  [[ -x "$prefix/bin/$b" ]] || fail "bin/$b not installed"
done
"$prefix/bin/kvgate" --version | grep -q "kvgate" || fail "the installed kvgate does not run"
unit="$prefix/lib/systemd/system/kvgate.service"
[[ -f "$unit" ]] || fail "no systemd unit"
grep -qx "ExecStart=$prefix/bin/kvgate \$KVGATE_ARGS" "$unit" || fail "ExecStart does not name the installed kvgate"
grep -qx "EnvironmentFile=/etc/kvgate/kvgate.env" "$unit" || fail "the unit reads no environment file"
grep -q "^TimeoutStopSec=" "$unit" || fail "the unit does not wait for the drain"
env_example="$prefix/share/doc/kvgate/kvgate.env.example"
[[ -f "$env_example" ]] || fail "no example environment file"
grep -q "^KVGATE_ARGS=.*--worker-urls" "$env_example" || fail "the example sets no KVGATE_ARGS"
if command -v systemd-analyze > /dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
  systemd-analyze verify "$unit" 2>&1 | grep -v "kvgate.env" || true
fi
echo "install_test: ok"
