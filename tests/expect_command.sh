#!/usr/bin/env bash
# expect_command.sh STATUS REGEX COMMAND [ARGS...]: passes only when COMMAND
# exits with STATUS and a line of its output (stdout and stderr) matches the
# extended regular expression REGEX. ctest's PASS_REGULAR_EXPRESSION ignores
# the exit status and WILL_FAIL checks no message; this checks both.
set -uo pipefail
want=$1 pattern=$2
shift 2
out=$("$@" 2>&1)
status=$?
if [ "$status" -ne "$want" ]; then
  printf '%s\n' "$out"
  echo "FAIL: $* exited with status $status, expected $want"
  exit 1
fi
if ! grep -qE -- "$pattern" <<<"$out"; then
  printf '%s\n' "$out"
  echo "FAIL: no line of the output of $* matches /$pattern/"
  exit 1
fi
echo "ok: $* exited with $want and printed /$pattern/"
