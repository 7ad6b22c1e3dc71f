#!/usr/bin/env bash
# Prints, for every test that failed in a ctest run, the failed test cases and their assertion
# messages, without the rest of the output. A failing suite's full output can run to thousands
# of lines of logs; this is the part that says what broke.
#   tools/test-failures.sh build/release
set -uo pipefail
build_dir=${1:-build/release}
log="$build_dir/Testing/Temporary/LastTest.log"
[[ -f "$log" ]] || { echo "test-failures: no $log"; exit 0; }
awk '
  /^[0-9]+\/[0-9]+ Test: / { test = $3 }
  /: Failure$/ { print "--- " test ": " $0; grab = 12; next }
  grab > 0 {
    if ($0 ~ /^\[ *(RUN|OK|FAILED) *\]/ || $0 ~ /^20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T/) { grab = 0; next }
    print "    " $0; grab--; next
  }
  /^\[  FAILED  \] [A-Za-z_0-9]+\.[A-Za-z_0-9\/]+ \(/ { print "FAILED " test ": " $4 " " $5 }
  /Sanitizer|runtime error:/ { print "--- " test ": " $0 }
' "$log" | head -200
