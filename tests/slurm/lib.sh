# Helpers for the integration tests that run on the emulated Slurm cluster
# (scripts/cluster). Sourced by each tests/slurm/test_*.sh; tests run as root
# and submit jobs as the unprivileged test user.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

SRAY_SOURCE_DIR=${SRAY_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
CLUSTER=$SRAY_SOURCE_DIR/scripts/cluster
eval "$("$CLUSTER" env)"

if [ "$(id -u)" -ne 0 ]; then
  skip "slurm tests run as root (they inspect the nodes and submit as $SRAY_TEST_USER)"
fi
if ! "$CLUSTER" status >/dev/null 2>&1; then
  skip "the test cluster is not up: run 'scripts/cluster up' (scripts/test does)"
fi
if [ ! -f "$SRAY_PREFIX/lib/sray/spank_sray.so" ]; then
  skip "sray is not installed in $SRAY_PREFIX: run scripts/build"
fi

EXAMPLES=$SRAY_PREFIX/libexec/sray/examples
# A scratch directory in the test user's home, visible on every node.
WORK=$(mktemp -d "$SRAY_TEST_HOME/test.XXXXXX")
chown "$SRAY_TEST_USER:" "$WORK"
chmod 755 "$WORK"
trap 'rm -rf "$WORK"' EXIT

# run_as USER HOME DIRECTORY CMD...: CMD as USER (a clean environment, HOME
# as given) in DIRECTORY; stdout and stderr as given, as it runs.
run_as() {
  local user=$1 home=$2 directory=$3
  shift 3
  (cd "$directory" && runuser -u "$user" -- env -i PATH="$SRAY_PREFIX/bin:/usr/bin:/bin" \
    HOME="$home" USER="$user" LANG=C.UTF-8 SLURM_CONF="$SLURM_CONF" "$@")
}

# Runs a command as the test user in $WORK; stdout and stderr as given, as it runs.
run_as_test_user() { run_as "$SRAY_TEST_USER" "$SRAY_TEST_HOME" "$WORK" "$@"; }

# The slurmd logs' sizes, to read what a command added to them.
slurmd_log_sizes() {
  local log
  for log in "$SRAY_CLUSTER_DIR"/log/slurmd-*.log; do echo "$log $(stat -c %s "$log")"; done
}

# Starts `srun -N3 --no-kill --ray-cluster tasks_check hold-objects` in the
# background (output in $WORK/held.out) and waits until it holds objects on
# every node; sets step_pid and job, and defines node2_files (what of the
# step is in /dev/shm for node 2, on n3).
start_step_holding_objects() {
  run_as_test_user srun -N3 --no-kill --ray-cluster bash -c 'echo "job $SLURM_JOB_ID"; exec "$0" hold-objects' \
    "$SRAY_PREFIX/libexec/sray/tests/tasks_check" >"$WORK/held.out" 2>&1 &
  step_pid=$!
  wait_for_ready "$WORK/held.out" "$step_pid"
  job=$(awk '$1 == "job" {print $2; exit}' "$WORK/held.out")
  node2_files() { ls /dev/shm | grep "^sray\.$job\.0\.n2\." || true; }
  [ -n "$(node2_files | grep -v '\.ucx$')" ] || fail "node 2 (n3) holds no object of job $job: $(ls /dev/shm)"
}

# True when a slurmd log gained a line matching PATTERN (grep) since SIZES
# (slurmd_log_sizes).
slurmd_logs_gained() {
  local sizes=$1 pattern=$2 log size
  while read -r log size; do
    # Not grep -q: under pipefail, tail's SIGPIPE once grep quits would
    # fail the pipe despite the match.
    tail -c +"$((size + 1))" "$log" | grep "$pattern" >/dev/null && return 0
  done <<<"$sizes"
  return 1
}

# Like slurmd_logs_gained, waiting up to SECONDS for the line: a sweep logs
# what it removed once it is over, after the files are gone (it may still be
# ending the steps' processes meanwhile).
slurmd_logs_gain_within() {
  local seconds=$1 sizes=$2 pattern=$3 attempt
  for attempt in $(seq $((seconds * 10))); do
    slurmd_logs_gained "$sizes" "$pattern" && return 0
    sleep 0.1
  done
  return 1
}

# Waits up to 5 s for COMMAND (a function printing what is left) to print
# nothing; true once it does.
gone_within_5s() {
  local attempt
  for attempt in $(seq 50); do
    [ -z "$("$@")" ] && return 0
    sleep 0.1
  done
  return 1
}

# True when the slurmd logs show, since SIZES, Slurm 22.05's authentication race
# (for one of the given steps, JOB.STEP, when any are given):
# a slurmstepd verifies a peer's PMIx connection while it has dropped its
# privileges to the job user (around SPANK user_init and the tasks' fork), munge
# refuses, and the step's PMIx collective never completes (sray's fence then
# fails after its timeout). Slurm 23.02 serialises the two (auth_setuid_lock);
# nothing in sray runs in that window (user_init takes about 0.3 ms).
slurm_auth_race_since() {
  local sizes=$1 log size step pattern='Munge decode failed'
  shift
  if [ $# -gt 0 ]; then
    pattern=""
    for step in "$@"; do pattern+="${pattern:+|}\\[${step//./\\.}\\] error: Munge decode failed"; done
  fi
  while read -r log size; do
    tail -c +"$((size + 1))" "$log" | grep -Eq "$pattern" && return 0
  done <<<"$sizes"
  return 1
}

# The steps (JOB.STEP) in FILES whose wire-up fence timed out: sray names the
# step's PMIx namespace, slurm.pmix.JOB.STEP, in that error.
fence_timeouts_in() {
  grep -ho 'PMIx fence of namespace slurm\.pmix\.[0-9]*\.[0-9]* did not complete' "$@" |
    sed 's/.*slurm\.pmix\.\([0-9]*\.[0-9]*\) .*/\1/' | sort -u || true
}

# Runs a command as the test user in $WORK; stdout and stderr as given (each
# written when the command ends). A command runs once more, with a note on
# stderr, only when one of its own steps failed in the wire-up fence and the
# slurmd log has Slurm's authentication race for that same step (a parallel
# command's race reruns nothing); that first attempt must still leave nothing
# behind. No other failure is retried.
as_user() { rerun_on_slurm_auth_race run_as_test_user "$@"; }

# rerun_on_slurm_auth_race RUNNER CMD...: as_user's rule, for any RUNNER
# (run_as_test_user, or a run_as of another user).
rerun_on_slurm_auth_race() {
  local runner=$1 sizes out err status=0 steps step
  shift
  sizes=$(slurmd_log_sizes)
  out=$(mktemp) err=$(mktemp)
  "$runner" "$@" >"$out" 2>"$err" || status=$?
  steps=""
  [ "$status" -eq 0 ] || steps=$(fence_timeouts_in "$out" "$err")
  # shellcheck disable=SC2086 # one argument per step
  if [ -n "$steps" ] && slurm_auth_race_since "$sizes" $steps; then
    for step in $steps; do expect_no_session_directories "${step%%.*}"; done
    echo "note: Slurm rejected a PMIx peer of step $(echo $steps) ('Munge decode failed' in the slurmd log, a Slurm 22.05 race); running the command once more: $*" >&2
    status=0
    "$runner" "$@" >"$out" 2>"$err" || status=$?
  fi
  cat "$out"
  cat "$err" >&2
  rm -f "$out" "$err"
  return "$status"
}

# The node's view of a path (each emulated node has a private /tmp).
on_node() { echo "$("$CLUSTER" node-root "$1")$2"; }

# Fails unless no session directory of the given job is left on any node.
# srun returns when the tasks have ended; slurmstepd's own cleanup (where the
# plugin removes the directory) finishes moments later, so wait up to 10 s.
expect_no_session_directories() {
  local job=$1 node left=""
  [ -n "$job" ] || fail "no job id to check: the step printed no 'job <id>' line"
  for _ in $(seq 100); do
    left=""
    for node in $(sinfo -h -N -o %N); do
      left+=$(ls -d "$(on_node "$node" /tmp)"/sray-*-"$job".* 2>/dev/null || true)
    done
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  fail "session directory left behind 10 s after the step: $left"
}

# Fails unless every pid listed in FILE (one per line, first field) is gone.
expect_processes_gone() {
  local file=$1 pid alive
  for _ in $(seq 100); do
    alive=""
    for pid in $(awk '{print $1}' "$file"); do
      [[ $pid =~ ^[0-9]+$ ]] || continue
      if [ -d "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; then
        alive+=" $pid"
      fi
    done
    [ -z "$alive" ] && return 0
    sleep 0.1
  done
  fail "processes of the step still alive 10 s after it:$alive"
}

# Runs BINARY MODE (a job-wide check) as the test user under
# `srun -N3 --ray-cluster[=OPTIONS]` plus any further srun options, expects
# EXPECTED "ok:" lines; then nothing of the step may remain.
run_step_check() {
  local binary=$1 mode=$2 expected=$3 option=--ray-cluster out
  [ -z "$4" ] || option="--ray-cluster=$4"
  shift 4
  out=$WORK/$(basename "$binary").$mode.out
  as_user srun -N3 "$@" "$option" bash -c 'echo "job $SLURM_JOB_ID"; exec "$0" "$@"' "$binary" "$mode" \
    >"$out" 2>&1 || { cat "$out" >&2; fail "$(basename "$binary") $mode failed under srun"; }
  expect_step_output "$out" "$expected"
  echo "ok: $mode"
}

# OUT (a step's output that starts with "job <id>") has EXPECTED "ok:" lines,
# and no session directory or shared-memory object of that job remains.
expect_step_output() {
  local out=$1 expected=$2 job
  expect_lines "$out" '^ok: ' "$expected"
  job=$(awk '$1 == "job" {print $2; exit}' "$out")
  expect_no_session_directories "$job"
  expect_no_shared_memory_objects "$job"
  expect_no_loose_ucx_segments
}

# UCX's shared-memory segments belong in the step's own directory
# (UCX_POSIX_DIR): one of the test user's in /dev/shm itself is a leak that
# no step's cleanup would find (issue 14, defect 3). Only segments that
# appeared since this test began count: an earlier test's leak fails that
# test, not every later one.
loose_ucx_segments() {
  find /dev/shm -maxdepth 1 -user "$SRAY_TEST_USER" -name 'ucx_shm_posix_*' 2>/dev/null | sort || true
}
UCX_SEGMENTS_BEFORE=$(loose_ucx_segments)
expect_no_loose_ucx_segments() {
  local loose
  loose=$(comm -13 <(printf '%s\n' "$UCX_SEGMENTS_BEFORE") <(loose_ucx_segments) | grep . || true)
  [ -z "$loose" ] || fail "UCX segments of $SRAY_TEST_USER left in /dev/shm: $loose"
}
