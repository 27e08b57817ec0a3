#!/usr/bin/env bash
# A slurmstepd that dies while its node's environment is being made (env= a
# spec; the user's conda tool can take minutes): the step's session
# directory and /dev/shm directory were already there, and its record was
# written only once the node was prepared, so no sweep knew of them and they
# stayed. The step is now recorded as soon as its session directory exists,
# and the next sray step's start on the node removes them. (Slurm gives the
# node to the next job only once the dead step's processes have ended: the
# tool and the process preparing the node, 20 s here.)
source "$(dirname "$0")/lib.sh"

mkdir -p "$WORK/bin"
# The tool gets slurmstepd's environment (with the step's markers), not the
# job's: its delay is the copy's default.
sed 's/FAKE_MICROMAMBA_SECONDS:-0/FAKE_MICROMAMBA_SECONDS:-20/' "$SRAY_SOURCE_DIR/tests/fixtures/micromamba" \
  >"$WORK/bin/micromamba"
chmod 755 "$WORK/bin/micromamba"
chown -R "$SRAY_TEST_USER:" "$WORK/bin"
# A spec no earlier step made: the node stages it with the (slow) tool.
cat >"$WORK/explicit.txt" <<TXT
@EXPLICIT
https://conda.anaconda.org/conda-forge/linux-64/python-3.11.$RANDOM-hab00c5b_0_cpython.conda#4bea2c4e29ba9a6fe6d9e3b4f5ca2e6b
TXT
run_as_test_user env PATH="$WORK/bin:$SRAY_PREFIX/bin:/usr/bin:/bin" \
  srun -N1 -w n3 --ray-cluster="env=$WORK/explicit.txt" true >"$WORK/slow.out" 2>&1 &
step_pid=$!
job="" tool=""
# Whatever fails below, nothing of this test keeps n3 busy.
staged=""  # the environment the tool makes: n3's cache keeps it, and other tests count that cache's copies
trap '{ [ -z "$job" ] || scancel "$job"; [ -z "$tool" ] || kill -KILL $tool; kill "$step_pid"; } 2>/dev/null || true; [ -z "$staged" ] || rm -rf "$staged" "$staged.log"; rm -rf "$WORK"' EXIT

# The tool runs once the session directory exists; its environment names it.
for attempt in $(seq 300); do
  tool=$(pgrep -u "$SRAY_TEST_USER" -f "$WORK/bin/micromamba create --yes --prefix" | head -1 || true)
  [ -n "$tool" ] && break
  sleep 0.1
done
[ -n "$tool" ] || fail "the conda tool did not start: $(cat "$WORK/slow.out")"
staged=$(on_node n3 "$(tr '\0' '\n' <"/proc/$tool/cmdline" | sed -n '/^--prefix$/{n;p;q}')")
[ "$staged" != "$(on_node n3 "")" ] || fail "the conda tool names no prefix: $(tr '\0' ' ' <"/proc/$tool/cmdline")"
tool_session=$(tr '\0' '\n' <"/proc/$tool/environ" | sed -n 's/^SRAY_SESSION_DIR=//p')
job=$(basename "$tool_session" | sed -n 's/^sray-[0-9]*-\([0-9]*\)\.0$/\1/p')
[ -n "$job" ] || fail "the conda tool names no session directory of a step: '$tool_session'"
session=$(on_node n3 "$tool_session")
[ -d "$session" ] || fail "no session directory $session of step $job.0 on n3 while staging"
ls -d /dev/shm/sray."$job".0.* >/dev/null 2>&1 || fail "no /dev/shm directory of step $job.0 while staging"

namespace=$(cat "$SRAY_CLUSTER_DIR/run/n3.mntns")
daemon=""
for proc in /proc/[0-9]*; do
  [ "$(readlink "$proc/ns/mnt" 2>/dev/null)" = "$namespace" ] || continue
  # Root's: the process preparing the node as the job user has the same name.
  [ "$(stat -c %u "$proc" 2>/dev/null)" = 0 ] || continue
  case "$(tr '\0' ' ' <"$proc/cmdline" 2>/dev/null || true)" in
    "slurmstepd: [$job.0]"*) daemon=${proc#/proc/} ;;
  esac
done
[ -n "$daemon" ] || fail "found no slurmstepd of step $job.0 on n3"
kill -KILL "$daemon"
scancel "$job"
wait "$step_pid" || true
sleep 1
[ -e "$session" ] || fail "the session directory went without its slurmstepd: nothing was left to test"

sizes=$(slurmd_log_sizes)
as_user srun -N1 -w n3 --ray-cluster true || fail "a later sray step on n3 failed"
[ ! -e "$session" ] || fail "the next sray step on n3 started, and step $job.0's session directory is still there"
gone_within_5s pgrep -u "$SRAY_TEST_USER" -f "$WORK/bin/micromamba create --yes --prefix" ||
  fail "the conda tool of step $job.0 still runs: $(pgrep -a -u "$SRAY_TEST_USER" -f micromamba)"
tool=""
! ls -d /dev/shm/sray."$job".0.* >/dev/null 2>&1 || fail "step $job.0 left /dev/shm entries: $(ls -d /dev/shm/sray."$job".0.*)"
slurmd_logs_gain_within 15 "$sizes" "sray: removed what step $job\.0 (node 0) left on n3 when its slurmstepd died" ||
  fail "no slurmd log says that the next step's start removed what step $job.0 left"
expect_no_session_directories "$job"
echo "ok: a slurmstepd killed while its node's environment was made leaves nothing after the next step's start"
echo PASS
