#!/usr/bin/env bash
# `cmake --install` produces a package that another project can find_package()
# and link, with the plugin and the sray command in place.
set -euo pipefail
build_dir=$1
source_dir=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

cmake --install "$build_dir" --prefix "$scratch/prefix" >/dev/null
for file in bin/sray include/sray/node.h include/sray/version.h lib/libsray_dashboard.so; do
  [ -e "$scratch/prefix/$file" ] || { echo "FAIL: $file was not installed"; exit 1; }
done
"$scratch/prefix/bin/sray" --version | grep '^sray ' >/dev/null || { echo "FAIL: installed sray does not run"; exit 1; }
cmake -S "$source_dir/consumer" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/consumer" >/dev/null
output=$(env -u SRAY_ROLE "$scratch/consumer/consumer")
echo "$output"
grep -q 'sray: SRAY_ROLE is not set: start the program with `srun --ray-cluster` or `sray run`' <<<"$output" ||
  { echo "FAIL: the consumer did not get sray's LaunchError"; exit 1; }
if [ -e "$scratch/prefix/lib/libsray_train.so" ]; then
  [ -x "$scratch/consumer/train_consumer" ] || { echo "FAIL: the sray::train consumer was not built"; exit 1; }
  output=$("$scratch/consumer/train_consumer")
  echo "$output"
  grep -q 'sray: this is not a training worker' <<<"$output" ||
    { echo "FAIL: the sray::train consumer did not get sray's error: $output"; exit 1; }
  # And it trains: two workers, one report, under the installed launcher.
  output=$("$scratch/prefix/bin/sray" run -N2 "$scratch/consumer/train_consumer" fit 2>&1) ||
    { echo "FAIL: the sray::train consumer's Fit failed: $output"; exit 1; }
  grep -q '^reports 1$' <<<"$output" || { echo "FAIL: the sray::train consumer's Fit gave: $output"; exit 1; }
fi
echo PASS
