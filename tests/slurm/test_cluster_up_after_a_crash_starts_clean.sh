#!/usr/bin/env bash
# A cluster that was never brought down (a killed session, a reboot) leaves
# step files in the nodes' spools, and a fresh slurmctld numbers the coming
# jobs as the crashed one did: Slurm's PMIx socket of a crashed step
# (stepd.slurm.pmix.JOB.STEP) then made the step with that number fail to
# launch ("Address already in use"; CI of stop 41). `scripts/cluster up` must
# start the nodes with clean spools.
source "$(dirname "$0")/lib.sh"

nodes=$(cat "$SRAY_CLUSTER_DIR/run/node-count")
# The tests after this one need the cluster: a failure between 'down' and
# 'up' brings it up again.
marker=$SRAY_CLUSTER_DIR/spool/sray/kept-by-up.$$
trap '"$CLUSTER" status >/dev/null 2>&1 || "$CLUSTER" up "$nodes" >/dev/null 2>&1 || true; rm -f "$marker"; rm -rf "$WORK"' EXIT
last_job=$(run_as_test_user srun -N1 bash -c 'echo $SLURM_JOB_ID')
[[ $last_job =~ ^[0-9]+$ ]] || fail "srun printed no job id: $last_job"

"$CLUSTER" down >"$WORK/down.out" 2>&1 || fail "'down' failed: $(cat "$WORK/down.out")"
# sray's own records in spool/sray are not slurmd's to lose.
mkdir -p "$(dirname "$marker")"
touch "$marker"
# What a crash leaves: the sockets of running steps of the next job ids
# (bound by one python3: each start of it takes about 0.4 s here).
sockets=()
for node in $(seq 1 "$nodes"); do
  spool=$SRAY_CLUSTER_DIR/spool/n$node
  mkdir -p "$spool"
  for id in $(seq "$last_job" $((last_job + 40))); do sockets+=("$spool/stepd.slurm.pmix.$id.0"); done
done
python3 -c 'import socket, sys; [socket.socket(socket.AF_UNIX).bind(path) for path in sys.argv[1:]]' "${sockets[@]}"
"$CLUSTER" up "$nodes" >"$WORK/up.out" 2>&1 || fail "'up' failed: $(cat "$WORK/up.out")"
[ -e "$marker" ] || fail "'up' removed $marker: sray's step records in spool/sray must stay"

for attempt in 1 2 3; do
  run_as_test_user srun -N"$nodes" bash -c 'echo "$SLURM_JOB_ID $SLURM_PROCID"' >"$WORK/srun.$attempt.out" 2>&1 ||
    fail "a step after 'up' failed to launch: $(cat "$WORK/srun.$attempt.out")"
  expect_lines "$WORK/srun.$attempt.out" '^[0-9]+ [0-9]+$' "$nodes"
done
echo PASS
