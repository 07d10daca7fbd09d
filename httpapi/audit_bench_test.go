package httpapi_test

import (
	"testing"
	"time"

	"github.com/idgen-project/idgen/audit"
)

// BenchmarkAuditIDs is GET /ids (count=1 and count=1000) through the
// node's handler with the audit trail off and on (JSON lines to a file,
// heartbeats every 333 ms): audit=on with the default block interval (a
// block record a second), audit=busy with one every millisecond, as
// sub-benchmarks for benchstat to compare:
//
//	go test -run '^$' -bench 'Audit' -count 8 ./audit/ ./httpapi/ > audit.txt
//	benchstat -col /audit audit.txt
//
// CPU-ns/op is the whole process's CPU time per request, the recorder's
// goroutine and the sink's writes included.
func BenchmarkAuditIDs(b *testing.B) {
	for _, target := range []struct{ name, path string }{{"count=1", "/ids"}, {"count=1000", "/ids?count=1000"}} {
		for _, mode := range []struct {
			name   string
			blocks time.Duration // 0: audit off
		}{{"off", 0}, {"on", audit.DefaultBlockInterval}, {"busy", time.Millisecond}} {
			b.Run(target.name+"/audit="+mode.name, func(b *testing.B) {
				o := envOptions{keeperTTL: time.Second}
				if mode.blocks > 0 {
					o.audit = benchAudit(b, mode.blocks)
				}
				e := newEnv(b, o)
				cpu0 := processCPU(b)
				benchHandler(b, e.h, target.path)
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "CPU-ns/op")
			})
		}
	}
}
