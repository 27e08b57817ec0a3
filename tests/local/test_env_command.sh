#!/usr/bin/env bash
# `sray env lock|verify|create` on a prefix tree written in conda's formats
# (conda-meta records, a pip dist-info): lock and verify agree, a changed
# build string makes verify fail naming it, a truncated lock is refused,
# pack/unpack relocates a script naming the prefix and the copy verifies,
# and create without conda, mamba or micromamba on PATH says what to install;
# in a step, env= takes a pack, a lock of a staged copy, or a spec made once
# by the user's conda tool.
source "$(dirname "$0")/lib.sh"
# A command prefix that runs a command with SIGINT and SIGQUIT at their
# defaults, as from a terminal: a script's background job starts with both
# ignored, and sray keeps them so. An array, not a function: `function &`
# would run in a subshell, and $! would be the subshell. (Not env
# --default-signal: coreutils 9 only.)
WITH_DEFAULT_SIGNALS=(python3 -c 'import os, signal, sys
for number in (signal.SIGINT, signal.SIGQUIT): signal.signal(number, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])')
# Waits until process $1 runs sray itself (not still the wrapper before its
# exec, with the signals ignored).
wait_for_sray_in() {
  local sray_binary
  sray_binary=$(readlink -f "$SRAY")
  for _ in $(seq 500); do
    [ "$(readlink "/proc/$1/exe" 2>/dev/null)" = "$sray_binary" ] && return 0
    sleep 0.01
  done
  fail "process $1 is not sray: $(readlink "/proc/$1/exe" 2>&1)"
}
prefix=$WORK/envs/train
mkdir -p "$prefix/conda-meta" "$prefix/lib/python3.11/site-packages/requests-2.31.0.dist-info"
for package in "python 3.11.5 hab00c5b_0_cpython 4bea2c4e29ba9a6fe6d9e3b4f5ca2e6b" \
               "numpy 1.26.0 py311h64a7726_0 7b0c9f3fe0b2a4cf3b5d0e8f7c61a1d2"; do
  set -- $package
  cat >"$prefix/conda-meta/$1-$2-$3.json" <<JSON
{"name": "$1", "version": "$2", "build": "$3", "build_number": 0,
 "channel": "https://conda.anaconda.org/conda-forge/linux-64", "subdir": "linux-64", "md5": "$4",
 "url": "https://conda.anaconda.org/conda-forge/linux-64/$1-$2-$3.conda", "files": []}
JSON
done
echo pip >"$prefix/lib/python3.11/site-packages/requests-2.31.0.dist-info/INSTALLER"

"$SRAY" env lock "$prefix" -o "$WORK/train.lock" >"$WORK/lock.out"
grep -q '^sray: locked 3 packages' "$WORK/lock.out" || fail "lock: $(cat "$WORK/lock.out")"
"$SRAY" env verify "$WORK/train.lock" "$prefix" >/dev/null || fail "a prefix does not verify against its own lock"
echo "ok: lock and verify agree"

cat >"$WORK/environment.yml" <<'YAML'
name: train
dependencies:
  - numpy=1.26.0=py311h64a7726_1
  - python=3.11.5=hab00c5b_0_cpython
  - pip:
    - requests==2.31.0
YAML
status=0
"$SRAY" env verify "$WORK/environment.yml" "$prefix" >"$WORK/verify.out" 2>&1 || status=$?
[ "$status" -eq 1 ] || fail "verify of a changed build exited with $status, not 1"
grep -q 'build of conda package numpy: wanted py311h64a7726_1, found py311h64a7726_0' "$WORK/verify.out" ||
  fail "verify did not name the changed build: $(cat "$WORK/verify.out")"
echo "ok: a changed build string fails verify"

head -n 3 "$WORK/train.lock" >"$WORK/truncated.lock"
status=0
"$SRAY" env verify "$WORK/truncated.lock" "$prefix" >"$WORK/truncated.out" 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q 'recorded hash' "$WORK/truncated.out" ||
  fail "a truncated lock was not refused: $(cat "$WORK/truncated.out")"
echo "ok: a truncated lock is refused"

printf '#!%s/bin/python\n' "$prefix" >"$prefix/bin-tool"
"$SRAY" env pack "$prefix" -o "$WORK/train.pack" >"$WORK/pack.out" || fail "pack: $(cat "$WORK/pack.out")"
"$SRAY" env unpack "$WORK/train.pack" "$WORK/u" >"$WORK/unpack.out" || fail "unpack: $(cat "$WORK/unpack.out")"
[ "$(head -c 200 "$WORK/u/bin-tool")" = "#!$WORK/u/bin/python" ] || fail "the unpacked script still names the old prefix"
"$SRAY" env verify "$WORK/train.lock" "$WORK/u" >/dev/null || fail "the unpacked environment does not verify"
echo "ok: pack and unpack relocate, and the copy verifies"

# The cache limit in GiB: 0 would evict every copy but the one staged, and
# 2^30 and more wrapped when turned into bytes (2026-12-07). Both refused,
# naming the range, before anything is staged.
for limit in 0 1073741825; do
  status=0
  "$SRAY" env stage "$WORK/train.pack" --cache "$WORK/limit-cache" --cache-limit-gib "$limit" \
    >"$WORK/limit.out" 2>&1 || status=$?
  [ "$status" -eq 2 ] &&
    grep -q -- "--cache-limit-gib: $limit is not a whole number from 1 to 1073741824" "$WORK/limit.out" ||
    fail "--cache-limit-gib $limit: status $status, $(cat "$WORK/limit.out")"
  [ ! -e "$WORK/limit-cache" ] || fail "--cache-limit-gib $limit made the cache"
done
echo "ok: a cache limit out of range is refused, naming the range"

# Ctrl-C of `sray env pack` (a real SIGINT, whenever it comes): the command
# ends by it, the earlier pack stays whole and nothing is left beside it.
# A signal after the last file used to end it with 0, as if never sent.
big=$WORK/envs/big
cp -a "$prefix" "$big"
mkdir -p "$big/lib/data"
for index in $(seq 400); do head -c 262144 /dev/urandom >"$big/lib/data/part-$index"; done
"$SRAY" env pack "$big" -o "$WORK/big.pack" >"$WORK/big-pack.out" || fail "pack: $(cat "$WORK/big-pack.out")"
earlier=$(sha256sum <"$WORK/big.pack")
cut_short=0
for delay in 0.02 0.1 0.25; do
  "${WITH_DEFAULT_SIGNALS[@]}" "$SRAY" env pack "$big" -o "$WORK/big.pack" >"$WORK/big-pack-int.out" 2>&1 &
  packer=$!
  wait_for_sray_in "$packer"
  sleep "$delay"
  kill -INT "$packer" 2>/dev/null || true
  status=0
  wait "$packer" || status=$?
  # 0 only when it had ended before the signal (kill succeeds on a process
  # not yet reaped): then it says so.
  [ "$status" -eq 130 ] || { [ "$status" -eq 0 ] && grep -q '^sray: packed' "$WORK/big-pack-int.out"; } ||
    fail "sray env pack ended with $status after SIGINT, expected 130: $(cat "$WORK/big-pack-int.out")"
  left=$(ls "$WORK" | grep '^big\.pack.' || true)
  [ -z "$left" ] || fail "an interrupted pack left $left"
  "$SRAY" env unpack "$WORK/big.pack" "$WORK/big-$delay" >/dev/null 2>&1 ||
    fail "the pack is not whole after an interrupted pack ($(cat "$WORK/big-pack-int.out"))"
  if grep -q 'was interrupted' "$WORK/big-pack-int.out"; then
    cut_short=$((cut_short + 1))
    [ "$(sha256sum <"$WORK/big.pack")" = "$earlier" ] || fail "an interrupted pack changed the earlier pack"
  fi
  rm -rf "$WORK/big-$delay"
done
echo "ok: SIGINT of sray env pack ends it by the signal and leaves a whole pack ($cut_short of 3 cut short)"

# The same for `sray env unpack`: ended by the signal, no staging directory
# left beside the target, and the target either absent or whole.
cut_short=0
for delay in 0.02 0.1 0.25; do
  target=$WORK/big-unpacked-$delay
  "${WITH_DEFAULT_SIGNALS[@]}" "$SRAY" env unpack "$WORK/big.pack" "$target" >"$WORK/big-unpack-int.out" 2>&1 &
  unpacker=$!
  wait_for_sray_in "$unpacker"
  sleep "$delay"
  kill -INT "$unpacker" 2>/dev/null || true
  status=0
  wait "$unpacker" || status=$?
  [ "$status" -eq 130 ] || { [ "$status" -eq 0 ] && grep -q '^sray: unpacked' "$WORK/big-unpack-int.out"; } ||
    fail "sray env unpack ended with $status after SIGINT, expected 130: $(cat "$WORK/big-unpack-int.out")"
  left=$(ls -a "$WORK" | grep -F ".big-unpacked-$delay.unpacking." || true)
  [ -z "$left" ] || fail "an interrupted unpack left $left"
  # Cut short (said, or before sray noted signals at all): no target; else
  # a whole one.
  if [ "$status" -eq 130 ]; then
    cut_short=$((cut_short + 1))
    [ ! -e "$target" ] || fail "an interrupted unpack left $target"
  else
    "$SRAY" env verify "$WORK/train.lock" "$target" >/dev/null || fail "the unpacked copy does not verify"
  fi
  rm -rf "$target"
done
echo "ok: SIGINT of sray env unpack ends it by the signal and leaves no half copy ($cut_short of 3 cut short)"

# A SIGINT the caller ignores (a script's background job, nohup) stays
# ignored: the pack runs to its end.
"$SRAY" env pack "$big" -o "$WORK/big-ignored.pack" >"$WORK/big-ignored.out" 2>&1 &
packer=$!
wait_for_sray_in "$packer"
sleep 0.05
kill -INT "$packer" 2>/dev/null || true
status=0
wait "$packer" || status=$?
[ "$status" -eq 0 ] && grep -q '^sray: packed' "$WORK/big-ignored.out" ||
  fail "sray env pack with SIGINT ignored: status $status, $(cat "$WORK/big-ignored.out")"
"$SRAY" env unpack "$WORK/big-ignored.pack" "$WORK/big-ignored" >/dev/null || fail "the pack made with SIGINT ignored is not whole"
rm -rf "$WORK/big-ignored" "$WORK/big-ignored.pack"
echo "ok: a SIGINT the caller ignores stays ignored"

# `sray env lock -o` whose rename fails (the target is a directory): it
# says so, and leaves no .tmp beside it.
mkdir -p "$WORK/lock-is-a-directory"
status=0
"$SRAY" env lock "$prefix" -o "$WORK/lock-is-a-directory" >"$WORK/lock-dir.out" 2>&1 || status=$?
[ "$status" -ne 0 ] && grep -q "cannot write $WORK/lock-is-a-directory" "$WORK/lock-dir.out" ||
  fail "sray env lock -o onto a directory: status $status, $(cat "$WORK/lock-dir.out")"
[ ! -e "$WORK/lock-is-a-directory.tmp" ] || fail "sray env lock left $WORK/lock-is-a-directory.tmp"
echo "ok: a lock that cannot be written says so and leaves no .tmp"

status=0
PATH=/usr/bin:/bin "$SRAY" env create "$WORK/environment.yml" -p "$WORK/new" >"$WORK/create.out" 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q 'no conda, mamba or micromamba on PATH' "$WORK/create.out" ||
  fail "create without conda: $(cat "$WORK/create.out")"
[ ! -e "$WORK/new" ] || fail "create left a partial prefix"
echo "ok: create without conda names what to install"
# In a step: --ray-cluster=env=PACK stages it under tmpdir once per node and
# activates it for every task; two steps at once share one staged copy.
mkdir -p "$WORK/tmp"
step() {
  "$SRAY" run -N3 --ray-cluster="env=$WORK/train.pack,tmpdir=$WORK/tmp" \
    bash -c 'echo "$SRAY_NODE_ID $CONDA_PREFIX ${PATH%%:*} $SRAY_ENV_HASH"'
}
step >"$WORK/step1.out" 2>&1 &
first=$!
step >"$WORK/step2.out" 2>&1 || fail "a step with env= failed: $(cat "$WORK/step2.out")"
wait "$first" || fail "a step with env= failed: $(cat "$WORK/step1.out")"
staged=$(ls "$WORK/tmp/sray-envs-$(id -u)")
[ "$(echo "$staged" | wc -l)" -eq 1 ] || fail "two steps staged more than one copy: $staged"
hash=$(awk '/^# sha256/ {print $3}' "$WORK/train.lock")
for out in "$WORK/step1.out" "$WORK/step2.out"; do
  expect_lines "$out" "^[0-2] $WORK/tmp/sray-envs-$(id -u)/$staged $WORK/tmp/sray-envs-$(id -u)/$staged/bin $hash\$" 3
done
echo "ok: env= stages once, and every task's CONDA_PREFIX, PATH and hash point at the copy"
"$SRAY" run -N3 --ray-cluster="env=$WORK/train.pack,tmpdir=$WORK/tmp" "$SRAY_BUILD_DIR/tests/tasks_check" basic \
  >"$WORK/tasks.out" 2>&1 || fail "a sray program under env= failed: $(cat "$WORK/tasks.out")"
echo "ok: nodes with the same environment pass the runtime's comparison"

# The dashboard's events say how each node made the environment ready.
mkdir -p "$WORK/home"  # a home of its own: other tests' jobs write jobs files too
HOME=$WORK/home "$SRAY" run -N2 --ray-cluster="env=$WORK/train.pack,tmpdir=$WORK/tmp" \
  bash -c 'echo "job $SRAY_JOB_ID"; exec "$0" "$@"' "$SRAY_BUILD_DIR/tests/dashboard_check" "$WORK/env-done" \
  >"$WORK/env-dashboard.out" 2>&1 &
env_job=$!
wait_for_ready "$WORK/env-dashboard.out" "$env_job" 60
env_jobs_file=$(ls "$WORK"/home/.sray/jobs/*.json)
url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$env_jobs_file")
token=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$env_jobs_file")
curl -sf -H "Authorization: Bearer $token" "${url}api/events" >"$WORK/env-events.json" || fail "no events"
touch "$WORK/env-done"
wait "$env_job" || fail "dashboard_check under env= failed: $(cat "$WORK/env-dashboard.out")"
for node in 0 1; do
  grep -q "\"kind\":\"env_staged\",\"message\":\"node $node: used the copy of $WORK/train.pack staged on this node before" "$WORK/env-events.json" ||
    fail "no env_staged event of node $node: $(cat "$WORK/env-events.json")"
done
echo "ok: each node's env_staged event says how it made the environment ready"

# A lock instead of the pack: it names the copy staged above.
"$SRAY" run -N3 --ray-cluster="env=$WORK/train.lock,tmpdir=$WORK/tmp" \
  bash -c 'echo "$SRAY_NODE_ID $CONDA_PREFIX $SRAY_ENV_HASH"' >"$WORK/lock-step.out" 2>&1 ||
  fail "a step with env=LOCK failed: $(cat "$WORK/lock-step.out")"
expect_lines "$WORK/lock-step.out" "^[0-2] $WORK/tmp/sray-envs-$(id -u)/$staged $hash\$" 3
echo "ok: env=LOCK finds the staged copy that matches it"

# An explicit file that nothing staged matches: made by the user's conda tool
# (tests/fixtures/micromamba stands in for micromamba, see there), once.
cat >"$WORK/explicit.txt" <<'TXT'
# platform: linux-64
@EXPLICIT
https://conda.anaconda.org/conda-forge/linux-64/numpy-1.26.0-py311h64a7726_0.conda#7b0c9f3fe0b2a4cf3b5d0e8f7c61a1d2
https://conda.anaconda.org/conda-forge/linux-64/python-3.11.5-hab00c5b_0_cpython.conda#4bea2c4e29ba9a6fe6d9e3b4f5ca2e6b
TXT
# `conda list --explicit` cannot list pip packages: verify compares the conda
# packages, says the pip one was not compared, and passes (it failed before,
# calling requests "extra").
"$SRAY" env verify "$WORK/explicit.txt" "$prefix" >"$WORK/verify-explicit.out" 2>&1 ||
  fail "verify against an explicit file failed: $(cat "$WORK/verify-explicit.out")"
grep -q '^sray: 1 pip package was not compared: .*explicit.txt is a conda explicit file, which cannot list pip packages' \
  "$WORK/verify-explicit.out" || fail "verify did not say what it left out: $(cat "$WORK/verify-explicit.out")"
grep -q '^sray: .* matches .*explicit.txt (2 packages)$' "$WORK/verify-explicit.out" ||
  fail "verify did not report the match: $(cat "$WORK/verify-explicit.out")"
echo "ok: verify against an explicit file leaves pip packages out and says so"
status=0
PATH=/usr/bin:/bin "$SRAY" run -N2 --ray-cluster="env=$WORK/explicit.txt,tmpdir=$WORK/tmp" \
  bash -c 'echo "user code ran"' >"$WORK/no-tool.out" 2>&1 || status=$?
[ "$status" -ne 0 ] || fail "env=SPEC without a match or a conda tool succeeded"
grep -q 'no environment matching .*explicit.txt is staged .* install micromamba' "$WORK/no-tool.out" ||
  fail "env=SPEC without a conda tool: $(cat "$WORK/no-tool.out")"
expect_lines "$WORK/no-tool.out" '^user code ran$' 0
mkdir -p "$WORK/bin"
cp "$SRAY_SOURCE_DIR/tests/fixtures/micromamba" "$WORK/bin/"
PATH=$WORK/bin:$PATH "$SRAY" env create "$WORK/explicit.txt" -p "$WORK/created" >"$WORK/create2.out" 2>&1 ||
  fail "create with micromamba on PATH: $(cat "$WORK/create2.out")"
grep -q "^sray: created $WORK/created with $WORK/bin/micromamba" "$WORK/create2.out" ||
  fail "create: $(cat "$WORK/create2.out")"
PATH=$WORK/bin:$PATH "$SRAY" run -N3 --ray-cluster="env=$WORK/explicit.txt,tmpdir=$WORK/tmp" \
  bash -c 'echo "$SRAY_NODE_ID $CONDA_PREFIX"' >"$WORK/spec-step.out" 2>&1 ||
  fail "a step with env=SPEC and micromamba on PATH failed: $(cat "$WORK/spec-step.out")"
created=$(ls -d "$WORK/tmp/sray-envs-$(id -u)"/spec-*/)
[ "$(echo "$created" | wc -l)" -eq 1 ] || fail "more than one copy made from one spec: $created"
expect_lines "$WORK/spec-step.out" "^[0-2] ${created%/}\$" 3
[ "$(grep -c '^micromamba create' "${created%/}.log")" -eq 1 ] || fail "micromamba ran more than once"
echo "ok: env=SPEC without a match fails before user code, and with micromamba on PATH is made once"

# An interrupt while the environment is created ends the creation and starts
# nothing (before: TERM and INT waited until the tool was done, then the
# program started and was ended at once).
grep -v numpy "$WORK/explicit.txt" >"$WORK/explicit-slow.txt"
# Starts `sray run -N2` of `touch $WORK/$1-started` on the slow spec in the
# background, output in $WORK/$1.out; returns once micromamba runs. Sets
# $launcher.
start_slow_staging() {
  FAKE_MICROMAMBA_SECONDS=60 PATH=$WORK/bin:$PATH "$SRAY" run -N2 \
    --ray-cluster="env=$WORK/explicit-slow.txt,tmpdir=$WORK/tmp" touch "$WORK/$1-started" \
    >"$WORK/$1.out" 2>&1 &
  launcher=$!
  for _ in $(seq 100); do
    compgen -G "$WORK/tmp/sray-envs-$(id -u)/spec-*.log" >/dev/null && break
    sleep 0.1
  done
  sleep 0.5
}
start_slow_staging slow
sent=$(date +%s%N)
kill -TERM "$launcher"
status=0
wait "$launcher" || status=$?
took_ms=$(( ($(date +%s%N) - sent) / 1000000 ))
[ "$status" -eq 143 ] || fail "an interrupted staging ended with status $status: $(cat "$WORK/slow.out")"
[ "$took_ms" -lt 5000 ] || fail "an interrupted staging took $took_ms ms to end"
grep -q '^sray: interrupted by Terminated while the nodes were being prepared: the program was not started$' \
  "$WORK/slow.out" || fail "no interrupt message: $(cat "$WORK/slow.out")"
[ ! -e "$WORK/slow-started" ] || fail "the program started after the interrupt"
for copy in "$WORK/tmp/sray-envs-$(id -u)"/spec-*/; do
  [ "$copy" = "$created" ] || fail "a half-made copy was left: $copy"
done
# The job's id starts with the launcher's pid: nothing of it may be left.
sleep 0.5
left=$(ls -d /dev/shm/sray.local"$launcher"-* "$WORK/tmp"/sray-*-local"$launcher"-* 2>/dev/null || true)
[ -z "$left" ] || fail "an interrupted staging left: $left"
echo "ok: an interrupt during staging ends it in ${took_ms} ms and starts nothing"

# kill -9 of the launcher while the environment is created: its janitor ends
# the tool and removes the node (before: the janitor knew of a node only once
# staging had ended, and the tool was no process of the step's, so both the
# session directory and the tool stayed).
start_slow_staging killed
tools=$(grep -l "$WORK/bin/micromamba" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3 | tr '\n' ' ')
[ -n "${tools// /}" ] || fail "no micromamba process while the environment was created"
kill -9 "$launcher"
wait "$launcher" 2>/dev/null || true
for _ in $(seq 50); do
  alive=""
  for pid in $tools; do [ -d "/proc/$pid" ] && alive+=" $pid"; done
  left=$(ls -d /dev/shm/sray.local"$launcher"-* "$WORK/tmp"/sray-*-local"$launcher"-* 2>/dev/null || true)
  [ -z "$alive" ] && [ -z "$left" ] && break
  sleep 0.1
done
[ -z "$alive" ] || fail "the conda tool ran on 5 s after its launcher was killed:$alive"
[ -z "$left" ] || fail "a launcher killed while staging left: $left"
[ ! -e "$WORK/killed-started" ] || fail "the program started after the launcher was killed"
grep -q "^sray: the launcher (pid $launcher) died without ending job local$launcher-[0-9a-f]*: ended [1-9]" \
  "$WORK/killed.out" || fail "the janitor did not say what it ended: $(cat "$WORK/killed.out")"
echo "ok: kill -9 of the launcher while staging leaves neither the tool nor the node's files"

# SIGTERM (or Ctrl-C, or SIGQUIT) of `sray env create`: the tool, in a process
# group of its own, ends with it and no prefix is left (before: sray died at
# once and micromamba ran on in the background; with SIGQUIT until
# 2026-12-07). sray ends by the signal after its orderly end, without a core
# file (SIGQUIT's default action would write one where it ran).
ulimit -c unlimited 2>/dev/null || true
# Only where a core file would land beside it: a hard limit of 0 or a
# core_pattern that pipes or names a directory would hide it anyway.
core_visible=0
pattern=$(cat /proc/sys/kernel/core_pattern 2>/dev/null || echo '|')
[ "$(ulimit -c)" != 0 ] && case $pattern in '|'* | /*) false ;; *) true ;; esac && core_visible=1
mkdir -p "$WORK/create-cwd"
cd "$WORK/create-cwd"
for signal in TERM QUIT; do
  expected=$((128 + $(kill -l "$signal")))
  FAKE_MICROMAMBA_SECONDS=60 PATH=$WORK/bin:$PATH "${WITH_DEFAULT_SIGNALS[@]}" "$SRAY" env create \
    "$WORK/explicit-slow.txt" -p "$WORK/interrupted" >"$WORK/create-$signal.out" 2>&1 &
  creator=$!
  tool=""
  for _ in $(seq 100); do
    # The tool's arguments (NUL-separated in /proc) hold `--prefix DIR`; sray's hold `-p DIR`.
    tool=$(for file in /proc/[0-9]*/cmdline; do
      tr '\0' ' ' <"$file" 2>/dev/null | grep -q -- "--prefix $WORK/interrupted " && echo "$file"
    done | cut -d/ -f3 | head -1 || true)
    [ -n "$tool" ] && break
    sleep 0.1
  done
  [ -n "$tool" ] || fail "no micromamba process for sray env create: $(cat "$WORK/create-$signal.out")"
  group=$(ps -o pgid= -p "$tool" | tr -d ' ')
  kill -"$signal" "$creator"
  status=0
  wait "$creator" 2>/dev/null || status=$?
  [ "$status" -eq "$expected" ] ||
    fail "sray env create ended with status $status after SIG$signal, expected $expected"
  in_group() { ps -e -o pid=,pgid=,args= | awk -v group="$1" '$2 == group'; }
  for _ in $(seq 50); do
    [ -z "$(in_group "$group")" ] && break
    sleep 0.1
  done
  [ -z "$(in_group "$group")" ] || fail "the conda tool ran on after SIG$signal of sray env create: $(in_group "$group")"
  [ ! -e "$WORK/interrupted" ] || fail "sray env create ended by SIG$signal left $WORK/interrupted"
  grep -q "was interrupted" "$WORK/create-$signal.out" || fail "no word of SIG$signal: $(cat "$WORK/create-$signal.out")"
  [ -z "$(ls "$WORK/create-cwd")" ] || fail "SIG$signal of sray env create left $(ls "$WORK/create-cwd")"
  if [ "$core_visible" = 1 ]; then
    echo "ok: SIG$signal of sray env create ends the tool and leaves no prefix (nor a core file)"
  else
    echo "ok: SIG$signal of sray env create ends the tool and leaves no prefix (core files not checked: core_pattern $pattern, limit $(ulimit -c))"
  fi
done
cd "$WORK"
echo PASS
