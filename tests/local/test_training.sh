#!/usr/bin/env bash
# sray::train under `sray run -N2`: a two-worker run whose loss falls, with
# every worker given rank 0's weights, checkpoints pruned by score and
# metrics logged; kill -9 of a training worker mid-epoch resumed from the
# last checkpoint (max_failures=1); the same kill and an exception in the
# loop failing Fit with the worker's cause (max_failures=0), and a restarted
# group failing again naming the first cause (max_failures=1); bad
# configuration and models that differ between workers refused with
# messages naming them; the loop's own TCPStore and Gloo group on
# MASTER_ADDR:MASTER_PORT, as code written for torchrun makes them; the
# Fashion-MNIST example on a slice of the real data.
# After each job no process, shared-memory object or session file is left.
source "$(dirname "$0")/lib.sh"
TRAIN=$SRAY_BUILD_DIR/tests/train_check
[ -x "$TRAIN" ] || skip "sray was built without LibTorch (SRAY_WITH_TORCH=OFF)"

run_train_mode() {
  local mode=$1 expected=$2 label=${3:-$1} out status=0
  out=$WORK/train.$label.out
  mkdir -p "$WORK/$label"
  "$SRAY" run -N2 bash -c 'echo "job $SRAY_JOB_ID"; exec "$0" "$@"' "$TRAIN" "$mode" "$WORK/$label" \
    >"$out" 2>&1 || status=$?
  [ "$status" -eq 0 ] || { cat "$out" >&2; fail "train_check $mode exited with $status"; }
  expect_job_output "$out" "$expected"
  echo "ok: $mode"
}

run_train_mode basic 15
run_train_mode kill-resume 6
# Both nodes see the run directory: each worker copies its checkpoint part
# there, and the driver moves the files into place. With staging off, the
# parts travel to the driver, and a restart's checkpoint comes back that way.
expect_lines "$WORK/train.kill-resume.out" 'workers on nodes 0,1, .*\(checkpoints copied there by each worker\)' 1
SRAY_TRAIN_STAGE_CHECKPOINTS=0 run_train_mode kill-resume 6 kill-resume-sent
expect_lines "$WORK/train.kill-resume-sent.out" 'workers on nodes 0,1, .*\(checkpoints sent to the driver from nodes 0,1,' 1
run_train_mode kill-fail 4
run_train_mode kill-twice 5
run_train_mode exception 4
run_train_mode bad-part 3
run_train_mode bad-input 6
run_train_mode own-group 3
grep -q 'failed: worker 1 (node 1, pid [0-9]*) died: its process ended with signal 9' "$WORK/train.kill-fail.out" ||
  { cat "$WORK/train.kill-fail.out" >&2; fail "the kill's error does not name the worker and the signal"; }

# The example, as README shows it, on 2048 real Fashion-MNIST images.
FASHION=$SRAY_BUILD_DIR/examples/train_fashion_mnist
# --resume without --storage-path had nothing to resume from (the default
# storage goes with the job) and was ignored without a word.
status=0
"$SRAY" run -N1 "$FASHION" --resume >"$WORK/resume-alone.out" 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "--resume without --storage-path: expected status 2, got $status: $(cat "$WORK/resume-alone.out")"
expect_lines "$WORK/resume-alone.out" '^sray: --resume needs --storage-path: ' 1
if [ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  "$SRAY" run -N2 "$FASHION" --workers 2 --epochs 2 --train-limit 2048 --test-limit 1000 \
    --storage-path "$WORK/results" >"$WORK/fashion.out" 2>&1 ||
    { cat "$WORK/fashion.out" >&2; fail "train_fashion_mnist failed"; }
  expect_lines "$WORK/fashion.out" '^sray train train_fashion_mnist: report [12]: .*samples/s' 2
  expect_lines "$WORK/fashion.out" '^final test accuracy 0\.[5-9]' 1
  [ -d "$WORK/results/train_fashion_mnist/checkpoint_000001" ] || fail "no checkpoint after epoch 2"
  # --resume continues from the latest checkpoint: nothing is left to train.
  "$SRAY" run -N2 "$FASHION" --workers 2 --epochs 2 --train-limit 2048 --test-limit 1000 \
    --storage-path "$WORK/results" --resume >"$WORK/resumed.out" 2>&1 ||
    { cat "$WORK/resumed.out" >&2; fail "train_fashion_mnist --resume failed"; }
  expect_lines "$WORK/resumed.out" '^final test accuracy .* after 0 reports' 1
  echo "ok: fashion-mnist example"
else
  echo "note: /usr/share/datasets/fashion-mnist missing (apt install dataset-fashion-mnist): example not run"
fi
# train_cifar10 on a small file written here in CIFAR-10's binary format
# (label byte, then 3x32x32 pixels per record): it reads and trains.
python3 - "$WORK/cifar" <<'PYTHON'
import os, random, sys
os.makedirs(sys.argv[1])
random.seed(1)
with open(os.path.join(sys.argv[1], "data_batch_1.bin"), "wb") as batch:
    for record in range(256):
        label = record % 10
        batch.write(bytes([label]) + bytes(random.randrange(256) // 4 + label * 16 for _ in range(3072)))
PYTHON
"$SRAY" run -N2 "$SRAY_BUILD_DIR/examples/train_cifar10" --workers 2 --epochs 2 --data "$WORK/cifar" \
  >"$WORK/cifar.out" 2>&1 || { cat "$WORK/cifar.out" >&2; fail "train_cifar10 failed"; }
expect_lines "$WORK/cifar.out" '^sray train train_cifar10: report [12]: ' 2
expect_lines "$WORK/cifar.out" '^final test accuracy ' 1
echo "ok: cifar-10 example"
echo PASS
