#!/usr/bin/env bash
# strict.sh: strict count=1 requests/s of an older idgen against this one,
# interleaved in one run, on PostgreSQL, SQLite and a three-member etcd.
#
# For each store, the older build (BEFORE) and then this checkout each get
# a fresh database with one strict namespace "ledger" (step 1) and:
#   - one node: the maximum rate of GET /ids?count=1&namespace=ledger in a
#     closed loop of CONNS connections, then an open loop at half of it
#     (CONNS connections) for p50/p99;
#   - three nodes on the same database: the same, the CONNS connections
#     and the open loop's rate split evenly over the nodes (one load tool
#     per node, run at once); the rate is their sum, p50 and p99 the worst
#     of the three.
# Everything listens on loopback. Writes $OUT/results.jsonl (one
# idgen-loadtest --json object per load tool run, labelled
# round/store/variant/nodes/mode), $OUT/fetches.txt (the store fetches
# the nodes made during each run, from their metrics) and $OUT/table.md.
#
# Environment:
#   BEFORE    a checkout of the older commit (required), e.g. made with
#             git worktree add /tmp/before fefa837
#   PG_DSN    a PostgreSQL DSN whose user may create databases (required
#             for postgres); each run gets a database of its own on it
#   ETCD_BIN  the etcd binary (default: $IDGEN_TEST_ETCD_BIN)
#   STORES    default "postgres sqlite etcd"
#   CONNS     default 64; DURATION default 10s; WARMUP default 2s
#   ROUNDS    default 1: how many times the whole sequence runs
#   OUT       default /tmp/idgen-strict-bench
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-/tmp/idgen-strict-bench}
before=${BEFORE:?set BEFORE to a checkout of the older commit}
etcd_bin=${ETCD_BIN:-${IDGEN_TEST_ETCD_BIN:-}}
stores=${STORES:-"postgres sqlite etcd"}
conns=${CONNS:-64}
duration=${DURATION:-10s}
warmup=${WARMUP:-2s}
rounds=${ROUNDS:-1}

pids=()
node_pids=()
pg_dbs=()
cleanup() {
	for pid in "${node_pids[@]}" "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${node_pids[@]}" "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	for db in "${pg_dbs[@]}"; do
		psql -q "$PG_DSN" -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
	done
	rm -rf "$tmp"
}
tmp=$(mktemp -d)
trap cleanup EXIT
mkdir -p "$out"
results="$out/results.jsonl"
: >"$results"
: >"$out/fetches.txt"
log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

log "building $(cd "$before" && git rev-parse --short HEAD) (before) and $(cd "$root" && git rev-parse --short HEAD) (after)"
mkdir -p "$tmp/before" "$tmp/after"
(cd "$before" && go build -o "$tmp/before/idgen" ./cmd/idgen)
(cd "$root" && go build -o "$tmp/after/idgen" ./cmd/idgen && go build -o "$tmp/idgen-loadtest" ./cmd/idgen-loadtest)
{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "nproc: $(nproc)"
	echo "before: $(cd "$before" && git rev-parse --short HEAD); after: $(cd "$root" && git rev-parse --short HEAD)"
	echo "loadavg before: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "settings: STORES=\"$stores\" CONNS=$conns DURATION=$duration WARMUP=$warmup ROUNDS=$rounds"
} >"$out/machine.txt"

# A three-member etcd on loopback ports, started once for the whole run;
# each run uses a key prefix of its own.
etcd_dsn=""
start_etcd() {
	[ -n "$etcd_bin" ] || { echo "strict.sh: set ETCD_BIN" >&2; exit 2; }
	local base=$((30000 + RANDOM % 20000)) cluster="" i
	for i in 0 1 2; do
		cluster+="${cluster:+,}m$i=http://127.0.0.1:$((base + 10 + i))"
	done
	for i in 0 1 2; do
		"$etcd_bin" --name "m$i" --data-dir "$tmp/etcd$i" \
			--listen-client-urls "http://127.0.0.1:$((base + i))" --advertise-client-urls "http://127.0.0.1:$((base + i))" \
			--listen-peer-urls "http://127.0.0.1:$((base + 10 + i))" --initial-advertise-peer-urls "http://127.0.0.1:$((base + 10 + i))" \
			--initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "strict-bench-$base" \
			>"$tmp/etcd$i.log" 2>&1 &
		pids+=("$!")
	done
	for i in $(seq 600); do
		curl -fsS "http://127.0.0.1:$base/health" 2>/dev/null | grep -q '"health":"true"' && break
		sleep 0.1
	done
	curl -fsS "http://127.0.0.1:$base/health" | grep -q '"health":"true"' || { tail -n 5 "$tmp"/etcd?.log >&2; exit 1; }
	etcd_dsn="etcd://127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
	log "etcd members at 127.0.0.1:$base-$((base + 2))"
}

run_id=0
# fresh_dsn STORE: sets dsn to a database of its own for one run.
fresh_dsn() {
	run_id=$((run_id + 1))
	local name="strict_bench_$$_$run_id"
	case $1 in
	postgres)
		psql -q "$PG_DSN" -c "CREATE DATABASE $name" >&2
		pg_dbs+=("$name")
		dsn=$(echo "$PG_DSN" | sed -E "s#(//[^/]*/)[^?]*#\1$name#")
		;;
	sqlite) dsn="sqlite:$tmp/$name.db" ;;
	etcd) dsn="$etcd_dsn/$name" ;;
	esac
}

urls=()
# start_node VARIANT DSN I: one idgen serve; appends its URL to urls.
start_node() {
	local bin="$tmp/$1/idgen" addr="$tmp/addr.$3"
	rm -f "$addr"
	"$bin" serve --dsn "$2" --listen 127.0.0.1:0 --addr-file "$addr" >"$tmp/node$3.log" 2>&1 &
	node_pids+=("$!")
	local i
	for i in $(seq 300); do
		[ -s "$addr" ] && curl -fsS "http://$(cat "$addr")/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fsS "http://$(cat "$addr")/readyz" >/dev/null || { cat "$tmp/node$3.log" >&2; exit 1; }
	urls+=("http://$(cat "$addr")")
}

stop_nodes() {
	local pid
	for pid in "${node_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${node_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	node_pids=()
	urls=()
}

# fetches: the strict fetches the nodes have made so far, summed.
fetches() {
	local u sum=0 v
	for u in "${urls[@]}"; do
		v=$(curl -fsS "$u/metrics" | awk '/^idgen_segment_fetches_total\{namespace="ledger"\}/ {print $2}')
		sum=$((sum + ${v:-0}))
	done
	echo "$sum"
}

# load LABEL MODE(closed|RATE) NODES: one load tool per node, at once;
# prints the summed requests/s. $OUT/fetches.txt gets the label, the
# requests and the store fetches of the run (warm-up included in both).
load() {
	local label=$1 mode=$2 n=$3 i c rate_args=() files=() tools=() f0
	f0=$(fetches)
	for i in $(seq 0 $((n - 1))); do
		c=$(((conns + n - 1 - i) / n))
		rate_args=()
		[ "$mode" = closed ] || rate_args=(--rate "$((mode / n))")
		"$tmp/idgen-loadtest" --quiet --json --label "$label" --url "${urls[$i]}" --conns "$c" --count 1 \
			--namespace ledger --warmup "$warmup" --duration "$duration" "${rate_args[@]}" >"$tmp/out.$i" &
		tools+=("$!")
		files+=("$tmp/out.$i")
	done
	for i in "${tools[@]}"; do wait "$i" || true; done
	cat "${files[@]}" >>"$results"
	echo "$label fetches=$(($(fetches) - f0))" >>"$out/fetches.txt"
	cat "${files[@]}" | jq -s 'map(.requests_per_s) | add | floor'
}

for round in $(seq "$rounds"); do
	for store in $stores; do
		[ "$store" = etcd ] && [ -z "$etcd_dsn" ] && start_etcd
		for variant in before after; do
			fresh_dsn "$store"
			start_node "$variant" "$dsn" 0
			"$tmp/after/idgen" namespaces create ledger --dsn "$dsn" --mode strict --step 1 >/dev/null
			for n in 1 3; do
				for i in $(seq 1 $((n - 1))); do
					[ "${#urls[@]}" -gt "$i" ] || start_node "$variant" "$dsn" "$i"
				done
				max=$(load "r$round/$store/$variant/$n/closed" closed "$n")
				half=$((max / 2))
				log "round $round $store $variant nodes=$n: max $max req/s; open loop at $half"
				load "r$round/$store/$variant/$n/open" "$half" "$n" >/dev/null
			done
			stop_nodes
		done
	done
done
echo "loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"

# One row per store, variant and node count: the closed loop's summed
# rate, and the open loop's rate and worst p50/p99 over the nodes.
jq -rs '
  def f: . * 100 | round / 100;
  group_by(.label | split("/")[0:4] | join("/"))
  | map({key: (.[0].label | split("/")[0:4] | join("/")),
         closed: map(select(.mode == "closed")), open: map(select(.mode != "closed"))})
  | (["| round / store / variant / nodes | max req/s (closed, '"$conns"' conns) | open loop req/s | p50 (ms) | p99 (ms) | errors | duplicates |",
      "|---|---:|---:|---:|---:|---:|---:|"][]),
    (.[] | "| \(.key) | \(.closed | map(.requests_per_s) | add | floor) | \(.open | map(.requests_per_s) | add | floor) | \(.open | map(.latency_ms.p50) | max | f) | \(.open | map(.latency_ms.p99) | max | f) | \((.closed + .open) | map(.errors) | add) | \((.closed + .open) | map(.duplicates) | add) |")
' "$results" | tee "$out/table.md"
