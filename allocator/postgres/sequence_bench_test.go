package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
)

// BenchmarkSequenceReserve measures reservations of one number each on one
// node (sequence.Service over the PostgreSQL store), from 1 and 64
// concurrent callers: reservations per second, the 99th percentile of a
// reservation's latency, and the store round trips per reservation (below
// 1 when the Service combines callers). "direct" calls the store once per
// reservation, without combining, for comparison.
//
//	go test -run '^$' -bench BenchmarkSequenceReserve -benchtime 3000x ./allocator/postgres/
func BenchmarkSequenceReserve(b *testing.B) {
	for _, mode := range []string{"service", "direct"} {
		for _, callers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/callers=%d", mode, callers), func(b *testing.B) {
				s := openTest(b)
				seqs := s.Sequences()
				if _, err := seqs.CreateSequence(b.Context(), sequence.Sequence{Name: "bench", Format: "B{yyyy}-{seq:09}", Reset: sequence.ResetYearly}); err != nil {
					b.Fatal(err)
				}
				svc := sequence.NewService(seqs, sequence.Settings{})
				var ids atomic.Int64
				reserve := func(ctx context.Context) error {
					if mode == "service" {
						_, err := svc.Reserve(ctx, "bench", 1, "bench", "")
						return err
					}
					_, err := seqs.Reserve(ctx, "bench", []sequence.Request{{ID: fmt.Sprint("r", ids.Add(1)), Count: 1, Caller: "bench"}})
					return err
				}
				var (
					next atomic.Int64
					wg   sync.WaitGroup
					mu   sync.Mutex
					lat  = make([]time.Duration, 0, b.N)
					errs atomic.Int64
				)
				b.ResetTimer()
				start := time.Now()
				for range callers {
					wg.Go(func() {
						var mine []time.Duration
						for next.Add(1) <= int64(b.N) {
							t0 := time.Now()
							if err := reserve(b.Context()); err != nil {
								errs.Add(1)
								continue
							}
							mine = append(mine, time.Since(t0))
						}
						mu.Lock()
						lat = append(lat, mine...)
						mu.Unlock()
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				if n := errs.Load(); n > 0 {
					b.Fatalf("%d reservations failed", n)
				}
				slices.Sort(lat)
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "reservations/s")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				if mode == "service" {
					b.ReportMetric(float64(svc.RoundTrips())/float64(b.N), "trips/reservation")
				}
			})
		}
	}
}
