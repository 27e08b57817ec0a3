#!/usr/bin/env bash
# A remote function whose parameter views memory (std::string_view) read the
# freed bytes of its message, silently; it must now fail to compile, with a
# message that names the fix, while the same function taking std::string
# compiles.   check.sh COMPILER [FLAGS...]
set -u
source="$(dirname "$0")/view_parameter.cc"
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
if "$@" -fsyntax-only -DPARAMETER='std::string_view' "$source" 2>"$errors"; then
  echo "FAIL: a remote function taking std::string_view compiled" >&2
  exit 1
fi
grep -q "must own their data" "$errors" || { cat "$errors" >&2; echo "FAIL: no message naming the fix" >&2; exit 1; }
"$@" -fsyntax-only -DPARAMETER='std::string' "$source" || { echo "FAIL: the std::string version did not compile" >&2; exit 1; }
echo "ok: std::string_view refused naming the fix; std::string compiles"
