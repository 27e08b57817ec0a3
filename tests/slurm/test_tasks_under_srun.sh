#!/usr/bin/env bash
# Remote tasks and the object store under `srun -N3 --ray-cluster` on the
# emulated cluster (PMIx from Slurm, each node its own slurmd): the same
# checks as tests/local/test_tasks_and_objects.sh, and a driver returning with
# tasks in flight; then nothing of the step may remain: no process,
# shared-memory object (UCX's segments included), session directory or spill file.
source "$(dirname "$0")/lib.sh"
TASKS=$SRAY_PREFIX/libexec/sray/tests/tasks_check
REFS=$SRAY_PREFIX/libexec/sray/tests/refs_check

run_mode() { run_step_check "$TASKS" "$@"; }

run_mode basic 14 ""
run_mode objects 4 ""
run_mode refcount 2 ""
run_mode spill 5 "object_store_memory=128M"
run_mode worker-death 4 ""
# A worker crashing on SIGSEGV on both tries: one sray line a try on the
# step's output, naming the signal and the worker's log; UCX's own
# backtrace goes to that log, not to the step's output.
run_mode worker-crash 2 ""
crash_out=$WORK/tasks_check.worker-crash.out
expect_lines "$crash_out" '^sray: worker [0-9]+ \(pid [0-9]+\) on node [0-9] crashed: caught signal 11 \(Segmentation fault.*\); its backtrace is in /.+/worker-([0-9]+)\.log while the job runs \(`sray logs --worker \1`; --ray-cluster=log_dir=DIR keeps the logs after the job\)$' 2
expect_lines "$crash_out" 'backtrace \(tid|ucs_handle_error|Caught signal' 0
run_mode exception 4 ""
run_mode infeasible 3 ""
run_mode memory 3 "" --mem=1G
run_mode nested 1 ""
run_mode lineage 3 ""
run_mode blocked 1 ""
run_mode short-after-long 1 ""
run_step_check "$REFS" values 13 ""
# A driver returning from main with 10,000 tasks in flight (it left
# ucx_shm_posix_* segments, and UCX's "open(/proc/<pid>/fd/..) failed" error,
# in 2 of 4 steps): three steps, each clean and quiet.
for attempt in 1 2 3; do
  run_mode return-in-flight 1 ""
  if grep -E 'UCX +ERROR' "$WORK/tasks_check.return-in-flight.out"; then
    fail "UCX reported an error when the driver returned with tasks in flight"
  fi
done

as_user srun -N3 --ray-cluster "$EXAMPLES/parallel_data" >"$WORK/example.out" 2>&1 ||
  { cat "$WORK/example.out" >&2; fail "the parallel_data example failed under srun"; }
expect_lines "$WORK/example.out" '^result correct$' 1

# The resource example: GPUs declared in the user's config file, 2 CPUs per task.
printf 'resources = "GPU:1"\n' >"$WORK/gpus.toml"
chown "$SRAY_TEST_USER:" "$WORK/gpus.toml"
as_user srun -N2 -c2 --ray-cluster="config=$WORK/gpus.toml" "$EXAMPLES/resources" >"$WORK/resources.out" 2>&1 ||
  { cat "$WORK/resources.out" >&2; fail "the resources example failed under srun"; }
expect_lines "$WORK/resources.out" '^train_shard \(CPU: 2\) ran on node [01]$' 1
expect_lines "$WORK/resources.out" '^infer \(GPU: 0.5\) ran on node [01] with CUDA_VISIBLE_DEVICES=0$' 4
expect_lines "$WORK/resources.out" '^half-GPU tasks shared a device$' 1
expect_lines "$WORK/resources.out" '^asking 64 GPUs fails at once: .*\{GPU: 64\}' 1
left=$(pgrep -u "$SRAY_TEST_USER" -f 'tasks_check|refs_check|parallel_data|examples/resources' || true)
[ -z "$left" ] || fail "processes of the test user left: $left"
echo PASS
