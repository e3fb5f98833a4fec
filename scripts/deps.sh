#!/bin/sh
# Installs the Debian 12 packages that csifs needs to build, run and test.
# Does nothing when all are present; runs apt-get update only when one is missing.
set -eu

# prometheus: promtool, which tests/integration/metrics runs on <mnt>/metrics
# cflow: scripts/check-cycles.sh (make check), the file-level call graph
# etcd-server, etcd-client, openssl: tests/system's etcd clusters (cluster/),
# etcdctl, and their TLS certificates
# libmicrohttpd-dev, libmicrohttpd12: -o http= (http/); curl: the HTTP tests
# zlib1g-dev: crc32 of the store's records (registry/store_codec.c)
PKGS="build-essential pkg-config clang
libfuse3-dev fuse3
libgrpc-dev
libprotobuf-c-dev protobuf-c-compiler
liblmdb-dev lmdb-utils
libmount-dev libsystemd-dev
libcriterion-dev
valgrind strace util-linux coreutils procps dash shellcheck
systemd mandoc man-db groff-base
prometheus
clang-14 libfuzzer-14-dev
cflow
etcd-server
etcd-client
openssl
libmicrohttpd-dev libmicrohttpd12
curl
zlib1g-dev"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing="$missing $p"
    fi
done

[ -z "$missing" ] && exit 0

echo "deps: installing$missing" >&2
if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing packages and not root; run: sudo apt-get install$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
