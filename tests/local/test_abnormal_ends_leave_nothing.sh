#!/usr/bin/env bash
# However a local job ends, nothing of it stays: SIGINT, SIGTERM or SIGHUP of
# `sray run`, kill -9 of `sray run` itself (its janitor process cleans up), and
# a driver that throws out of main. Each job first has an object in the store
# of every node (/dev/shm) and UCX's segment directories there; afterwards no
# process, session directory, PMIx directory or /dev/shm entry of the job may
# remain (these leaked before: 36 MB per node per killed job).
source "$(dirname "$0")/lib.sh"
TASKS=$SRAY_BUILD_DIR/tests/tasks_check

job_of() { awk '$1 == "job" {print $2; exit}' "$1"; }

# Starts a job holding an object on every node; sets $launcher and $job.
start_holding() {
  local out=$1 files
  "$SRAY" run -N3 bash -c 'echo "job $SRAY_JOB_ID"; exec "$0" hold-objects' "$TASKS" >"$out" 2>&1 &
  launcher=$!
  wait_for_ready "$out" "$launcher"
  job=$(job_of "$out")
  # The check below can fail: the files are there while the job runs.
  files=$(ls /dev/shm | grep "^sray\.$job\.0\.n[012]\." || true)
  [ "$(grep -vc '\.ucx$' <<<"$files")" -ge 3 ] || fail "expected an object on each node, found: $files"
  [ "$(grep -c '\.ucx$' <<<"$files")" -eq 3 ] || fail "expected a UCX directory per node, found: $files"
}

# Nothing of $job anywhere: processes, /tmp, /dev/shm; prints how long it took.
expect_gone_within_5s() {
  local since=$1 left attempt
  for attempt in $(seq 50); do
    left=$(
      ls -d /tmp/sray-*-"$job".* 2>/dev/null
      ls /dev/shm | grep "^sray\.$job\." || true
      grep -l "SRAY_JOB_ID=$job" /proc/[0-9]*/environ 2>/dev/null | grep -v "/proc/$$/" || true
    )
    if [ -z "$left" ]; then
      echo "  gone after $((($(date +%s%N) - since) / 1000000)) ms"
      return 0
    fi
    sleep 0.1
  done
  fail "5 s after the end of job $job, still there: $left"
}

for signal in INT TERM HUP; do
  out=$WORK/$signal.out
  start_holding "$out"
  kill -"$signal" "$launcher"
  since=$(date +%s%N)
  status=0
  wait "$launcher" || status=$?
  expected=$((128 + $(kill -l "$signal")))
  [ "$status" -eq "$expected" ] || { cat "$out" >&2; fail "SIG$signal: exit status $status, expected $expected"; }
  echo "SIG$signal of sray run:"
  expect_gone_within_5s "$since"
done

# Ctrl-C of a shell loop of jobs: the terminal sends SIGINT to the whole
# foreground group, and a shell stops its loop only when its child died by
# SIGINT (an exit status of 130 is not enough: the loop went on before).
out=$WORK/loop.out
# (A shell without job control starts its background commands with SIGINT
# ignored; perl gives the loop's shell the terminal's default back.)
setsid -w perl -e '$SIG{INT} = "DEFAULT"; exec @ARGV or die "cannot run $ARGV[0]: $!"' \
  bash -c 'for i in 1 2; do "$0" run -N2 sleep 60; echo "after job $i"; done' "$SRAY" >"$out" 2>&1 &
loop=$!
for attempt in $(seq 100); do
  [ -n "$(ps -o pid= --ppid "$loop")" ] && break
  sleep 0.1
done
sleep 1
kill -INT -- "-$loop"
status=0
timeout 30 tail --pid="$loop" -f /dev/null || fail "a shell loop of jobs went on after Ctrl-C: $(cat "$out")"
wait "$loop" || status=$?
[ "$status" -eq 130 ] || { cat "$out" >&2; fail "the shell loop ended with status $status, expected 130 (SIGINT)"; }
if grep -q '^after job' "$out"; then cat "$out" >&2; fail "the loop went on after the job ended by Ctrl-C"; fi
echo "Ctrl-C of a shell loop of jobs: the loop stopped"

# nohup: a hang-up the caller ignores leaves the job running (before, the
# launcher's signalfd took it anyway and ended the job).
out=$WORK/nohup.out
nohup "$SRAY" run -N2 bash -c 'echo ready; sleep 3; echo "survived $PMIX_RANK"' >"$out" 2>&1 &
launcher=$!
wait_for_ready "$out" "$launcher"
kill -HUP "$launcher"
status=0
wait "$launcher" || status=$?
[ "$status" -eq 0 ] || { cat "$out" >&2; fail "a job under nohup ended with status $status after SIGHUP"; }
expect_lines "$out" '^survived [01]$' 2
echo "SIGHUP of sray run under nohup: the job ran to its end"

# Ctrl-C while the reader of the output stopped reading (`sray run ... | less`
# left at its first page): the launcher blocked in write(2) and never saw the
# interrupt. The reader here holds a FIFO open and reads nothing.
fifo=$WORK/stopped-reader.fifo
mkfifo "$fifo"
sleep 300 <"$fifo" &
reader=$!
"$SRAY" run -N2 bash -c 'echo "job $SRAY_JOB_ID" >&2; echo ready >&2; yes "a line of rank $PMIX_RANK" | head -c 50000000' \
  >"$fifo" 2>"$WORK/stopped-reader.err" &
launcher=$!
wait_for_ready "$WORK/stopped-reader.err" "$launcher"
job=$(job_of "$WORK/stopped-reader.err")
sleep 1
kill -INT "$launcher"
since=$(date +%s%N)
timeout 15 tail --pid="$launcher" -f /dev/null ||
  fail "sray run did not end within 15 s of Ctrl-C while its reader did not read: $(cat "$WORK/stopped-reader.err")"
status=0
wait "$launcher" || status=$?
[ "$status" -eq 130 ] || fail "Ctrl-C with a stopped reader: exit status $status, expected 130"
echo "Ctrl-C of sray run whose reader stopped reading: ended after $((($(date +%s%N) - since) / 1000000)) ms"
expect_gone_within_5s "$since"
kill "$reader"
wait "$reader" 2>/dev/null || true

# A reader that is only slow gets all of it (what the ranks wrote before they
# ended waits in their pipes while the launcher holds its share).
bytes=$("$SRAY" run -N2 bash -c 'yes "a line of rank $PMIX_RANK" | head -c 3000000; echo done' | (sleep 3; cat) | wc -c)
[ "$bytes" -eq 6000010 ] || fail "a slow reader got $bytes bytes of the ranks' output, expected 6000010"

# kill -9 of the launcher: the ranks and workers must not run on, and their
# files must not stay (before: everything ran to its end and stayed).
out=$WORK/kill.out
start_holding "$out"
kill -9 "$launcher"
since=$(date +%s%N)
wait "$launcher" || true
echo "kill -9 of sray run:"
expect_gone_within_5s "$since"
expect_lines "$out" "^sray: the launcher \\(pid $launcher\\) died without ending job $job: ended [1-9][0-9]* process\\(es\\) and removed the job's files\$" 1

# kill -9 of a node manager (node 1's rank): the workers it started die with
# it at once (PR_SET_PDEATHSIG); the node is lost and the job goes on without
# it (tests/local/test_node_loss.sh checks the work); Ctrl-C then ends it
# with nothing left, node 1's files included.
out=$WORK/manager.out
start_holding "$out"
manager=""
for pid in $(ps -o pid= --ppid "$launcher"); do
  if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -x 'SRAY_NODE_ID=1' >/dev/null; then manager=$pid; fi
done
[ -n "$manager" ] || fail "no rank of node 1 among the launcher's children: $(ps -o pid=,args= --ppid "$launcher")"
workers=$(ps -o pid= --ppid "$manager" | tr -s ' \n' ' ')
[ -n "${workers// /}" ] || fail "node 1's manager (pid $manager) has no worker: the object's task ran elsewhere"
kill -9 "$manager"
since=$(date +%s%N)
for attempt in $(seq 30); do
  alive=""
  for pid in $workers; do
    if [ -d "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; then alive+=" $pid"; fi
  done
  [ -z "$alive" ] && break
  sleep 0.1
done
[ -z "$alive" ] || fail "workers of the killed node manager still run 3 s after it:$alive"
echo "kill -9 of node 1's manager: its workers ($workers) gone after $((($(date +%s%N) - since) / 1000000)) ms"
for attempt in $(seq 50); do
  grep -q '^sray: node 1 (.*) was lost: ' "$out" && break
  sleep 0.1
done
grep -q '^sray: node 1 (.*) was lost: ' "$out" || { cat "$out" >&2; fail "the head did not report node 1 lost within 5 s"; }
kill -0 "$launcher" 2>/dev/null || { cat "$out" >&2; fail "the job ended when node 1 was lost"; }
kill -INT "$launcher"
since=$(date +%s%N)
status=0
wait "$launcher" || status=$?
[ "$status" -ne 0 ] || fail "a job ended by Ctrl-C exited with 0"
expect_gone_within_5s "$since"

# A launcher whose parent ignored SIGCHLD (which exec passes on): the system
# reaped the ranks unseen, and `sray run` waited for ever, Ctrl-C or not.
# It runs and ends as any other job now.
out=$WORK/sigchld.out
status=0
timeout -k 10 60 perl -e '$SIG{CHLD} = "IGNORE"; exec @ARGV or die "cannot run $ARGV[0]: $!"' \
  "$SRAY" run -N3 bash -c 'echo "job $SRAY_JOB_ID"; exec "$0" nested' "$TASKS" >"$out" 2>&1 || status=$?
[ "$status" -eq 0 ] || { cat "$out" >&2; fail "a job started with SIGCHLD ignored: exit status $status (124: it hung)"; }
expect_lines "$out" '^ok: ' 1
job=$(job_of "$out")
echo "a job started with SIGCHLD ignored:"
expect_gone_within_5s "$(date +%s%N)"

# A driver that throws out of main (std::terminate, SIGABRT).
out=$WORK/throw.out
status=0
"$SRAY" run -N3 --ray-cluster="log_dir=$WORK/kept-logs" bash -c 'echo "job $SRAY_JOB_ID"; exec "$0" throw-out-of-main' \
  "$TASKS" >"$out" 2>&1 || status=$?
[ "$status" -ne 0 ] || fail "a driver that threw out of main exited with 0"
grep -q 'thrown out of main by tasks_check' "$out" || { cat "$out" >&2; fail "the exception's message is missing"; }
job=$(job_of "$out")
# log_dir= keeps every node's worker logs, node 0's too, whose manager died
# with the driver (before, only the other nodes' were copied).
for node in 0 1 2; do
  ls "$WORK/kept-logs/$job.0/node-$node"/worker-*.log >/dev/null 2>&1 ||
    fail "log_dir kept no worker log of node $node: $(ls -R "$WORK/kept-logs")"
done
echo "driver threw out of main (exit status $status):"
expect_gone_within_5s "$(date +%s%N)"
echo PASS
