#!/usr/bin/env bash
# --ray-cluster=env= under srun on the emulated cluster (each node has a
# private /tmp): a packed environment is staged into each node's /tmp once
# and activated for every task, two steps at once share that copy; a prefix
# that differs on one node fails the step before user code runs, naming the
# node and the package; a lock finds the staged copy, and a spec nothing
# matches is made on each node by the user's conda tool.
source "$(dirname "$0")/lib.sh"
TASKS=$SRAY_PREFIX/libexec/sray/tests/tasks_check
test_uid=$(id -u "$SRAY_TEST_USER")

# A prefix written in conda's formats at $1, with numpy's build $2.
make_prefix() {
  mkdir -p "$1/conda-meta" "$1/bin"
  for package in "python 3.11.5 hab00c5b_0_cpython" "numpy 1.26.0 $2"; do
    set -- "$1" $package
    printf '{"name": "%s", "version": "%s", "build": "%s", "channel": "conda-forge", "subdir": "linux-64"}\n' \
      "$2" "$3" "$4" >"$1/conda-meta/$2-$3-$4.json"
  done
  printf '#!%s/bin/python\n' "$1" >"$1/bin/tool"
  chown -R "$SRAY_TEST_USER:" "$1"
}

# 1. A packed environment on the shared home.
make_prefix "$WORK/train" py311h_0
as_user "$SRAY_PREFIX/bin/sray" env pack "$WORK/train" -o "$WORK/train.pack" >/dev/null
step() {
  as_user srun -N3 --ray-cluster="env=$WORK/train.pack" \
    bash -c 'echo "$SRAY_NODE_ID $CONDA_PREFIX ${PATH%%:*} $(head -c 100 "$CONDA_PREFIX/bin/tool")"'
}
step >"$WORK/step1.out" 2>&1 &
first=$!
step >"$WORK/step2.out" 2>&1 || { cat "$WORK/step2.out" >&2; fail "a step with env= failed"; }
wait "$first" || { cat "$WORK/step1.out" >&2; fail "a step with env= failed"; }
for node in n1 n2 n3; do
  copies=$(ls "$(on_node "$node" "/tmp/sray-envs-$test_uid")")
  [ "$(echo "$copies" | wc -l)" -eq 1 ] || fail "$node staged more than one copy: $copies"
done
staged=/tmp/sray-envs-$test_uid/$copies
for out in "$WORK/step1.out" "$WORK/step2.out"; do
  expect_lines "$out" "^[0-2] $staged $staged/bin #!$staged/bin/python\$" 3
done
echo "ok: the pack is staged once into each node's /tmp, relocated, and activated for every task"
# Staging ran before the step's output was connected: the node's first task
# says how it went, once per node that staged (the other step reused the copy).
told=$(cat "$WORK/step1.out" "$WORK/step2.out" |
  grep -Ec "^sray: node [0-2]: staged $WORK/train.pack into $staged in [0-9.]+ s \([0-9]+ files, " || true)
[ "$told" -eq 3 ] || fail "the steps' output says $told times how a node staged the pack, not 3: $(cat "$WORK/step1.out" "$WORK/step2.out")"
echo "ok: each node's staging is said in the step's output"
as_user srun -N3 --ray-cluster="env=$WORK/train.pack" "$TASKS" basic >"$WORK/same.out" 2>&1 ||
  { cat "$WORK/same.out" >&2; fail "a sray program under env= failed"; }
echo "ok: nodes with the same environment pass the runtime's comparison"

# 1b. A lock of that environment names the copy staged on each node.
as_user "$SRAY_PREFIX/bin/sray" env lock "$WORK/train" -o "$WORK/train.lock" >/dev/null
as_user srun -N3 --ray-cluster="env=$WORK/train.lock" bash -c 'echo "$SRAY_NODE_ID $CONDA_PREFIX"' \
  >"$WORK/lock.out" 2>&1 || { cat "$WORK/lock.out" >&2; fail "a step with env=LOCK failed"; }
expect_lines "$WORK/lock.out" "^[0-2] $staged\$" 3
echo "ok: env=LOCK finds the copy staged on each node"

# 1c. An explicit file nothing staged matches: each node makes it once with the
# user's micromamba (tests/fixtures/micromamba stands in for it, see there).
mkdir -p "$WORK/bin"
cp "$SRAY_SOURCE_DIR/tests/fixtures/micromamba" "$WORK/bin/"
chown -R "$SRAY_TEST_USER:" "$WORK/bin"
cat >"$WORK/explicit.txt" <<'TXT'
@EXPLICIT
https://conda.anaconda.org/conda-forge/linux-64/python-3.11.5-hab00c5b_0_cpython.conda#4bea2c4e29ba9a6fe6d9e3b4f5ca2e6b
TXT
as_user env PATH="$WORK/bin:$SRAY_PREFIX/bin:/usr/bin:/bin" srun -N3 --ray-cluster="env=$WORK/explicit.txt" \
  bash -c 'echo "$SRAY_NODE_ID $CONDA_PREFIX"' >"$WORK/spec.out" 2>&1 ||
  { cat "$WORK/spec.out" >&2; fail "a step with env=SPEC and micromamba on PATH failed"; }
expect_lines "$WORK/spec.out" "^[0-2] /tmp/sray-envs-$test_uid/spec-[0-9a-f]{16}\$" 3
for node in n1 n2 n3; do
  ls -d "$(on_node "$node" "/tmp/sray-envs-$test_uid")"/spec-*/conda-meta >/dev/null ||
    fail "$node has no environment made from the spec"
done
expect_lines "$WORK/spec.out" "^sray: node [0-2]: made /tmp/sray-envs-$test_uid/spec-[0-9a-f]{16} from $WORK/explicit.txt in [0-9.]+ s\$" 3
echo "ok: env=SPEC is made on each node by the user's conda tool before user code, and said"

# 2. The same prefix path, but node n3 (node 2) holds another numpy build.
for node in n1 n2 n3; do
  build=py311h_0
  [ "$node" = n3 ] && build=py311h_1
  make_prefix "$(on_node "$node" /tmp/sray-envtest)" "$build"
done
status=0
as_user srun -N3 --ray-cluster=env=/tmp/sray-envtest "$TASKS" basic >"$WORK/differ.out" 2>&1 || status=$?
[ "$status" -ne 0 ] || fail "a step whose node 2 has another environment succeeded"
grep -q 'conda numpy: 1.26.0 py311h_1 .* on node 2, 1.26.0 py311h_0 .* on node 0' "$WORK/differ.out" ||
  { cat "$WORK/differ.out" >&2; fail "the error does not name node 2 and numpy's builds"; }
expect_lines "$WORK/differ.out" '^ok: ' 0
echo "ok: a node with a different environment fails the step before user code, naming it"

for node in n1 n2 n3; do
  rm -rf "$(on_node "$node" /tmp/sray-envtest)" "$(on_node "$node" "/tmp/sray-envs-$test_uid")"
done
echo PASS
