package client

import (
	"context"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
)

// benchGenerator is a Generator on a broker of its own (a node on SQLite
// in this process), with a long lease so that heartbeats stay rare.
func benchGenerator(b *testing.B) *Generator {
	b.Helper()
	node := testserver.MustStart(b, testserver.Options{
		Tokens: brokerTokens,
		Keeper: allocator.KeeperSettings{TTL: 5 * time.Second, WorkerIDs: &WorkerRange{Min: 0, Max: 0}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := NewGenerator(ctx, node.URL, GeneratorOptions{Token: leaseToken, Holder: "bench", TTL: 60 * time.Second})
	if err != nil {
		b.Fatalf("NewGenerator: %v", err)
	}
	b.Cleanup(func() { _ = g.Close(context.Background()) })
	return g
}

// reportCap adds CPU-ns/op (the process's CPU time per ID, the broker's
// idle keeper and the generator's heartbeats included), CPU%wall and the
// share of the layout's physical cap reached (%cap): 2^sequence_bits IDs
// per millisecond, 4,096,000 per second with the default layout.
func reportCap(b *testing.B, g *Generator, cpu0 time.Duration, start time.Time, ids int) {
	elapsed := time.Since(start)
	cpu := testkit.ProcessCPU(b) - cpu0
	perMS := float64(g.Layout().MaxSequence() + 1)
	b.ReportMetric(float64(cpu)/float64(ids), "CPU-ns/op")
	b.ReportMetric(100*float64(cpu)/float64(elapsed), "CPU%wall")
	b.ReportMetric(100*float64(ids)/(perMS*float64(elapsed)/float64(time.Millisecond)), "%cap")
}

// BenchmarkGeneratorNext is Generator.Next in a loop: one ID per call,
// through the client's API.
func BenchmarkGeneratorNext(b *testing.B) {
	g := benchGenerator(b)
	b.ReportAllocs()
	cpu0, start := testkit.ProcessCPU(b), time.Now()
	for b.Loop() {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
	reportCap(b, g, cpu0, start, b.N)
}

// BenchmarkGeneratorNextN1000 is Generator.NextN in batches of 1,000 into
// one reused slice; one op is one ID.
func BenchmarkGeneratorNextN1000(b *testing.B) {
	g := benchGenerator(b)
	buf := make([]int64, 0, 1000)
	b.ReportAllocs()
	cpu0, start := testkit.ProcessCPU(b), time.Now()
	ids := 0
	for ids < b.N {
		var err error
		if buf, err = g.NextN(buf[:0], min(1000, b.N-ids)); err != nil {
			b.Fatal(err)
		}
		ids += len(buf)
	}
	reportCap(b, g, cpu0, start, ids)
}
