#!/usr/bin/env bash
# A bad --ray-cluster value makes srun and sbatch exit non-zero with a
# "sray: ..." message naming the problem, before any task starts.
source "$(dirname "$0")/lib.sh"

expect_rejected() {
  local message=$1
  shift
  if as_user "$@" touch "$WORK/started" >"$WORK/out" 2>"$WORK/err"; then
    fail "accepted: $*"
  fi
  expect_lines "$WORK/err" "$message" 1
  [ ! -e "$WORK/started" ] || fail "a task started despite the bad option: $*"
}

expect_rejected "sray: --ray-cluster: unknown key 'colour': accepted keys are config, dashboard, env, log_dir, log_level, log_to_driver, max_tasks_in_flight, node_timeout, object_store_memory, resources, tmpdir, wireup" \
  srun -N3 --ray-cluster=colour=red
expect_rejected "sray: --ray-cluster: option 'log_level' does not accept 'loud': use one of error, warning, info, debug" \
  srun -N3 --ray-cluster=log_level=loud
expect_rejected "sray: --ray-cluster: option 'tmpdir' must be an absolute path" \
  srun -N1 --ray-cluster=tmpdir=scratch
expect_rejected "sray: --ray-cluster: 'tmpdir' is not key=value" \
  srun -N1 --ray-cluster=tmpdir
expect_rejected "sray: user configuration \(config=\): cannot read config file /nonexistent.toml" \
  srun -N1 --ray-cluster=config=/nonexistent.toml
printf 'log_level = "info"\nthreads = "4"\n' >"$WORK/typo.toml"
chmod 644 "$WORK/typo.toml"
expect_rejected "sray: user configuration \(config=\): $WORK/typo.toml:2: unknown key 'threads'" \
  srun -N1 --ray-cluster="config=$WORK/typo.toml"

# sbatch refuses the job at submission.
printf '#!/bin/bash\n#SBATCH --ray-cluster=colour=red\nsrun touch started\n' >"$WORK/bad.sh"
chmod 644 "$WORK/bad.sh"
if as_user sbatch "$WORK/bad.sh" >"$WORK/out" 2>"$WORK/err"; then fail "sbatch accepted a bad option"; fi
expect_lines "$WORK/err" "sray: --ray-cluster: unknown key 'colour'" 1

# A problem only a node can see (its tmpdir is missing) fails every task with
# the node named, and runs no user code.
if as_user srun -N3 --ray-cluster=tmpdir=/nonexistent touch "$WORK/started" >"$WORK/out" 2>"$WORK/err"; then
  fail "a step with a missing tmpdir succeeded"
fi
expect_lines "$WORK/err" "sray: cannot start the sray cluster on n[1-3] \(node [0-2]\): cannot create session directory /nonexistent/sray-.*: set tmpdir= to an existing, writable node-local directory" 3
[ ! -e "$WORK/started" ] || fail "user code ran although the node setup failed"
echo PASS
