#!/usr/bin/env bash
# `sray run` started inside an srun step (whose tasks carry Slurm's PMIx
# variables) wires its own ranks through its own PMIx server.
source "$(dirname "$0")/lib.sh"
CHECK=$SRAY_PREFIX/libexec/sray/tests/transport_check

as_user srun -N1 --ray-cluster sray run -N2 --tasks-per-node 2 "$CHECK" alltoall >"$WORK/nested.out"
expect_lines "$WORK/nested.out" '^rank [0-3] \(node [01] of 2, local rank [01] of 2\): all-to-all ok with 4 ranks$' 4
echo PASS
