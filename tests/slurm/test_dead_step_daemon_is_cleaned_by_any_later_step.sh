#!/usr/bin/env bash
# A step whose slurmstepd dies on one node while the node stays up (the OOM
# killer, an admin's kill -9) leaves its /dev/shm files and session directory
# there, which nothing of that step can remove any more. The end of the next
# step on the node, of any job and without --ray-cluster, removes them and
# says so in the slurmd log. (Before: they stayed until the next sray step on
# the node, possibly never on a node where nobody runs sray again.)
source "$(dirname "$0")/lib.sh"

start_step_holding_objects

# n3's step daemon and the step's processes there die at once; n3's slurmd
# lives on.
namespace=$(cat "$SRAY_CLUSTER_DIR/run/n3.mntns")
victims=""
for proc in /proc/[0-9]*; do
  [ "$(readlink "$proc/ns/mnt" 2>/dev/null)" = "$namespace" ] || continue
  pid=${proc#/proc/}
  args=$(tr '\0' ' ' <"$proc/cmdline" 2>/dev/null || true)
  owner=$(stat -c %U "$proc" 2>/dev/null || true)
  case "$args" in "slurmstepd: [$job.0]"*) victims="$victims $pid"; continue ;; esac
  [ "$owner" = "$SRAY_TEST_USER" ] && victims="$victims $pid"
done
[[ "$victims" == *[0-9]* ]] || fail "found no slurmstepd of step $job.0 on n3"
# shellcheck disable=SC2086 # one argument per process
kill -KILL $victims
scancel "$job"
wait "$step_pid" || true
# The other nodes' step daemons clean up; node 2's is gone.
sleep 1
[ -n "$(node2_files)" ] || fail "node 2's files went without its step daemon: nothing was left to test"

sizes=$(slurmd_log_sizes)
run_as_test_user srun -N3 true || fail "a plain step (no --ray-cluster) failed"
gone_within_5s node2_files ||
  fail "a later step ended on n3, and node 2's files of job $job are still there: $(node2_files)"
slurmd_logs_gain_within 15 "$sizes" "sray: removed what step $job\.0 (node 2) left on n3 when its slurmstepd died" ||
  fail "no slurmd log says that the later step's end on n3 removed what step $job.0 left"
echo "ok: the end of a plain step on n3 removed what the step with a dead slurmstepd left, and said so"
expect_no_session_directories "$job"
left=$(pgrep -u "$SRAY_TEST_USER" -f tasks_check || true)
[ -z "$left" ] || fail "processes of step $job.0 left: $left"
echo PASS
