#!/usr/bin/env bash
# with_small_dev_shm.sh SIZE COMMAND [ARGS...]: runs COMMAND in a private
# mount namespace whose /dev/shm is a fresh tmpfs of SIZE, so that a test of
# what a small /dev/shm does is the same on every machine. Root uses a mount
# namespace alone (as scripts/cluster does); anyone else a user namespace too.
set -euo pipefail
size=$1
shift
namespace=(--mount --propagation private)
[ "$(id -u)" -eq 0 ] || namespace=(--user --map-root-user "${namespace[@]}")
exec unshare "${namespace[@]}" -- /bin/sh -c 'mount -t tmpfs -o "size=$0" tmpfs /dev/shm && exec "$@"' "$size" "$@"
