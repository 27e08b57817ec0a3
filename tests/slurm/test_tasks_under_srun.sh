#!/usr/bin/env bash
# Remote tasks and the object store under `srun -N3 --ray-cluster` on the
# emulated cluster (PMIx from Slurm, each node its own slurmd): the same
# checks as tests/local/test_tasks_and_objects.sh, then nothing of the step
# may remain: no process, shared-memory object, session directory or spill file.
source "$(dirname "$0")/lib.sh"
TASKS=$SRAY_PREFIX/libexec/sray/tests/tasks_check

run_mode() {
  local mode=$1 expected=$2 option=--ray-cluster out=$WORK/$1.out
  [ -z "$3" ] || option="--ray-cluster=$3"
  as_user srun -N3 "$option" bash -c 'echo "job $SLURM_JOB_ID"; exec "$0" "$@"' "$TASKS" "$mode" \
    >"$out" 2>&1 || { cat "$out" >&2; fail "tasks_check $mode failed under srun"; }
  expect_lines "$out" '^ok: ' "$expected"
  local job
  job=$(awk '$1 == "job" {print $2; exit}' "$out")
  expect_no_session_directories "$job"
  expect_no_shared_memory_objects "$job"
  echo "ok: $mode"
}

run_mode basic 6 ""
run_mode objects 4 ""
run_mode refcount 2 ""
run_mode spill 4 "object_store_memory=512M"
run_mode worker-death 3 ""
run_mode exception 4 ""
run_mode infeasible 3 ""
run_mode nested 1 ""
run_mode lineage 3 ""
run_mode blocked 1 ""
run_mode short-after-long 1 ""

as_user srun -N3 --ray-cluster "$EXAMPLES/parallel_data" >"$WORK/example.out" 2>&1 ||
  { cat "$WORK/example.out" >&2; fail "the parallel_data example failed under srun"; }
expect_lines "$WORK/example.out" '^result correct$' 1
left=$(pgrep -u "$SRAY_TEST_USER" -f 'tasks_check|parallel_data' || true)
[ -z "$left" ] || fail "processes of the test user left: $left"
echo PASS
