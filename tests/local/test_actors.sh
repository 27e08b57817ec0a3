#!/usr/bin/env bash
# Actors and placement groups under `sray run -N3`: order per caller, state
# across calls, named lookup from tasks on other nodes, 200 actors over 3
# nodes, restarts after kill -9 and actor-died errors after the last one,
# Kill freeing resources for a waiting actor, SPREAD and PACK groups,
# constructor and method errors, concurrent calls, a killed actor's process
# serving the next actor (or ending when it cannot), results of calls killed
# with their actor freed from the stores; the FeatureCache example.
# After each job no process, shared-memory object or session file is left.
source "$(dirname "$0")/lib.sh"
ACTORS=$SRAY_BUILD_DIR/tests/actors_check

run_mode() { run_job_check "$ACTORS" "$1" "$2" ""; }

run_mode basic 7
run_mode many 2
run_mode restart 5
run_mode kill 5
run_mode placement 7
run_mode errors 5
run_mode concurrency 1
run_mode caller-death 1
run_mode orphans 1
run_mode reuse 11

"$SRAY" run -N3 "$SRAY_BUILD_DIR/examples/feature_cache" >"$WORK/example.out" 2>&1 ||
  { cat "$WORK/example.out" >&2; fail "the feature_cache example failed"; }
expect_lines "$WORK/example.out" '^cache correct$' 1
echo PASS
