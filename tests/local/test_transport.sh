#!/usr/bin/env bash
# Wire-up and transport under `sray run -N3 --tasks-per-node 2` (embedded
# PMIx server), with UCX's default transports and with UCX_TLS=tcp,self.
source "$(dirname "$0")/lib.sh"

for tls in default tcp,self; do
  env_prefix=()
  [ "$tls" = default ] || env_prefix=(env "UCX_TLS=$tls")
  "${env_prefix[@]}" "$SRAY" run -N3 --tasks-per-node 2 "$CHECK" alltoall >"$WORK/alltoall.out"
  expect_lines "$WORK/alltoall.out" '^rank [0-5] \(node [0-2] of 3, local rank [01] of 2\): all-to-all ok with 6 ranks$' 6
  "${env_prefix[@]}" "$SRAY" run -N3 --tasks-per-node 2 "$CHECK" bulk 1073741824 >"$WORK/bulk.out"
  expect_lines "$WORK/bulk.out" '^rank 0: rendezvous send of 1073741824 bytes to rank 5 \(node 2, .*\) verified' 1
  expect_lines "$WORK/bulk.out" '^rank 5: RMA pull of 1073741824 bytes from rank 0 verified' 1
  "${env_prefix[@]}" "$SRAY" run -N3 --tasks-per-node 2 "$CHECK" intruder >"$WORK/intruder.out"
  expect_lines "$WORK/intruder.out" '^rank 1: intruder refused: ' 1
  expect_lines "$WORK/intruder.out" '^rank 1: rank 0 rejected [1-9][0-9]* frame\(s\)$' 1
  echo "ok: UCX_TLS=$tls"
done
"$SRAY" run -N3 "$CHECK" fence-timeout >"$WORK/timeout.out"
expect_lines "$WORK/timeout.out" '^rank [02]: the job-wide PMIx fence of namespace [^ ]+ did not complete within 2 s' 2
"$SRAY" run -N3 "$CHECK" fence >"$WORK/fence.out"
# Ranks 0 and 2 (on time) must wait for rank 1 (3 s late) at both fences.
expect_lines "$WORK/fence.out" '^rank [02] left fence [12] after rank 1 arrived$' 4
expect_lines "$WORK/fence.out" '^rank 1 arrived late at fence [12]$' 2
echo PASS
