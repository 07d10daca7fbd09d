package metrics_test

import (
	"bufio"
	"context"
	"math"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

// fixedClock is a wall clock that stands still at t.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time        { return c.t }
func (c fixedClock) Sleep(d time.Duration) {}

// scrape returns the samples of the node's GET /metrics, keyed by the
// series as written (name and labels).
func scrape(t *testing.T, s *testserver.Server) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: got %d, want 200", rec.Code)
	}
	samples := map[string]float64{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		samples[line[:i]] = v
	}
	return samples
}

// TestMetricLayoutRemaining checks idgen_layout_remaining_seconds against
// the layout's end for clocks at known instants: it is the time from the
// millisecond the clock is in to the layout's last millisecond, for the
// default layout and for one whose lifetime is longer than a
// time.Duration can hold (50 time bits: 35,000 years).
func TestMetricLayoutRemaining(t *testing.T) {
	def := snowflake.DefaultLayout()
	long := snowflake.Layout{TimeBits: 50, DatacenterBits: 3, WorkerBits: 3, SequenceBits: 7, Epoch: def.Epoch}
	last := func(l snowflake.Layout) time.Time { return l.End().Add(-time.Millisecond) } // the last instant IDs can carry
	twoYears := 2 * 365 * 24 * time.Hour
	for _, tc := range []struct {
		name   string
		layout snowflake.Layout
		now    time.Time
	}{
		{"at the epoch", def, def.Epoch},
		{"1.5 s after the epoch", def, def.Epoch.Add(1500 * time.Millisecond)},
		{"today", def, time.Now()},
		{"two years before the end", def, last(def).Add(-twoYears)},
		{"a day under two years before the end", def, last(def).Add(-twoYears + 24*time.Hour + 300*time.Microsecond)},
		{"in the last millisecond", def, last(def).Add(300 * time.Microsecond)},
		{"past the end", def, def.End().Add(time.Hour)},
		{"50 time bits, today", long, time.Now()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testserver.MustStart(t, testserver.Options{NoWait: true, Clock: fixedClock{tc.now}, Keeper: allocator.KeeperSettings{Layout: tc.layout}})
			got, ok := scrape(t, s)["idgen_layout_remaining_seconds"]
			if !ok {
				t.Fatal("metrics lack idgen_layout_remaining_seconds")
			}
			// Whole milliseconds, from the one the clock is in.
			want := max(float64(last(tc.layout).UnixMilli()-tc.now.UnixMilli())/1000, 0)
			if math.IsNaN(got) || math.Abs(got-want) > want*1e-15 {
				t.Errorf("layout %v, clock at %s: got %v s, want %v s", tc.layout, tc.now.Format(time.RFC3339Nano), got, want)
			}
		})
	}
}

// TestMetricWorkerPool checks idgen_worker_pool_size and _held against a
// lease table with leases inside and outside the node's pool, live,
// expired and released, on every store: expiry is the store's time.
func TestMetricWorkerPool(t *testing.T) {
	testserver.Parallel(t, testserver.StoreDialects, testMetricWorkerPool)
}

func testMetricWorkerPool(t *testing.T, dialect string) {
	ctx := context.Background()
	s := testserver.MustStart(t, testserver.Options{Dialect: dialect, Keeper: allocator.KeeperSettings{WorkerIDs: &allocator.WorkerRange{Min: 4, Max: 7}}})
	claim := func(holder string, dc, worker int64, ttl time.Duration) allocator.Lease {
		t.Helper()
		res, err := s.Store().Claim(ctx, allocator.ClaimRequest{
			DatacenterID: dc, MinWorkerID: worker, MaxWorkerID: worker, Holder: holder, TTL: ttl,
		})
		if err != nil {
			t.Fatalf("claim %d/%d for %s: %v", dc, worker, holder, err)
		}
		return res.Lease
	}
	own := s.Keeper().Status().Lease.WorkerID
	var others []int64
	for w := int64(4); w <= 7; w++ {
		if w != own {
			others = append(others, w)
		}
	}
	claim("other-live", 0, others[0], time.Minute)       // counted
	claim("other-short", 0, others[1], time.Millisecond) // expired by the scrape
	rel := claim("other-released", 0, others[2], time.Minute)
	if _, err := s.Store().Release(ctx, allocator.ReleaseRequest{Key: rel.LeaseKey, Holder: "other-released",
		FencingVersion: rel.FencingVersion}); err != nil {
		t.Fatalf("release: %v", err)
	}
	claim("outside-pool", 0, 3, time.Minute)
	claim("other-datacenter", 1, 5, time.Minute)
	time.Sleep(1100 * time.Millisecond) // past the short lease's expiry, on a store with whole-second times too

	samples := scrape(t, s)
	series := `{datacenter="0",workers="4-7"}`
	for _, tc := range []struct {
		name string
		want float64
	}{
		{"idgen_worker_pool_size" + series, 4},
		{"idgen_worker_pool_held" + series, 2}, // this node's and other-live
	} {
		if got, ok := samples[tc.name]; !ok || got != tc.want {
			t.Errorf("%s: got %v (present %v), want %v", tc.name, got, ok, tc.want)
		}
	}
}
