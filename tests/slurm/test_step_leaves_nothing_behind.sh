#!/usr/bin/env bash
# After a step, its session directories are gone from every node and no
# process of the step is alive, including ones that left the task's process
# tree (background, setsid) and would otherwise outlive the step.
source "$(dirname "$0")/lib.sh"

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

# The same holds when the step fails.
if as_user srun -N3 --ray-cluster bash -c 'sleep 602 & echo "$! background"; echo "job $SLURM_JOB_ID"; exit 3' \
  >"$WORK/failed.out"; then
  fail "a failing step reported success"
fi
job=$(awk '$1 == "job" {print $2; exit}' "$WORK/failed.out")
expect_no_session_directories "$job"
expect_processes_gone "$WORK/failed.out"
echo PASS
