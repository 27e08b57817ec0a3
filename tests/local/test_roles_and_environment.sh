#!/usr/bin/env bash
# `sray run -N3` gives the same roles and variables as srun --ray-cluster:
# one head, two workers, a private session directory per emulated node.
source "$(dirname "$0")/lib.sh"

"$SRAY" run -N3 "$ROLES" >"$WORK/roles.out"
expect_lines "$WORK/roles.out" '^node 0 of 3 on .*: head ' 1
expect_lines "$WORK/roles.out" '^node [12] of 3 on .*: worker ' 2

"$SRAY" run -N3 --tasks-per-node 2 --cpus-per-node 8 --mem-per-node 1536M -l --ray-cluster=log_level=debug bash -c \
  'echo "role=$SRAY_ROLE node=$SRAY_NODE_ID nodes=$SRAY_NUM_NODES cpus=$SRAY_NODE_CPUS memory=$SRAY_NODE_MEMORY level=$SRAY_LOG_LEVEL"; stat -c "session %a %F" "$SRAY_SESSION_DIR"; echo "dir=$SRAY_SESSION_DIR job=$SRAY_JOB_ID"' \
  >"$WORK/env.out"
expect_lines "$WORK/env.out" '^[01]: role=head node=0 nodes=3 cpus=8 memory=1610612736 level=debug$' 2
expect_lines "$WORK/env.out" '^[2-5]: role=worker node=[12] nodes=3 cpus=8 memory=1610612736 level=debug$' 4
expect_lines "$WORK/env.out" '^[0-5]: session 700 directory$' 6
[ "$(grep -o 'dir=[^ ]*' "$WORK/env.out" | sort -u | wc -l)" -eq 3 ] || fail "expected one session directory per emulated node"
job=$(grep -o 'job=[^ ]*' "$WORK/env.out" | head -1 | cut -d= -f2)
expect_nothing_left "$job"

# UCX defaults that keep shared memory usable with peer-failure detection,
# exported unless the user chose otherwise.
"$SRAY" run -N1 bash -c 'echo "ucx $UCX_POSIX_ERROR_HANDLING $UCX_SYSV_ERROR_HANDLING"' >"$WORK/ucx.out"
expect_lines "$WORK/ucx.out" '^ucx y y$' 1
UCX_POSIX_ERROR_HANDLING=n "$SRAY" run -N1 bash -c 'echo "ucx $UCX_POSIX_ERROR_HANDLING $UCX_SYSV_ERROR_HANDLING"' >"$WORK/ucx.out"
expect_lines "$WORK/ucx.out" '^ucx n y$' 1

# An option's variable inherited from the caller (an outer step, a user's
# export) is not taken for a setting: before, SRAY_OBJECT_STORE_MEMORY=abc
# reached every rank unchecked and each aborted in std::stoull.
SRAY_OBJECT_STORE_MEMORY=abc SRAY_RESOURCES='GPU:8' "$SRAY" run -N1 bash -c \
  'echo "inherited [${SRAY_OBJECT_STORE_MEMORY-unset}] [${SRAY_RESOURCES-unset}] [$SRAY_NODE_TIMEOUT]"' >"$WORK/inherited.out"
expect_lines "$WORK/inherited.out" '^inherited \[unset\] \[unset\] \[30\]$' 1
SRAY_OBJECT_STORE_MEMORY=abc "$SRAY" run -N1 --ray-cluster=object_store_memory=64M bash -c \
  'echo "set [$SRAY_OBJECT_STORE_MEMORY]"' >"$WORK/inherited.out"
expect_lines "$WORK/inherited.out" '^set \[67108864\]$' 1

# A terminal on standard input reaches rank 0, as under srun; the other
# ranks read /dev/null. Before, every rank read the terminal from a
# background process group: stopped by SIGTTIN, the job hung, silently.
# (script(1) gives the launcher a terminal.)
(sleep 1; printf 'typed\n') | timeout 30 script -qec \
  "'$SRAY' run -N2 -l sh -c 'read line; echo \"read [\$line]\"'" /dev/null >"$WORK/tty.out" 2>&1 ||
  fail "a job reading the terminal did not end: $(cat "$WORK/tty.out")"
expect_lines "$WORK/tty.out" '^0: read \[typed\].?$' 1
expect_lines "$WORK/tty.out" '^1: read \[\].?$' 1
# Input that is not a terminal (a pipe, a file) reaches rank 0 alone, as
# README says; the other ranks read /dev/null. Before, every rank inherited
# it and whichever read first took it (rank 1 or 2 in 2 of 6 runs).
for attempt in 1 2 3; do
  seq 1 5 | "$SRAY" run -N3 -l sh -c 'printf "got [%s]\n" "$(cat | tr "\n" " ")"' >"$WORK/piped.out" 2>&1 ||
    fail "a job with piped input failed: $(cat "$WORK/piped.out")"
  expect_lines "$WORK/piped.out" '^0: got \[1 2 3 4 5 \]$' 1
  expect_lines "$WORK/piped.out" '^[12]: got \[\]$' 2
done
# A large paste that rank 0 never reads neither stalls the launcher nor holds
# back the Ctrl-C typed after it.
(sleep 1; yes 'pasted text' | head -c 300000; sleep 1; printf '\003'; sleep 3) |
  timeout 60 script -qec "'$SRAY' run -N1 sleep 40" /dev/null >"$WORK/paste.out" 2>&1 || true
grep -q 'sray: interrupted by Interrupt: ending every rank' "$WORK/paste.out" ||
  fail "Ctrl-C after a paste rank 0 does not read was not acted on: $(tail -c 300 "$WORK/paste.out")"

# Options the program must pass through untouched.
"$SRAY" run -N1 bash -c 'echo "args: $*"' prog -N 5 --label >"$WORK/args.out"
expect_lines "$WORK/args.out" '^args: -N 5 --label$' 1

# Bad input fails before anything starts, with a message naming the problem.
if "$SRAY" run -N2 --ray-cluster=colour=red touch "$WORK/started" 2>"$WORK/err"; then fail "accepted a bad option"; fi
expect_lines "$WORK/err" "^sray: --ray-cluster: unknown key 'colour': accepted keys are config, dashboard, env, log_dir, log_level, log_to_driver, max_tasks_in_flight, node_timeout, object_store_memory, resources, tmpdir, wireup$" 1
if "$SRAY" run -N2 no-such-program-sray 2>"$WORK/err"; then fail "ran a missing program"; fi
expect_lines "$WORK/err" "^sray: cannot run 'no-such-program-sray': not found in PATH" 1
# A program the kernel will not run says why once, and what to do (before:
# "exec of the program failed", once per rank, and no reason).
printf 'echo hello\n' >"$WORK/no-first-line.sh"
printf '#!/no/such/interpreter\necho hello\n' >"$WORK/bad-interpreter.sh"
chmod +x "$WORK/no-first-line.sh" "$WORK/bad-interpreter.sh"
status=0
"$SRAY" run -N2 "$WORK/no-first-line.sh" >"$WORK/err" 2>&1 || status=$?
[ "$status" -eq 127 ] || fail "expected status 127 for a script without #!, got $status"
expect_lines "$WORK/err" "^sray: cannot run .*no-first-line.sh: it is not a program this machine can run .*#!/bin/sh$" 1
status=0
"$SRAY" run -N2 "$WORK/bad-interpreter.sh" >"$WORK/err" 2>&1 || status=$?
[ "$status" -eq 127 ] || fail "expected status 127 for a missing interpreter, got $status"
expect_lines "$WORK/err" "^sray: cannot run .*bad-interpreter.sh: the interpreter its #! line names does not exist" 1
chmod -x "$WORK/no-first-line.sh"
if "$SRAY" run -N2 "$WORK/no-first-line.sh" 2>"$WORK/err"; then fail "ran a file that is not executable"; fi
expect_lines "$WORK/err" "^sray: cannot run '.*no-first-line.sh': the file is not executable: chmod \+x " 1
if "$SRAY" run -N0 true 2>"$WORK/err"; then fail "accepted -N0"; fi
# Said in words, with the subcommand's help, status 2 (before: CLI11's
# "not in range 1 to 1024" for abc, status 105, and `see sray --help`).
status=0
"$SRAY" run -N abc true 2>"$WORK/err" || status=$?
[ "$status" -eq 2 ] || fail "expected status 2 for -N abc, got $status"
expect_lines "$WORK/err" "^sray run: --nodes: 'abc' is not a whole number from 1 to 1024: see \`sray run --help\`$" 1
if "$SRAY" frobnicate 2>"$WORK/err"; then fail "accepted an unknown command"; fi
expect_lines "$WORK/err" "^sray: unknown command 'frobnicate': the commands are config, env, login, logs, run, status" 1
if "$SRAY" run -N2 --frobnicate true 2>"$WORK/err"; then fail "accepted an unknown option"; fi
expect_lines "$WORK/err" "^sray: unknown option '--frobnicate' of sray run: see \`sray run --help\`" 1
# srun's `--` before the program; one after it is the program's.
"$SRAY" run -N2 -l -- bash -c 'echo "args: $*"' prog -- x >"$WORK/dashes.out" 2>&1 ||
  fail "sray run -N2 -- PROGRAM failed: $(cat "$WORK/dashes.out")"
expect_lines "$WORK/dashes.out" '^[01]: args: -- x$' 2
if "$SRAY" run -N1 --mem-per-node lots true 2>"$WORK/err"; then fail "accepted --mem-per-node lots"; fi
grep -q 'mem-per-node' "$WORK/err" || fail "a bad --mem-per-node was not named: $(cat "$WORK/err")"
[ ! -e "$WORK/started" ] || fail "a rank started despite bad input"
echo PASS
