package allocator

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
)

// benchSegments returns a Segments on a fake store whose namespace "orders"
// has a range large enough that a benchmark never runs it dry, warmed up
// (first range fetched, prefetch done).
func benchSegments(b *testing.B) *Segments {
	b.Helper()
	store := newFakeSegmentStore(Namespace{Name: "orders", Step: 1 << 40})
	s := mustSegments(b, store, SegmentSettings{})
	b.Cleanup(func() { _ = s.Close(context.Background()) })
	for range 2 {
		if _, err := DrawOne(context.Background(), s, "orders"); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkAtomicInt64Add is the baseline: the cost of the one atomic add a
// warm draw must make.
func BenchmarkAtomicInt64Add(b *testing.B) {
	b.ReportAllocs()
	var n atomic.Int64
	for b.Loop() {
		n.Add(1)
	}
}

// BenchmarkSegmentDraw draws single IDs by namespace name from a warm
// buffer into a reused Batch, as the core does.
func BenchmarkSegmentDraw(b *testing.B) {
	s := benchSegments(b)
	ctx := context.Background()
	var out Batch
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Draw(ctx, "orders", 1, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSegmentDrawBatch100 draws batches of 100 into a reused Batch.
func BenchmarkSegmentDrawBatch100(b *testing.B) {
	s := benchSegments(b)
	ctx := context.Background()
	var out Batch
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Draw(ctx, "orders", 100, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSegmentDrawParallel draws single IDs by name from every P at once
// (all from one namespace: one contended counter).
func BenchmarkSegmentDrawParallel(b *testing.B) {
	s := benchSegments(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var out Batch
		for pb.Next() {
			if err := s.Draw(ctx, "orders", 1, &out); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkSegmentDrawLatency measures the latency of single draws while
// ranges switch, each fetch taking 20 ms in the fake store. The step starts
// at 1,000 and grows by the dynamic step to 2^22 during the warm-up; the
// timed draws then switch ranges several times. It reports p50, p99 and
// p99.9 of the draw latency in nanoseconds, and the number of switches.
func BenchmarkSegmentDrawLatency(b *testing.B) {
	const maxStep = 1 << 22
	store := newFakeSegmentStore(Namespace{Name: "orders", Step: 1000, MinStep: 1000, MaxStep: maxStep})
	store.setLatency(20 * time.Millisecond)
	s := mustSegments(b, store, SegmentSettings{})
	defer func() { _ = s.Close(context.Background()) }()
	BenchSwitchLatency(b, s, "orders", maxStep, func() int64 {
		_, fetches, _ := store.counts()
		return int64(fetches)
	})
}

// BenchSwitchLatency times b.N single draws of namespace name of s, once the dynamic step has grown to maxStep, and
// reports p50, p99, p99.9 and the maximum of their latency in nanoseconds,
// and the fetches made while timing as fetches counts them. It is the
// body of BenchmarkSegmentDrawLatency and, exported for package
// allocator_test, of BenchmarkSegmentIntegrationDrawLatency.
func BenchSwitchLatency(b *testing.B, s *Segments, name string, maxStep int64, fetches func() int64) {
	b.Helper()
	ctx := context.Background()
	var out Batch
	for st, _ := s.NamespaceStats(name); st.Step < maxStep; st, _ = s.NamespaceStats(name) {
		if err := s.Draw(ctx, name, 1, &out); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, b.N)
	before := fetches()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := s.Draw(ctx, name, 1, &out); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(start)
	}
	b.StopTimer()
	after := fetches()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))]) }
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
	b.ReportMetric(pct(0.999), "p99.9-ns")
	b.ReportMetric(float64(lat[len(lat)-1]), "max-ns")
	b.ReportMetric(float64(after-before), "fetches")
}

// BenchmarkStrictDrawParallel draws single IDs of a strict namespace from
// 64 goroutines, whose draws queue behind the fetch in flight and share
// the next one; the fake store answers each fetch after 200 µs, about a
// PostgreSQL round trip. cpu-ns/op is the process's CPU per draw: the
// queue's cost, with the fake store's.
func BenchmarkStrictDrawParallel(b *testing.B) {
	store := newFakeSegmentStore(Namespace{Name: "ledger", Mode: ModeStrict, Step: 1})
	store.setLatency(200 * time.Microsecond)
	s := mustSegments(b, store, SegmentSettings{})
	b.Cleanup(func() { _ = s.Close(context.Background()) })
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(32)
	cpu := testkit.ProcessCPU(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var out Batch
		for pb.Next() {
			if err := s.Draw(ctx, "ledger", 1, &out); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(testkit.ProcessCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
}
