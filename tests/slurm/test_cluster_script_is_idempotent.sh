#!/usr/bin/env bash
# `scripts/cluster up` on a running cluster changes nothing, asking for another
# size is refused with advice, and the plugin's option shows in `srun --help`.
source "$(dirname "$0")/lib.sh"

pids_before=$(cat "$SRAY_CLUSTER_DIR"/run/*.pid | sort)
nodes=$(cat "$SRAY_CLUSTER_DIR/run/node-count")
"$CLUSTER" up "$nodes" >"$WORK/up.out"
expect_lines "$WORK/up.out" "already up with $nodes nodes" 1
[ "$(cat "$SRAY_CLUSTER_DIR"/run/*.pid | sort)" = "$pids_before" ] || fail "'up' restarted daemons"

if "$CLUSTER" up $((nodes + 1)) >"$WORK/resize.out" 2>&1; then fail "'up' with another size succeeded"; fi
expect_lines "$WORK/resize.out" "the cluster is up with $nodes nodes, not $((nodes + 1)): run 'scripts/cluster down' first" 1

as_user srun --help >"$WORK/help.out"
expect_lines "$WORK/help.out" '--ray-cluster=key=value,\.\.\.' 1
echo PASS
