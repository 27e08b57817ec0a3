#!/usr/bin/env bash
# Remote tasks and the object store under `sray run -N3`: results, objects
# crossing nodes (shared memory and UCX_TLS=tcp,self), reference counting,
# ObjectRefs inside values borrowed across processes, surplus idle workers
# kept while they own objects, spilling 576 MiB
# through 128 MiB stores, a SIGKILLed worker's task retried, a crashing
# worker reported in one line with its backtrace in its log,
# remote exceptions, infeasible requests, fractional GPUs declared in
# config, memory as a resource; the parallel_data and resources examples;
# after each job no process, shared-memory object or spill file.
source "$(dirname "$0")/lib.sh"
TASKS=$SRAY_BUILD_DIR/tests/tasks_check
REFS=$SRAY_BUILD_DIR/tests/refs_check

run_mode() { run_job_check "$TASKS" "$@"; }

run_mode basic 14 ""
run_mode objects 4 ""
run_mode objects 4 "" env UCX_TLS=tcp,self
run_mode refcount 2 ""
run_mode spill 5 "object_store_memory=128M,log_level=debug"
# log_level=debug: each Put of 64 MiB or more is a line with its size and
# rate, and so is each pull of one between nodes (72 MiB objects).
expect_lines "$WORK/tasks_check.spill.out" '^sray: \[debug\] put object [0-9]+\.[0-9]+ into node 0.s store: 754[0-9]{5} bytes in [0-9.]+ s \([0-9]+ MiB/s\)$' 8
expect_lines "$WORK/tasks_check.spill.out" '^sray: \[debug\] node [12] pulled object [0-9]+\.[0-9]+ from node 0: 754[0-9]{5} bytes in [0-9.]+ s \([0-9]+ MiB/s\)$'
run_mode worker-death 4 ""
# A worker crashing on SIGSEGV on both tries: UCX's backtrace goes to the
# worker's log (kept here by log_dir=), the job's output gets one sray line a try.
run_mode worker-crash 2 "log_dir=$WORK/crash-logs"
crash_out=$WORK/tasks_check.worker-crash.out
expect_lines "$crash_out" '^sray: worker [0-9]+ \(pid [0-9]+\) on node [0-9] crashed: caught signal 11 \(Segmentation fault.*\); its backtrace is in /.+/worker-([0-9]+)\.log, copied to .+/crash-logs/.+/node-[0-9]/worker-\1\.log when the job ends$' 2
expect_lines "$crash_out" 'backtrace \(tid|ucs_handle_error|Caught signal' 0
crash_job=$(awk '$1 == "job" {print $2; exit}' "$crash_out")
crash_logs=$(grep -l '^==== backtrace' "$WORK/crash-logs/$crash_job.0"/node-*/worker-*.log | wc -l)
[ "$crash_logs" -ge 1 ] || fail "no kept worker log holds UCX's backtrace: $(ls -R "$WORK/crash-logs")"
echo "ok: a crashed worker's backtrace is in its log, one line on the job's output"
run_mode exception 4 ""
run_mode infeasible 3 ""
run_mode memory 3 ""
# After a burst of 20,000 tasks, an idle driver hands back what it left.
run_mode memory-after-burst 1 ""
run_mode gpu 4 "resources=GPU:2"
run_mode nested 1 ""
# Tasks in flight capped at 3 in every process: the driver's submissions and
# a task's own (which waits, lending its CPUs and running queued tasks) go
# on without a deadlock.
run_mode nested 1 "max_tasks_in_flight=3"
expect_lines "$WORK/tasks_check.nested.out" 'sray: \[info\] 3 tasks of this process are in flight, the most max_tasks_in_flight allows' 1
run_mode blocked 1 "max_tasks_in_flight=1"
run_mode lineage 3 ""
run_mode blocked 1 ""
run_mode short-after-long 1 ""
# ObjectRefs inside values: arguments, results, Put values, actor state,
# borrowed across processes and freed once the last borrower lets go.
run_job_check "$REFS" values 13 ""
# Workers above a node's pool size that own objects others hold stay until
# they own none (they were killed after 1 s idle, losing the objects).
run_job_check "$REFS" idle_owners 4 ""
# A borrower killed without giving its registrations back: its owners (the
# driver, an actor) free what only it held; and a task whose submitter was
# killed while it ran returns a ref lent to the dead submitter: freed too.
run_job_check "$REFS" dead_borrower 8 ""

# Started directly, without a launcher: one sray line and exit status 1, not
# "terminate called after throwing" and a core dump (status 134 before).
status=0
env -u SRAY_ROLE "$SRAY_BUILD_DIR/examples/parallel_data" >"$WORK/direct.out" 2>&1 || status=$?
[ "$status" -eq 1 ] || fail "a program started directly exited with $status: $(cat "$WORK/direct.out")"
expect_lines "$WORK/direct.out" '^sray: this process was not started by sray: SRAY_ROLE is not set: start the program with `srun --ray-cluster` or `sray run`, or set SRAY_LOCAL_MODE=1 to run its tasks and actors in this one process$' 1
expect_lines "$WORK/direct.out" '.' 1

# The same program, unchanged, in local mode: no launcher, one process.
SRAY_LOCAL_MODE=1 env -u SRAY_ROLE "$SRAY_BUILD_DIR/examples/parallel_data" >"$WORK/local-mode.out" 2>&1 ||
  fail "parallel_data in local mode failed: $(cat "$WORK/local-mode.out")"
expect_lines "$WORK/local-mode.out" '^result correct$' 1
# Under a launcher, local mode is refused with the fix.
status=0
SRAY_LOCAL_MODE=1 "$SRAY" run -N1 "$SRAY_BUILD_DIR/examples/parallel_data" >"$WORK/local-launched.out" 2>&1 || status=$?
[ "$status" -ne 0 ] || fail "local mode under sray run was accepted"
grep -q '^sray: local mode (SRAY_LOCAL_MODE=1 or InitOptions::local_mode) is for a program started directly' \
  "$WORK/local-launched.out" || fail "no clear error for local mode under a launcher: $(cat "$WORK/local-launched.out")"

# A store that cannot fit in /dev/shm fails at start, before user code, with the fix.
status=0
"$SRAY" run -N3 --ray-cluster=object_store_memory=20T "$TASKS" basic >"$WORK/too-big.out" 2>&1 || status=$?
[ "$status" -ne 0 ] || fail "a 20 TiB object store per node was accepted"
grep -q 'object_store_memory=.* does not fit in /dev/shm (3 nodes of the step share .*: lower object_store_memory' \
  "$WORK/too-big.out" || fail "no clear error for a store larger than /dev/shm: $(cat "$WORK/too-big.out")"
expect_lines "$WORK/too-big.out" '^ok: ' 0

# The seed's example: 100 chunks over three nodes.
"$SRAY" run -N3 "$SRAY_BUILD_DIR/examples/parallel_data" >"$WORK/example.out" 2>&1 ||
  { cat "$WORK/example.out" >&2; fail "the parallel_data example failed"; }
expect_lines "$WORK/example.out" '^result correct$' 1

# The resource example on a machine without GPUs, one declared per node in a config file.
printf 'resources = "GPU:1"\n' >"$WORK/gpus.toml"
"$SRAY" run -N2 --cpus-per-node 2 --ray-cluster="config=$WORK/gpus.toml" \
  "$SRAY_BUILD_DIR/examples/resources" >"$WORK/resources.out" 2>&1 ||
  { cat "$WORK/resources.out" >&2; fail "the resources example failed"; }
expect_lines "$WORK/resources.out" '^train_shard \(CPU: 2\) ran on node [01]$' 1
expect_lines "$WORK/resources.out" '^infer \(GPU: 0.5\) ran on node [01] with CUDA_VISIBLE_DEVICES=0$' 4
expect_lines "$WORK/resources.out" '^half-GPU tasks shared a device$' 1
expect_lines "$WORK/resources.out" '^asking 64 GPUs fails at once: .*\{GPU: 64\}' 1
echo PASS
