#!/usr/bin/env bash
# The dashboard under `srun -N2 --ray-cluster` on the emulated cluster, as
# the test user: the jobs file in the user's home (0600), `sray status` and
# `sray logs` of the user (of a worker, of an actor by name), what tasks
# print prefixed in the step's output, 401 for a request without the token,
# no login link in srun's output but one from `sray login` that opens the page
# in Chromium, a second step at once on its own port and token,
# the file unreadable by another user; after the step no jobs file and
# nothing listening, and the log_dir= copy read by `sray logs --log-dir`.
source "$(dirname "$0")/lib.sh"
CHECK_PROGRAM=$SRAY_PREFIX/libexec/sray/tests/dashboard_check
JOBS=$SRAY_TEST_HOME/.sray/jobs

KEPT=$WORK/kept  # the test user's, as a shared log directory would be
run_as_test_user srun -N2 --ray-cluster=log_dir="$KEPT" bash -c 'echo "job $SLURM_JOB_ID"; exec "$0" "$@"' \
  "$CHECK_PROGRAM" "$WORK/done" >"$WORK/job.out" 2>&1 &
job_pid=$!
wait_for_ready "$WORK/job.out" "$job_pid"
job=$(awk '$1 == "job" {print $2; exit}' "$WORK/job.out")
file=$JOBS/$job.0.json
[ -f "$file" ] || fail "no jobs file $file: $(ls -la "$JOBS" 2>&1)"
[ "$(stat -c '%a %U' "$file")" = "600 $SRAY_TEST_USER" ] || fail "the jobs file is $(stat -c '%a %U' "$file")"
url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$file")
echo "ok: the jobs file is the test user's, mode 600 ($url)"

! runuser -u nobody -- cat "$file" >/dev/null 2>&1 || fail "another user read the jobs file"
[ "$(runuser -u nobody -- curl -s -o /dev/null -w '%{http_code}' "${url}api/nodes")" = 401 ] ||
  fail "another user's request without the token was answered"
echo "ok: another user can neither read the jobs file nor use the API"

as_user sray status "$job" >"$WORK/status.out" 2>&1 || fail "sray status failed: $(cat "$WORK/status.out")"
expect_lines "$WORK/status.out" '^[01] +[^ ]+ +[0-9.]+/[0-9.]+ ' 2
as_user sray logs "$job" >"$WORK/logs.out" 2>&1 || fail "sray logs failed: $(cat "$WORK/logs.out")"
grep -Eq '^[01] +[0-9]+ +[1-9][0-9]*$' "$WORK/logs.out" || fail "sray logs lists nothing: $(cat "$WORK/logs.out")"
as_user sray logs "$job" --actor greeter >"$WORK/actor.out" 2>&1 ||
  fail "sray logs --actor failed: $(cat "$WORK/actor.out")"
grep -q '^hello, dashboard$' "$WORK/actor.out" || fail "sray logs --actor greeter: $(cat "$WORK/actor.out")"
echo "ok: sray status and sray logs of the test user, of a worker and of an actor"

expect_lines "$WORK/job.out" '^\(node [01] worker [0-9]+ pid [1-9][0-9]*\) twice\([0-9]+\) on node [01]$' 20

# srun's output may be a file others read: no login link there, `sray login`
# gives one, and a real browser (Debian's headless Chromium) opens the page.
! grep -q 'login?code=' "$WORK/job.out" || fail "the driver printed a login link to the step's output"
grep -q "sray: dashboard of job $job.0: $url (a login link: sray login $job.0; " "$WORK/job.out" ||
  fail "the driver's line does not say how to log in: $(grep dashboard "$WORK/job.out")"
login=$(as_user sray login "$job" 2>"$WORK/login.err") || fail "sray login failed: $(cat "$WORK/login.err")"
case $login in "${url}login?code="[0-9a-f]*) ;; *) fail "sray login printed no link: $login $(cat "$WORK/login.err")" ;; esac
if CHROMIUM=$(command -v chromium); then
  timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --virtual-time-budget=6000 \
    --user-data-dir="$WORK/chromium-profile" --dump-dom "$login" >"$WORK/page.html" 2>"$WORK/chromium.err" ||
    fail "chromium failed: $(tail -5 "$WORK/chromium.err")"
  rows=$(grep -o '<tr class="node">' "$WORK/page.html" | wc -l)
  [ "$rows" -eq 2 ] || fail "the page opened by sray login's link shows $rows node rows, not 2: $(head -c 1000 "$WORK/page.html")"
  echo "ok: no login link in srun's output; sray login's link opens the page in Chromium, with both nodes"
else
  fail "no chromium: scripts/install-deps installs it"
fi

# A second step of the same user at the same time: its own port and token.
run_as_test_user srun -N2 --ray-cluster bash -c 'echo "job $SLURM_JOB_ID"; exec "$0" "$@"' \
  "$CHECK_PROGRAM" "$WORK/done-second" >"$WORK/second.out" 2>&1 &
second_pid=$!
wait_for_ready "$WORK/second.out" "$second_pid"
second=$(awk '$1 == "job" {print $2; exit}' "$WORK/second.out")
second_file=$JOBS/$second.0.json
second_url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$second_file")
token=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$file")
second_token=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$second_file")
[ "$second_url" != "$url" ] && [ "$second_token" != "$token" ] || fail "two steps share a dashboard address or token"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "${second_url}api/nodes")" = 401 ] ||
  fail "one step's token opens the other step's dashboard"
touch "$WORK/done-second"
wait "$second_pid" || fail "the second step failed: $(cat "$WORK/second.out")"
echo "ok: two steps of one user at once get their own ports and tokens"

touch "$WORK/done"
wait "$job_pid" || fail "the step failed: $(cat "$WORK/job.out")"
[ ! -e "$file" ] || fail "the jobs file outlived the step"
curl -s --max-time 5 "$url" >/dev/null 2>&1 && fail "the dashboard still answers after the step"
expect_step_output "$WORK/job.out" 4
echo "ok: after the step, no jobs file and nothing listening"

[ "$(stat -c '%a %U' "$KEPT/$job.0/node-1")" = "700 $SRAY_TEST_USER" ] ||
  fail "node 1's kept logs: $(ls -laR "$KEPT" 2>&1)"
as_user sray logs "$job" --log-dir "$KEPT" --actor greeter >"$WORK/kept.out" 2>&1 ||
  fail "sray logs --log-dir failed: $(cat "$WORK/kept.out")"
grep -q '^hello, dashboard$' "$WORK/kept.out" || fail "the kept actor log: $(cat "$WORK/kept.out")"
echo "ok: log_dir keeps both nodes' logs for sray logs --log-dir after the step"

# kill -9 of the driver: the step ends, and the SPANK plugin removes the
# jobs file the driver could not.
run_as_test_user srun -N2 --ray-cluster bash -c 'echo "job $SLURM_JOB_ID"; exec "$0" "$@"' \
  "$CHECK_PROGRAM" "$WORK/done-killed" >"$WORK/killed.out" 2>&1 &
killed_pid=$!
wait_for_ready "$WORK/killed.out" "$killed_pid"
killed=$(awk '$1 == "job" {print $2; exit}' "$WORK/killed.out")
killed_file=$JOBS/$killed.0.json
[ -f "$killed_file" ] || fail "no jobs file $killed_file"
driver=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$killed_file")
kill -9 "$driver"
wait "$killed_pid" && fail "a step whose driver was killed exited 0"
for attempt in $(seq 50); do [ -e "$killed_file" ] || break; sleep 0.1; done
[ ! -e "$killed_file" ] || fail "a killed driver's jobs file outlived its step"
echo "ok: a killed driver's jobs file goes with its step"

# A jobs file whose driver ran on a node that then crashed: nothing ran
# there to remove it, and the tools listed the job as running until it was
# removed by hand. They now ask Slurm: the ended job's file is removed, a
# running (here pending or running) job's stays listed. Two steps of the
# running job, so that `sray status` lists them rather than reach one.
# squeue lists the killed step's job while it is still completing.
for attempt in $(seq 100); do [ -z "$(squeue -h -j "$killed" 2>/dev/null)" ] && break; sleep 0.1; done
running=$(as_user sbatch --parsable -N1 -o /dev/null --wrap 'sleep 120')
trap 'scancel "$running" 2>/dev/null || true; rm -f "$JOBS/$running".*.json; rm -rf "$WORK"' EXIT
# One home may serve several clusters: an ended job of this cluster's
# number recorded for another cluster is not this cluster's to judge.
for fake in "$killed 0 ended sray" "$killed 1 elsewhere other" "$running 0 running sray" "$running 1 running sray"; do
  read -r fake_job fake_step fake_state fake_cluster <<<"$fake"
  cat >"$JOBS/$fake_job.$fake_step.json" <<JSON
{"job_id": "$fake_job", "step_id": "$fake_step", "url": "http://127.0.0.1:9/", "token": "t",
 "head_hostname": "crashed-head-$fake_state", "pid": 1, "cluster": "$fake_cluster"}
JSON
  chown "$SRAY_TEST_USER" "$JOBS/$fake_job.$fake_step.json"
  chmod 600 "$JOBS/$fake_job.$fake_step.json"
done
as_user sray status >"$WORK/crashed.out" 2>&1 || fail "sray status failed: $(cat "$WORK/crashed.out")"
grep -q "^  $running.0 .*crashed-head-running" "$WORK/crashed.out" &&
  grep -q "^  $running.1 .*crashed-head-running" "$WORK/crashed.out" ||
  fail "a running job's files are not listed: $(cat "$WORK/crashed.out")"
grep -q "^  $killed.1 .*crashed-head-elsewhere" "$WORK/crashed.out" ||
  fail "another cluster's job was judged by this one: $(cat "$WORK/crashed.out")"
! grep -q "crashed-head-ended" "$WORK/crashed.out" || fail "an ended job is listed: $(cat "$WORK/crashed.out")"
[ ! -e "$JOBS/$killed.0.json" ] || fail "the ended job's jobs file was not removed"
[ -e "$JOBS/$running.0.json" ] || fail "the running job's jobs file was removed"
rm -f "$JOBS/$killed.1.json"
scancel "$running"
rm -f "$JOBS/$running".*.json
echo "ok: the jobs file of an ended job whose head crashed is dropped; a running job's stays"
echo PASS
