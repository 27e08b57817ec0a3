#!/usr/bin/env bash
# srun -N3 --ray-cluster gives exactly one head (node 0) and two workers, each
# with the SRAY_* variables, a private session directory, as the test user.
source "$(dirname "$0")/lib.sh"

as_user srun -N3 --ray-cluster "$EXAMPLES/roles" >"$WORK/roles.out"
expect_lines "$WORK/roles.out" '^node 0 of 3 on n1: head ' 1
expect_lines "$WORK/roles.out" ': head ' 1
expect_lines "$WORK/roles.out" '^node [12] of 3 on n[23]: worker \(head n1,' 2

# Each task reports its variables and what it sees of its session directory.
as_user srun -N3 --ray-cluster bash -c '
  echo "task $SLURM_PROCID node $SLURM_NODEID job $SLURM_JOB_ID step $SLURM_STEP_ID user $(id -un)"
  env | grep ^SRAY_ | sed "s/^/task $SLURM_PROCID /"
  echo "task $SLURM_PROCID session $(stat -c "%U %a %F" "$SRAY_SESSION_DIR")"
' >"$WORK/env.out"
job=$(awk '$1 == "task" && $3 == "node" {print $6; exit}' "$WORK/env.out")
[[ $job =~ ^[0-9]+$ ]] || fail "no job id in the output"
for task in 0 1 2; do
  role=worker
  [ "$task" = 0 ] && role=head
  expect_lines "$WORK/env.out" "^task $task node $task job $job step 0 user $SRAY_TEST_USER\$" 1
  expect_lines "$WORK/env.out" "^task $task SRAY_ROLE=$role\$" 1
  expect_lines "$WORK/env.out" "^task $task SRAY_NODE_ID=$task\$" 1
  expect_lines "$WORK/env.out" "^task $task SRAY_NUM_NODES=3\$" 1
  expect_lines "$WORK/env.out" "^task $task SRAY_HEAD_HOST=n1\$" 1
  expect_lines "$WORK/env.out" "^task $task SRAY_JOB_ID=$job\$" 1
  expect_lines "$WORK/env.out" "^task $task SRAY_STEP_ID=0\$" 1
  expect_lines "$WORK/env.out" "^task $task SRAY_SESSION_DIR=/tmp/sray-$(id -u "$SRAY_TEST_USER")-$job.0\$" 1
  # Resolved options: the admin file of the test cluster sets these.
  expect_lines "$WORK/env.out" "^task $task SRAY_LOG_LEVEL=info\$" 1
  expect_lines "$WORK/env.out" "^task $task SRAY_TMPDIR=/tmp\$" 1
  expect_lines "$WORK/env.out" "^task $task session $SRAY_TEST_USER 700 directory\$" 1
done

# SRAY_NODE_CPUS and SRAY_NODE_MEMORY (bytes) are what Slurm gave the step on
# each node: -c and --mem as asked, and the cluster's DefMemPerCPU=256 (MiB)
# times the node's CPUs when no memory is asked for.
as_user srun -N3 -c2 --mem=1G --ray-cluster bash -c 'echo "resources $SLURM_NODEID $SRAY_NODE_CPUS $SRAY_NODE_MEMORY"' \
  >"$WORK/resources.out"
expect_lines "$WORK/resources.out" '^resources [0-2] 2 1073741824$' 3
as_user srun -N2 --ntasks-per-node 2 -c1 --ray-cluster bash -c 'echo "resources $SLURM_NODEID $SRAY_NODE_CPUS $SRAY_NODE_MEMORY"' \
  >"$WORK/resources.out"
expect_lines "$WORK/resources.out" '^resources [01] 2 536870912$' 4
echo "ok: SRAY_NODE_CPUS and SRAY_NODE_MEMORY are the step's allocation on each node"

# User options override the admin defaults, and a user file is read on the nodes.
printf 'log_level = "warning"\n' >"$WORK/user.toml"
chmod 644 "$WORK/user.toml"
as_user srun -N2 --ray-cluster="config=$WORK/user.toml" printenv SRAY_LOG_LEVEL >"$WORK/user.out"
expect_lines "$WORK/user.out" '^warning$' 2
as_user srun -N2 --ray-cluster="config=$WORK/user.toml,log_level=debug" printenv SRAY_LOG_LEVEL >"$WORK/cli.out"
expect_lines "$WORK/cli.out" '^debug$' 2

# UCX defaults reach the tasks unless the user set them.
as_user srun -N2 --ray-cluster bash -c 'echo "ucx $UCX_POSIX_ERROR_HANDLING $UCX_SYSV_ERROR_HANDLING"' >"$WORK/ucx.out"
expect_lines "$WORK/ucx.out" '^ucx y y$' 2
as_user env UCX_SYSV_ERROR_HANDLING=n srun -N2 --ray-cluster bash -c 'echo "ucx $UCX_POSIX_ERROR_HANDLING $UCX_SYSV_ERROR_HANDLING"' >"$WORK/ucx.out"
expect_lines "$WORK/ucx.out" '^ucx y n$' 2

# Without --ray-cluster the plugin stays out of the way.
as_user srun -N1 bash -c 'echo "role=${SRAY_ROLE:-none}"' >"$WORK/plain.out"
expect_lines "$WORK/plain.out" '^role=none$' 1
echo PASS
