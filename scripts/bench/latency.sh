#!/usr/bin/env bash
# Gathers the open-loop latency curve of docs/benchmarks.md: builds idgen
# and idgen-loadtest, starts a fresh `idgen serve` on SQLite in a temporary
# directory, measures the most GET /ids?count=1 requests per second it
# sustains (closed loop), then loads it in an open loop at 25%, 50% and 75%
# of that rate and records p50, p99 and p99.9 of the latency measured from
# each request's intended send time (idgen-loadtest --rate). Results go to
# $OUT/results.jsonl (one idgen-loadtest --json object per run), the
# machine to $OUT/machine.txt, the table to $OUT/latency.md and, when
# matplotlib is there, the curve to $OUT/latency.png. The table also gives
# the CPU time per request of the server and the load tool, the cores
# anything else used meanwhile and how many server threads, on average,
# were runnable but waiting for a CPU: on a machine with cores to spare the
# last two stay near zero.
#
# Usage: scripts/bench/latency.sh
# Settings (environment):
#   OUT           output directory (default docs/benchmarks/latency)
#   MAX_CONNS     connections of the closed loop that finds the maximum
#                 rate (default 8: where the throughput levels off on
#                 2 cores, see docs/benchmarks.md)
#   MAX_DURATION  measured time of that run (default 10s)
#   LEVELS        open-loop rates in percent of the maximum (default
#                 "25 50 75")
#   OPEN_CONNS    connections of the open loop (default 64; requests go out
#                 on whichever is free, so it must cover the requests in
#                 flight at the tail: rate × p99.9 latency)
#   DURATION      measured time of each open-loop run (default 30s)
#   WARMUP        unmeasured load before each run (default 3s)
#   REPEAT        rounds over the levels (default 1); the maximum is
#                 measured again at the start of each round
#   PYTHON        a Python 3 with matplotlib for the plot (default
#                 /usr/bin/python3; skipped when it cannot import it)
#
# Run it on a quiet machine: the load tool and the server share the
# machine's cores, and anything else running adds to the latencies.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-$root/docs/benchmarks/latency}
max_conns=${MAX_CONNS:-8}
max_duration=${MAX_DURATION:-10s}
levels=${LEVELS:-"25 50 75"}
open_conns=${OPEN_CONNS:-64}
duration=${DURATION:-30s}
warmup=${WARMUP:-3s}
repeat=${REPEAT:-1}
python=${PYTHON:-/usr/bin/python3}

# shellcheck source=lib.sh
. "$here/lib.sh"
bench_start
bench_record "settings: MAX_CONNS=$max_conns MAX_DURATION=$max_duration LEVELS=\"$levels\" OPEN_CONNS=$open_conns DURATION=$duration WARMUP=$warmup REPEAT=$repeat"

# load LABEL ARGS...: one measured run against idgen, appended to
# results.jsonl.
load() {
	local label=$1
	shift
	"$tmp/idgen-loadtest" --quiet --json --label "$label" --url "$srv" --count 1 --warmup "$warmup" --server-pid "$srv_pid" "$@" >>"$results"
	tail -n 1 "$results" | jq -r '"\(.label): \(.requests_per_s|floor) req/s, p50 \(.latency_ms.p50) ms, p99 \(.latency_ms.p99) ms, p99.9 \(.latency_ms["p99.9"]) ms, errors \(.errors), unsent \(.unsent // 0)"' >&2
}

for round in $(seq "$repeat"); do
	if [ "$repeat" -gt 1 ]; then
		log "round $round of $repeat"
	fi
	load max --conns "$max_conns" --duration "$max_duration"
	max=$(tail -n 1 "$results" | jq '.requests_per_s')
	for level in $levels; do
		rate=$(jq -n --argjson max "$max" --argjson level "$level" '$max * $level / 100 | floor')
		load "open-$level" --rate "$rate" --conns "$open_conns" --duration "$duration"
	done
done
echo "loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"

# The table: one row per run, in run order.
jq -rs '
  def f(x): (x * 100 | round) / 100;
  def others: if .machine_busy_s then ([0, (.machine_busy_s - .server.cpu_s - .client_cpu_s) / .duration_s] | max | f(.)) else "–" end;
  def runq: if .server.runq_wait_s then f(.server.runq_wait_s / .duration_s) else "–" end;
  "| run | rate asked (req/s) | achieved (req/s) | p50 (ms) | p99 (ms) | p99.9 (ms) | max (ms) | send lag p99 (ms) | service p99 (ms) | unsent | errors | server CPU µs/req | load tool CPU µs/req | other load (cores) | server threads waiting for a CPU |",
  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  (.[] | "| \(.label) (\(.mode), \(.conns) conns) | \(if .rate then (.rate|floor) else "–" end) | \(.requests_per_s|floor) | \(f(.latency_ms.p50)) | \(f(.latency_ms.p99)) | \(f(.latency_ms["p99.9"])) | \(f(.latency_ms.max)) | \(if .send_lag_ms then f(.send_lag_ms.p99) else "–" end) | \(if .service_ms then f(.service_ms.p99) else "–" end) | \(.unsent // 0) | \(.errors) | \(1e6 * .server.cpu_s / .requests | floor) | \(1e6 * .client_cpu_s / .requests | floor) | \(others) | \(runq) |")
' "$results" >"$out/latency.md"
{
	echo
	jq -rs '
	  [.[] | select(.label == "open-50")] as $half
	  | if ($half | length) == 0 then "No run at 50% of the maximum (LEVELS)."
	    else ($half | map(.latency_ms.p99) | sort | .[length / 2 | floor]) as $p99
	    | "p99 at 50% of the maximum: \(($p99 * 1000 | round) / 1000) ms (budget: under 1 ms): \(if $p99 < 1 then "met" else "missed" end)."
	    end
	' "$results"
} >>"$out/latency.md"
cat "$out/latency.md" >&2

if "$python" -c 'import matplotlib' 2>/dev/null; then
	"$python" "$here/plot_latency.py" "$results" "$out/latency.png"
	log "wrote $results, $out/latency.md and $out/latency.png"
else
	log "wrote $results and $out/latency.md ($python has no matplotlib: no plot)"
fi
