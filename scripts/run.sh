#!/bin/sh
# make run: csifs in the foreground on MNT with its state in STATE (Ctrl-C unmounts).
set -eu
bin=$1 mnt=$2 state=$3
echo "csifs on $mnt (state $state; Ctrl-C unmounts). Try: mkdir -p $mnt/csi-node/demo/a1 && ln -sfn /run/demo.sock $mnt/csi-node/demo/a1/socket && ls -l $mnt/csi-node/demo/a1 && timeout 2 cat $mnt/events"
exec "$bin" -f -o "state=$state" "$mnt"
