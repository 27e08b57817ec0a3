# Helpers for the tests of `sray run` (label `local`): no Slurm, the current
# user, binaries from the build tree. Sourced by tests/local/test_*.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
: "${SRAY_BUILD_DIR:?run through ctest, which sets SRAY_BUILD_DIR}"
SRAY=$SRAY_BUILD_DIR/launcher/sray
CHECK=$SRAY_BUILD_DIR/tests/transport_check
ROLES=$SRAY_BUILD_DIR/examples/roles
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT



# Nothing of job $1 (a local job id, e.g. local1234) may remain in /tmp.
expect_nothing_left() {
  local job=$1 left
  left=$(ls -d /tmp/sray-*-"$job".* 2>/dev/null || true)
  [ -z "$left" ] || fail "left behind in /tmp: $left"
  left=$(grep -l "SRAY_JOB_ID=$job" /proc/[0-9]*/environ 2>/dev/null | grep -v "/proc/$$/" || true)
  [ -z "$left" ] || fail "processes of $job still alive: $left"
}
