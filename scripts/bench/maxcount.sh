#!/usr/bin/env bash
# maxcount.sh measures what one request of the largest count costs a node in
# memory: for each count, a fresh `idgen serve --max-count COUNT` on SQLite
# (GOGC as the binary sets it, 400, unless the environment sets GOGC), its
# peak resident set (VmHWM of /proc/PID/status) after a few small requests,
# then after one request of COUNT IDs, for
#
#   snowflake  GET /ids?count=COUNT
#   segment    GET /ids?count=COUNT&namespace=bench (a namespace of the
#              default step, 1000, and max_step, 100000)
#   grpc       IdService/NextIds over Connect, binary protobuf
#
# and, with CONCURRENT > 1, as many such requests at once. The deploy
# manifests give a serving pod 256 MiB (deploy/k8s, deploy/helm), so the
# peak after the largest request must stay well below it.
#
#   scripts/bench/maxcount.sh                      # COUNTS="10000 262144"
#   COUNTS="262144 1048576 16777216" CONCURRENT=4 scripts/bench/maxcount.sh
#
# Output: docs/benchmarks/maxcount/results.txt (OUT to change), one line per
# run, and machine.txt.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/docs/benchmarks/maxcount}
counts=${COUNTS:-"10000 262144"}
concurrent=${CONCURRENT:-1}
# shellcheck source=scripts/bench/lib.sh
. "$root/scripts/bench/lib.sh"

tmp=$(mktemp -d)
trap bench_cleanup EXIT
mkdir -p "$out"
log "building idgen"
(cd "$root" && go build -o "$tmp/idgen" ./cmd/idgen)
{
	machine_info
	echo "counts: $counts"
	echo "concurrent: $concurrent"
	echo "GOGC: ${GOGC:-unset (the binary sets 400)}"
} >"$out/machine.txt"
results="$out/results.txt"
: >"$results"

# hwm PID prints the peak resident set of PID in kB.
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }

# varint N prints N as a protobuf varint, as printf escapes.
varint() {
	local n=$1 s=""
	while ((n >= 128)); do
		s+=$(printf '\\x%02x' $(((n & 127) | 128)))
		n=$((n >> 7))
	done
	s+=$(printf '\\x%02x' "$n")
	echo "$s"
}

# measure COUNT KIND: one fresh node, one request (CONCURRENT at once).
measure() {
	local count=$1 kind=$2 dir pid addr before after i status bytes
	dir="$tmp/$kind-$count"
	mkdir -p "$dir"
	"$tmp/idgen" serve --dsn "sqlite:$dir/idgen.db" --listen 127.0.0.1:0 --addr-file "$dir/addr" \
		--max-count "$count" >"$dir/serve.log" 2>&1 &
	pid=$!
	pids+=("$pid")
	for i in $(seq 300); do
		[ -s "$dir/addr" ] && curl -fsS "http://$(cat "$dir/addr")/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	addr=http://$(cat "$dir/addr")
	"$tmp/idgen" namespaces create bench --dsn "sqlite:$dir/idgen.db" >/dev/null
	# Warm: the first requests of each kind, so that before is the node
	# serving, not the node starting.
	for i in 1 2 3; do
		curl -fsS -o /dev/null "$addr/ids?count=10"
		curl -fsS -o /dev/null "$addr/ids?count=10&namespace=bench"
	done
	printf '\x10%b' "$(varint 10)" >"$dir/small.pb"
	printf '\x10%b' "$(varint "$count")" >"$dir/large.pb"
	curl -fsS -o /dev/null -H 'Content-Type: application/proto' --data-binary @"$dir/small.pb" "$addr/idgen.v1.IdService/NextIds"
	before=$(hwm "$pid")
	local reqs=()
	for i in $(seq "$concurrent"); do
		case $kind in
		snowflake) curl -sS -o "$dir/out$i" -w '%{http_code}\n' "$addr/ids?count=$count" >"$dir/status$i" & ;;
		segment) curl -sS -o "$dir/out$i" -w '%{http_code}\n' "$addr/ids?count=$count&namespace=bench" >"$dir/status$i" & ;;
		grpc) curl -sS -o "$dir/out$i" -w '%{http_code}\n' -H 'Content-Type: application/proto' \
			--data-binary @"$dir/large.pb" "$addr/idgen.v1.IdService/NextIds" >"$dir/status$i" & ;;
		esac
		reqs+=($!)
	done
	wait "${reqs[@]}"
	after=$(hwm "$pid")
	status=$(sort -u "$dir"/status* | tr '\n' ' ')
	bytes=$(stat -c %s "$dir/out1")
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null || true
	printf '%-9s count=%-8s concurrent=%s status=%sbody_bytes=%-9s VmHWM_before=%s kB VmHWM_after=%s kB (+%s MiB)\n' \
		"$kind" "$count" "$concurrent" "$status" "$bytes" "$before" "$after" $(((after - before) / 1024)) | tee -a "$results"
}

for count in $counts; do
	for kind in snowflake segment grpc; do
		measure "$count" "$kind"
	done
done
log "results in $results"
