#!/usr/bin/env bash
# Remote tasks and the object store under `sray run -N3`: results, objects
# crossing nodes (shared memory and UCX_TLS=tcp,self), reference counting,
# spilling 2 GiB through 512 MiB stores, a SIGKILLed worker's task retried,
# remote exceptions, infeasible requests, fractional GPUs declared in
# config; after each job no process, shared-memory object or spill file.
source "$(dirname "$0")/lib.sh"
TASKS=$SRAY_BUILD_DIR/tests/tasks_check

# Runs tasks_check MODE under sray run -N3 with OPTIONS, expects N ok lines.
run_mode() {
  local mode=$1 expected=$2 out=$WORK/$1.out status=0 options=()
  [ -z "$3" ] || options=(--ray-cluster="$3")
  shift 3
  "$@" "$SRAY" run -N3 "${options[@]}" bash -c 'echo "job $SRAY_JOB_ID"; exec "$0" "$@"' \
    "$TASKS" "$mode" >"$out" 2>&1 || status=$?
  [ "$status" -eq 0 ] || { cat "$out" >&2; fail "tasks_check $mode exited with $status"; }
  expect_lines "$out" '^ok: ' "$expected"
  local job
  job=$(awk '$1 == "job" {print $2; exit}' "$out")
  expect_nothing_left "$job"
  expect_no_shared_memory_objects "$job"
  echo "ok: $mode"
}

run_mode basic 6 ""
run_mode objects 4 ""
run_mode objects 4 "" env UCX_TLS=tcp,self
run_mode refcount 2 ""
run_mode spill 4 "object_store_memory=512M"
run_mode worker-death 3 ""
run_mode exception 4 ""
run_mode infeasible 3 ""
run_mode gpu 2 "resources=GPU:1"
run_mode nested 1 ""
run_mode lineage 3 ""
run_mode blocked 1 ""
run_mode short-after-long 1 ""

# The seed's example: 100 chunks over three nodes.
"$SRAY" run -N3 "$SRAY_BUILD_DIR/examples/parallel_data" >"$WORK/example.out" 2>&1 ||
  { cat "$WORK/example.out" >&2; fail "the parallel_data example failed"; }
expect_lines "$WORK/example.out" '^result correct$' 1
echo PASS
