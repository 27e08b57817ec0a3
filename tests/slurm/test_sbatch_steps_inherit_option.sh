#!/usr/bin/env bash
# `#SBATCH --ray-cluster=...` reaches every srun step of the batch script; the
# batch script itself is not a cluster member.
source "$(dirname "$0")/lib.sh"

cat >"$WORK/job.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH -N3
#SBATCH --ray-cluster=log_level=debug
srun -l bash -c 'echo "step $SRAY_STEP_ID role $SRAY_ROLE nodes $SRAY_NUM_NODES level $SRAY_LOG_LEVEL"'
srun -l -N2 bash -c 'echo "step $SRAY_STEP_ID role $SRAY_ROLE nodes $SRAY_NUM_NODES level $SRAY_LOG_LEVEL"'
echo "batch role ${SRAY_ROLE:-none}"
SCRIPT
chmod 644 "$WORK/job.sh"
as_user sbatch --wait -o "$WORK/job.out" "$WORK/job.sh" >/dev/null
expect_lines "$WORK/job.out" '^0: step 0 role head nodes 3 level debug$' 1
expect_lines "$WORK/job.out" '^[12]: step 0 role worker nodes 3 level debug$' 2
expect_lines "$WORK/job.out" '^0: step 1 role head nodes 2 level debug$' 1
expect_lines "$WORK/job.out" '^1: step 1 role worker nodes 2 level debug$' 1
expect_lines "$WORK/job.out" '^batch role none$' 1

# Without a value the option still turns the steps into clusters.
cat >"$WORK/plain.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH -N2
#SBATCH --ray-cluster
srun bash -c 'echo "role $SRAY_ROLE level $SRAY_LOG_LEVEL"'
SCRIPT
chmod 644 "$WORK/plain.sh"
as_user sbatch --wait -o "$WORK/plain.out" "$WORK/plain.sh" >/dev/null
expect_lines "$WORK/plain.out" '^role head level info$' 1
expect_lines "$WORK/plain.out" '^role worker level info$' 1
echo PASS
