#!/usr/bin/env bash
# The dashboard in a real browser (Debian's headless Chromium) under
# `sray run -N2`: a one-time login link from `sray login` opens the page, whose DOM
# then shows both nodes and the training run with a point per report on its
# loss curve; a screenshot is kept in the test's output directory. Without
# a login the page shows no data and says how to log in.
source "$(dirname "$0")/lib.sh"
TRAIN=$SRAY_BUILD_DIR/tests/train_check
[ -x "$TRAIN" ] || skip "sray was built without LibTorch (SRAY_WITH_TORCH=OFF)"
CHROMIUM=$(command -v chromium || true)
[ -n "$CHROMIUM" ] || fail "no chromium: scripts/install-deps installs it (apt install chromium)"

mkdir -p "$WORK/storage"
"$SRAY" run -N2 bash -c 'echo "job $SRAY_JOB_ID"; exec "$0" "$@"' "$TRAIN" dashboard "$WORK/storage" \
  >"$WORK/job.out" 2>&1 &
job_pid=$!
wait_for_ready "$WORK/job.out" "$job_pid"
job=$(awk '$1 == "job" {print $2; exit}' "$WORK/job.out")
login=$("$SRAY" login "$job" 2>"$WORK/login.err") || fail "sray login $job failed: $(cat "$WORK/login.err")"
case $login in http://127.0.0.1:[0-9]*/login?code=[0-9a-f]*) ;; *) fail "sray login printed no link: $login" ;; esac
page=${login%%login*}

# Root needs --no-sandbox; the virtual time budget lets the page's fetches
# and drawing finish before the DOM is dumped and the screenshot taken. The
# outer timeout turns a hang into a failure (a fetch the server never
# answered once held virtual time still, with the dashboard's old server).
browse() {
  timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --virtual-time-budget=8000 \
    --user-data-dir="$WORK/profile-$1" --window-size=1280,1100 "${@:2}"
}
browse denied --dump-dom "$page" >"$WORK/denied.html" 2>"$WORK/chromium-denied.err" || true
grep -q "this tab is not logged in to the job" "$WORK/denied.html" ||
  fail "the page does not say it is not logged in: $(grep -o '<div id="status">[^<]*' "$WORK/denied.html")"
grep -q 'class="node"' "$WORK/denied.html" && fail "node rows shown without a login"
echo "ok: without a login the page shows no data and says how to log in"

browse login --screenshot="$WORK/dashboard.png" --dump-dom "$login" >"$WORK/page.html" \
  2>"$WORK/chromium.err" || { cat "$WORK/chromium.err" >&2; fail "chromium failed"; }
nodes=$(grep -o '<tr class="node">' "$WORK/page.html" | wc -l)
[ "$nodes" -eq 2 ] || fail "the page shows $nodes node rows, not 2: $(head -c 2000 "$WORK/page.html")"
grep -q 'data-run="check"' "$WORK/page.html" || fail "the page shows no training run"
grep -q 'data-metric="loss" data-points="5"' "$WORK/page.html" ||
  fail "the loss curve does not have the run's five points: $(grep -o 'data-metric="[^"]*" data-points="[0-9]*"' "$WORK/page.html")"
points=$(grep -o '<circle' "$WORK/page.html" | wc -l)
[ "$points" -ge 5 ] || fail "no points drawn on the curves"
[ -s "$WORK/dashboard.png" ] || fail "no screenshot"
mkdir -p "$SRAY_BUILD_DIR/test-output"
cp "$WORK/dashboard.png" "$SRAY_BUILD_DIR/test-output/dashboard.png"
echo "ok: the page shows both nodes and the run's loss curve with its 5 points (screenshot: $SRAY_BUILD_DIR/test-output/dashboard.png)"

touch "$WORK/storage/done"
status=0
wait "$job_pid" || status=$?
[ "$status" -eq 0 ] || { cat "$WORK/job.out" >&2; fail "the training job exited with $status"; }
expect_job_output "$WORK/job.out" 1
echo PASS
