#!/usr/bin/env bash
# Actors under `srun -N3 --ray-cluster` on the emulated cluster: the checks
# of tests/local/test_actors.sh that matter most across real step daemons
# (order and state, named lookup from other nodes, 200 actors, restarts
# after kill -9, Kill freeing resources, placement groups), then nothing of
# the step may remain.
source "$(dirname "$0")/lib.sh"
ACTORS=$SRAY_PREFIX/libexec/sray/tests/actors_check

# MODE, the count of ok lines expected, then any srun options.
run_mode() { run_step_check "$ACTORS" "$1" "$2" "" "${@:3}"; }

run_mode basic 7
run_mode many 2
run_mode restart 5
# Two CPUs per node: three CPU:2 actors then fill the step.
run_mode kill 5 -c2
run_mode placement 7 -c2

as_user srun -N3 --ray-cluster "$EXAMPLES/feature_cache" >"$WORK/example.out" 2>&1 ||
  { cat "$WORK/example.out" >&2; fail "the feature_cache example failed under srun"; }
expect_lines "$WORK/example.out" '^cache correct$' 1
left=$(pgrep -u "$SRAY_TEST_USER" -f 'actors_check|feature_cache' || true)
[ -z "$left" ] || fail "processes of the test user left: $left"
echo PASS
