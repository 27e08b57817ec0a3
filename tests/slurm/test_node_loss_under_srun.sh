#!/usr/bin/env bash
# A whole non-head node lost under `srun -N3 --ray-cluster` (kill -9 of node
# 2's manager and every worker it started, while 600 tasks run): the step
# goes on without it (Slurm does not end a step when one task dies), the
# driver's checks all pass (tasks rerun, node 2's results rebuilt, its actors
# restarted elsewhere, new tasks avoid it), srun reports the killed task, and
# nothing of the step is left.
source "$(dirname "$0")/lib.sh"
CHECK_BINARY=$SRAY_PREFIX/libexec/sray/tests/node_loss_check
out=$WORK/node_loss.out
signal=$WORK/node-2-killed
for attempt in 1 2; do
  sizes=$(slurmd_log_sizes)
  run_as_test_user srun -N3 --ray-cluster bash -c 'echo "job $SLURM_JOB_ID"; exec "$0" "$@"' \
    "$CHECK_BINARY" "$signal" >"$out" 2>&1 &
  srun_pid=$!
  for _ in $(seq 600); do
    grep -q '^node-loss: ready$' "$out" && break
    kill -0 "$srun_pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -q '^node-loss: ready$' "$out" && break
  job=$(awk '$1 == "job" {print $2; exit}' "$out")
  if [ "$attempt" = 1 ] && [ -n "$job" ] && slurm_auth_race_since "$sizes" "$job.0"; then
    echo "note: Slurm rejected a PMIx peer of job $job ('Munge decode failed' in the slurmd log, a Slurm 22.05 race); cancelling it and starting the step once more" >&2
    scancel "$job"
    wait "$srun_pid" || true
    expect_no_session_directories "$job"
    continue
  fi
  cat "$out" >&2
  fail "the step was not ready within 60 s"
done
victim=$(awk '$1 == "node-loss:" && $2 == "victim" {print $3; exit}' "$out")
[ -n "$victim" ] || fail "the job named no victim"
tr '\0' '\n' <"/proc/$victim/environ" | grep -x 'SRAY_NODE_ID=2' >/dev/null || fail "pid $victim is not node 2's manager"
kill -9 "$victim" $(ps -o pid= --ppid "$victim") 2>/dev/null || true
touch "$signal"
status=0
wait "$srun_pid" || status=$?
[ "$status" -ne 0 ] || fail "srun reported success although one of its tasks was killed"
expect_lines "$out" '^sray: node 2 \(n3\) was lost: .*; the job goes on without it' 1
expect_lines "$out" '^FAIL' 0
expect_step_output "$out" 17
left=$(pgrep -u "$SRAY_TEST_USER" -f node_loss_check || true)
[ -z "$left" ] || fail "processes of the test user left: $left"
echo PASS
