#!/usr/bin/env bash
# make demo: shows what kvgate can do today. Never fails the caller.
set -uo pipefail
build_dir="${1:-build/release}"
echo "kvgate demo (build: $build_dir)"
echo "Binaries built:"
for b in "$build_dir"/bin/kvgate*; do
  [[ -x "$b" ]] && echo "  $(basename "$b")"
done
echo "The gateway, mock fleet and trace replay are not built yet; this demo grows with them."
exit 0
