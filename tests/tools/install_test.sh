#!/usr/bin/env bash
# `cmake --install` gives an operator what kvgate.service needs: the binaries, a unit whose
# ExecStart names the installed kvgate, and the example environment file it reads. The unit
# waits for kvgate's readiness (Type=notify), reloads with SIGHUP, and scores 4.0 or under in
# systemd-analyze security.
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
grep -qx "Type=notify" "$unit" || fail "the unit does not wait for kvgate to say it is ready"
grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$unit" || fail "systemctl reload does not reach kvgate"
grep -qx "LogsDirectory=kvgate" "$unit" || fail "no log directory for --log-dir under DynamicUser"
# The hardening, as systemd itself scores it (0 best, 10 worst; 4.0 and under is "OK").
exposure="$(systemd-analyze security --offline=true "$unit" 2>&1 \
  | sed -n 's/.*Overall exposure level for kvgate.service: \([0-9.]*\).*/\1/p')"
[[ -n "$exposure" ]] || fail "systemd-analyze security gave no score"
awk -v e="$exposure" 'BEGIN { exit !(e <= 4.0) }' || fail "exposure $exposure is over 4.0"
echo "install_test: systemd exposure $exposure"
if [[ -d /run/systemd/system ]]; then
  systemd-analyze verify "$unit" 2>&1 | grep -v "kvgate.env" || true
fi
echo "install_test: ok"
