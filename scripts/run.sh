#!/bin/sh
# make run: csifs in the foreground on MNT with its state in STATE.
set -eu
bin=$1 mnt=$2 state=$3
echo "csifs on $mnt (state $state). In another shell try:"
echo "  mkdir -p $mnt/csi-node/demo/a1 && ln -sfn /run/demo.sock $mnt/csi-node/demo/a1/socket && ls -l $mnt/csi-node/demo/a1 && cat $mnt/events"
echo "Ctrl-C unmounts."
exec "$bin" -f -o "state=$state" "$mnt"
