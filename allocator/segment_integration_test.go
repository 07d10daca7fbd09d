package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/pressly/goose/v3"
	"github.com/rs/zerolog"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/etcd"
	"github.com/idgen-project/idgen/allocator/mysql"
	"github.com/idgen-project/idgen/allocator/postgres"
	"github.com/idgen-project/idgen/allocator/sqlite"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/snowflake"
)

// These tests run the segment allocator against the real stores. Postgres,
// MariaDB/MySQL and etcd are reached through a toxiproxy proxy run in this
// process on 127.0.0.1, which adds latency or cuts the database off (for
// etcd, the allocators' DSN names one member, behind the proxy); SQLite is
// a local file and has no proxy.

// segBackend is one kind of database.
type segBackend struct {
	name  string
	dsn   func(testing.TB) string
	open  func(ctx context.Context, dsn string) (segTestStore, error)
	proxy bool // reach it through toxiproxy
}

// segTestStore is what the tests need of a store.
type segTestStore interface {
	allocator.Store
	Migrations() (*goose.Provider, error)
}

var segBackends = []segBackend{
	{"postgres", testkit.Postgres, func(ctx context.Context, dsn string) (segTestStore, error) { return postgres.Open(ctx, dsn) }, true},
	{"mysql", testkit.MySQL, func(ctx context.Context, dsn string) (segTestStore, error) { return mysql.Open(ctx, dsn) }, true},
	{"sqlite", testkit.SQLite, func(ctx context.Context, dsn string) (segTestStore, error) { return sqlite.Open(ctx, dsn) }, false},
	{"etcd", testkit.EtcdDSN, func(ctx context.Context, dsn string) (segTestStore, error) { return etcd.Open(ctx, dsn) }, true},
}

// segEnv is a migrated database of its own for one test, and the DSN that
// allocators use (through the proxy when the backend has one).
type segEnv struct {
	backend segBackend
	admin   allocator.Store // direct connection, for setting up rows
	dsn     string
	proxy   *toxiproxy.Proxy // nil for SQLite
}

func newSegEnv(tb testing.TB, b segBackend) *segEnv {
	tb.Helper()
	ctx := context.Background()
	dsn := b.dsn(tb)
	admin, err := b.open(ctx, dsn)
	if err != nil {
		tb.Fatalf("open %s: %v", b.name, err)
	}
	tb.Cleanup(func() { _ = admin.Close() })
	p, err := admin.Migrations()
	if err != nil {
		tb.Fatalf("migrations: %v", err)
	}
	_, err = p.Up(ctx)
	_ = p.Close()
	if err != nil {
		tb.Fatalf("migrate up: %v", err)
	}
	env := &segEnv{backend: b, admin: admin, dsn: dsn}
	if b.proxy {
		u, err := url.Parse(dsn)
		if err != nil {
			tb.Fatalf("parse DSN: %v", err)
		}
		// An etcd DSN names every member: the proxy stands in front of the
		// first, and the allocators' DSN names only the proxy.
		upstream, _, _ := strings.Cut(u.Host, ",")
		server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
		env.proxy = toxiproxy.NewProxy(server, b.name, "127.0.0.1:0", upstream)
		if err := env.proxy.Start(); err != nil {
			tb.Fatalf("start toxiproxy: %v", err)
		}
		tb.Cleanup(env.proxy.Stop)
		u.Host = env.proxy.Listen // the port it listens on, kept across Stop and Start
		env.dsn = u.String()
	}
	return env
}

// store opens a store through the proxy, as a node of its own would.
func (e *segEnv) store(tb testing.TB) allocator.Store {
	tb.Helper()
	st, err := e.backend.open(context.Background(), e.dsn)
	if err != nil {
		tb.Fatalf("open %s: %v", e.backend.name, err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

func (e *segEnv) create(tb testing.TB, ns allocator.Namespace) {
	tb.Helper()
	if ns.MinStep == 0 {
		ns.MinStep = ns.Step
	}
	if ns.MaxStep == 0 {
		ns.MaxStep = ns.Step
	}
	if ns.Mode == "" {
		ns.Mode = allocator.ModeBuffered
	}
	if ns.Fallback == "" {
		ns.Fallback = allocator.FallbackNone
	}
	if _, err := e.admin.CreateNamespace(context.Background(), ns); err != nil {
		tb.Fatalf("create namespace: %v", err)
	}
}

// latency adds ms milliseconds to every reply from the database.
func (e *segEnv) latency(tb testing.TB, ms int) {
	tb.Helper()
	_, err := e.proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name":"latency","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, ms)))
	if err != nil {
		tb.Fatalf("add latency toxic: %v", err)
	}
}

// recordingStore records the ranges its FetchSegment returned without error.
type recordingStore struct {
	allocator.SegmentStore
	mu      sync.Mutex
	fetches int
	ranges  []allocator.Segment
}

func (r *recordingStore) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	seg, err := r.SegmentStore.FetchSegment(ctx, name, n)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fetches++
	if err == nil {
		r.ranges = append(r.ranges, seg)
	}
	return seg, err
}

func segSettings() allocator.SegmentSettings {
	return allocator.SegmentSettings{
		FetchTimeout: 3 * time.Second,
		RetryMin:     5 * time.Millisecond,
		RetryMax:     50 * time.Millisecond,
	}
}

// contendedFetchTimeout is the fetch timeout of tests where several
// allocators fetch from one namespace as fast as they can: a bound on a
// fetch that hangs, not on one that keeps losing to other nodes' fetches.
// Measured under 4 CPU burners on 2 cores with the race detector, a fetch
// from etcd by one of four such allocators lost up to 15 compare-and-swap
// rounds and took up to 3 s (the old timeout, which failed it).
const contendedFetchTimeout = 30 * time.Second

func newSegs(tb testing.TB, st allocator.SegmentStore, s allocator.SegmentSettings) *allocator.Segments {
	tb.Helper()
	sg, err := allocator.NewSegments(st, s)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sg.Close(context.Background()) })
	return sg
}

func forEachBackend(t *testing.T, fn func(t *testing.T, env *segEnv)) {
	for _, b := range segBackends {
		t.Run(b.name, func(t *testing.T) { fn(t, newSegEnv(t, b)) })
	}
}

// TestSegmentIntegrationUnique draws 1,000,000 IDs with 4 allocators of 8
// goroutines each, step 1,000: every ID is unique, each goroutine's IDs and
// each allocator's ranges increase, and there are at most 1,000 + 2 fetches
// per allocator.
func TestSegmentIntegrationUnique(t *testing.T) {
	const (
		allocators = 4
		goroutines = 8
		total      = 1_000_000
		perG       = total / (allocators * goroutines)
		step       = 1000
	)
	forEachBackend(t, func(t *testing.T, env *segEnv) {
		env.create(t, allocator.Namespace{Name: "orders", Step: step})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()

		// The four allocators keep the namespace's one key busy (a range of
		// 1,000 IDs lasts no longer than a fetch takes), and on etcd a fetch is
		// a compare-and-swap that another node's write makes fail: a fetch
		// can lose many rounds in a row, each answered, for seconds on a
		// loaded machine. This test is about uniqueness, not fetch latency:
		// its fetch timeout only bounds a fetch that gets no answer.
		set := segSettings()
		set.FetchTimeout = contendedFetchTimeout
		recs := make([]*recordingStore, allocators)
		segs := make([]*allocator.Segments, allocators)
		for a := range allocators {
			recs[a] = &recordingStore{SegmentStore: env.store(t)}
			segs[a] = newSegs(t, recs[a], set)
		}
		draws := allocator.MixedDraws{
			Sizes: []int{1, 10, 1, 100, 1, 500},
		}
		start := time.Now()
		all := slices.Concat(allocator.DrawConcurrently(t, allocators, goroutines, func(a, _ int) ([]int64, error) {
			return draws.Draw(ctx, segs[a], "orders", perG)
		})...)
		t.Logf("%s: %d IDs in %v", env.backend.name, len(all), time.Since(start).Round(time.Millisecond))
		allocator.CheckUnique(t, all, total)
		fetches := 0
		var ranges []allocator.Segment
		for a, r := range recs {
			r.mu.Lock()
			fetches += r.fetches
			for i := 1; i < len(r.ranges); i++ {
				if r.ranges[i].First <= r.ranges[i-1].Last {
					t.Errorf("allocator %d: range %d..%d fetched after %d..%d", a,
						r.ranges[i].First, r.ranges[i].Last, r.ranges[i-1].First, r.ranges[i-1].Last)
				}
			}
			ranges = append(ranges, r.ranges...)
			r.mu.Unlock()
		}
		t.Logf("%s: %d fetches", env.backend.name, fetches)
		if limit := total/step + 2*allocators; fetches > limit {
			t.Errorf("fetches: got %d, want at most %d", fetches, limit)
		}
		// Every ID lies in a range whose fetch succeeded.
		allocator.CheckInRanges(t, all, ranges, "range fetched")
	})
}

// TestSegmentIntegrationStrict draws from a strict namespace with 3
// allocators: in turns the IDs increase without gaps across allocators, and
// concurrently they are gap-free together.
func TestSegmentIntegrationStrict(t *testing.T) {
	forEachBackend(t, func(t *testing.T, env *segEnv) {
		env.create(t, allocator.Namespace{Name: "invoices", Step: 1, Mode: allocator.ModeStrict})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		segs := make([]*allocator.Segments, 3)
		for i := range segs {
			segs[i] = newSegs(t, env.store(t), segSettings())
		}

		next := int64(1)
		var b allocator.Batch
		for i := range 30 {
			n := 1 + i%3
			if err := segs[i%3].Draw(ctx, "invoices", n, &b); err != nil {
				t.Fatalf("draw %d: %v", i, err)
			}
			if want := []allocator.IDRange{{First: next, Last: next + int64(n) - 1}}; !slices.Equal(b.Ranges, want) {
				t.Fatalf("draw %d (allocator %d): got %v, want %v", i, i%3, b.Ranges, want)
			}
			next += int64(n)
		}

		// Concurrently, two goroutines on each allocator: together the IDs
		// are gap-free.
		draws := allocator.MixedDraws{Sizes: []int{1, 2, 3, 4}} // 40 draws of 100 IDs
		drawn := allocator.DrawConcurrently(t, len(segs), 2, func(a, _ int) ([]int64, error) {
			return draws.Draw(ctx, segs[a], "invoices", 100)
		})
		allocator.CheckConsecutive(t, slices.Concat(drawn...), next)
	})
}

// heldStore holds its first FetchSegment until hold closes and counts
// the calls that reached the store.
type heldStore struct {
	allocator.SegmentStore
	hold    chan struct{}
	mu      sync.Mutex
	fetches int
	sizes   []int64
}

func (h *heldStore) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	h.mu.Lock()
	h.fetches++
	h.sizes = append(h.sizes, n)
	first := h.fetches == 1
	h.mu.Unlock()
	if first {
		select {
		case <-h.hold:
		case <-ctx.Done():
			return allocator.Segment{}, ctx.Err()
		}
	}
	return h.SegmentStore.FetchSegment(ctx, name, n)
}

func (h *heldStore) counts() (int, []int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fetches, slices.Clone(h.sizes)
}

// TestSegmentIntegrationStrictCombined: strict draws that wait at the same
// time on one node share one store round trip. While a fetch is held, 8
// draws of 1 to 8 IDs queue; they are served by one fetch of 36, split in
// the order they queued, with one revision. Then 3 allocators of 8
// goroutines draw concurrently: the IDs are gap-free with no duplicate,
// each goroutine's revisions increase, and no more fetches reach the
// stores than there are draws.
func TestSegmentIntegrationStrictCombined(t *testing.T) {
	forEachBackend(t, func(t *testing.T, env *segEnv) {
		env.create(t, allocator.Namespace{Name: "invoices", Step: 1, Mode: allocator.ModeStrict})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()

		held := &heldStore{SegmentStore: env.store(t), hold: make(chan struct{})}
		sg := newSegs(t, held, segSettings())
		type result struct {
			b   allocator.Batch
			err error
		}
		draw := func(n int) <-chan result {
			ch := make(chan result, 1)
			go func() {
				var r result
				r.err = sg.Draw(ctx, "invoices", n, &r.b)
				ch <- r
			}()
			return ch
		}
		waitFor := func(what string, ok func() bool) {
			t.Helper()
			for !ok() {
				select {
				case <-ctx.Done():
					t.Fatalf("waiting for %s: %v", what, ctx.Err())
				case <-time.After(time.Millisecond):
				}
			}
		}
		first := draw(1)
		waitFor("the first fetch", func() bool { n, _ := held.counts(); return n == 1 })
		var queued []<-chan result
		for n := 1; n <= 8; n++ {
			queued = append(queued, draw(n))
			waitFor(fmt.Sprintf("%d queued draws", n), func() bool {
				st, ok := sg.NamespaceStats("invoices")
				return ok && st.StrictQueued == n
			})
		}
		close(held.hold)
		r := <-first
		if r.err != nil || !slices.Equal(r.b.Ranges, []allocator.IDRange{{First: 1, Last: 1}}) {
			t.Fatalf("the first draw: got %v, %v, want 1..1", r.b.Ranges, r.err)
		}
		next, rev := int64(2), int64(0)
		for i, ch := range queued {
			n := int64(i + 1)
			q := <-ch
			if q.err != nil {
				t.Fatalf("queued draw %d: %v", i, q.err)
			}
			if want := []allocator.IDRange{{First: next, Last: next + n - 1}}; !slices.Equal(q.b.Ranges, want) {
				t.Errorf("queued draw %d: got %v, want %v", i, q.b.Ranges, want)
			}
			if i == 0 {
				rev = q.b.Revision
			}
			if q.b.Revision != rev || rev <= r.b.Revision {
				t.Errorf("queued draw %d: revision %d, want %d, above the first draw's %d", i, q.b.Revision, rev, r.b.Revision)
			}
			next += n
		}
		if fetches, sizes := held.counts(); fetches != 2 || !slices.Equal(sizes, []int64{1, 36}) {
			t.Errorf("fetches: got %d of sizes %v, want 2 of [1 36]: one round trip for the 8 queued draws", fetches, sizes)
		}

		const allocators, goroutines, perG = 3, 8, 60
		recs := make([]*recordingStore, allocators)
		segs := make([]*allocator.Segments, allocators)
		set := segSettings()
		set.FetchTimeout = contendedFetchTimeout
		for a := range allocators {
			recs[a] = &recordingStore{SegmentStore: env.store(t)}
			segs[a] = newSegs(t, recs[a], set)
		}
		var draws atomic.Int64
		drawn := allocator.DrawConcurrently(t, allocators, goroutines, func(a, _ int) ([]int64, error) {
			prev := rev
			return allocator.MixedDraws{
				Sizes: []int{1, 1, 2, 1, 3},
				Check: func(_ int, b *allocator.Batch) error {
					draws.Add(1)
					if b.Revision <= prev {
						return fmt.Errorf("revision %d not above %d, the goroutine's previous one", b.Revision, prev)
					}
					prev = b.Revision
					return nil
				},
			}.Draw(ctx, segs[a], "invoices", perG)
		})
		all := slices.Concat(drawn...)
		allocator.CheckUnique(t, slices.Clone(all), allocators*goroutines*perG)
		allocator.CheckConsecutive(t, all, next)
		fetches := 0
		for _, r := range recs {
			r.mu.Lock()
			fetches += r.fetches
			r.mu.Unlock()
		}
		t.Logf("%s: %d strict draws in %d store fetches", env.backend.name, draws.Load(), fetches)
		if int64(fetches) > draws.Load() {
			t.Errorf("fetches: got %d for %d draws, want at most one per draw", fetches, draws.Load())
		}
	})
}

// TestSegmentIntegrationTailReturn closes an allocator that used 10 IDs of a
// 1,000-range: the next allocator starts at the 11th, unless another fetch
// came in between, when the tail is skipped.
func TestSegmentIntegrationTailReturn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, env *segEnv) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tests := []struct {
			ns       string
			between  bool
			wantNext int64
		}{
			{"returned", false, 11},
			{"skipped", true, 2001},
		}
		for _, tt := range tests {
			env.create(t, allocator.Namespace{Name: tt.ns, Step: 1000})
			a, err := allocator.NewSegments(env.store(t), segSettings())
			if err != nil {
				t.Fatal(err)
			}
			var b allocator.Batch
			if err := a.Draw(ctx, tt.ns, 10, &b); err != nil {
				t.Fatal(err)
			}
			if tt.between {
				// A fetch by another node: a's tail can no longer be given back.
				if _, err := env.admin.FetchSegment(ctx, tt.ns, 1000); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Close(ctx); err != nil {
				t.Fatalf("%s: Close: %v", tt.ns, err)
			}
			c := newSegs(t, env.store(t), segSettings())
			id, err := allocator.DrawOne(ctx, c, tt.ns)
			if err != nil || id != tt.wantNext {
				t.Errorf("%s: next allocator's first ID: got %d, %v, want %d", tt.ns, id, err, tt.wantNext)
			}
		}
	})
}

// TestSegmentIntegrationTopOfInt64 draws the last IDs below 2^63 from each
// store: buffered single draws across a fetch that can only get what is
// left, a batch whose range ends at the largest int64, and strict draws
// that get exactly what they ask or a refusal; then every draw answers
// ErrNamespaceExhausted.
func TestSegmentIntegrationTopOfInt64(t *testing.T) {
	const top = int64(math.MaxInt64)
	forEachBackend(t, func(t *testing.T, env *segEnv) {
		env.create(t, allocator.Namespace{Name: "single", MaxID: top - 18, Step: 10})
		env.create(t, allocator.Namespace{Name: "batch", MaxID: top - 10, Step: 10})
		env.create(t, allocator.Namespace{Name: "strict", MaxID: top - 5, Step: 10, Mode: allocator.ModeStrict})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sg := newSegs(t, env.store(t), segSettings())

		for want := top - 17; ; want++ {
			id, err := allocator.DrawOne(ctx, sg, "single")
			if err != nil || id != want {
				t.Fatalf("single: Next: got %d, %v; want %d", id, err, want)
			}
			if want == top {
				break
			}
		}
		var b allocator.Batch
		if err := sg.Draw(ctx, "batch", 10, &b); err != nil || len(b.IDs) != 10 || b.IDs[0] != top-9 || b.IDs[9] != top ||
			!slices.Equal(b.Ranges, []allocator.IDRange{{First: top - 9, Last: top}}) {
			t.Errorf("batch: Draw(10): got %d IDs, ranges %v, %v; want %d..%d", len(b.IDs), b.Ranges, err, top-9, top)
		}
		if err := sg.Draw(ctx, "strict", 6, &b); !errors.Is(err, allocator.ErrNamespaceExhausted) {
			t.Errorf("strict: Draw(6) with 5 left: got %v, want %v", err, allocator.ErrNamespaceExhausted)
		}
		if err := sg.Draw(ctx, "strict", 5, &b); err != nil || len(b.IDs) != 5 || b.IDs[0] != top-4 || b.IDs[4] != top {
			t.Errorf("strict: Draw(5) with 5 left: got %d IDs %v, %v; want %d..%d", len(b.IDs), b.Ranges, err, top-4, top)
		}
		for _, name := range []string{"single", "batch", "strict"} {
			if err := sg.Draw(ctx, name, 1, &b); !errors.Is(err, allocator.ErrNamespaceExhausted) || errors.Is(err, allocator.ErrUnavailable) {
				t.Errorf("%s: Draw(1) when exhausted: got %v, want %v (and not %v)", name, err, allocator.ErrNamespaceExhausted, allocator.ErrUnavailable)
			}
			ns, err := env.admin.GetNamespace(ctx, name)
			if err != nil || ns.MaxID != top {
				t.Errorf("%s: max_id after the last draw: got %d, %v; want %d", name, ns.MaxID, err, top)
			}
		}
	})
}

// testSnowflakes is a SnowflakeSource for the fallback test: IDs of the
// default layout's current millisecond, handed out consecutively.
type testSnowflakes struct {
	mu     sync.Mutex
	layout snowflake.Layout
	next   int64
}

func (s *testSnowflakes) SmallestIDNow() int64 {
	return int64(s.layout.SmallestID(time.Now()))
}

func (s *testSnowflakes) NextSnowflakesFenced(dst []int64, n int) ([]int64, allocator.LeaseToken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = max(s.next, s.SmallestIDNow())
	for range n {
		dst = append(dst, s.next)
		s.next++
	}
	return dst, allocator.LeaseToken{WorkerID: 1, FencingVersion: 1}, nil
}

// TestSegmentIntegrationFallback cuts the database off (toxiproxy disabled)
// with both buffers empty: a namespace with the Snowflake fallback serves
// Snowflake IDs, one without fails with ErrUnavailable; once the database is
// back, segment IDs continue above the old max_id, up to the namespace's
// max_id_limit and no further, below every fallback ID.
func TestSegmentIntegrationFallback(t *testing.T) {
	for _, b := range segBackends {
		if !b.proxy {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			env := newSegEnv(t, b)
			const limit = 250
			env.create(t, allocator.Namespace{Name: "orders", Step: 100, Fallback: allocator.FallbackSnowflake, MaxIDLimit: limit})
			env.create(t, allocator.Namespace{Name: "plain", Step: 100})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			set := segSettings()
			set.Fallback = &testSnowflakes{layout: snowflake.DefaultLayout()}
			sg := newSegs(t, env.store(t), set)

			for _, ns := range []string{"orders", "plain"} {
				if id, err := allocator.DrawOne(ctx, sg, ns); err != nil || id != 1 {
					t.Fatalf("%s: first Next: got %d, %v, want 1", ns, id, err)
				}
			}
			env.proxy.Stop() // the database is cut off
			var batch allocator.Batch
			for _, ns := range []string{"orders", "plain"} {
				// The rest of the range: its prefetch fails.
				if err := sg.Draw(ctx, ns, 99, &batch); err != nil {
					t.Fatalf("%s: Draw(99) from the buffer: %v", ns, err)
				}
			}
			if err := sg.Draw(ctx, "plain", 3, &batch); !errors.Is(err, allocator.ErrUnavailable) {
				t.Errorf("plain with the database cut off: got %v, want ErrUnavailable", err)
			}
			if err := sg.Draw(ctx, "orders", 3, &batch); err != nil {
				t.Fatalf("orders with the database cut off: %v", err)
			}
			if batch.Source != allocator.SourceSnowflake || len(batch.IDs) != 3 || batch.IDs[0] <= limit {
				t.Errorf("orders with the database cut off: got %v from %q, want 3 Snowflake IDs above max_id_limit %d", batch.IDs, batch.Source, limit)
			}
			st, _ := sg.NamespaceStats("orders")
			if st.Fallbacks != 1 || st.MaxID != 100 {
				t.Errorf("stats: got %d fallbacks, max_id %d, want 1, 100", st.Fallbacks, st.MaxID)
			}

			if err := env.proxy.Start(); err != nil { // the database is back
				t.Fatal(err)
			}
			for {
				if err := sg.Draw(ctx, "orders", 2, &batch); err != nil {
					t.Fatalf("orders after the database came back: %v", err)
				}
				if batch.Source == allocator.SourceSegment {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatal("orders: still no segment IDs after the database came back")
				case <-time.After(10 * time.Millisecond):
				}
			}
			if batch.IDs[0] <= 100 {
				t.Errorf("orders after the database came back: got %v, want IDs above the old max_id 100", batch.IDs)
			}
			// The counter rises to its limit and stops there.
			last := batch.IDs[len(batch.IDs)-1]
			for {
				id, err := allocator.DrawOne(ctx, sg, "orders")
				if errors.Is(err, allocator.ErrNamespaceExhausted) {
					break
				}
				if err != nil || id != last+1 {
					t.Fatalf("orders up to its limit: got %d, %v; want %d", id, err, last+1)
				}
				last = id
			}
			if last != limit {
				t.Errorf("orders: the last segment ID is %d, want the limit %d", last, limit)
			}
			if err := sg.Draw(ctx, "orders", 1, &batch); !errors.Is(err, allocator.ErrNamespaceExhausted) {
				t.Errorf("orders at its limit: got %v from %q, %v; want %v", batch.IDs, batch.Source, err, allocator.ErrNamespaceExhausted)
			}
		})
	}
}

// BenchmarkSegmentIntegrationDrawLatency measures single draws while ranges
// switch, with 20 ms of toxiproxy latency on every database reply (none on
// SQLite, a local file). Like BenchmarkSegmentDrawLatency, it lets the
// dynamic step grow first and reports p50, p99 and p99.9 in nanoseconds.
func BenchmarkSegmentIntegrationDrawLatency(b *testing.B) {
	const maxStep = 1 << 22
	for _, be := range segBackends {
		b.Run(be.name, func(b *testing.B) {
			env := newSegEnv(b, be)
			env.create(b, allocator.Namespace{Name: "orders", Step: 1000, MinStep: 1000, MaxStep: maxStep})
			st := env.store(b)
			if env.proxy != nil {
				env.latency(b, 20)
			}
			sg := newSegs(b, st, allocator.SegmentSettings{})
			allocator.BenchSwitchLatency(b, sg, "orders", maxStep, func() int64 {
				st, _ := sg.NamespaceStats("orders")
				return st.Fetches
			})
		})
	}
}
