#!/bin/bash
# cpu.sh BIN BENCH N: CPU ns per op of BENCH (user+sys of N iterations minus 1 iteration)
bin=$1; bench=$2; n=${3:-2000000}
t() { /usr/bin/time -f "%U %S" $bin -test.run '^$' -test.bench "^$bench\$" -test.benchtime ${1}x >/dev/null 2>/tmp/core23b/t.$$; tail -1 /tmp/core23b/t.$$ | awk '{print $1+$2}'; }
a=$(t $n); b=$(t 1)
echo "$a $b" | awk -v n=$n '{printf "%.0f\n", ($1-$2)*1e9/n}'
