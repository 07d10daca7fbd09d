#!/usr/bin/env bash
# A/B: idgen without and with the GC default, against bare echo; count=1, 8 conns.
# The script as it was run for docs/benchmarks.md ("The garbage collector's
# target"). It expects three binaries built from the repository beforehand:
#   /tmp/idgen-base  go build -o /tmp/idgen-base ./cmd/idgen  (before 91c3608)
#   /tmp/idgen-gc    go build -o /tmp/idgen-gc ./cmd/idgen    (at or after it)
#   /tmp/loadtest    go build -o /tmp/loadtest ./cmd/idgen-loadtest
# R rounds (default 3) of D (default 10s) per server, the order rotated
# every round; with the GC default in the binary, GOGC=100 in the
# environment of idgen-gc gives the old behaviour as well.
set -u
R=${R:-3}; D=${D:-10s}
d=$(mktemp -d)
/tmp/idgen-base serve --dsn sqlite:$d/a.db --listen 127.0.0.1:18081 >$d/a.log 2>&1 & pa=$!
/tmp/idgen-gc serve --dsn sqlite:$d/b.db --listen 127.0.0.1:18082 >$d/b.log 2>&1 & pb=$!
/tmp/loadtest bare-echo --listen 127.0.0.1:18083 >$d/c.log 2>&1 & pc=$!
sleep 3
declare -A url=([base]=http://127.0.0.1:18081 [gc]=http://127.0.0.1:18082 [bare]=http://127.0.0.1:18083)
declare -A pid=([base]=$pa [gc]=$pb [bare]=$pc)
order=(base gc bare)
for r in $(seq 1 $R); do
  for k in "${order[@]}"; do
    /tmp/loadtest --url ${url[$k]} --conns 8 --count 1 --warmup 2s --duration $D --check-unique=false --server-pid ${pid[$k]} --json 2>/dev/null |
      python3 -c "import sys,json; j=json.load(sys.stdin); s=j.get('server') or {}; print('$r $k', round(j['requests_per_s']), 'p99', j['latency_ms']['p99'], 'server', s)"
  done
  order=("${order[@]:1}" "${order[0]}")
done
kill $pa $pb $pc
