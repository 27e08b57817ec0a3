#!/usr/bin/env bash
# Under srun the ranks exchange their wire-up values through srun's
# rendezvous (no PMIx fence among the step daemons, which Slurm 22.05 can
# leave hanging); wireup=pmix takes PMIx's fence. Both wire the job up, and
# neither the driver nor its tasks keep srun's token in their environment.
source "$(dirname "$0")/lib.sh"
TASKS=$SRAY_PREFIX/libexec/sray/tests/tasks_check

as_user srun -N3 --ray-cluster=log_level=debug "$TASKS" secrets >"$WORK/srun.out" 2>"$WORK/srun.err" ||
  { cat "$WORK/srun.out" "$WORK/srun.err" >&2; fail "a step wired up through srun failed"; }
expect_lines "$WORK/srun.err" "^sray: \[debug\] rank [0-2] wired up: PMIx connect [0-9.]+ ms, UCX worker [0-9.]+ ms, publish [0-9.]+ ms, srun exchange [0-9.]+ ms, " 3
expect_lines "$WORK/srun.err" "PMIx fence" 0
expect_lines "$WORK/srun.out" "^ok: the driver finds no trace of srun's rendezvous token$" 1
expect_lines "$WORK/srun.out" "^ok: tasks find no trace of the worker secret$" 1
echo "ok: every rank wires up through srun by default, and no process keeps srun's token"

# srun's --export=NONE holds the invitation back: every rank says so at once
# (rather than taking PMIx's fence, which can hang); naming it passes it.
PROBE=$SRAY_PREFIX/libexec/sray/bench/launch_probe
if as_user srun -N3 --export=NONE --ray-cluster "$PROBE" >"$WORK/none.out" 2>&1; then
  fail "a step with --export=NONE wired up without srun's invitation"
fi
expect_lines "$WORK/none.out" "^sray: wire-up failed: srun's invitation to exchange addresses \(SRAY_RENDEZVOUS\) did not reach this task: .*--export=ALL.*wireup=pmix" 3
as_user srun -N3 --export=SRAY_RENDEZVOUS,PATH --ray-cluster "$PROBE" >"$WORK/named.out" 2>&1 ||
  { cat "$WORK/named.out" >&2; fail "a step whose --export names SRAY_RENDEZVOUS failed"; }
expect_lines "$WORK/named.out" "^launch_probe " 1
echo "ok: --export=NONE fails at once naming the fix; an --export list that names SRAY_RENDEZVOUS wires up"

# (The probe: tasks_check's modes check the scheduler too, and their timing
# on a loaded machine is not what this test is about.)
as_user srun -N3 --ray-cluster=wireup=pmix,log_level=debug "$PROBE" >"$WORK/pmix.out" 2>"$WORK/pmix.err" ||
  { cat "$WORK/pmix.out" "$WORK/pmix.err" >&2; fail "a step wired up through PMIx failed"; }
expect_lines "$WORK/pmix.err" "^sray: \[debug\] rank [0-2] wired up: .*, PMIx fence [0-9.]+ ms, " 3
expect_lines "$WORK/pmix.err" "srun exchange" 0
expect_lines "$WORK/pmix.out" "^launch_probe " 1
echo "ok: wireup=pmix wires up through PMIx's fence"
