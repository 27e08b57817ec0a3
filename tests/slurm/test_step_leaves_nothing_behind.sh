#!/usr/bin/env bash
# After a step, its session directories are gone from every node and no
# process of the step is alive, including ones that left the task's process
# tree (background, setsid) and would otherwise outlive the step; after a
# scancel, a SIGKILL of srun or of the driver alone nothing of the step stays
# in /dev/shm either.
source "$(dirname "$0")/lib.sh"
TASKS=$SRAY_PREFIX/libexec/sray/tests/tasks_check

as_user srun -N3 --ray-cluster bash -c '
  sleep 600 &
  echo "$! background"
  setsid sleep 601 </dev/null >/dev/null 2>&1 &
  echo "$! setsid"
  echo "$$ task"
  echo "job $SLURM_JOB_ID"
  test -d "$SRAY_SESSION_DIR" && echo "session present"
' >"$WORK/pids.out"
expect_lines "$WORK/pids.out" '^session present$' 3
expect_lines "$WORK/pids.out" ' setsid$' 3
job=$(awk '$1 == "job" {print $2; exit}' "$WORK/pids.out")
expect_no_session_directories "$job"
expect_processes_gone "$WORK/pids.out"

# The same holds when the step fails, and for children started just before
# the task exits (they may still be between fork and exec when it ends).
if as_user srun -N3 --ray-cluster bash -c 'echo "job $SLURM_JOB_ID"; for i in 1 2 3 4 5 6 7 8; do sleep 602 & echo "$! background"; done; exit 3' \
  >"$WORK/failed.out"; then
  fail "a failing step reported success"
fi
job=$(awk '$1 == "job" {print $2; exit}' "$WORK/failed.out")
expect_no_session_directories "$job"
expect_processes_gone "$WORK/failed.out"
# They must be ended when the last task exits, not found only after Slurm
# gave up waiting for the output they held open.
if grep -q "\[$job.0\] error: eio_handle_mainloop: Abandoning IO" "$SRAY_CLUSTER_DIR"/log/slurmd-*.log; then
  fail "leftovers of step $job.0 kept its output open until Slurm abandoned it"
fi

# scancel of a step whose stores hold an object on every node: its processes
# die without their destructors, so the plugin's cleanup on each node removes
# the node's /dev/shm entries (before: sray.<job>.0.n{0,1,2}.* stayed, 36 MB
# each, owned by the test user).
run_as_test_user srun -N3 -c2 --ray-cluster bash -c 'echo "job $SLURM_JOB_ID"; exec "$0" hold-objects' \
  "$TASKS" >"$WORK/cancelled.out" 2>&1 &
step_pid=$!
wait_for_ready "$WORK/cancelled.out" "$step_pid"
job=$(awk '$1 == "job" {print $2; exit}' "$WORK/cancelled.out")
held=$(ls /dev/shm | grep "^sray\.$job\.0\.n[012]\." || true)
[ "$(grep -vc '\.ucx$' <<<"$held")" -ge 3 ] || fail "expected an object on each node, found: $held"
scancel "$job"
cancelled_at=$(date +%s%N)
wait "$step_pid" || true
for _ in $(seq 50); do
  left=$(ls /dev/shm | grep "^sray\.$job\." || true)
  [ -z "$left" ] && break
  sleep 0.1
done
[ -z "$left" ] || fail "5 s after scancel, left in /dev/shm: $left"
echo "scancel: /dev/shm clean after $((($(date +%s%N) - cancelled_at) / 1000000)) ms"
expect_no_session_directories "$job"

# expect_step_gone_within_5s JOB SRAY_JOB WHEN: within 5 s, no /dev/shm entry
# and no process of the step remain.
expect_step_gone_within_5s() {
  local job=$1 sray_job=$2 when=$3 left alive
  for _ in $(seq 50); do
    left=$(ls /dev/shm | grep "^sray\.$job\." || true)
    alive=$(grep -lzx "SRAY_JOB_ID=$sray_job" /proc/[0-9]*/environ 2>/dev/null || true)
    [ -z "$left$alive" ] && return 0
    sleep 0.1
  done
  [ -z "$left" ] || fail "5 s after $when, left in /dev/shm: $left"
  fail "5 s after $when, processes of the job still alive: $alive"
}

# SIGKILL of srun (the user's kill -9, or the OOM killer on a login node):
# Slurm ends the step when srun's connection goes, and nothing of it may
# stay: no process of the job (workers included), no /dev/shm entry, no
# session directory.
run_as_test_user srun -N3 -c2 --ray-cluster bash -c 'echo "$$ task"; echo "job $SLURM_JOB_ID $SRAY_JOB_ID"; exec "$0" hold-objects' \
  "$TASKS" >"$WORK/killed.out" 2>&1 &
step_pid=$!
wait_for_ready "$WORK/killed.out" "$step_pid"
read -r job sray_job < <(awk '$1 == "job" {print $2, $3; exit}' "$WORK/killed.out")
[ -n "$sray_job" ] || fail "the step printed no SRAY_JOB_ID: $(cat "$WORK/killed.out")"
# srun runs below the runuser of run_as (one or two levels below step_pid).
srun_pid=$(pgrep -x srun -P "$step_pid,$(pgrep -d, -P "$step_pid")" | head -1)
[ -n "$srun_pid" ] || fail "no srun found below $step_pid"
kill -KILL "$srun_pid"
killed_at=$(date +%s%N)
wait "$step_pid" || true
expect_step_gone_within_5s "$job" "$sray_job" "SIGKILL of srun"
echo "SIGKILL of srun: nothing of the step left after $((($(date +%s%N) - killed_at) / 1000000)) ms"
expect_no_session_directories "$job"
expect_processes_gone "$WORK/killed.out"

# SIGKILL of the driver alone (rank 0's program; srun and Slurm go on):
# nodes 1 and 2 notice that the driver is gone, say so and end themselves,
# so the step ends and nothing of it stays.
run_as_test_user srun -N3 -c2 --ray-cluster bash -c 'echo "rank $SLURM_PROCID $$"; echo "job $SLURM_JOB_ID $SRAY_JOB_ID"; exec "$0" hold-objects' \
  "$TASKS" >"$WORK/driver_killed.out" 2>&1 &
step_pid=$!
wait_for_ready "$WORK/driver_killed.out" "$step_pid"
read -r job sray_job < <(awk '$1 == "job" {print $2, $3; exit}' "$WORK/driver_killed.out")
driver_pid=$(awk '$1 == "rank" && $2 == 0 {print $3; exit}' "$WORK/driver_killed.out")
[ -n "$driver_pid" ] || fail "rank 0 printed no pid: $(cat "$WORK/driver_killed.out")"
kill -KILL "$driver_pid"
killed_at=$(date +%s%N)
for _ in $(seq 300); do
  kill -0 "$step_pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$step_pid" 2>/dev/null && fail "the step still ran 30 s after its driver was killed: $(cat "$WORK/driver_killed.out")"
wait "$step_pid" || true
expect_step_gone_within_5s "$job" "$sray_job" "the end of the step"
expect_lines "$WORK/driver_killed.out" '^sray: node [12]: lost the driver \(rank 0\): ' 2
echo "SIGKILL of the driver: the step ended, nothing left $((($(date +%s%N) - killed_at) / 1000000)) ms after the kill"
expect_no_session_directories "$job"
echo PASS
