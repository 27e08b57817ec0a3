#!/usr/bin/env bash
# sray::train under `srun -N2 --ray-cluster` on the emulated cluster: a
# two-worker run (one worker per node) whose loss falls, kill -9 of a
# training worker resumed from the last checkpoint, the same kill failing Fit
# with max_failures=0 and naming the worker, a restarted group failing again
# (an exception) naming the first cause, the loop's own TCPStore and Gloo
# group on MASTER_ADDR:MASTER_PORT as torchrun code makes them, and the
# Fashion-MNIST example on a slice of the real data; checkpoints go to a
# directory every node sees.
# Nothing of a step may remain afterwards.
source "$(dirname "$0")/lib.sh"
TRAIN=$SRAY_PREFIX/libexec/sray/tests/train_check
[ -x "$TRAIN" ] || skip "sray was built without LibTorch"

run_train_mode() {
  local mode=$1 expected=$2 out
  out=$WORK/train.$mode.out
  as_user mkdir -p "$WORK/$mode"
  as_user srun -N2 --ray-cluster bash -c 'echo "job $SLURM_JOB_ID"; exec "$0" "$@"' "$TRAIN" "$mode" "$WORK/$mode" \
    >"$out" 2>&1 || { cat "$out" >&2; fail "train_check $mode failed under srun"; }
  expect_step_output "$out" "$expected"
  echo "ok: $mode"
}

run_train_mode basic 15
run_train_mode kill-resume 6
run_train_mode kill-fail 4
grep -q 'failed: worker 1 (node 1, pid [0-9]*) died: its process ended with signal 9' "$WORK/train.kill-fail.out" ||
  { cat "$WORK/train.kill-fail.out" >&2; fail "the kill's error does not name the worker and the signal"; }
run_train_mode kill-twice 5
run_train_mode own-group 3

if [ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  as_user srun -N2 --ray-cluster "$EXAMPLES/train_fashion_mnist" --workers 2 --spread --epochs 1 \
    --train-limit 2048 --test-limit 1000 --storage-path "$WORK/results" >"$WORK/fashion.out" 2>&1 ||
    { cat "$WORK/fashion.out" >&2; fail "train_fashion_mnist failed under srun"; }
  expect_lines "$WORK/fashion.out" 'workers on nodes 0,1' 1
  expect_lines "$WORK/fashion.out" '^final test accuracy 0\.[5-9]' 1
  echo "ok: fashion-mnist example"
fi
left=$(pgrep -u "$SRAY_TEST_USER" -f 'train_check|train_fashion_mnist' || true)
[ -z "$left" ] || fail "processes of the test user left: $left"
echo PASS
