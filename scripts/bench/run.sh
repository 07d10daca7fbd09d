#!/usr/bin/env bash
# Gathers the HTTP figures of docs/benchmarks.md: builds idgen and
# idgen-loadtest, starts a fresh `idgen serve` on SQLite in a temporary
# directory and a bare echo server (idgen-loadtest bare-echo) as the
# baseline, drives both with idgen-loadtest at each connection count, then
# loads idgen for a minute and reads its resident memory. Results go to
# $OUT/results.jsonl (one JSON object per run, idgen-loadtest --json), the
# machine to $OUT/machine.txt, the plot to $OUT/connections.png and the
# tables to $OUT/tables.md.
#
# Usage: scripts/bench/run.sh
# Settings (environment):
#   OUT           output directory (default docs/benchmarks)
#   CONNS         connection counts (default "1 2 4 8 16 32 64")
#   DURATION      measured time of each run (default 10s)
#   WARMUP        unmeasured load before each run (default 2s)
#   RSS_DURATION  length of the memory run (default 60s)
#   RSS_CONNS     connections of the memory run (default 8; RSS_DURATION=0
#                 skips the memory run)
#   REPEAT        rounds over all connection counts (default 1); plot.py
#                 takes the median of the rounds and tables.md shows their
#                 spread
#   PYTHON        a Python 3 with matplotlib (default /usr/bin/python3:
#                 Debian's python3-matplotlib)
#
# Run it on a quiet machine: the load generator and the server share the
# machine's cores, and anything else running skews both. Nothing is pinned
# to a core (see docs/benchmarks.md).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-$root/docs/benchmarks}
conns=${CONNS:-"1 2 4 8 16 32 64"}
duration=${DURATION:-10s}
warmup=${WARMUP:-2s}
rss_duration=${RSS_DURATION:-60s}
rss_conns=${RSS_CONNS:-8}
repeat=${REPEAT:-1}
python=${PYTHON:-/usr/bin/python3}

tmp=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# wait_for FILE PATTERN: waits up to 30 s for a line matching the extended
# regular expression PATTERN in FILE and prints its first match.
wait_for() {
	local i
	for i in $(seq 300); do
		if m=$(grep -Eo -m 1 "$2" "$1" 2>/dev/null); then
			echo "$m" | head -n 1
			return 0
		fi
		sleep 0.1
	done
	echo "run.sh: timed out waiting for /$2/ in $1:" >&2
	cat "$1" >&2
	return 1
}

mkdir -p "$out"
log "building idgen and idgen-loadtest"
(cd "$root" && go build -o "$tmp/idgen" ./cmd/idgen && go build -o "$tmp/idgen-loadtest" ./cmd/idgen-loadtest)

dsn="sqlite:$tmp/idgen.db"
"$tmp/idgen" serve --dsn "$dsn" --listen 127.0.0.1:0 >"$tmp/serve.log" 2>&1 &
srv_pid=$!
pids+=("$srv_pid")
srv="http://$(wait_for "$tmp/serve.log" 'msg="idgen serving" addr=[0-9.:]+' | sed 's/.*addr=//')"
for i in $(seq 300); do
	curl -fsS "$srv/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -fsS "$srv/readyz" >/dev/null
"$tmp/idgen" namespaces create bench --dsn "$dsn" --description "load test" >&2
log "idgen serving at $srv (pid $srv_pid)"

"$tmp/idgen-loadtest" bare-echo --listen 127.0.0.1:0 >"$tmp/bare.log" 2>&1 &
bare_pid=$!
pids+=("$bare_pid")
bare=$(wait_for "$tmp/bare.log" 'http://[0-9.:]+')
log "bare echo serving at $bare (pid $bare_pid)"

{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "nproc: $(nproc)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
	echo "go: $(go version)"
	echo "kernel: $(uname -sr)"
	echo "loadavg before: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "settings: CONNS=\"$conns\" DURATION=$duration WARMUP=$warmup REPEAT=$repeat RSS_DURATION=$rss_duration RSS_CONNS=$rss_conns"
	echo "idle RSS of idgen serve: $(grep VmRSS /proc/$srv_pid/status | awk '{print $2, $3}')"
} >"$out/machine.txt"

results="$out/results.jsonl"
: >"$results"
# load LABEL ARGS...: one measured run, appended to results.jsonl.
load() {
	local label=$1
	shift
	"$tmp/idgen-loadtest" --quiet --json --label "$label" --warmup "$warmup" "$@" >>"$results"
	tail -n 1 "$results" | jq -r '"\(.label) conns=\(.conns): \(.requests_per_s|floor) req/s \(.ids_per_s|floor) ids/s p99 \(.latency_ms.p99)ms errors \(.errors)"' >&2
}

# The sources alternate at each connection count, so that a change of the
# machine's speed during the script touches all of them alike.
for round in $(seq "$repeat"); do
	if [ "$repeat" -gt 1 ]; then
		log "round $round of $repeat"
	fi
	for c in $conns; do
		load snowflake --url "$srv" --conns "$c" --count 1 --duration "$duration" --server-pid "$srv_pid"
		load bare-echo --url "$bare" --conns "$c" --count 1 --duration "$duration" --server-pid "$bare_pid" --check-unique=false
		load segment --url "$srv" --conns "$c" --count 1 --namespace bench --duration "$duration" --server-pid "$srv_pid"
		load snowflake-1000 --url "$srv" --conns "$c" --count 1000 --duration "$duration" --server-pid "$srv_pid"
		load segment-1000 --url "$srv" --conns "$c" --count 1000 --namespace bench --duration "$duration" --server-pid "$srv_pid"
	done
done

if [ "$rss_duration" != 0 ]; then
	log "memory: $rss_duration of GET /ids?count=1 over $rss_conns connections"
	load rss-snowflake --url "$srv" --conns "$rss_conns" --count 1 --duration "$rss_duration" --server-pid "$srv_pid"
fi
echo "loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"

"$python" "$here/plot.py" "$results" "$out/connections.png" >"$out/tables.md"
log "wrote $results, $out/connections.png and $out/tables.md"
