#!/usr/bin/env bash
# A node that crashes while a step holds objects there (every process of
# emulated node n3 killed at once: slurmd, slurmstepd, the tasks) leaves its
# /dev/shm files, which Slurm cannot remove. When the node's slurmd starts
# again, the plugin's sweep removes them, before any step runs there, and
# says so in the slurmd log. (Before: they stayed until the next sray step on
# the node.)
source "$(dirname "$0")/lib.sh"
node_restored=no
# A failure below must not leave the cluster a node short for the next test.
trap '[ "$node_restored" = yes ] || "$CLUSTER" restore n3 >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

start_step_holding_objects

"$CLUSTER" fail n3 >/dev/null
scancel "$job"
wait "$step_pid" || true
# The other nodes' step daemons clean up; node 2's died with it.
sleep 1
[ -n "$(node2_files)" ] || fail "node 2's files went while its node was down: nothing was left to test"

sizes=$(slurmd_log_sizes)
"$CLUSTER" restore n3 >/dev/null
node_restored=yes
gone_within_5s node2_files ||
  fail "n3's slurmd started again, and node 2's files of job $job are still there: $(node2_files)"
slurmd_logs_gain_within 15 "$sizes" "sray: removed what step $job\.0 (node 2) left on n3 when its slurmstepd died" ||
  fail "no slurmd log says that n3's start removed what step $job.0 left"
echo "ok: n3's slurmd start removed what the crashed step left in /dev/shm, and said so"
expect_no_session_directories "$job"
echo PASS
