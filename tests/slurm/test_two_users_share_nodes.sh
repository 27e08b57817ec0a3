#!/usr/bin/env bash
# Two users' jobs on the same three nodes at once. The test user's job holds
# objects in every node's store, keeps an actor process on every node, and
# has node 0 spill objects to its session directory (a 16 MiB store).
# Meanwhile:
# - its session directories, spill files and shared-memory entries give no
#   access to group or others (checked as root on every node);
# - the second user's job, on the same nodes, cannot list those
#   directories, read those objects or spill files or the first user's jobs
#   file, and gets 401 from its dashboard, with no token or a made-up one;
# - the second job runs sray work of its own (objects on every node), and
#   its end, cleanup included, leaves the first job's processes, objects and
#   directories alone.
# Then the other way round: a third job, the second user's again, runs while
# the first one ends, and the first job's end leaves the third's alone.
# Every job finds its objects intact, and none leaves anything.
source "$(dirname "$0")/lib.sh"
CHECK_PROGRAM=$SRAY_PREFIX/libexec/sray/tests/shared_node_check
SECOND_USER=${SRAY_SECOND_TEST_USER:-}
[ -n "$SECOND_USER" ] && id -u "$SECOND_USER" >/dev/null 2>&1 ||
  skip "no second test user: run 'scripts/cluster up' from this tree (it creates sraytest2)"
SECOND_HOME=$SRAY_SECOND_TEST_HOME
SECOND_WORK=$(mktemp -d "$SECOND_HOME/test.XXXXXX")
chown "$SECOND_USER:" "$SECOND_WORK"
chmod 755 "$SECOND_WORK"
first_pid=""
third_pid=""
# A failure while a job waits ends that job before the files go.
trap 'touch "$WORK/done" "$SECOND_WORK/third-done" 2>/dev/null
      [ -z "$first_pid" ] || wait "$first_pid" 2>/dev/null
      [ -z "$third_pid" ] || wait "$third_pid" 2>/dev/null
      rm -rf "$WORK" "$SECOND_WORK"' EXIT
run_as_second_user() { run_as "$SECOND_USER" "$SECOND_HOME" "$SECOND_WORK" "$@"; }
first_uid=$(id -u "$SRAY_TEST_USER")

run_as_test_user srun -N3 --ray-cluster=object_store_memory=16M bash -c 'echo "job $SLURM_JOB_ID"; exec "$0" "$@"' \
  "$CHECK_PROGRAM" "$WORK/done" spill >"$WORK/first.out" 2>&1 &
first_pid=$!
wait_for_ready "$WORK/first.out" "$first_pid"
first_job=$(awk '$1 == "job" {print $2; exit}' "$WORK/first.out")
[ -n "$first_job" ] || fail "the first job printed no job id: $(cat "$WORK/first.out")"
# The second job goes to the first job's nodes, whatever the cluster's size.
nodelist=$(squeue -h -j "$first_job" -o %N)
nodes=$(scontrol show hostnames "$nodelist")
[ "$(echo "$nodes" | wc -w)" -eq 3 ] || fail "the first job is not on 3 nodes: '$nodelist'"
holders=$(awk '$1 == "holder" {print $5}' "$WORK/first.out")
[ "$(echo "$holders" | wc -w)" -eq 3 ] || fail "the first job names no holder per node: $(cat "$WORK/first.out")"

# The first job's files, as root on every node: directories 0700 and files
# 0600 or narrower, all of the job user. Spill files are named as the job's
# tasks see them (/tmp of their node), for the second user's probe.
: >"$SECOND_WORK/spilled"
for node in $nodes; do
  session=$(ls -d "$(on_node "$node" /tmp)/sray-$first_uid-$first_job".* 2>/dev/null) ||
    fail "no session directory of job $first_job on $node"
  [ "$(stat -c '%a %U' "$session")" = "700 $SRAY_TEST_USER" ] ||
    fail "the session directory on $node is $(stat -c '%a %U' "$session")"
  open=$(find "$session" ! -type l \( -perm /077 -o ! -user "$SRAY_TEST_USER" \) -printf '%m %u %p\n')
  [ -z "$open" ] || fail "files of the session directory on $node that others may use: $open"
  if [ -d "$session/spill" ]; then
    find "$session/spill" -type f | sed "s|^$(on_node "$node" "")||" >>"$SECOND_WORK/spilled"
  fi
done
[ -s "$SECOND_WORK/spilled" ] || fail "the first job spilled nothing: $(cat "$WORK/first.out")"
echo "ok: the first job's spill files ($(wc -l <"$SECOND_WORK/spilled")) are its user's alone"
shared=$(find /dev/shm -mindepth 1 -maxdepth 1 -user "$SRAY_TEST_USER" -name "*$first_job*")
[ -n "$shared" ] || fail "the first job has nothing in /dev/shm: $(ls -la /dev/shm)"
open=$(find $shared ! -type l -perm /077 -printf '%m %u %p\n')
[ -z "$open" ] || fail "shared-memory entries of the first job that others may use: $open"
objects=$(find $shared ! -type d)
[ -n "$objects" ] || fail "the first job has no shared-memory object: $shared"
echo "ok: the first job's session directories and shared memory are its user's alone ($(echo "$objects" | wc -w) objects)"

jobs_file=$SRAY_TEST_HOME/.sray/jobs/$first_job.0.json
url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$jobs_file")
echo "$objects" >"$SECOND_WORK/objects"
# On each node, as the second user, before its own sray program starts.
probe='
  node=$SLURMD_NODENAME
  for directory in /tmp/sray-'"$first_uid-$first_job"'.*; do
    [ -e "$directory" ] || echo "LEAK: the first job has no session directory on $node to probe"
    ls "$directory" >/dev/null 2>&1 && echo "LEAK: listed $directory on $node"
    cat "$directory"/* >/dev/null 2>&1 && echo "LEAK: read a file of $directory on $node"
  done
  while read -r object; do
    cat "$object" >/dev/null 2>&1 && echo "LEAK: read $object on $node"
    : >>"$object" 2>/dev/null && echo "LEAK: opened $object for writing on $node"
  done <objects
  denied=0 total=0
  while read -r spilled; do
    total=$((total + 1))
    if refusal=$(cat "$spilled" 2>&1 >/dev/null); then
      echo "LEAK: read spill file $spilled on $node"
    else
      case $refusal in *"Permission denied"*) denied=$((denied + 1)) ;; esac
    fi
  done <spilled
  echo "spill files denied $denied of $total on $node"
  cat '"$jobs_file"' >/dev/null 2>&1 && echo "LEAK: read the first user'"'"'s jobs file on $node"
  code=$(curl -s --max-time 5 -o /dev/null -w "%{http_code}" '"${url}api/nodes"')
  [ "$code" = 401 ] || echo "LEAK: the first job'"'"'s dashboard answered $code without a token on $node"
  code=$(curl -s --max-time 5 -o /dev/null -w "%{http_code}" -H "Authorization: Bearer 00000000000000000000000000000000" '"${url}api/nodes"')
  [ "$code" = 401 ] || echo "LEAK: the first job'"'"'s dashboard answered $code to a made-up token on $node"
  echo "probed $node"
'
touch "$SECOND_WORK/done"  # the second job checks and ends at once
rerun_on_slurm_auth_race run_as_second_user srun -N3 -w "$nodelist" --ray-cluster \
  bash -c 'echo "job $SLURM_JOB_ID"; eval "$0"; exec "$@"' "$probe" "$CHECK_PROGRAM" "$SECOND_WORK/done" \
  >"$WORK/second.out" 2>&1 || fail "the second user's job failed: $(cat "$WORK/second.out")"
if grep '^LEAK' "$WORK/second.out"; then fail "the second user reached the first user's job"; fi
for node in $nodes; do expect_lines "$WORK/second.out" "^probed $node\$" 1; done
# On the node that spilled, each read must have been refused for want of
# permission, not for a path that does not exist there.
spilled_count=$(wc -l <"$SECOND_WORK/spilled")
grep -q "^spill files denied $spilled_count of $spilled_count on " "$WORK/second.out" ||
  fail "no node refused the second user every spill file for want of permission: $(grep '^spill files' "$WORK/second.out")"
expect_step_output "$WORK/second.out" 9
second_job=$(awk '$1 == "job" {print $2; exit}' "$WORK/second.out")
[ "$second_job" != "$first_job" ] || fail "both users' steps have job id $first_job"
echo "ok: the second user's job could not read or use the first's, and ran its own on the same nodes"

# expect_job_untouched NAME OTHER OUT PID UID JOB HOLDER_PIDS OBJECT_FILES:
# the NAME job (output OUT, srun PID, user UID, job id JOB) still runs, with
# its holders, /dev/shm objects and session directories on every node, after
# the OTHER job and its cleanup ended.
expect_job_untouched() {
  local name=$1 other=$2 out=$3 pid=$4 uid=$5 job=$6 holder_pids=$7 object_files=$8 holder object node
  kill -0 "$pid" 2>/dev/null || fail "the $name job ended with the $other: $(cat "$out")"
  for holder in $holder_pids; do
    [ -d "/proc/$holder" ] || fail "holder pid $holder of the $name job is gone after the $other job ended"
  done
  for object in $object_files; do
    [ -e "$object" ] || fail "$object of the $name job is gone after the $other job ended"
  done
  for node in $nodes; do
    ls -d "$(on_node "$node" /tmp)/sray-$uid-$job".* >/dev/null 2>&1 ||
      fail "the $name job's session directory on $node is gone after the $other job ended"
  done
  echo "ok: the $other job's cleanup left the $name job's processes, objects and directories"
}
expect_job_untouched first second "$WORK/first.out" "$first_pid" "$first_uid" "$first_job" "$holders" "$objects"

# The other way round: the second user's third job runs while the first
# job ends, cleanup included.
run_as_second_user srun -N3 -w "$nodelist" --ray-cluster bash -c 'echo "job $SLURM_JOB_ID"; exec "$0" "$@"' \
  "$CHECK_PROGRAM" "$SECOND_WORK/third-done" >"$WORK/third.out" 2>&1 &
third_pid=$!
wait_for_ready "$WORK/third.out" "$third_pid"
third_job=$(awk '$1 == "job" {print $2; exit}' "$WORK/third.out")
third_holders=$(awk '$1 == "holder" {print $5}' "$WORK/third.out")
[ "$(echo "$third_holders" | wc -w)" -eq 3 ] || fail "the third job names no holder per node: $(cat "$WORK/third.out")"
second_uid=$(id -u "$SECOND_USER")
third_shared=$(find /dev/shm -mindepth 1 -maxdepth 1 -user "$SECOND_USER" -name "*$third_job*")
[ -n "$third_shared" ] || fail "the third job has nothing in /dev/shm: $(ls -la /dev/shm)"
third_objects=$(find $third_shared ! -type d)
[ -n "$third_objects" ] || fail "the third job has no shared-memory object: $third_shared"

touch "$WORK/done"
wait "$first_pid" || fail "the first job failed: $(cat "$WORK/first.out")"
first_pid=""
expect_step_output "$WORK/first.out" 11
echo "ok: the first job's objects, spilled ones included, were intact to its end, and it left nothing"

expect_job_untouched third first "$WORK/third.out" "$third_pid" "$second_uid" "$third_job" "$third_holders" \
  "$third_objects"
touch "$SECOND_WORK/third-done"
wait "$third_pid" || fail "the third job failed: $(cat "$WORK/third.out")"
third_pid=""
expect_step_output "$WORK/third.out" 9
echo "ok: the third job's objects were intact to its end, and no job left anything"
echo PASS
