package audit_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
)

// The hot paths of ID issuance with the audit trail off and on, as
// sub-benchmarks audit=off and audit=on for benchstat to compare
// (docs/benchmarks.md, "The audit trail and the hot path"):
//
//	go test -run '^$' -bench 'Audit' -count 8 ./audit/ ./httpapi/ > audit.txt
//	benchstat -col /audit audit.txt
//
// With the audit on, the store is wrapped by audit.WrapStore and the
// recorder writes JSON lines to a file, with block records every
// millisecond (the most a node writes is one per second by default) and
// heartbeats every 100 ms, so that the recorder's work runs during the
// measurement. CPU-ns/op is the whole process's CPU time per op: the
// recorder's goroutine and the sink's writes included.

// auditModes are the sub-benchmarks' audit settings.
var auditModes = []struct {
	name string
	on   bool
}{{"audit=off", false}, {"audit=on", true}}

// benchStore returns a fresh SQLite store, wrapped by a running audit
// recorder writing JSON lines to a file when on.
func benchStore(b *testing.B, on bool) allocator.Store {
	b.Helper()
	var store allocator.Store = testserver.OpenStore(b, "sqlite")
	if !on {
		return store
	}
	sink, err := audit.OpenSink("file:"+filepath.Join(b.TempDir(), "audit.jsonl"), nil)
	if err != nil {
		b.Fatal(err)
	}
	rec, err := audit.New(sink, audit.RecorderSettings{Node: "bench", BlockInterval: time.Millisecond, FlushInterval: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	rec.Start()
	b.Cleanup(func() {
		if err := rec.Close(context.Background()); err != nil {
			b.Error(err)
		}
		if st := rec.Stats(); st.Recorded == 0 || st.Dropped != 0 {
			b.Errorf("audit recorder %+v: want events recorded, none dropped", st)
		}
	})
	return audit.WrapStore(store, rec)
}

// BenchmarkAuditKeeperNext: one Snowflake ID at a time from a node's
// keeper (allocator.Keeper.Next), which counts what it issues for the
// block records of its heartbeats. It runs at the layout's cap (4,096 IDs
// a millisecond), so ns/op is the cap's 244 ns; CPU-ns/op is what it costs.
func BenchmarkAuditKeeperNext(b *testing.B) {
	for _, m := range auditModes {
		b.Run(m.name, func(b *testing.B) {
			ctx := context.Background()
			k, err := allocator.NewKeeper(benchStore(b, m.on), allocator.KeeperSettings{Holder: "bench",
				WorkerIDs: &allocator.WorkerRange{Min: 0, Max: 3}, TTL: 2 * time.Second, Heartbeat: 100 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			if err := k.Start(ctx); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = k.Close(context.Background()) })
			for deadline := time.Now().Add(10 * time.Second); k.Ready() != nil; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatalf("keeper not ready after 10s: %v", k.Ready())
				}
			}
			b.ReportAllocs()
			cpu0 := testkit.ProcessCPU(b)
			for b.Loop() {
				if _, err := k.Next(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(testkit.ProcessCPU(b)-cpu0)/float64(b.N), "CPU-ns/op")
		})
	}
}

// BenchmarkAuditSegmentDraw: one ID at a time from a segment namespace
// (allocator.Segments.Draw into a reused Batch, as the core draws), with
// ranges of a million fetched in the background: each fetch is an audit
// event when the audit is on.
func BenchmarkAuditSegmentDraw(b *testing.B) {
	for _, m := range auditModes {
		b.Run(m.name, func(b *testing.B) {
			ctx := context.Background()
			store := benchStore(b, m.on)
			step := int64(1 << 20)
			ns, err := allocator.NamespaceSpec{Name: "orders", Step: &step, MinStep: &step, MaxStep: &step}.Namespace(0)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := store.CreateNamespace(ctx, ns); err != nil {
				b.Fatal(err)
			}
			s, err := allocator.NewSegments(store, allocator.SegmentSettings{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close(context.Background()) })
			var out allocator.Batch
			for range 2 { // the first range fetched, the prefetch started
				if err := s.Draw(ctx, "orders", 1, &out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			cpu0 := testkit.ProcessCPU(b)
			for b.Loop() {
				if err := s.Draw(ctx, "orders", 1, &out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(testkit.ProcessCPU(b)-cpu0)/float64(b.N), "CPU-ns/op")
		})
	}
}
