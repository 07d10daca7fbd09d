#!/usr/bin/env bash
# Gathers the gRPC figures of docs/benchmarks.md: builds idgen and
# idgen-loadtest, starts a fresh `idgen serve` on SQLite in a temporary
# directory, then
#   1. unary: GET /ids?count=1 over HTTP/1.1, IdService.NextIds count=1
#      over gRPC (h2c; from connect-go's client and from grpc-go's) and
#      over the Connect protocol (HTTP/1.1), the order
#      reversed every other round, each on CONNS connections, REPEAT
#      rounds; the ratios are taken within each round;
#   2. streaming: IdService.StreamIds with BATCH IDs per message on
#      STREAM_CONNS streams (one per connection), REPEAT rounds.
# Results go to $OUT/results.jsonl (one JSON object per run, idgen-loadtest
# --json), the machine to $OUT/machine.txt and the tables to $OUT/tables.md
# (scripts/bench/grpc_tables.py, which can redraw them from results.jsonl).
#
# Usage: scripts/bench/grpc.sh
# Settings (environment):
#   OUT           output directory (default docs/benchmarks/grpc)
#   CONNS         connections of the unary runs (default 8)
#   STREAM_CONNS  streams of the streaming runs (default 1)
#   BATCH         IDs per stream message (default 4096)
#   DURATION      measured time of each run (default 10s)
#   WARMUP        unmeasured load before each run (default 2s)
#   REPEAT        rounds (default 3)
#   CHECK_UNIQUE  whether the load tool checks the IDs for duplicates
#                 (default true, in every run alike)
#
# Run it on a quiet machine: the load generator and the server share the
# machine's cores.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-$root/docs/benchmarks/grpc}
conns=${CONNS:-8}
stream_conns=${STREAM_CONNS:-1}
batch=${BATCH:-4096}
duration=${DURATION:-10s}
warmup=${WARMUP:-2s}
repeat=${REPEAT:-3}
check_unique=${CHECK_UNIQUE:-true}

# shellcheck source=lib.sh
. "$here/lib.sh"
bench_start
bench_record "settings: CONNS=$conns STREAM_CONNS=$stream_conns BATCH=$batch CHECK_UNIQUE=$check_unique DURATION=$duration WARMUP=$warmup REPEAT=$repeat"

# load LABEL ROUND ARGS...: one measured run, appended to results.jsonl.
load() {
	local label=$1 round=$2
	shift 2
	"$tmp/idgen-loadtest" --url "$srv" --quiet --json --label "$label" --warmup "$warmup" --duration "$duration" \
		--check-unique="$check_unique" --server-pid "$srv_pid" "$@" |
		jq -c --argjson round "$round" '. + {round: $round}' >>"$results"
	tail -n 1 "$results" | jq -r '"round \(.round) \(.label) conns=\(.conns): \(.requests_per_s|floor) req/s \(.ids_per_s|floor) ids/s p99 \(.latency_ms.p99)ms errors \(.errors) duplicates \(.duplicates)"' >&2
}

for round in $(seq "$repeat"); do
	log "round $round of $repeat"
	# Alternate which goes first, so that neither always runs on a warmer
	# server.
	if ((round % 2)); then
		load http "$round" --conns "$conns" --count 1
		load grpc "$round" --conns "$conns" --count 1 --transport grpc
		load grpc-go "$round" --conns "$conns" --count 1 --transport grpc-go
		load connect "$round" --conns "$conns" --count 1 --transport connect
	else
		load connect "$round" --conns "$conns" --count 1 --transport connect
		load grpc-go "$round" --conns "$conns" --count 1 --transport grpc-go
		load grpc "$round" --conns "$conns" --count 1 --transport grpc
		load http "$round" --conns "$conns" --count 1
	fi
	load stream "$round" --conns "$stream_conns" --count "$batch" --transport grpc --stream
done

# The tables: medians of the rounds with [min–max].
python3 "$here/grpc_tables.py" "$results" "$conns" "$stream_conns" "$batch" >"$out/tables.md"
cat "$out/tables.md" >&2
