# Assertions shared by the shell tests (tests/local, tests/slurm, tests/install).

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# skip REASON: ctest counts the test as skipped (exit 77). Under scripts/test,
# which sets SRAY_TESTS_MUST_RUN=1, a skip fails instead: a slurmd that died
# mid-suite must not turn the remaining tests into silent passes.
skip() {
  if [ "${SRAY_TESTS_MUST_RUN:-}" = 1 ]; then
    fail "cannot run: $* (scripts/test runs every test)"
  fi
  echo "SKIP: $*"
  exit 77
}

# expect_lines FILE REGEX [COUNT]: FILE has COUNT lines (default: at least one)
# matching the extended regular expression REGEX.
expect_lines() {
  local file=$1 pattern=$2 want=${3:-} got
  got=$(grep -cE -- "$pattern" "$file" || true)
  if [ -z "$want" ]; then
    [ "$got" -ge 1 ] || { cat "$file" >&2; fail "no line of $file matches /$pattern/"; }
  else
    [ "$got" -eq "$want" ] || { cat "$file" >&2; fail "$got lines of $file match /$pattern/, expected $want"; }
  fi
}

# wait_for_victim FILE: prints the pid that `transport_check peer-death` reports
# for its victim in FILE, waiting up to 30 s; fails when none appears.
wait_for_victim() {
  local file=$1 victim=""
  for _ in $(seq 300); do
    victim=$(awk '$1 == "rank" && $3 == "victim" {print $5; exit}' "$file")
    [ -n "$victim" ] && break
    sleep 0.1
  done
  [ -n "$victim" ] || { cat "$file" >&2; fail "the victim never started"; }
  echo "$victim"
}

# count_within_10s FILE REGEX WANT: waits up to 10 s for WANT matching lines.
count_within_10s() {
  local file=$1 pattern=$2 want=$3 seen=0
  for _ in $(seq 100); do
    seen=$(grep -cE -- "$pattern" "$file" || true)
    [ "$seen" -ge "$want" ] && break
    sleep 0.1
  done
  echo "$seen"
}

# Fails unless no shared-memory object of job $1 (object store files named
# sray.<job>.<step>.n<node>...) is left in /dev/shm.
expect_no_shared_memory_objects() {
  local job=$1 objects
  [ -n "$job" ] || fail "no job id to check: the job printed no 'job <id>' line"
  objects=$(ls /dev/shm | grep "^sray\.$job\." || true)
  [ -z "$objects" ] || fail "shared-memory objects of job $job left: $objects"
}

# wait_for_ready OUT PID [SECONDS]: waits until OUT (the output of the job
# running as PID) has the line "ready"; fails when the job ends first or
# after SECONDS (default 120).
wait_for_ready() {
  local out=$1 pid=$2 limit=${3:-120} attempt
  for attempt in $(seq $((limit * 10))); do
    grep -q '^ready$' "$out" && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$out" >&2; fail "the job ended before it was ready"; }
    sleep 0.1
  done
  fail "the job was not ready within $limit s: $(cat "$out")"
}
