package httpapi_test

import (
	"testing"
	"time"
)

// BenchmarkAuditIDs is GET /ids (count=1 and count=1000) through the
// node's handler with the audit trail off and on (JSON lines to a file,
// block records every millisecond, heartbeats every 333 ms), as
// sub-benchmarks audit=off and audit=on for benchstat to compare:
//
//	go test -run '^$' -bench 'Audit' -count 8 ./audit/ ./httpapi/ > audit.txt
//	benchstat -col /audit audit.txt
//
// CPU-ns/op is the whole process's CPU time per request, the recorder's
// goroutine and the sink's writes included.
func BenchmarkAuditIDs(b *testing.B) {
	for _, target := range []struct{ name, path string }{{"count=1", "/ids"}, {"count=1000", "/ids?count=1000"}} {
		for _, on := range []bool{false, true} {
			name := target.name + "/audit=off"
			if on {
				name = target.name + "/audit=on"
			}
			b.Run(name, func(b *testing.B) {
				o := envOptions{keeperTTL: time.Second}
				if on {
					o.audit = benchAudit(b)
				}
				e := newEnv(b, o)
				cpu0 := processCPU(b)
				benchHandler(b, e.h, target.path)
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "CPU-ns/op")
			})
		}
	}
}
