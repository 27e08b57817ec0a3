#!/usr/bin/env bash
# The job's dashboard under `sray run`: on the head's loopback with a free
# port, the jobs file private to the user, 401 without the token, the API
# and Prometheus metrics (parsed by Debian's prometheus_client) with it, a one-time
# login link, two jobs on different ports and tokens, dashboard=off, and
# nothing left after the job: no jobs file, no listening port.
source "$(dirname "$0")/lib.sh"
CHECK_PROGRAM=$SRAY_BUILD_DIR/tests/dashboard_check
# A home of its own: other tests' jobs (ctest -j) write jobs files too.
export HOME=$WORK/home
mkdir -p "$HOME"
JOBS=$HOME/.sray/jobs

# Starts `sray run -N$1 [--ray-cluster=$2]` of dashboard_check in the
# background, output in $WORK/$3.out, done file $WORK/$3.done; waits for
# "ready". Sets JOB_PID.
start_job() {
  local nodes=$1 options=$2 name=$3 cluster=()
  [ -z "$options" ] || cluster=(--ray-cluster="$options")
  "$SRAY" run -N"$nodes" "${cluster[@]}" bash -c 'echo "job $SRAY_JOB_ID"; exec "$0" "$@"' \
    "$CHECK_PROGRAM" "$WORK/$name.done" >"$WORK/$name.out" 2>&1 &
  JOB_PID=$!
  wait_for_ready "$WORK/$name.out" "$JOB_PID" 60
}
finish_job() {
  local name=$1 pid=$2 status=0
  touch "$WORK/$name.done"
  wait "$pid" || status=$?
  [ "$status" -eq 0 ] || { cat "$WORK/$name.out" >&2; fail "job $name exited with $status"; }
}
job_of() { awk '$1 == "job" {print $2; exit}' "$WORK/$1.out"; }
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
http_status() { curl -s -o /dev/null -w '%{http_code}' "$@"; }

start_job 3 "log_dir=$WORK/kept" first
first_pid=$JOB_PID
first=$(job_of first)
file=$JOBS/$first.0.json
[ -f "$file" ] || fail "no jobs file $file"
[ "$(stat -c %a "$file")" = 600 ] || fail "the jobs file is mode $(stat -c %a "$file"), not 600"
[ "$(stat -c %a "$JOBS")" = 700 ] || fail "$JOBS is mode $(stat -c %a "$JOBS"), not 700"
url=$(field "$file" url)
token=$(field "$file" token)
case $url in http://127.0.0.1:[0-9]*/) ;; *) fail "the dashboard is not on the loopback: $url" ;; esac
echo "ok: listens on $url, jobs file private"

# What tasks print: prefixed in the job's output, and in each worker's log.
for attempt in $(seq 50); do grep -q '^(node [0-2] worker [0-9]* pid [0-9]*) twice(7) on node' "$WORK/first.out" && break; sleep 0.1; done
expect_lines "$WORK/first.out" '^\(node [0-2] worker [0-9]+ pid [1-9][0-9]*\) twice\([0-9]+\) on node [0-2]$' 20
expect_lines "$WORK/first.out" '^\(node [0-2] worker [0-9]+ pid [1-9][0-9]*\) a line on standard error from twice\(7\)$' 1
logged=$(cat /tmp/sray-*-"$first".0.node*/logs/worker-*.log 2>/dev/null | grep -c '^twice(' || true)
[ "$logged" -eq 20 ] || fail "the workers' log files hold $logged of the 20 lines: $(ls -la /tmp/sray-*-"$first".0.node*/logs/ 2>&1)"
echo "ok: what tasks print reaches the job's output with a prefix, and the workers' log files"
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  ! runuser -u nobody -- cat "$file" >/dev/null 2>&1 || fail "another user read the jobs file"
  echo "ok: another user cannot read the jobs file"
fi

for path in api/nodes api/logs metrics; do
  [ "$(http_status "$url$path")" = 401 ] || fail "/$path answered without a token"
  [ "$(http_status -H "Authorization: Bearer wrong" "$url$path")" = 401 ] ||
    fail "/$path answered a wrong token"
done
# The page holds no data: anyone gets it, and it asks the API with a session.
page_body=$(curl -s "$url")
grep -q "sessionStorage" <<<"$page_body" || fail "the page does not ask with its tab's session"
! grep -q "$token" <<<"$page_body" || fail "the page carries the token"
echo "ok: 401 without the token"

curl -sf -H "Authorization: Bearer $token" "${url}api/nodes" >"$WORK/nodes.json" ||
  fail "the API refused the token"
python3 - "$WORK/nodes.json" <<'PYTHON' || fail "the nodes API is wrong: $(cat "$WORK/nodes.json")"
import json, sys
nodes = json.load(open(sys.argv[1]))["nodes"]
assert [node["node_id"] for node in nodes] == [0, 1, 2], nodes
assert all(node["resources_total"]["CPU"] > 0 for node in nodes), nodes
assert all(node["worker_processes"] >= 0 and "object_store" in node for node in nodes), nodes
# Each node's load: the machine's load average and memory, and what sray holds resident.
assert all(node["load"]["load_average_1m"] >= 0 for node in nodes), nodes
assert all(0 < node["load"]["memory_available_bytes"] <= node["load"]["memory_total_bytes"] for node in nodes), nodes
assert all(node["load"]["sray_resident_bytes"] > 1 << 20 for node in nodes), nodes
PYTHON
echo "ok: the API lists the three nodes with their load"

curl -sf -H "Authorization: Bearer $token" "${url}metrics" >"$WORK/metrics.txt" || fail "no metrics"
/usr/bin/python3 - "$WORK/metrics.txt" "$first" <<'PYTHON' || fail "the metrics do not parse: $(head -20 "$WORK/metrics.txt")"
import sys
from prometheus_client.parser import text_string_to_metric_families
families = {family.name: family for family in text_string_to_metric_families(open(sys.argv[1]).read())}
cpus = [sample for sample in families["sray_node_resource_total"].samples
        if sample.labels["resource"] == "CPU"]
assert sorted(sample.labels["node"] for sample in cpus) == ["0", "1", "2"], cpus
assert all(sample.labels["job"] == sys.argv[2] and sample.labels["step"] == "0" for sample in cpus)
assert "sray_object_store_memory_bytes" in families
assert len(families["sray_node_load_average_1m"].samples) == 3, families["sray_node_load_average_1m"]
assert all(sample.value > 0 for sample in families["sray_node_resident_bytes"].samples)
attempts = [sample for sample in families["sray_task_attempts"].samples
            if sample.labels["function"] == "twice" and sample.labels["state"] == "finished"]
assert attempts and attempts[0].value == 20, attempts
assert families["sray_task_attempts"].type == "counter"
assert {sample.labels["state"] for sample in families["sray_actors"].samples} >= {"alive", "dead"}
PYTHON
echo "ok: Prometheus parses the metrics, labelled by job, step and node"

# The job's output went to a file others may read: the driver printed no
# login link there, only how to get one.
[ "$(stat -c %a "$WORK/first.out")" != 600 ] || fail "the test's output file is private already"
! grep -q 'login?code=' "$WORK/first.out" || fail "the driver printed a login link to a file others may read"
grep -q "sray: dashboard of job $first.0: ${url} (a login link: sray login $first.0; token in .*ssh -L " "$WORK/first.out" ||
  fail "the driver's dashboard line does not say how to log in: $(grep dashboard "$WORK/first.out")"
login=$("$SRAY" login "$first" 2>"$WORK/login.err") || fail "sray login failed: $(cat "$WORK/login.err")"
case $login in "${url}login?code="[0-9a-f]*) ;; *) fail "sray login printed no link: $login $(cat "$WORK/login.err")" ;; esac
port=${url#http://127.0.0.1:} && port=${port%/}
grep -q "ssh -L $port:127.0.0.1:$port " "$WORK/login.err" || fail "sray login printed no ssh -L command: $(cat "$WORK/login.err")"
curl -s -D "$WORK/login.headers" -o "$WORK/login.html" "$login"
grep -q '^HTTP/1.1 200' "$WORK/login.headers" || fail "the login link was refused: $(cat "$WORK/login.headers")"
! grep -qi '^Set-Cookie:' "$WORK/login.headers" || fail "the login link set a cookie, which every port of the host would get"
session=$(sed -n 's/.*sessionStorage.setItem("sray_session", "\([0-9a-f]*\)").*/\1/p' "$WORK/login.html")
[ ${#session} = 64 ] || fail "the login page keeps no session in its tab: $(cat "$WORK/login.html")"
[ "$(http_status -H "Authorization: Bearer $session" "${url}api/nodes")" = 200 ] || fail "the login's session does not open the API"
[ "$(http_status "${url}api/nodes")" = 401 ] || fail "the API answered without a session"
[ "$(http_status "$login")" = 401 ] || fail "the login link worked twice"
(umask 022 && "$SRAY" login "$first" >"$WORK/login-public.txt" 2>"$WORK/login-public.err") &&
  fail "sray login printed a link to a file others may read"
[ ! -s "$WORK/login-public.txt" ] || fail "sray login wrote to a file others may read: $(cat "$WORK/login-public.txt")"
grep -q "^sray: login: not printing a login link to $WORK/login-public.txt: others may read that file" \
  "$WORK/login-public.err" || fail "sray login did not say why it refused: $(cat "$WORK/login-public.err")"
echo "ok: sray login's link works once and its session opens the API; not printed where others may read it"

# Output to a file only the user may read: there the driver prints the link.
install -m 600 /dev/null "$WORK/second.out"
start_job 1 "" second
second_pid=$JOB_PID
second=$(job_of second)
grep -q "sray: dashboard of job $second.0: http://127.0.0.1:[0-9]*/login?code=[0-9a-f]* (token in " "$WORK/second.out" ||
  fail "the driver printed no login link to a private output file: $(grep dashboard "$WORK/second.out")"
echo "ok: the login link goes to a private output only"
second_url=$(field "$JOBS/$second.0.json" url)
second_token=$(field "$JOBS/$second.0.json" token)
[ "$second_url" != "$url" ] && [ "$second_token" != "$token" ] ||
  fail "two jobs share a dashboard address or token"
[ "$(http_status -H "Authorization: Bearer $token" "${second_url}api/nodes")" = 401 ] ||
  fail "one job's token opens another job's dashboard"
echo "ok: two jobs get their own ports and tokens"

"$SRAY" status >"$WORK/status-both.out" 2>&1 || fail "sray status failed: $(cat "$WORK/status-both.out")"
grep -q '^several sray jobs are running; give one: sray status JOB$' "$WORK/status-both.out" &&
  grep -q "^  $first.0 .*$url" "$WORK/status-both.out" && grep -q "^  $second.0 " "$WORK/status-both.out" ||
  fail "sray status does not list both jobs: $(cat "$WORK/status-both.out")"
# login and logs act on one job: with two running and none named they fail,
# with the list on standard error; before, they printed it on standard
# output with status 0, which `$(sray login)` took for a link.
for command in login logs; do
  # Through a pipe: login refuses to print into a file others may read.
  status=0
  "$SRAY" $command 2>"$WORK/$command-both.err" | cat >"$WORK/$command-both.out" || status=$?
  [ "$status" -eq 1 ] && [ ! -s "$WORK/$command-both.out" ] &&
    grep -q "^sray: $command: several sray jobs are running, and no job was named: name one" "$WORK/$command-both.err" &&
    grep -q "^  $first.0 " "$WORK/$command-both.err" && grep -q "^  $second.0 " "$WORK/$command-both.err" ||
    fail "sray $command with two jobs and none named: status $status, out: $(cat "$WORK/$command-both.out"), err: $(cat "$WORK/$command-both.err")"
done
echo "ok: sray login and sray logs with two jobs and none named fail, listing them"
"$SRAY" status "$first" >"$WORK/status-first.out" 2>&1 || fail "sray status $first failed: $(cat "$WORK/status-first.out")"
expect_lines "$WORK/status-first.out" '^[012] +vm-node[012]|^[012] +[^ ]+ +[0-9.]+/[0-9.]+ ' 3
grep -q "^job $first.0  dashboard $url" "$WORK/status-first.out" || fail "sray status names no job: $(cat "$WORK/status-first.out")"
echo "ok: sray status lists the jobs, and one job's three nodes"

"$SRAY" logs "$first" >"$WORK/logs-list.out" 2>&1 || fail "sray logs failed: $(cat "$WORK/logs-list.out")"
grep -Eq '^[012] +[0-9]+ +[0-9]+$' "$WORK/logs-list.out" || fail "sray logs lists no log: $(cat "$WORK/logs-list.out")"
read -r log_node log_worker log_bytes < <(grep -E '^[012] +[0-9]+ +[1-9][0-9]*$' "$WORK/logs-list.out" | head -1)
"$SRAY" logs "$first" --node "$log_node" --worker "$log_worker" >"$WORK/log-one.out" 2>&1 ||
  fail "sray logs of one worker failed: $(cat "$WORK/log-one.out")"
# The first worker listed with output may run tasks or host the greeter
# actor, as scheduling placed them.
[ "$(wc -c <"$WORK/log-one.out")" -eq "$log_bytes" ] &&
  grep -Eq "^(twice\(|greeter starts with 'hello'$)" "$WORK/log-one.out" ||
  fail "sray logs shows not the worker's $log_bytes bytes: $(cat "$WORK/log-one.out")"
"$SRAY" logs "$first" --node "$log_node" --worker "$log_worker" --follow >"$WORK/log-follow.out" 2>&1 &
follower=$!
status=0
"$SRAY" logs "$first" --node 0 --worker 12345 >"$WORK/log-none.out" 2>&1 || status=$?
[ "$status" -eq 1 ] && grep -q 'worker 12345 has no log on this node' "$WORK/log-none.out" ||
  fail "sray logs of a worker without a log: status $status, $(cat "$WORK/log-none.out")"
echo "ok: sray logs lists the workers' logs and shows one, a missing one said as such"

# A worker killed while idle: an event names it and how it ended; the job goes on.
# The job prints a live task worker's pid (not the greeter's).
greeter_pid=$(awk '$1 == "greeter" && $2 == "pid" {print $3; exit}' "$WORK/first.out")
victim=$(awk '$1 == "task" && $2 == "worker" && $3 == "pid" {print $4; exit}' "$WORK/first.out")
[ -n "$victim" ] || fail "the job printed no task worker pid: $(cat "$WORK/first.out")"
kill -9 "$victim" || fail "cannot kill worker $victim"
for attempt in $(seq 100); do
  curl -s -H "Authorization: Bearer $token" "${url}api/events" >"$WORK/events.json"
  grep -q "worker process $victim of node [0-2] ended: signal 9" "$WORK/events.json" && break
  sleep 0.1
done
grep -q "\"kind\":\"worker_exited\",\"message\":\"worker process $victim of node [0-2] ended: signal 9" "$WORK/events.json" ||
  fail "no event for the killed worker $victim: $(cat "$WORK/events.json")"
echo "ok: a killed worker is an event naming it and its signal"

# Tasks by function and state, the actor, the placement group, the objects.
api() { curl -sf -H "Authorization: Bearer $token" "$url$1" >"$WORK/$2.json" || fail "no answer from /$1"; }
# Actors send their call counts at most every 250 ms: wait for the greeter's.
for attempt in $(seq 50); do
  api api/tasks tasks
  grep -q '"function":"Greeter::Pid"' "$WORK/tasks.json" && break
  sleep 0.1
done
api api/actors actors
api api/placement_groups groups
api api/objects objects
python3 - "$WORK" "$greeter_pid" <<'PYTHON' || fail "the tasks, actors, groups or objects API is wrong: $(cat "$WORK"/{tasks,actors,groups,objects}.json)"
import json, sys
work, greeter_pid = sys.argv[1], int(sys.argv[2])
load = lambda name: json.load(open(f"{work}/{name}.json"))
tasks = {entry["function"]: entry for entry in load("tasks")["by_function"]}
assert tasks["twice"]["finished"] == 20 and tasks["twice"]["failed"] == 0, tasks
assert tasks["refuse"]["failed"] == 1, tasks
assert tasks["greeter"]["finished"] == 1, tasks  # a named actor's constructor goes by its name
# Its method calls, counted by the actor, by method.
assert tasks["Greeter::Greet"]["finished"] == 1 and tasks["Greeter::Greet"]["failed"] == 0, tasks
assert tasks["Greeter::Pid"]["finished"] == 1 and tasks["Greeter::Pid"]["running"] == 0, tasks
assert len(load("tasks")["by_node"]) == 3
actors = load("actors")
assert actors["total"] == 1, actors
greeter = actors["actors"][0]
assert greeter["name"] == "greeter" and greeter["state"] == "alive", greeter
assert greeter["pid"] == greeter_pid and greeter["max_restarts"] == 1, greeter
groups = load("groups")["placement_groups"]
assert len(groups) == 1 and groups[0]["name"] == "pair" and groups[0]["state"] == "placed", groups
assert len(set(groups[0]["bundle_nodes"])) == 2, groups
objects = load("objects")
assert len(objects["nodes"]) == 3 and objects["objects"] >= 0, objects
PYTHON
echo "ok: the API counts tasks and actor calls by function and state, lists the actor and the placement group"

"$SRAY" logs "$first" --actor greeter >"$WORK/log-actor.out" 2>&1 ||
  fail "sray logs --actor failed: $(cat "$WORK/log-actor.out")"
grep -q "^greeter starts with 'hello'$" "$WORK/log-actor.out" && grep -q '^hello, dashboard$' "$WORK/log-actor.out" ||
  fail "sray logs --actor greeter does not show the actor's lines: $(cat "$WORK/log-actor.out")"
status=0
"$SRAY" logs "$first" --actor nobody >"$WORK/log-nobody.out" 2>&1 || status=$?
[ "$status" -eq 1 ] && grep -q 'has no actor named nobody' "$WORK/log-nobody.out" ||
  fail "sray logs --actor nobody: status $status, $(cat "$WORK/log-nobody.out")"
echo "ok: sray logs --actor shows an actor's log by name"

# The actor killed: it restarts (max_restarts=1), and the events say so.
kill -9 "$greeter_pid"
for attempt in $(seq 100); do
  api api/events events
  grep -q "actor [0-9]* 'greeter' (Greeter::Create): its process (pid $greeter_pid) on node [0-2] ended with signal 9.*restarted" "$WORK/events.json" && break
  sleep 0.1
done
grep -q '"kind":"actor_restarted"' "$WORK/events.json" ||
  fail "no event for the restarted actor: $(cat "$WORK/events.json")"
echo "ok: a killed actor's restart is an event"

finish_job second "$second_pid"
finish_job first "$first_pid"
# --follow ends with the job, having printed the log.
for attempt in $(seq 100); do kill -0 "$follower" 2>/dev/null || break; sleep 0.1; done
kill -0 "$follower" 2>/dev/null && fail "sray logs --follow outlived its job"
wait "$follower" || fail "sray logs --follow exited with $?"
grep -Eq "^(twice\(|greeter starts with 'hello'$)" "$WORK/log-follow.out" || fail "sray logs --follow printed nothing: $(cat "$WORK/log-follow.out")"
echo "ok: sray logs --follow prints the log and ends with the job"
[ ! -e "$file" ] && [ ! -e "$JOBS/$second.0.json" ] || fail "a jobs file outlived its job"
curl -s --max-time 5 "$url" >/dev/null 2>&1 && fail "the dashboard still answers after the job"
expect_nothing_left "$first"
expect_nothing_left "$second"
echo "ok: after the jobs, no jobs file and nothing listening"

# log_dir=: each node's worker logs and the actor list, kept after the job.
kept=$WORK/kept/$first.0
for node in 0 1 2; do
  [ "$(stat -c %a "$kept/node-$node")" = 700 ] || fail "$kept/node-$node is not private: $(ls -la "$kept")"
done
[ "$(stat -c %a "$kept/actors.json")" = 600 ] || fail "actors.json is not private: $(ls -la "$kept")"
! find "$kept" -name 'worker-*.log' ! -perm 600 | grep . >/dev/null || fail "a kept log is not private: $(ls -laR "$kept")"
"$SRAY" logs "$first" --log-dir "$WORK/kept" >"$WORK/kept-list.out" 2>&1 ||
  fail "sray logs --log-dir failed: $(cat "$WORK/kept-list.out")"
[ "$(grep -Ec '^[012] +[0-9]+ +[0-9]+$' "$WORK/kept-list.out")" -ge 3 ] ||
  fail "sray logs --log-dir lists too few logs: $(cat "$WORK/kept-list.out")"
"$SRAY" logs "$first" --log-dir "$WORK/kept" --actor greeter >"$WORK/kept-actor.out" 2>&1 ||
  fail "sray logs --actor --log-dir failed: $(cat "$WORK/kept-actor.out")"
grep -q "^greeter starts with 'hello'$" "$WORK/kept-actor.out" ||
  fail "the kept log of the restarted greeter lacks its start: $(cat "$WORK/kept-actor.out")"
logged=$(cat "$kept"/node-*/worker-*.log | grep -c '^twice(' || true)
[ "$logged" -eq 20 ] || fail "the kept logs hold $logged of the 20 lines"
# A second job's copy beside it: with none named, logs fails and lists both
# on standard error (before: on standard output, with status 0).
mkdir -p "$WORK/kept/$second.0/node-0"
status=0
"$SRAY" logs --log-dir "$WORK/kept" >"$WORK/kept-both.out" 2>"$WORK/kept-both.err" || status=$?
[ "$status" -eq 1 ] && [ ! -s "$WORK/kept-both.out" ] &&
  grep -q "^sray: logs: several jobs' logs are kept in $WORK/kept: name one" "$WORK/kept-both.err" &&
  grep -q "^  $first.0$" "$WORK/kept-both.err" && grep -q "^  $second.0$" "$WORK/kept-both.err" ||
  fail "sray logs --log-dir with two copies and none named: status $status, out: $(cat "$WORK/kept-both.out"), err: $(cat "$WORK/kept-both.err")"
echo "ok: log_dir keeps every node's logs and the actors, private, read by sray logs --log-dir"
status=0
"$SRAY" status >"$WORK/status-none.out" 2>&1 || status=$?
[ "$status" -eq 1 ] && grep -q '^sray: status: no running sray job of this user' "$WORK/status-none.out" ||
  fail "sray status without jobs: status $status, $(cat "$WORK/status-none.out")"
echo "ok: sray status says when no job runs"

# kill -9 of the driver: sray run ends the step and removes its jobs file.
start_job 2 "" killed
killed=$(job_of killed)
driver=$(field "$JOBS/$killed.0.json" pid)
kill -9 "$driver"
status=0
wait "$JOB_PID" || status=$?
[ "$status" -ne 0 ] || fail "a job whose driver was killed exited 0"
[ ! -e "$JOBS/$killed.0.json" ] || fail "the killed driver's jobs file was left"
expect_nothing_left "$killed"
echo "ok: a killed driver's jobs file is removed with its step"

# The same with a driver whose $HOME is not the launcher's: its file is
# under its own home, and was left there before.
other_home=$WORK/driver-home
mkdir -p "$other_home"
"$SRAY" run -N2 bash -c 'echo "job $SRAY_JOB_ID"; HOME=$1 exec "$0" "$2"' \
  "$CHECK_PROGRAM" "$other_home" "$WORK/elsewhere.done" >"$WORK/elsewhere.out" 2>&1 &
JOB_PID=$!
wait_for_ready "$WORK/elsewhere.out" "$JOB_PID" 60
elsewhere=$(job_of elsewhere)
[ -f "$other_home/.sray/jobs/$elsewhere.0.json" ] || fail "no jobs file under the driver's own home"
kill -9 "$(field "$other_home/.sray/jobs/$elsewhere.0.json" pid)"
wait "$JOB_PID" || true
[ ! -e "$other_home/.sray/jobs/$elsewhere.0.json" ] ||
  fail "a killed driver's jobs file under its own \$HOME was left"
expect_nothing_left "$elsewhere"
echo "ok: a killed driver's jobs file under another \$HOME is removed with its step"

# --follow of a job whose dashboard does not answer is a failure, said as
# such (it ended with 0 and nothing said, as if the job had ended).
mkdir -p "$JOBS"
printf '{"job_id": "deadport", "step_id": "0", "url": "http://127.0.0.1:1/", "token": "x", "head_hostname": "%s", "pid": %d}\n' \
  "$(hostname)" "$$" >"$JOBS/deadport.0.json"
status=0
"$SRAY" logs deadport.0 --node 0 --worker 0 --follow >"$WORK/follow-dead.out" 2>&1 || status=$?
rm -f "$JOBS/deadport.0.json"
[ "$status" -ne 0 ] || fail "sray logs --follow of an unreachable dashboard exited 0: $(cat "$WORK/follow-dead.out")"
grep -q "cannot reach the dashboard of job deadport.0" "$WORK/follow-dead.out" ||
  fail "sray logs --follow did not say why: $(cat "$WORK/follow-dead.out")"
echo "ok: sray logs --follow of an unreachable dashboard fails and says why"
# A `sray run` job's: no srun to suggest (it did: srun --jobid=local...).
printf '{"job_id": "local1-deadbeef", "step_id": "0", "url": "http://127.0.0.1:1/", "token": "x", "head_hostname": "%s", "pid": %d}\n' \
  "$(hostname)" "$$" >"$JOBS/local1-deadbeef.0.json"
status=0
"$SRAY" status local1-deadbeef.0 >"$WORK/local-dead.out" 2>&1 || status=$?
rm -f "$JOBS/local1-deadbeef.0.json"
[ "$status" -ne 0 ] || fail "sray status of an unreachable dashboard exited 0"
expect_lines "$WORK/local-dead.out" "cannot reach the dashboard of job local1-deadbeef.0 .*runs on this machine under \`sray run\`.*its driver is pid $$" 1
expect_lines "$WORK/local-dead.out" "srun" 0

# A head whose own name does not resolve, with a dashboard on every
# interface: the tools there reach it at the loopback (they looked the name
# up and failed). A UTS namespace of its own gives the name: root with
# CAP_SYS_ADMIN only, and only where that name then does not resolve (nss
# myhostname resolves the machine's own name, whatever it is).
unresolvable_head() {
  [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v hostname >/dev/null &&
    unshare -u sh -c 'hostname sray-unresolvable-head.invalid && ! getent hosts "$(hostname)"' >/dev/null 2>&1
}
if ! unresolvable_head; then
  echo "skipped: a head whose name does not resolve (needs root, unshare -u, and no nss myhostname)"
else
  status=0
  SRAY=$SRAY CHECK_PROGRAM=$CHECK_PROGRAM WORK=$WORK unshare -u bash -c '
    hostname sray-unresolvable-head.invalid  # RFC 6761: never resolves
    "$SRAY" run -N2 --ray-cluster=dashboard=0.0.0.0:0 bash -c "echo job \$SRAY_JOB_ID; exec \"\$0\" \"\$@\"" \
      "$CHECK_PROGRAM" "$WORK/unresolvable.done" >"$WORK/unresolvable.out" 2>&1 &
    job_pid=$!
    for attempt in $(seq 600); do
      grep -q "^ready$" "$WORK/unresolvable.out" && break
      kill -0 "$job_pid" 2>/dev/null || break
      sleep 0.1
    done
    job=$(awk "\$1 == \"job\" {print \$2; exit}" "$WORK/unresolvable.out")
    status=0
    "$SRAY" status "$job" >"$WORK/unresolvable-status.out" 2>&1 || status=$?
    touch "$WORK/unresolvable.done"
    wait "$job_pid" || status=$((status + 100))
    exit "$status"' || status=$?
  unresolvable=$(job_of unresolvable)
  [ "$status" -eq 0 ] && grep -q "^job $unresolvable.0  dashboard http://sray-unresolvable-head.invalid:" \
    "$WORK/unresolvable-status.out" ||
    fail "sray status on a head whose name does not resolve: status $status, $(cat "$WORK/unresolvable-status.out"), job: $(cat "$WORK/unresolvable.out")"
  expect_nothing_left "$unresolvable"
  echo "ok: on a head whose name does not resolve, sray status reaches a dashboard on every interface"
fi

start_job 1 "dashboard=off,log_to_driver=false" off
off=$(job_of off)
[ ! -e "$JOBS/$off.0.json" ] || fail "dashboard=off wrote a jobs file"
! grep -q 'dashboard of job' "$WORK/off.out" || fail "dashboard=off printed a dashboard line"
! grep -q '^(node ' "$WORK/off.out" || fail "log_to_driver=false still forwarded worker lines"
finish_job off "$JOB_PID"
echo "ok: dashboard=off starts none, log_to_driver=false keeps worker lines out of the output"

# A port another job holds: that job goes on, without a dashboard, and says so.
python3 -c 'import socket,time; s=socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' >"$WORK/port" &
holder=$!
for attempt in $(seq 50); do [ -s "$WORK/port" ] && break; sleep 0.1; done
start_job 1 "dashboard=127.0.0.1:$(cat "$WORK/port")" taken
grep -q "^sray: the dashboard of job .* did not start: cannot listen on 127.0.0.1:$(cat "$WORK/port")" "$WORK/taken.out" ||
  fail "no clear line for a taken port: $(cat "$WORK/taken.out")"
finish_job taken "$JOB_PID"
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
echo "ok: a taken port is said in one line and the job goes on"
echo PASS
