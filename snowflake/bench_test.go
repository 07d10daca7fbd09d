package snowflake

import (
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
)

// reportCap adds CPU-ns/op, the CPU time as a share of the wall time
// (CPU%wall) and the share of the layout's cap reached (%cap): the default
// layout allows 4,096 IDs per millisecond, 244.14 ns per ID.
func reportCap(b *testing.B, cpu0 time.Duration, start time.Time, ids int) {
	elapsed := time.Since(start)
	cpu := testkit.ProcessCPU(b) - cpu0
	b.ReportMetric(float64(cpu)/float64(ids), "CPU-ns/op")
	b.ReportMetric(100*float64(cpu)/float64(elapsed), "CPU%wall")
	capNS := float64(time.Millisecond) / float64(DefaultLayout().MaxSequence()+1)
	b.ReportMetric(100*capNS*float64(ids)/float64(elapsed), "%cap")
}

func BenchmarkNext(b *testing.B) {
	g := mustGenerator(b, Settings{})
	b.ReportAllocs()
	cpu0, start := testkit.ProcessCPU(b), time.Now()
	for b.Loop() {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
	reportCap(b, cpu0, start, b.N)
}

func BenchmarkNextParallel(b *testing.B) {
	g := mustGenerator(b, Settings{})
	b.ReportAllocs()
	cpu0, start := testkit.ProcessCPU(b), time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Next(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportCap(b, cpu0, start, b.N)
}

// BenchmarkNextN1000 reports per ID: one op is one ID of batches of 1,000.
func BenchmarkNextN1000(b *testing.B) {
	g := mustGenerator(b, Settings{})
	buf := make([]ID, 0, 1000)
	b.ReportAllocs()
	cpu0, start := testkit.ProcessCPU(b), time.Now()
	ids := 0
	for b.Loop() {
		var err error
		if buf, err = g.NextN(buf[:0], 1000); err != nil {
			b.Fatal(err)
		}
		ids += len(buf)
	}
	b.ReportMetric(float64(time.Since(start))/float64(ids), "ns/id")
	reportCap(b, cpu0, start, ids)
}

// BenchmarkNextUncapped measures the cost of issuing without the sequence
// cap: a layout with 22 sequence bits never waits.
func BenchmarkNextUncapped(b *testing.B) {
	g := mustGenerator(b, Settings{Layout: Layout{TimeBits: 41, SequenceBits: 22, Epoch: DefaultEpoch}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextUncappedParallel is BenchmarkNextUncapped from GOMAXPROCS
// goroutines: the cost of issuing when callers contend for the state.
func BenchmarkNextUncappedParallel(b *testing.B) {
	g := mustGenerator(b, Settings{Layout: Layout{TimeBits: 41, SequenceBits: 22, Epoch: DefaultEpoch}})
	b.ReportAllocs()
	cpu0 := testkit.ProcessCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Next(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(testkit.ProcessCPU(b)-cpu0)/float64(b.N), "CPU-ns/op")
}

// BenchmarkAppendEncoded reports the cost of writing one 63-bit ID in each
// form, as GET /ids does per ID.
func BenchmarkAppendEncoded(b *testing.B) {
	for _, f := range []Format{FormatDecimal, FormatBase32, FormatBase62, FormatHex} {
		b.Run(f.String(), func(b *testing.B) {
			buf := make([]byte, 0, 32)
			id := ID(119830431582389226)
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendEncoded(buf[:0], id, f, 63)
			}
		})
	}
}
