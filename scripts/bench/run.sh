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
#   LOADS         which loads to run at each connection count (default all:
#                 "snowflake bare-echo segment snowflake-1000 segment-1000");
#                 LOADS="snowflake bare-echo" compares count=1 with the bare
#                 echo handler only
#   CHECK_UNIQUE  whether the load tool checks idgen's IDs for duplicates
#                 (default true). The check costs the load tool a few µs of
#                 CPU per request, which it does not spend on the bare echo
#                 server's constant answers: set it to false when comparing
#                 idgen with bare echo, so that both get the same load
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
loads=${LOADS:-"snowflake bare-echo segment snowflake-1000 segment-1000"}
check_unique=${CHECK_UNIQUE:-true}
python=${PYTHON:-/usr/bin/python3}

# shellcheck source=lib.sh
. "$here/lib.sh"
bench_start
start_bare
bench_record "settings: CONNS=\"$conns\" LOADS=\"$loads\" CHECK_UNIQUE=$check_unique DURATION=$duration WARMUP=$warmup REPEAT=$repeat RSS_DURATION=$rss_duration RSS_CONNS=$rss_conns" \
	"idle RSS of idgen serve: $(grep VmRSS /proc/$srv_pid/status | awk '{print $2, $3}')"

# load LABEL ARGS...: one measured run, appended to results.jsonl.
load() {
	local label=$1
	shift
	"$tmp/idgen-loadtest" --quiet --json --label "$label" --warmup "$warmup" --check-unique="$check_unique" "$@" >>"$results"
	tail -n 1 "$results" | jq -r '"\(.label) conns=\(.conns): \(.requests_per_s|floor) req/s \(.ids_per_s|floor) ids/s p99 \(.latency_ms.p99)ms errors \(.errors)"' >&2
}

# The sources alternate at each connection count, so that a change of the
# machine's speed during the script touches all of them alike.
for round in $(seq "$repeat"); do
	if [ "$repeat" -gt 1 ]; then
		log "round $round of $repeat"
	fi
	for c in $conns; do
		for l in $loads; do
			case $l in
			snowflake) load snowflake --url "$srv" --conns "$c" --count 1 --duration "$duration" --server-pid "$srv_pid" ;;
			bare-echo) load bare-echo --url "$bare" --conns "$c" --count 1 --duration "$duration" --server-pid "$bare_pid" --check-unique=false ;;
			segment) load segment --url "$srv" --conns "$c" --count 1 --namespace bench --duration "$duration" --server-pid "$srv_pid" ;;
			snowflake-1000) load snowflake-1000 --url "$srv" --conns "$c" --count 1000 --duration "$duration" --server-pid "$srv_pid" ;;
			segment-1000) load segment-1000 --url "$srv" --conns "$c" --count 1000 --namespace bench --duration "$duration" --server-pid "$srv_pid" ;;
			*)
				echo "run.sh: unknown load $l in LOADS" >&2
				exit 2
				;;
			esac
		done
	done
done

if [ "$rss_duration" != 0 ]; then
	log "memory: $rss_duration of GET /ids?count=1 over $rss_conns connections"
	load rss-snowflake --url "$srv" --conns "$rss_conns" --count 1 --duration "$rss_duration" --server-pid "$srv_pid"
fi
echo "loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"

"$python" "$here/plot.py" "$results" "$out/connections.png" >"$out/tables.md"
log "wrote $results, $out/connections.png and $out/tables.md"
