package bench

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bwsnowflake "github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake/v2"

	"github.com/idgen-project/idgen/snowflake"
)

// A generator under comparison: a name for the sub-benchmark, the most IDs
// its layout allows per time unit, and a constructor of its Next.
type impl struct {
	name string
	// capPerUnit IDs per unit of time at most: the sequence's range.
	capPerUnit float64
	unit       time.Duration
	newNext    func(tb testing.TB) func() (int64, error)
}

// impls lists the generators compared. idgen and bwmarrin/snowflake share the
// classic 41/10/12 layout (4,096 IDs per millisecond); Sonyflake has 8
// sequence bits per time unit, 10 ms by default (25,600 IDs/s) and 1 ms at
// its finest (256,000 IDs/s).
func impls() []impl {
	return []impl{
		{name: "idgen", capPerUnit: 4096, unit: time.Millisecond, newNext: newIdgen},
		{name: "bwmarrin", capPerUnit: 4096, unit: time.Millisecond, newNext: newBwmarrin},
		{name: "sonyflake-1ms", capPerUnit: 256, unit: time.Millisecond, newNext: newSonyflake(time.Millisecond)},
		{name: "sonyflake-10ms", capPerUnit: 256, unit: 10 * time.Millisecond, newNext: newSonyflake(10 * time.Millisecond)},
	}
}

func newIdgen(tb testing.TB) func() (int64, error) {
	g, err := snowflake.NewGenerator(snowflake.Settings{WorkerID: 1})
	if err != nil {
		tb.Fatalf("idgen NewGenerator: %v", err)
	}
	return func() (int64, error) {
		id, err := g.Next()
		return int64(id), err
	}
}

func newBwmarrin(tb testing.TB) func() (int64, error) {
	n, err := bwsnowflake.NewNode(1)
	if err != nil {
		tb.Fatalf("bwmarrin NewNode: %v", err)
	}
	return func() (int64, error) { return int64(n.Generate()), nil }
}

func newSonyflake(unit time.Duration) func(tb testing.TB) func() (int64, error) {
	return func(tb testing.TB) func() (int64, error) {
		sf, err := sonyflake.New(sonyflake.Settings{
			TimeUnit:  unit,
			MachineID: func() (int, error) { return 1, nil },
		})
		if err != nil {
			tb.Fatalf("sonyflake New: %v", err)
		}
		return sf.NextID
	}
}

// cpuTime returns the CPU time (user + system) the process has used, from
// getrusage(2), as snowflake/bench_test.go measures it.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// meter reports, for ids IDs issued since it was started, the CPU time per
// ID (CPU-ns/op) and the share of the generator's cap reached (%cap).
type meter struct {
	cpu0  time.Duration
	start time.Time
}

func startMeter(b *testing.B) meter { return meter{cpu0: cpuTime(b), start: time.Now()} }

// report reports the metrics; perID names the CPU time per ID "CPU-ns/id"
// instead of "CPU-ns/op", for benchmarks whose op is a batch.
func (m meter) report(b *testing.B, in impl, ids int, perID bool) {
	elapsed := time.Since(m.start)
	if ids == 0 || elapsed <= 0 {
		return
	}
	unit := "CPU-ns/op"
	if perID {
		unit = "CPU-ns/id"
		b.ReportMetric(float64(elapsed)/float64(ids), "ns/id")
	}
	b.ReportMetric(float64(cpuTime(b)-m.cpu0)/float64(ids), unit)
	capNS := float64(in.unit) / in.capPerUnit
	b.ReportMetric(100*capNS*float64(ids)/float64(elapsed), "%cap")
}

// checkIncreasing fails the benchmark when a generator hands out an ID that
// is not above the one before: a benchmark of a broken generator is void.
func checkIncreasing(b *testing.B, prev *int64, id int64) {
	if id <= *prev {
		b.Fatalf("ID %d not above the one before, %d", id, *prev)
	}
	*prev = id
}

// BenchmarkNext issues one ID per op from one goroutine.
func BenchmarkNext(b *testing.B) {
	for _, in := range impls() {
		b.Run("impl="+in.name, func(b *testing.B) {
			next := in.newNext(b)
			var prev int64
			b.ReportAllocs()
			m := startMeter(b)
			for b.Loop() {
				id, err := next()
				if err != nil {
					b.Fatal(err)
				}
				checkIncreasing(b, &prev, id)
			}
			m.report(b, in, b.N, false)
		})
	}
}

// BenchmarkNextParallel issues one ID per op from GOMAXPROCS goroutines
// sharing one generator.
func BenchmarkNextParallel(b *testing.B) {
	for _, in := range impls() {
		b.Run("impl="+in.name, func(b *testing.B) {
			next := in.newNext(b)
			b.ReportAllocs()
			m := startMeter(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := next(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			m.report(b, in, b.N, false)
		})
	}
}

// BenchmarkBatch1000 issues batches of 1,000 IDs: one op is a batch, and
// ns/id, CPU-ns/id and %cap are per ID. idgen reserves a millisecond's IDs
// with one atomic operation (NextN); the others have no batch call, so a
// batch is 1,000 calls.
func BenchmarkBatch1000(b *testing.B) {
	const batch = 1000
	b.Run("impl=idgen", func(b *testing.B) {
		in := impls()[0]
		g, err := snowflake.NewGenerator(snowflake.Settings{WorkerID: 1})
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]snowflake.ID, 0, batch)
		var prev int64
		b.ReportAllocs()
		m := startMeter(b)
		ids := 0
		for b.Loop() {
			if buf, err = g.NextN(buf[:0], batch); err != nil {
				b.Fatal(err)
			}
			checkIncreasing(b, &prev, int64(buf[0]))
			prev = int64(buf[len(buf)-1])
			ids += len(buf)
		}
		m.report(b, in, ids, true)
	})
	for _, in := range impls()[1:] {
		if in.unit > time.Millisecond {
			continue // 1,000 IDs take 40 ms at Sonyflake's default cap: nothing to learn
		}
		b.Run("impl="+in.name, func(b *testing.B) {
			next := in.newNext(b)
			buf := make([]int64, 0, batch)
			var prev int64
			b.ReportAllocs()
			m := startMeter(b)
			ids := 0
			for b.Loop() {
				buf = buf[:0]
				for range batch {
					id, err := next()
					if err != nil {
						b.Fatal(err)
					}
					buf = append(buf, id)
				}
				checkIncreasing(b, &prev, buf[0])
				prev = buf[len(buf)-1]
				ids += len(buf)
			}
			m.report(b, in, ids, true)
		})
	}
}

// BenchmarkBatch1000Parallel issues batches of 1,000 idgen IDs from many
// goroutines at once, as the HTTP server does under GET /ids?count=1000 with
// many connections: one op is a batch, the metrics per ID as in
// BenchmarkBatch1000.
func BenchmarkBatch1000Parallel(b *testing.B) {
	const batch = 1000
	in := impls()[0]
	for _, goroutines := range []int{4, 16, 64} {
		b.Run(fmt.Sprintf("impl=idgen/goroutines=%d", goroutines), func(b *testing.B) {
			g, err := snowflake.NewGenerator(snowflake.Settings{WorkerID: 1})
			if err != nil {
				b.Fatal(err)
			}
			var ids atomic.Int64
			b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			m := startMeter(b)
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]snowflake.ID, 0, batch)
				for pb.Next() {
					var err error
					if buf, err = g.NextN(buf[:0], batch); err != nil {
						b.Error(err)
						return
					}
					ids.Add(int64(len(buf)))
				}
			})
			m.report(b, in, int(ids.Load()), true)
		})
	}
}
