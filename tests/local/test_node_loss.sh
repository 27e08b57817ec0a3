#!/usr/bin/env bash
# A whole non-head node lost under `sray run -N3` (kill -9 of node 2's
# manager and its workers at once, while 600 tasks run): the launcher and
# the head go on without it, tasks in flight run again on the other nodes,
# results that lived only on node 2 are rebuilt from lineage, its actors
# restart elsewhere, new tasks avoid it, and the job ends with the driver's
# status 0 and nothing left, node 2's shared-memory files included.
source "$(dirname "$0")/lib.sh"
CHECK_BINARY=$SRAY_BUILD_DIR/tests/node_loss_check
out=$WORK/node_loss.out
signal=$WORK/node-2-killed
"$SRAY" run -N3 bash -c 'echo "job $SRAY_JOB_ID"; exec "$0" "$@"' "$CHECK_BINARY" "$signal" >"$out" 2>&1 &
launcher=$!
for attempt in $(seq 600); do
  grep -q '^node-loss: ready$' "$out" && break
  kill -0 "$launcher" 2>/dev/null || { cat "$out" >&2; fail "the job ended before it was ready"; }
  sleep 0.1
done
grep -q '^node-loss: ready$' "$out" || { cat "$out" >&2; fail "the job was not ready within 60 s"; }
victim=$(awk '$1 == "node-loss:" && $2 == "victim" {print $3; exit}' "$out")
[ -n "$victim" ] || fail "the job named no victim"
tr '\0' '\n' <"/proc/$victim/environ" | grep -x 'SRAY_NODE_ID=2' >/dev/null ||
  fail "pid $victim is not node 2's manager"
# The node at once: its manager and every process it started.
kill -9 "$victim" $(ps -o pid= --ppid "$victim") 2>/dev/null || true
touch "$signal"
status=0
wait "$launcher" || status=$?
[ "$status" -eq 0 ] || { cat "$out" >&2; fail "the job exited with $status after losing node 2"; }
expect_lines "$out" '^sray: node 2 \(.*\) was lost: .*; the job goes on without it' 1
expect_lines "$out" '^sray: rank 2 \(node 2\) was killed by signal .*: its node is lost; the job goes on without it$' 1
expect_job_output "$out" 17
grep "^ok: " "$out"
echo "ok: node 2 lost, the job went on and finished"
