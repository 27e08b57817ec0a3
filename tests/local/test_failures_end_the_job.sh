#!/usr/bin/env bash
# `sray run` returns the first non-zero exit status, reports a killed rank to
# the others within 10 s, ends everything on PMIx_Abort and on Ctrl-C (ranks
# that ignore SIGTERM after a grace, or at once on a second Ctrl-C), cleans
# up when its reader goes away, and
# leaves no process, session directory or PMIx file behind.
source "$(dirname "$0")/lib.sh"

# Exit status of the first failing rank.
status=0
"$SRAY" run -N3 bash -c 'echo "job $SRAY_JOB_ID"; [ "$SRAY_NODE_ID" = 1 ] && exit 3; exit 0' >"$WORK/exit.out" 2>"$WORK/exit.err" || status=$?
[ "$status" -eq 3 ] || fail "expected exit status 3, got $status"
expect_lines "$WORK/exit.err" '^sray: rank 1 \(node 1\) exited with status 3' 1
expect_nothing_left "$(awk '{print $2; exit}' "$WORK/exit.out")"

# kill -9 of one rank: the others name it within 10 s and exit non-zero.
for tls in default tcp,self; do
  env_prefix=()
  [ "$tls" = default ] || env_prefix=(env "UCX_TLS=$tls")
  out=$WORK/death.$tls.out
  "${env_prefix[@]}" "$SRAY" run -N3 --tasks-per-node 2 bash -c 'echo "job $SRAY_JOB_ID"; exec "$0" peer-death' "$CHECK" >"$out" 2>&1 &
  launcher=$!
  victim=$(wait_for_victim "$out")
  kill -9 "$victim"
  killed_at=$(date +%s%N)
  seen=$(count_within_10s "$out" 'peer failure seen: rank 5 \(node 2, .*\) is unreachable' 5)
  [ "$seen" -ge 5 ] || { cat "$out" >&2; fail "only $seen of 5 survivors saw rank 5 die within 10 s"; }
  echo "UCX_TLS=$tls: survivors saw the failure within $((($(date +%s%N) - killed_at) / 1000000)) ms"
  status=0
  wait "$launcher" || status=$?
  [ "$status" -eq 137 ] || fail "expected exit status 137 (rank 5 killed), got $status"
  expect_nothing_left "$(awk '$1 == "job" {print $2; exit}' "$out")"
done

# PMIx_Abort from one rank ends all of them with its status, and leaves
# nothing behind.
status=0
"$SRAY" run -N2 --tasks-per-node 2 bash -c 'echo "job $SRAY_JOB_ID"; exec "$0" abort' "$CHECK" \
  >"$WORK/abort.out" 2>"$WORK/abort.err" || status=$?
[ "$status" -eq 5 ] ||
  fail "expected exit status 5 from PMIx_Abort, got $status: $(cat "$WORK/abort.err" "$WORK/abort.out")"
expect_lines "$WORK/abort.err" '^sray: rank 1 aborted the job: transport_check asked for it$' 1
abort_job=$(awk '$1 == "job" {print $2; exit}' "$WORK/abort.out")
expect_nothing_left "$abort_job"
expect_no_shared_memory_objects "$abort_job"

# Ranks that ignore SIGTERM and SIGINT: one Ctrl-C gives them the grace
# (3 s), then SIGKILL; a second Ctrl-C ends them at once.
# start_stubborn_job OUT: starts it in the background, sets $launcher once
# both ranks run.
start_stubborn_job() {
  local out=$1 attempt
  "$SRAY" run -N2 -l bash -c 'trap "" TERM INT; echo "job $SRAY_JOB_ID"; sleep 300' >"$out" 2>&1 &
  launcher=$!
  for attempt in $(seq 101); do
    [ "$(grep -c ' job ' "$out" || true)" -ge 2 ] && return 0
    [ "$attempt" -le 100 ] || { cat "$out" >&2; fail "both ranks did not start within 10 s"; }
    sleep 0.1
  done
}
milliseconds() { echo $(($(date +%s%N) / 1000000)); }
# wait_for_launcher SECONDS: the launcher's exit status in $status, or a
# failure (and SIGKILL of the launcher) after SECONDS rather than a hang.
wait_for_launcher() {
  local limit=$1 attempt
  for attempt in $(seq $((limit * 20))); do
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$launcher" 2>/dev/null; then
    kill -9 "$launcher"
    fail "the launcher still ran $limit s after it was interrupted"
  fi
  status=0
  wait "$launcher" || status=$?
}
start_stubborn_job "$WORK/stubborn.out"
interrupted_at=$(milliseconds)
kill -INT "$launcher"
wait_for_launcher 15
took=$(($(milliseconds) - interrupted_at))
[ "$status" -eq 130 ] || fail "expected exit status 130 after SIGINT, got $status"
[ "$took" -ge 2500 ] && [ "$took" -le 15000 ] ||
  fail "ranks ignoring SIGTERM ended $took ms after one Ctrl-C: expected the 3 s grace, then SIGKILL"
expect_nothing_left "$(awk '$2 == "job" {print $3; exit}' "$WORK/stubborn.out")"
echo "one Ctrl-C: ranks ignoring SIGTERM ended after $took ms"
start_stubborn_job "$WORK/stubborn2.out"
kill -INT "$launcher"
# Two signals pending at once would read as one: the second goes once the
# launcher has acted on the first.
for attempt in $(seq 101); do
  grep -q '^sray: interrupted by Interrupt' "$WORK/stubborn2.out" && break
  [ "$attempt" -le 100 ] || fail "the launcher did not act on the first Ctrl-C within 10 s"
  sleep 0.1
done
interrupted_at=$(milliseconds)
kill -INT "$launcher"
wait_for_launcher 15
took=$(($(milliseconds) - interrupted_at))
[ "$status" -eq 130 ] || fail "expected exit status 130 after two SIGINTs, got $status"
[ "$took" -lt 2500 ] || fail "a second Ctrl-C took $took ms to end ranks ignoring SIGTERM: expected at once"
expect_nothing_left "$(awk '$2 == "job" {print $3; exit}' "$WORK/stubborn2.out")"
echo "second Ctrl-C: ranks ended $took ms after it"

# Ctrl-C ends every rank, including processes that left the rank's group.
"$SRAY" run -N2 -l bash -c 'echo "job $SRAY_JOB_ID"; setsid sleep 300 & sleep 300' >"$WORK/int.out" 2>&1 &
launcher=$!
for attempt in $(seq 101); do
  [ "$(grep -c ' job ' "$WORK/int.out" || true)" -ge 2 ] && break
  [ "$attempt" -le 100 ] || { cat "$WORK/int.out" >&2; fail "both ranks did not start within 10 s"; }
  sleep 0.1
done
kill -INT "$launcher"
status=0
wait "$launcher" || status=$?
[ "$status" -eq 130 ] || fail "expected exit status 130 after SIGINT, got $status"
expect_lines "$WORK/int.out" '^sray: interrupted by Interrupt: ending every rank$' 1
expect_nothing_left "$(awk '$2 == "job" {print $3; exit}' "$WORK/int.out")"

# A reader that goes away (| head) does not kill the launcher before it has
# cleaned up (it did: SIGPIPE left the session and PMIx directories).
# (Its status is SIGPIPE's, or 0 where the job ended before head did.)
{ "$SRAY" run -N2 bash -c 'echo "job $SRAY_JOB_ID"; for i in $(seq 20000); do echo "line $i"; done' || true; } |
  head -1 >"$WORK/pipe.out"
expect_nothing_left "$(awk '$1 == "job" {print $2; exit}' "$WORK/pipe.out")"
# And the job ends then, by SIGPIPE as a pipeline's writer does, instead of
# running on with its output dropped (an endless producer ran for good,
# the launcher busy dropping its lines).
statuses=$(
  set +o pipefail
  timeout 30 "$SRAY" run -N2 bash -c 'echo "job $SRAY_JOB_ID"; exec yes' | head -2 >"$WORK/endless.out"
  echo "${PIPESTATUS[*]}"
)
[ "$statuses" = "141 0" ] || fail "expected sray run to end by SIGPIPE (141) when its reader went away, got: $statuses"
expect_nothing_left "$(awk '$1 == "job" {print $2; exit}' "$WORK/endless.out")"
# An object store that cannot fit fails the job once, before any rank starts
# (before: every rank aborted with "terminate called", one core each).
status=0
"$SRAY" run -N3 --ray-cluster=object_store_memory=100T true >"$WORK/store.out" 2>&1 || status=$?
[ "$status" -ne 0 ] || fail "three 100 TiB stores fitted in /dev/shm?"
expect_lines "$WORK/store.out" '^sray: cannot prepare emulated node 0: object_store_memory=.* per node does not fit in /dev/shm \(3 nodes of the step share' 1
[ "$(wc -l <"$WORK/store.out")" -eq 1 ] || fail "expected one line: $(cat "$WORK/store.out")"

# A program that is not a sray driver keeps its other ranks to their own end
# after rank 0 ended: the launcher ends ranks still running 10 s after the
# driver's only in sray jobs (whose head wrote its marker), where nothing
# else would end a node stopped for good.
status=0
"$SRAY" run -N2 bash -c 'echo "job $SRAY_JOB_ID"; [ "$SRAY_NODE_ID" = 0 ] && exit 0; sleep 12; echo "node 1 finished"' \
  >"$WORK/late.out" 2>&1 || status=$?
[ "$status" -eq 0 ] || fail "expected exit status 0, got $status: $(cat "$WORK/late.out")"
expect_lines "$WORK/late.out" '^node 1 finished$' 1
expect_lines "$WORK/late.out" 'ending the ranks still running' 0
expect_nothing_left "$(awk '$1 == "job" {print $2; exit}' "$WORK/late.out")"
echo PASS
