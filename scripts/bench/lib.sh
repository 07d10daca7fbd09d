# Shared by the scripts in scripts/bench (sourced, not run): building the
# binaries, starting a fresh idgen serve on SQLite and the bare echo
# baseline, recording the machine, and stopping them on exit. The caller
# sets root (the repository) and out (the output directory) first and calls
# bench_start, then bench_record.

pids=()

# bench_cleanup stops every process started here and removes $tmp.
bench_cleanup() {
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}

# bench_start is the start of every script: a scratch directory $tmp,
# removed on exit with every process started here, the output directory
# $out, the binaries, and a fresh idgen serve (start_idgen).
bench_start() {
	tmp=$(mktemp -d)
	trap bench_cleanup EXIT
	mkdir -p "$out"
	build_binaries
	start_idgen
}

# bench_record LINE...: writes what the figures are taken on (machine_info)
# and the LINEs (the script's settings) to $out/machine.txt, and empties
# $out/results.jsonl, named by results, for the runs to append to.
bench_record() {
	{
		machine_info
		printf '%s\n' "$@"
	} >"$out/machine.txt"
	results="$out/results.jsonl"
	: >"$results"
}

log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# wait_for FILE PATTERN: waits up to 30 s for a line matching the extended
# regular expression PATTERN in FILE and prints its first match.
wait_for() {
	local i m
	for i in $(seq 300); do
		if m=$(grep -Eo -m 1 "$2" "$1" 2>/dev/null); then
			echo "$m" | head -n 1
			return 0
		fi
		sleep 0.1
	done
	echo "$(basename "$0"): timed out waiting for /$2/ in $1:" >&2
	cat "$1" >&2
	return 1
}

# build_binaries builds idgen and idgen-loadtest into $tmp.
build_binaries() {
	log "building idgen and idgen-loadtest"
	(cd "$root" && go build -o "$tmp/idgen" ./cmd/idgen && go build -o "$tmp/idgen-loadtest" ./cmd/idgen-loadtest)
}

# start_idgen starts a fresh `idgen serve` on SQLite in $tmp with a
# namespace "bench", and sets srv (its URL), srv_pid and dsn.
start_idgen() {
	dsn="sqlite:$tmp/idgen.db"
	"$tmp/idgen" serve --dsn "$dsn" --listen 127.0.0.1:0 >"$tmp/serve.log" 2>&1 &
	srv_pid=$!
	pids+=("$srv_pid")
	srv="http://$(wait_for "$tmp/serve.log" 'msg="idgen serving" addr=[0-9.:]+' | sed 's/.*addr=//')"
	local i
	for i in $(seq 300); do
		curl -fsS "$srv/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fsS "$srv/readyz" >/dev/null
	"$tmp/idgen" namespaces create bench --dsn "$dsn" --description "load test" >&2
	log "idgen serving at $srv (pid $srv_pid)"
}

# start_bare starts the bare echo baseline and sets bare (its URL) and
# bare_pid.
start_bare() {
	"$tmp/idgen-loadtest" bare-echo --listen 127.0.0.1:0 >"$tmp/bare.log" 2>&1 &
	bare_pid=$!
	pids+=("$bare_pid")
	bare=$(wait_for "$tmp/bare.log" 'http://[0-9.:]+')
	log "bare echo serving at $bare (pid $bare_pid)"
}

# machine_info prints what the figures were taken on.
machine_info() {
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "nproc: $(nproc)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
	echo "go: $(go version)"
	echo "kernel: $(uname -sr)"
	echo "commit: $(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "loadavg before: $(cut -d' ' -f1-3 /proc/loadavg)"
}
