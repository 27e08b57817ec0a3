#!/usr/bin/env bash
# A node that stops without dying (every process of node 2 sent SIGSTOP, as a
# frozen, swapping or cut-off node would look) while 600 tasks run, under
# `sray run -N3 --ray-cluster=node_timeout=6`. UCX takes its processes for
# alive, so only the missing heartbeats show it: the head declares node 2
# lost after 6 s and the job goes on as for a dead node (node_loss_check's
# checks). Then:
# - resumed (SIGCONT): node 2 finds itself shut out, ends its workers and
#   objects and exits 0; the job ends with the driver's status 0;
# - never resumed: the launcher ends it 10 s after the driver's rank ended,
#   and the job's status is still the driver's.
# Either way nothing of the job is left. (Before: the job waited for node 2
# for good, and a resumed node 2 failed the job.)
source "$(dirname "$0")/lib.sh"
CHECK_BINARY=$SRAY_BUILD_DIR/tests/node_loss_check

# run_frozen NAME RESUME: runs the job, stops node 2, resumes it when RESUME
# is yes once the head declared it lost; leaves the output in $WORK/NAME.out
# and the launcher's status in $status.
run_frozen() {
  local name=$1 resume=$2 out=$WORK/$1.out signal=$WORK/$1-stopped launcher victim members attempt
  "$SRAY" run -N3 --ray-cluster=node_timeout=6 bash -c 'echo "job $SRAY_JOB_ID"; exec "$0" "$@"' \
    "$CHECK_BINARY" "$signal" >"$out" 2>&1 &
  launcher=$!
  for attempt in $(seq 600); do
    grep -q '^node-loss: ready$' "$out" && break
    kill -0 "$launcher" 2>/dev/null || { cat "$out" >&2; fail "$name: the job ended before it was ready"; }
    sleep 0.1
  done
  grep -q '^node-loss: ready$' "$out" || { cat "$out" >&2; fail "$name: the job was not ready within 60 s"; }
  victim=$(awk '$1 == "node-loss:" && $2 == "victim" {print $3; exit}' "$out")
  tr '\0' '\n' <"/proc/$victim/environ" | grep -x 'SRAY_NODE_ID=2' >/dev/null || fail "pid $victim is not node 2's manager"
  members="$victim $(ps -o pid= --ppid "$victim" | tr '\n' ' ')"
  # shellcheck disable=SC2086 # one argument per process
  kill -STOP $members
  touch "$signal"
  for attempt in $(seq 300); do
    grep -q '^sray: node 2 (.*) was lost: no heartbeat' "$out" && break
    sleep 0.1
  done
  grep -q '^sray: node 2 (.*) was lost: no heartbeat' "$out" ||
    { cat "$out" >&2; fail "$name: the head did not declare the stopped node 2 lost within 30 s"; }
  # Stopped a while longer, as a frozen node would be.
  sleep 2
  # shellcheck disable=SC2086 # one argument per process
  [ "$resume" = yes ] && kill -CONT $members
  status=0
  wait "$launcher" || status=$?
}

run_frozen resumed yes
[ "$status" -eq 0 ] || { cat "$WORK/resumed.out" >&2; fail "the job exited with $status after node 2 came back"; }
expect_lines "$WORK/resumed.out" '^sray: node 2: shut out of the job: .*: ending this node.s workers and objects; the job goes on without it$' 1
expect_job_output "$WORK/resumed.out" 17
echo "ok: a stopped node 2 was declared lost, the job went on, and node 2 left when it came back"

run_frozen never no
[ "$status" -eq 0 ] || { cat "$WORK/never.out" >&2; fail "the job exited with $status with node 2 still stopped"; }
expect_lines "$WORK/never.out" "^sray: ending the ranks still running 10 s after the driver's rank ended" 1
expect_job_output "$WORK/never.out" 17
echo "ok: a node stopped for good was declared lost, and the launcher ended it after the driver"
