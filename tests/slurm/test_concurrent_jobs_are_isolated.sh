#!/usr/bin/env bash
# Two jobs running at the same time on the same nodes get different session
# directories. Each task waits until it sees both jobs' directories on its
# node, which proves the jobs overlapped.
source "$(dirname "$0")/lib.sh"

# A task latches what it saw in a marker file in $WORK (visible to all
# nodes), then waits for the other job's task on its node to do the same, so
# neither removes its directory before the other has looked.
probe='
  echo "dir $SLURMD_NODENAME $SRAY_SESSION_DIR"
  for _ in $(seq 600); do
    [ "$(ls -d /tmp/sray-$(id -u)-* | wc -l)" -ge 2 ] && break
    sleep 0.1
  done
  echo "seen $SLURMD_NODENAME $(ls -d /tmp/sray-$(id -u)-* | wc -l)"
  touch "seen.$SLURM_JOB_ID.$SLURMD_NODENAME"
  for _ in $(seq 600); do
    [ "$(ls seen.*."$SLURMD_NODENAME" | wc -l)" -ge 2 ] && break
    sleep 0.1
  done
'
as_user srun -N3 --ray-cluster bash -c "$probe" >"$WORK/a.out" &
first=$!
as_user srun -N3 --ray-cluster bash -c "$probe" >"$WORK/b.out" &
second=$!
wait "$first" || fail "first job failed"
wait "$second" || fail "second job failed"

for node in n1 n2 n3; do
  expect_lines "$WORK/a.out" "^seen $node 2\$" 1
  expect_lines "$WORK/b.out" "^seen $node 2\$" 1
done
dir_a=$(awk '$1 == "dir" {print $3; exit}' "$WORK/a.out")
dir_b=$(awk '$1 == "dir" {print $3; exit}' "$WORK/b.out")
[ -n "$dir_a" ] && [ "$dir_a" != "$dir_b" ] || fail "both jobs used session directory '$dir_a'"
echo PASS
