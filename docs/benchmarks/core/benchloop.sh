#!/bin/bash
# Alternates old and new test binaries, one run each per round, so that both see the same load.
. /root/testenv.sh
cd /tmp/core23b
H='^Benchmark(IDsCount1|IDsCount1RequestID|IDsCount1Tokens|IDsCount1000|IDsNamespace|BareEcho|IDsCount1RateLimit|IDsCount1TokensRateLimit|IDsCount1Tracing|HTTPLoopback)$'
S='^Benchmark(Next|NextParallel|NextN1000|NextUncapped|NextUncappedParallel|AtomicInt64Add)$'
A='^Benchmark(SegmentDrawBatch100|SegmentDrawParallel|SegmentDrawLatency)$'
rm -f old.*.txt new.*.txt
for i in $(seq 1 10); do
  for v in old new; do
    ./$v.httpapi.test -test.run '^$' -test.bench "$H" -test.benchmem -test.benchtime 1s >> $v.httpapi.txt 2>&1
    ./$v.snowflake.test -test.run '^$' -test.bench "$S" -test.benchmem -test.benchtime 1s >> $v.snowflake.txt 2>&1
    ./$v.allocator.test -test.run '^$' -test.bench "$A" -test.benchmem -test.benchtime 1s >> $v.allocator.txt 2>&1
  done
  echo "round $i done $(date +%T)" >> progress.txt
done
echo done >> progress.txt
