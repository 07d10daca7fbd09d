#!/usr/bin/env bash
# Builds the etcd server that the etcd store's tests start (three members
# on loopback ports, see internal/testkit), at the version pinned in
# internal/testkit/etcdserver/go.mod, and prints the binary's path on stdout
# (progress goes to stderr). CI exports it before running the tests:
#
#   export IDGEN_TEST_ETCD_BIN="$(bash scripts/ci/etcd.sh)"
#
# Without IDGEN_TEST_ETCD_BIN the tests build the same server themselves on
# first use; building it here first keeps that time out of the test
# timeouts and fails early, with the go command's message, when the module
# proxy cannot be reached. Needs only Go and the module proxy.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"

out="${IDGEN_ETCD_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/idgen/etcd-ci}"
mkdir -p "$out"
printf '== building etcd (internal/testkit/etcdserver) into %s\n' "$out" >&2
(cd internal/testkit/etcdserver && GOWORK=off GOFLAGS=-mod=readonly go build -trimpath -o "$out/etcd.tmp" . && mv "$out/etcd.tmp" "$out/etcd") >&2
"$out/etcd" --version >&2
echo "$out/etcd"
