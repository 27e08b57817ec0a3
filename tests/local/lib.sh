# Helpers for the tests of `sray run` (label `local`): no Slurm, the current
# user, binaries from the build tree. Sourced by tests/local/test_*.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
: "${SRAY_BUILD_DIR:?run through ctest, which sets SRAY_BUILD_DIR}"
SRAY=$SRAY_BUILD_DIR/launcher/sray
CHECK=$SRAY_BUILD_DIR/tests/transport_check
ROLES=$SRAY_BUILD_DIR/examples/roles
WORK=$(mktemp -d)
# A test that fails while a job of its own runs in the background must end
# that job first: left running, it wrote its log_dir copy into $WORK again
# after the removal.
end_background_jobs_and_work() {
  local pid
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap end_background_jobs_and_work EXIT



# Nothing of job $1 (a local job id, e.g. local1234) may remain in /tmp.
# A process SIGKILLed at the end of the job may still be tearing down its
# memory for a moment (its environ stays readable): look again for 5 s.
expect_nothing_left() {
  local job=$1 left attempt
  # An empty id would match nothing and pass.
  [ -n "$job" ] || fail "no job id to check: the job printed no 'job <id>' line"
  left=$(ls -d /tmp/sray-*-"$job".* 2>/dev/null || true)
  [ -z "$left" ] || fail "left behind in /tmp: $left"
  for attempt in $(seq 50); do
    left=$(grep -l "SRAY_JOB_ID=$job" /proc/[0-9]*/environ 2>/dev/null | grep -v "/proc/$$/" || true)
    [ -n "$left" ] || return 0
    sleep 0.1
  done
  fail "processes of $job still alive: $left"
}

# Runs BINARY MODE (a job-wide check: tasks_check, actors_check) under
# `sray run -N3`, with --ray-cluster=OPTIONS unless OPTIONS is empty and after
# any command prefix given as further arguments (env UCX_TLS=...). Expects
# EXPECTED "ok:" lines; then nothing of the job may remain.
run_job_check() {
  local binary=$1 mode=$2 expected=$3 options=$4 out status=0 cluster=()
  shift 4
  out=$WORK/$(basename "$binary").$mode.out
  [ -z "$options" ] || cluster=(--ray-cluster="$options")
  "$@" "$SRAY" run -N3 "${cluster[@]}" bash -c 'echo "job $SRAY_JOB_ID"; exec "$0" "$@"' \
    "$binary" "$mode" >"$out" 2>&1 || status=$?
  [ "$status" -eq 0 ] || { cat "$out" >&2; fail "$(basename "$binary") $mode exited with $status"; }
  expect_job_output "$out" "$expected"
  echo "ok: $mode"
}

# OUT (a job's output that starts with "job <id>") has EXPECTED "ok:" lines,
# and nothing of that job remains.
expect_job_output() {
  local out=$1 expected=$2 job
  expect_lines "$out" '^ok: ' "$expected"
  job=$(awk '$1 == "job" {print $2; exit}' "$out")
  expect_nothing_left "$job"
  expect_no_shared_memory_objects "$job"
}
