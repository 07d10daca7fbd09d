package etcd

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/postgres"
	"github.com/idgen-project/idgen/internal/testkit"
)

// The store benchmarks run etcd (the three-member test cluster) and
// PostgreSQL (IDGEN_TEST_POSTGRES_DSN or a container) side by side in one
// run, so that their figures are taken on the same machine at the same
// time:
//
//	go test -run '^$' -bench 'HotNamespace|Claims' -benchtime 5s ./allocator/etcd/

// benchNodes is how many stores (idgen nodes) share the work.
const benchNodes = 4

// benchStores opens benchNodes stores of the kind on one fresh database or
// prefix.
func benchStores(b *testing.B, kind string) []allocator.Store {
	b.Helper()
	var open func() allocator.Store
	switch kind {
	case "etcd":
		dsn := testkit.EtcdDSN(b)
		open = func() allocator.Store { return openDSN(b, dsn) }
	case "postgres":
		dsn := testkit.Postgres(b)
		open = func() allocator.Store {
			s, err := postgres.Open(b.Context(), dsn)
			if err != nil {
				b.Fatalf("open postgres: %v", err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}
		first := open().(*postgres.Store)
		p, err := first.Migrations()
		if err != nil {
			b.Fatalf("migrations: %v", err)
		}
		if _, err := p.Up(b.Context()); err != nil {
			b.Fatalf("migrate: %v", err)
		}
	}
	stores := make([]allocator.Store, benchNodes)
	for i := range stores {
		stores[i] = open()
	}
	return stores
}

// BenchmarkHotNamespace measures range fetches per second on one namespace:
// 16 clients on 4 nodes each fetch ranges of 100 as fast as they can.
func BenchmarkHotNamespace(b *testing.B) {
	const clients = 16
	for _, kind := range []string{"etcd", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			stores := benchStores(b, kind)
			if _, err := stores[0].CreateNamespace(b.Context(), allocator.Namespace{Name: "hot", Step: 100, MinStep: 1, MaxStep: 1000,
				Mode: allocator.ModeBuffered, Fallback: allocator.FallbackNone}); err != nil {
				b.Fatalf("CreateNamespace: %v", err)
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			b.ResetTimer()
			start := time.Now()
			for c := range clients {
				s := stores[c%len(stores)]
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						if _, err := s.FetchSegment(b.Context(), "hot", 100); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatalf("FetchSegment: %v", err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "fetches/s")
			reportConflicts(b, stores, b.N)
		})
	}
}

// BenchmarkClaims measures how fast 32 keepers on 4 nodes settle on a pool
// of 8 worker IDs: one round is 32 concurrent claims of a fresh pool, of
// which 8 succeed and 24 find it full.
func BenchmarkClaims(b *testing.B) {
	const (
		keepers = 32
		pool    = 8
	)
	for _, kind := range []string{"etcd", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			stores := benchStores(b, kind)
			b.ResetTimer()
			start := time.Now()
			for round := range b.N {
				var (
					wg  sync.WaitGroup
					won atomic.Int64
					bad atomic.Pointer[error]
				)
				for k := range keepers {
					s := stores[k%len(stores)]
					wg.Go(func() {
						_, err := s.Claim(b.Context(), allocator.ClaimRequest{
							DatacenterID: int64(round), MinWorkerID: 0, MaxWorkerID: pool - 1,
							Holder: fmt.Sprintf("keeper-%02d", k), TTL: time.Minute,
						})
						switch {
						case err == nil:
							won.Add(1)
						case !errors.Is(err, allocator.ErrNoWorkerAvailable):
							bad.Store(&err)
						}
					})
				}
				wg.Wait()
				if p := bad.Load(); p != nil {
					b.Fatalf("round %d: Claim: %v", round, *p)
				}
				if got := won.Load(); got != pool {
					b.Fatalf("round %d: %d claims succeeded, want %d", round, got, pool)
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N*pool)/elapsed.Seconds(), "claims/s")
			b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/round")
			reportConflicts(b, stores, b.N)
		})
	}
}

// reportConflicts reports the transactions each store ran again per
// operation (allocator.RetryCounter): etcd's failed compares, PostgreSQL's
// serialization failures.
func reportConflicts(b *testing.B, stores []allocator.Store, ops int) {
	var n int64
	for _, s := range stores {
		if rc, ok := s.(allocator.RetryCounter); ok {
			n += rc.SerializationRetries()
		}
	}
	b.ReportMetric(float64(n)/float64(ops), "retries/op")
}
