package allocator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/snowflake"
)

// testSettings are SegmentSettings for tests: fast retries.
func testSettings() SegmentSettings {
	return SegmentSettings{RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond}
}

// mustSegments returns NewSegments(store, s), ending the test on an error.
func mustSegments(tb testing.TB, store SegmentStore, s SegmentSettings) *Segments {
	tb.Helper()
	sg, err := NewSegments(store, s)
	if err != nil {
		tb.Fatal(err)
	}
	return sg
}

// newTestSegments returns a Segments on store that is closed when the test
// ends.
func newTestSegments(t *testing.T, store SegmentStore, s SegmentSettings) *Segments {
	t.Helper()
	sg := mustSegments(t, store, s)
	t.Cleanup(func() { _ = sg.Close(context.Background()) })
	return sg
}

// testCtx returns a context that ends with the test, bounded so that a
// hung draw fails the test instead of hanging it.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// cancelledCtx is a context that is already done: a draw that succeeds with
// it did not wait.
func cancelledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// waitIdle waits until no background load of name is in flight.
func waitIdle(t *testing.T, s *Segments, name string) {
	t.Helper()
	ns := (*s.spaces.Load())[name]
	if ns == nil {
		t.Fatalf("namespace %q not in use", name)
	}
	ctx := testCtx(t)
	for {
		ns.mu.Lock()
		loading, ch := ns.loading, ns.changed
		ns.mu.Unlock()
		if !loading {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("namespace %q: background load still in flight", name)
		}
	}
}

// fetchIdle looks namespace name up, which fetches its first range, and
// waits until no fetch of it is under way.
func fetchIdle(t *testing.T, ctx context.Context, s *Segments, name string) {
	t.Helper()
	if _, err := s.namespace(ctx, name); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, s, name)
}

func mustDrawOne(t *testing.T, ctx context.Context, s *Segments, name string) int64 {
	t.Helper()
	id, err := DrawOne(ctx, s, name)
	if err != nil {
		t.Fatalf("DrawOne(%q): %v", name, err)
	}
	return id
}

func mustDraw(t *testing.T, ctx context.Context, s *Segments, name string, n int) Batch {
	t.Helper()
	var b Batch
	if err := s.Draw(ctx, name, n, &b); err != nil {
		t.Fatalf("Draw(%q, %d): %v", name, n, err)
	}
	return b
}

func stats(t *testing.T, s *Segments, name string) SegmentStats {
	t.Helper()
	st, ok := s.NamespaceStats(name)
	if !ok {
		t.Fatalf("no stats for namespace %q", name)
	}
	return st
}

// The exported helpers from here on serve both the package's own tests
// (on the fake stores) and its integration tests (package allocator_test,
// on the real databases), so that the two check a rule the same way. Being
// in a _test.go file, they exist only in the test binary.

// CheckResolveError checks the error of a Resolve of settings named name:
// none when want is "", otherwise one wrapping snowflake.ErrInvalidSettings
// whose text contains want.
func CheckResolveError(t testing.TB, name string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: Resolve: %v, want no error", name, err)
	case want != "" && (!errors.Is(err, snowflake.ErrInvalidSettings) || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: Resolve: got %v, want ErrInvalidSettings saying %q", name, err, want)
	}
}

// DrawOne draws one ID of namespace name from s.
func DrawOne(ctx context.Context, s *Segments, name string) (int64, error) {
	var b Batch
	if err := s.Draw(ctx, name, 1, &b); err != nil {
		return 0, err
	}
	return b.IDs[0], nil
}

// MixedDraws is how one goroutine of a uniqueness test draws: batches of
// Sizes, in turn.
type MixedDraws struct {
	// Sizes are the batch sizes, used in turn; the last batch is cut to
	// the IDs still wanted.
	Sizes []int
	// Check, when not nil, checks the batch of every Draw of n IDs; an
	// error ends the goroutine's draws.
	Check func(n int, b *Batch) error
}

// Draw draws want IDs of namespace name from s and returns them in the
// order drawn. It fails on the first error of a draw or of Check, and on
// an ID that is not above the one before: the IDs one goroutine draws
// always increase.
func (m MixedDraws) Draw(ctx context.Context, s *Segments, name string, want int) ([]int64, error) {
	ids := make([]int64, 0, want)
	var b Batch
	for i := 0; len(ids) < want; i++ {
		n := min(m.Sizes[i%len(m.Sizes)], want-len(ids))
		if err := s.Draw(ctx, name, n, &b); err != nil {
			return nil, err
		}
		if m.Check != nil {
			if err := m.Check(n, &b); err != nil {
				return nil, err
			}
		}
		ids = append(ids, b.IDs...)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return nil, fmt.Errorf("ID %d after %d", ids[i], ids[i-1])
		}
	}
	return ids, nil
}

// DrawConcurrently runs draw(a, g) in goroutines goroutines for each of
// allocators allocators, waits for them all, and returns the IDs each
// allocator's goroutines drew, in no particular order. It reports every
// error, with its allocator and goroutine, and ends the test if there was
// one.
func DrawConcurrently(t testing.TB, allocators, goroutines int, draw func(a, g int) ([]int64, error)) [][]int64 {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		drawn = make([][]int64, allocators)
		errs  []error
	)
	for a := range allocators {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids, err := draw(a, g)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Errorf("allocator %d goroutine %d: %w", a, g, err))
					return
				}
				drawn[a] = append(drawn[a], ids...)
			}()
		}
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return drawn
}

// CheckUnique checks that there are want IDs and no two alike; it sorts
// ids.
func CheckUnique(t testing.TB, ids []int64, want int) {
	t.Helper()
	if len(ids) != want {
		t.Fatalf("IDs drawn: got %d, want %d", len(ids), want)
	}
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			t.Fatalf("ID %d handed out twice", ids[i])
		}
	}
}

// CheckConsecutive checks that ids, sorted, are first, first+1, … without
// a gap or a repeat, as the draws of a strict namespace must be together;
// it sorts ids.
func CheckConsecutive(t testing.TB, ids []int64, first int64) {
	t.Helper()
	slices.Sort(ids)
	for i, id := range ids {
		if want := first + int64(i); id != want {
			t.Fatalf("concurrent strict IDs: got %d at %d, want %d", id, i, want)
		}
	}
}

// CheckInRanges checks that every one of the sorted ids lies in one of
// ranges, the ranges the store handed out (it sorts them); what names
// them in the failure.
func CheckInRanges(t testing.TB, ids []int64, ranges []Segment, what string) {
	t.Helper()
	slices.SortFunc(ranges, func(a, b Segment) int { return int(a.First - b.First) })
	j := 0
	for _, id := range ids {
		for j < len(ranges) && ranges[j].Last < id {
			j++
		}
		if j == len(ranges) || id < ranges[j].First {
			t.Fatalf("ID %d lies in no %s", id, what)
		}
	}
}

func TestValidNamespace(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"0", true},
		{"orders", true},
		{"invoice.eu-west_2", true},
		{"9lives", true},
		{strings.Repeat("a", 64), true},
		{"a" + strings.Repeat("_", 63), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{"Orders", false},
		{"_orders", false},
		{".orders", false},
		{"-orders", false},
		{"order s", false},
		{"orders/1", false},
		{"orders;drop", false},
		{"ordérs", false},
		{"orders\n", false},
		{"a'b", false},
	}
	for _, tt := range tests {
		err := ValidNamespace(tt.name)
		if got := err == nil; got != tt.ok {
			t.Errorf("ValidNamespace(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidNamespace) {
			t.Errorf("ValidNamespace(%q) = %v, want an error wrapping ErrInvalidNamespace", tt.name, err)
		}
	}
}

func TestSegmentsBadAndUnknownNames(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "orders"})
	s := newTestSegments(t, store, testSettings())
	ctx := testCtx(t)

	for _, name := range []string{"", "Orders", "-x", "a b", strings.Repeat("x", 65)} {
		var b Batch
		if err := s.Draw(ctx, name, 3, &b); !errors.Is(err, ErrInvalidNamespace) {
			t.Errorf("Draw(%q): got %v, want ErrInvalidNamespace", name, err)
		}
	}
	if gets, fetches, _ := store.counts(); gets != 0 || fetches != 0 {
		t.Errorf("bad names reached the store: got %d lookups, %d fetches, want 0, 0", gets, fetches)
	}

	for i := range 4 {
		if _, err := DrawOne(ctx, s, "missing"); !errors.Is(err, ErrNamespaceNotFound) {
			t.Fatalf("DrawOne(missing) #%d: got %v, want ErrNamespaceNotFound", i, err)
		}
	}
	// An unknown name leaves nothing behind: each use asks the store again,
	// and a namespace created later is found.
	if gets, fetches, _ := store.counts(); gets != 4 || fetches != 0 {
		t.Errorf("unknown name: got %d lookups, %d fetches, want 4, 0", gets, fetches)
	}
	if st := s.Stats(); len(st) != 0 {
		t.Errorf("Stats after unknown names: got %d namespaces, want 0", len(st))
	}
	store.add(Namespace{Name: "missing", Step: 10})
	if id := mustDrawOne(t, ctx, s, "missing"); id != 1 {
		t.Errorf("DrawOne(missing) after creating it: got %d, want 1", id)
	}

	for _, n := range []int{0, -1, MaxDrawCount + 1} {
		var b Batch
		if err := s.Draw(ctx, "orders", n, &b); !errors.Is(err, ErrInvalidCount) {
			t.Errorf("Draw(orders, %d): got %v, want ErrInvalidCount", n, err)
		}
	}
}

func TestSegmentsFirstUseWithDatabaseDown(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "orders", Fallback: FallbackSnowflake})
	store.setDown(errFakeDown)
	sf := &fakeSnowflakeSource{}
	sf.set(1<<40, 1<<40, nil)
	set := testSettings()
	set.Fallback = sf
	s := newTestSegments(t, store, set)
	ctx := testCtx(t)

	// The row was never read, so its fallback setting is unknown: no fallback.
	_, err := DrawOne(ctx, s, "orders")
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errFakeDown) {
		t.Fatalf("DrawOne with the database down: got %v, want ErrUnavailable wrapping the store error", err)
	}
	if sf.calls != 0 {
		t.Errorf("fallback calls: got %d, want 0", sf.calls)
	}
	store.setDown(nil)
	if id := mustDrawOne(t, ctx, s, "orders"); id != 1 {
		t.Errorf("DrawOne after the database came back: got %d, want 1", id)
	}
}

// TestSegmentsUniqueAcrossAllocators draws from one namespace with several
// allocators and goroutines, with batches of mixed sizes.
func TestSegmentsUniqueAcrossAllocators(t *testing.T) {
	const (
		allocators = 4
		goroutines = 8
		perG       = 6000
		step       = 1000
	)
	store := newFakeSegmentStore(Namespace{Name: "orders", Step: step})
	ctx := testCtx(t)

	segs := make([]*Segments, allocators)
	for a := range segs {
		segs[a] = newTestSegments(t, store, testSettings())
	}
	draws := MixedDraws{
		Sizes: []int{1, 1, 7, 1, 64, 1, 250},
		Check: func(n int, b *Batch) error {
			if b.Source != SourceSegment || len(b.IDs) != n {
				return fmt.Errorf("Draw(%d) gave %d IDs from %q", n, len(b.IDs), b.Source)
			}
			return nil
		},
	}
	drawn := DrawConcurrently(t, allocators, goroutines, func(a, _ int) ([]int64, error) {
		return draws.Draw(ctx, segs[a], "orders", perG)
	})
	all := slices.Concat(drawn...)
	CheckUnique(t, all, allocators*goroutines*perG)
	// Every ID lies in a committed range.
	CheckInRanges(t, all, store.commits(), "committed range")
	for a, sg := range segs {
		st := stats(t, sg, "orders")
		if limit := int64(len(drawn[a]))/step + 2; st.Fetches > limit {
			t.Errorf("allocator %d: got %d fetches for %d IDs, want at most %d", a, st.Fetches, len(drawn[a]), limit)
		}
	}
}

func TestSegmentsBatchSpansSwitch(t *testing.T) {
	tests := []struct {
		name   string
		other  bool // another allocator fetches before this one's second range
		prefix int  // IDs drawn before the batch
		n      int
		want   []IDRange
	}{
		{"contiguous switch merges", false, 95, 10, []IDRange{{96, 105}}},
		{"gap across switch", true, 95, 10, []IDRange{{96, 100}, {201, 205}}},
		{"exactly the rest", false, 95, 5, []IDRange{{96, 100}}},
		{"larger than a step", false, 50, 260, []IDRange{{51, 310}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newFakeSegmentStore(Namespace{Name: "orders", Step: 100})
			a := newTestSegments(t, store, testSettings())
			b := newTestSegments(t, store, testSettings())
			ctx := testCtx(t)

			mustDraw(t, ctx, a, "orders", 5) // 1..5, before the trigger at 11
			if tt.other {
				if id := mustDrawOne(t, ctx, b, "orders"); id != 101 {
					t.Fatalf("other allocator: got %d, want 101", id)
				}
			}
			mustDraw(t, ctx, a, "orders", tt.prefix-5) // crosses the trigger
			waitIdle(t, a, "orders")
			got := mustDraw(t, ctx, a, "orders", tt.n)
			if !slices.Equal(got.Ranges, tt.want) {
				t.Errorf("Ranges: got %v, want %v", got.Ranges, tt.want)
			}
			var wantIDs []int64
			for _, r := range tt.want {
				for id := r.First; id <= r.Last; id++ {
					wantIDs = append(wantIDs, id)
				}
			}
			if !slices.Equal(got.IDs, wantIDs) {
				t.Errorf("IDs: got %v, want %v", got.IDs, wantIDs)
			}
			if got.Source != SourceSegment {
				t.Errorf("Source: got %q, want %q", got.Source, SourceSegment)
			}
		})
	}
}

func TestSegmentsOneLoadInFlight(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "orders", Step: 50})
	store.setLatency(200 * time.Microsecond)
	s := newTestSegments(t, store, testSettings())
	ctx := testCtx(t)

	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b Batch
			for i := range 300 {
				if err := s.Draw(ctx, "orders", 1+i%3, &b); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if _, fetches, maxInFlight := store.counts(); maxInFlight != 1 {
		t.Errorf("fetches in flight at once: got %d (of %d fetches), want 1", maxInFlight, fetches)
	}
}

// TestSegmentsWaitOnlyWhenBothEmpty holds the background fetch at a gate and
// draws with a context that is already cancelled: such a draw succeeds only
// if it did not have to wait.
func TestSegmentsWaitOnlyWhenBothEmpty(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "orders", Step: 100})
	s := newTestSegments(t, store, testSettings())
	ctx := testCtx(t)
	done := cancelledCtx()

	if id := mustDrawOne(t, ctx, s, "orders"); id != 1 {
		t.Fatalf("first DrawOne: got %d, want 1", id)
	}
	store.closeGate()
	// IDs 2..100: the 11th starts the background load, which is held.
	for want := int64(2); want <= 100; want++ {
		id, err := DrawOne(done, s, "orders")
		if err != nil || id != want {
			t.Fatalf("DrawOne with a load in flight: got %d, %v, want %d", id, err, want)
		}
	}
	if st := stats(t, s, "orders"); !st.Loading || st.Runway != 0 {
		t.Errorf("stats with both buffers empty: got loading=%v runway=%d, want true, 0", st.Loading, st.Runway)
	}
	// Both buffers empty: the draw waits, and its context is done.
	if _, err := DrawOne(done, s, "orders"); !errors.Is(err, context.Canceled) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("DrawOne with both buffers empty: got %v, want context.Canceled and ErrUnavailable", err)
	}
	var b Batch
	if err := s.Draw(done, "orders", 2, &b); !errors.Is(err, context.Canceled) || len(b.IDs) != 0 {
		t.Fatalf("Draw with both buffers empty: got %v with %d IDs, want context.Canceled and none", err, len(b.IDs))
	}
	store.openGate()
	waitIdle(t, s, "orders")
	// The range loaded is served without waiting (the IDs reserved by the
	// cancelled draws are skipped).
	id, err := DrawOne(done, s, "orders")
	if err != nil || id != 101 {
		t.Fatalf("DrawOne after the load: got %d, %v, want 101", id, err)
	}

	// A range loaded in the background while the current one still has IDs
	// becomes current without waiting.
	rest := stats(t, s, "orders").Runway
	if err := s.Draw(done, "orders", int(rest), &b); err != nil {
		t.Fatalf("Draw(rest of range): %v", err)
	}
	waitIdle(t, s, "orders")
	id, err = DrawOne(done, s, "orders")
	if err != nil || id != 201 {
		t.Fatalf("DrawOne after the switch: got %d, %v, want 201", id, err)
	}
}

// stepTest is a Segments on namespace "orders" (step 100, min_step 25,
// max_step 400) on a fake time, for the tests of the dynamic step: the
// test decides how long each range lasts.
type stepTest struct {
	s     *Segments
	store *fakeSegmentStore
	ft    *fakeTime
	ctx   context.Context
}

// newStepTest returns a stepTest with settings set (its clock replaced)
// whose first range, of 100, has been fetched at time 0.
func newStepTest(t *testing.T, set SegmentSettings) *stepTest {
	t.Helper()
	st := &stepTest{
		store: newFakeSegmentStore(Namespace{Name: "orders", Step: 100, MinStep: 25, MaxStep: 400}),
		ft:    newFakeTime(),
		ctx:   testCtx(t),
	}
	set.Clock = &fakeWall{t: st.ft}
	st.s = newTestSegments(t, st.store, set)
	mustDrawOne(t, st.ctx, st.s, "orders")
	return st
}

// useUp lets the current range last lasted and draws the rest of it: the
// draw crosses the trigger, so the next range is fetched in the
// background. It waits for that fetch and returns the sizes of every fetch
// so far, the new one last.
func (st *stepTest) useUp(t *testing.T, lasted time.Duration) []int64 {
	t.Helper()
	st.ft.advance(lasted)
	mustDraw(t, st.ctx, st.s, "orders", int(stats(t, st.s, "orders").Runway))
	waitIdle(t, st.s, "orders")
	return st.store.sizes()
}

func TestSegmentsDynamicStep(t *testing.T) {
	sf := newStepTest(t, testSettings())
	steps := []struct {
		lasted time.Duration
		want   int64
		change func() // applied to the row before this fetch
	}{
		{time.Minute, 200, nil},
		{time.Minute, 400, nil},
		{14 * time.Minute, 400, nil}, // capped at max_step
		{20 * time.Minute, 400, nil}, // between 15 and 30 minutes: kept
		{31 * time.Minute, 200, nil},
		{40 * time.Minute, 100, nil},
		{time.Hour, 50, nil},
		{time.Hour, 25, nil},
		{time.Hour, 25, nil}, // floor at min_step
		{20 * time.Minute, 25, func() { // an operator sets step 300: applied from the row this fetch returns
			sf.store.update("orders", func(ns *Namespace) { ns.Step = 300 })
		}},
		{20 * time.Minute, 300, nil},
		{time.Minute, 400, nil},
	}
	for i, st := range steps {
		if st.change != nil {
			st.change()
		}
		sizes := sf.useUp(t, st.lasted)
		if got := sizes[len(sizes)-1]; got != st.want {
			t.Errorf("fetch %d after a range that lasted %v: got step %d, want %d (all: %v)", i+2, st.lasted, got, st.want, sizes)
		}
		if got := stats(t, sf.s, "orders").Runway; got != st.want {
			t.Errorf("fetch %d: runway got %d, want %d", i+2, got, st.want)
		}
	}
}

func TestSegmentsStrictGapFree(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "invoices", Mode: ModeStrict, Step: 1000})
	ctx := testCtx(t)
	segs := make([]*Segments, 3)
	for i := range segs {
		segs[i] = newTestSegments(t, store, testSettings())
	}

	// Interleaved, one at a time: increasing and gap-free across allocators.
	next := int64(1)
	var (
		b       Batch
		lastRev int64
	)
	for i := range 30 {
		s := segs[i%3]
		n := 1 + i%4
		if n == 1 {
			id := mustDrawOne(t, ctx, s, "invoices")
			if id != next {
				t.Fatalf("draw %d (allocator %d): got %d, want %d", i, i%3, id, next)
			}
			next++
			continue
		}
		if err := s.Draw(ctx, "invoices", n, &b); err != nil {
			t.Fatal(err)
		}
		if want := []IDRange{{next, next + int64(n) - 1}}; !slices.Equal(b.Ranges, want) {
			t.Fatalf("draw %d (allocator %d): got %v, want %v", i, i%3, b.Ranges, want)
		}
		// The revision is the row's version after this draw's fetch: it
		// grows with every fetch, from whichever allocator.
		if row := store.row("invoices"); b.Revision != row.Version || b.Revision <= lastRev {
			t.Fatalf("draw %d (allocator %d): revision %d, want the row's version %d, above the previous %d", i, i%3, b.Revision, row.Version, lastRev)
		}
		lastRev = b.Revision
		next += int64(n)
	}

	// Concurrently: together the IDs are gap-free; each goroutine's
	// revisions increase (its next draw starts after its last returned);
	// draws that shared a fetch share its revision, so there are as many
	// revisions as fetches, and no more fetches than draws.
	_, before, _ := store.counts()
	var (
		mu   sync.Mutex
		revs = map[int64]bool{}
	)
	drawn := DrawConcurrently(t, len(segs), 4, func(a, _ int) ([]int64, error) {
		prev := lastRev
		draws := MixedDraws{
			Sizes: []int{1, 2, 3}, // 25 draws of 49 IDs
			Check: func(_ int, b *Batch) error {
				if b.Revision <= prev {
					return fmt.Errorf("revision %d not above %d, the goroutine's previous one", b.Revision, prev)
				}
				prev = b.Revision
				mu.Lock()
				defer mu.Unlock()
				revs[b.Revision] = true
				return nil
			},
		}
		return draws.Draw(ctx, segs[a], "invoices", 49)
	})
	CheckConsecutive(t, slices.Concat(drawn...), next)
	for i, s := range segs {
		st := stats(t, s, "invoices")
		if st.Runway != 0 || st.Mode != ModeStrict || st.StrictQueued != 0 {
			t.Errorf("allocator %d: got runway %d, mode %q, queued %d, want 0, strict, 0", i, st.Runway, st.Mode, st.StrictQueued)
		}
	}
	// Nothing was buffered: every fetch served draws.
	_, after, _ := store.counts()
	if fetches := after - before; fetches != len(revs) || fetches > 12*25 {
		t.Errorf("fetches: got %d for %d revisions, want one per revision and at most one per draw (%d)", fetches, len(revs), 12*25)
	}
}

// strictQueued waits until n strict draws of name queue on s for the next
// fetch, bounded by ctx.
func strictQueued(t *testing.T, ctx context.Context, s *Segments, name string, n int) {
	t.Helper()
	for {
		if st, ok := s.NamespaceStats(name); ok && st.StrictQueued == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %d queued strict draws of %q: %v", n, name, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// fetchesStarted waits until store has seen n fetches, bounded by ctx.
func fetchesStarted(t *testing.T, ctx context.Context, store *fakeSegmentStore, n int) {
	t.Helper()
	for {
		if _, got, _ := store.counts(); got >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %d fetches: %v", n, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// strictDraw is the outcome of one strict draw run in a goroutine.
type strictDraw struct {
	b   Batch
	err error
}

// goDraw starts a draw of n IDs of name and returns where its outcome
// arrives.
func goDraw(ctx context.Context, s *Segments, name string, n int) <-chan strictDraw {
	ch := make(chan strictDraw, 1)
	go func() {
		var d strictDraw
		d.err = s.Draw(ctx, name, n, &d.b)
		ch <- d
	}()
	return ch
}

// TestSegmentsStrictCombined holds a strict fetch in flight while draws of
// 1 to 5 IDs queue one after the other: they share the next fetch, of the
// sum of their counts, split in the order they queued, with one revision
// above the first fetch's; a draw that starts after they returned gets a
// fetch of its own.
func TestSegmentsStrictCombined(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "invoices", Mode: ModeStrict, Step: 1})
	ctx := testCtx(t)
	s := newTestSegments(t, store, testSettings())
	mustDrawOne(t, ctx, s, "invoices") // looks the namespace up: ID 1

	store.closeGate()
	first := goDraw(ctx, s, "invoices", 1)
	fetchesStarted(t, ctx, store, 2)
	var queued []<-chan strictDraw
	for n := 1; n <= 5; n++ {
		queued = append(queued, goDraw(ctx, s, "invoices", n))
		strictQueued(t, ctx, s, "invoices", n)
	}
	store.openGate()

	d := <-first
	if d.err != nil {
		t.Fatal(d.err)
	}
	if want := []IDRange{{2, 2}}; !slices.Equal(d.b.Ranges, want) {
		t.Fatalf("the draw in flight: got %v, want %v", d.b.Ranges, want)
	}
	next, rev := int64(3), int64(0)
	for i, ch := range queued {
		n := int64(i + 1)
		d := <-ch
		if d.err != nil {
			t.Fatalf("queued draw %d: %v", i, d.err)
		}
		if want := []IDRange{{next, next + n - 1}}; !slices.Equal(d.b.Ranges, want) {
			t.Errorf("queued draw %d of %d: got %v, want %v", i, n, d.b.Ranges, want)
		}
		if i == 0 {
			rev = d.b.Revision
		}
		if d.b.Revision != rev {
			t.Errorf("queued draw %d: revision %d, want %d like the other draws of its fetch", i, d.b.Revision, rev)
		}
		next += n
	}
	if want := []int64{1, 1, 15}; !slices.Equal(store.sizes(), want) {
		t.Errorf("fetch sizes: got %v, want %v", store.sizes(), want)
	}
	if rev <= d.b.Revision {
		t.Errorf("the shared revision %d is not above the first fetch's", rev)
	}
	b := mustDraw(t, ctx, s, "invoices", 2)
	if want := []IDRange{{next, next + 1}}; !slices.Equal(b.Ranges, want) || b.Revision <= rev {
		t.Errorf("a later draw: got %v revision %d, want %v above revision %d", b.Ranges, b.Revision, want, rev)
	}
	if st := stats(t, s, "invoices"); st.Fetches != 4 || st.StrictQueued != 0 {
		t.Errorf("stats: got %d fetches, %d queued, want 4, 0", st.Fetches, st.StrictQueued)
	}
}

// TestSegmentsStrictQueueLeave: a queued draw whose ctx ends leaves the
// queue and takes no IDs; a fetch that fails fails every draw of its
// group and none is served later; the namespace's exhaustion refuses only
// the draws that ask for more than is left.
func TestSegmentsStrictQueueLeave(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "invoices", Mode: ModeStrict, Step: 1, MaxIDLimit: 11})
	ctx := testCtx(t)
	s := newTestSegments(t, store, testSettings())
	mustDrawOne(t, ctx, s, "invoices") // ID 1

	// A queued draw leaves when its ctx ends.
	store.closeGate()
	first := goDraw(ctx, s, "invoices", 1)
	fetchesStarted(t, ctx, store, 2)
	stay := goDraw(ctx, s, "invoices", 2)
	strictQueued(t, ctx, s, "invoices", 1)
	leaveCtx, leave := context.WithCancel(ctx)
	left := goDraw(leaveCtx, s, "invoices", 3)
	strictQueued(t, ctx, s, "invoices", 2)
	leave()
	if d := <-left; !errors.Is(d.err, ErrUnavailable) || !errors.Is(d.err, context.Canceled) || len(d.b.IDs) != 0 {
		t.Errorf("the draw that left: got %v with %v, want ErrUnavailable and context.Canceled, no IDs", d.err, d.b.IDs)
	}
	strictQueued(t, ctx, s, "invoices", 1)
	store.openGate()
	if d := <-first; d.err != nil || !slices.Equal(d.b.Ranges, []IDRange{{2, 2}}) {
		t.Errorf("the draw in flight: got %v, %v, want [{2 2}]", d.b.Ranges, d.err)
	}
	if d := <-stay; d.err != nil || !slices.Equal(d.b.Ranges, []IDRange{{3, 4}}) {
		t.Errorf("the draw that stayed: got %v, %v, want [{3 4}]", d.b.Ranges, d.err)
	}

	// A failed fetch fails its whole group; their IDs are never served.
	store.closeGate()
	first = goDraw(ctx, s, "invoices", 1)
	fetchesStarted(t, ctx, store, 4)
	store.inject(fakeFault{err: errors.New("reply lost"), commit: true}) // for the next fetch: the group's
	a := goDraw(ctx, s, "invoices", 1)
	strictQueued(t, ctx, s, "invoices", 1)
	b := goDraw(ctx, s, "invoices", 2)
	strictQueued(t, ctx, s, "invoices", 2)
	store.openGate()
	if d := <-first; d.err != nil || !slices.Equal(d.b.Ranges, []IDRange{{5, 5}}) {
		t.Errorf("the draw in flight: got %v, %v, want [{5 5}]", d.b.Ranges, d.err)
	}
	for _, ch := range []<-chan strictDraw{a, b} {
		if d := <-ch; !errors.Is(d.err, ErrUnavailable) || len(d.b.IDs) != 0 {
			t.Errorf("a draw of the failed fetch: got %v with %v, want ErrUnavailable, no IDs", d.err, d.b.IDs)
		}
	}

	// IDs 6..8 went with the failed fetch; after 9, 2 are left up to 11.
	// Together the draws of 2 and 2 ask for too many: the first is
	// served, the second refused.
	store.closeGate()
	first = goDraw(ctx, s, "invoices", 1)
	fetchesStarted(t, ctx, store, 6)
	a = goDraw(ctx, s, "invoices", 2)
	strictQueued(t, ctx, s, "invoices", 1)
	b = goDraw(ctx, s, "invoices", 2)
	strictQueued(t, ctx, s, "invoices", 2)
	store.openGate()
	if d := <-first; d.err != nil || !slices.Equal(d.b.Ranges, []IDRange{{9, 9}}) {
		t.Errorf("the draw in flight: got %v, %v, want [{9 9}]", d.b.Ranges, d.err)
	}
	if d := <-a; d.err != nil || !slices.Equal(d.b.Ranges, []IDRange{{10, 11}}) {
		t.Errorf("the first draw of 2: got %v, %v, want [{10 11}]", d.b.Ranges, d.err)
	}
	if d := <-b; !errors.Is(d.err, ErrNamespaceExhausted) || len(d.b.IDs) != 0 {
		t.Errorf("the second draw of 2: got %v with %v, want ErrNamespaceExhausted, no IDs", d.err, d.b.IDs)
	}
	if want := []int64{1, 1, 2, 1, 3, 1, 4, 2, 2}; !slices.Equal(store.sizes(), want) {
		t.Errorf("fetch sizes: got %v, want %v", store.sizes(), want)
	}
}

// TestSegmentsStrictCloseWaits: Close lets a strict fetch in flight
// finish, so its draw is served, and fails the draws queued behind it
// without fetching for them.
func TestSegmentsStrictCloseWaits(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "invoices", Mode: ModeStrict, Step: 1})
	ctx := testCtx(t)
	s := mustSegments(t, store, testSettings())
	mustDrawOne(t, ctx, s, "invoices") // ID 1

	store.closeGate()
	first := goDraw(ctx, s, "invoices", 2)
	fetchesStarted(t, ctx, store, 2)
	queued := goDraw(ctx, s, "invoices", 1)
	strictQueued(t, ctx, s, "invoices", 1)
	closed := make(chan error, 1)
	go func() { closed <- s.Close(ctx) }()
	for !s.closed.Load() {
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	store.openGate()
	if d := <-first; d.err != nil || !slices.Equal(d.b.Ranges, []IDRange{{2, 3}}) {
		t.Errorf("the draw in flight at Close: got %v, %v, want [{2 3}]", d.b.Ranges, d.err)
	}
	if d := <-queued; !errors.Is(d.err, ErrSegmentsClosed) {
		t.Errorf("the queued draw: got %v, want ErrSegmentsClosed", d.err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if want := []int64{1, 2}; !slices.Equal(store.sizes(), want) {
		t.Errorf("fetch sizes: got %v, want %v", store.sizes(), want)
	}
}

// otherNode starts another allocator on store, as a second node would, and
// draws one ID of "orders" with it, which fetches the next range. It
// returns the allocator and the ID.
func otherNode(t *testing.T, ctx context.Context, store *fakeSegmentStore) (*Segments, int64) {
	t.Helper()
	b := newTestSegments(t, store, testSettings())
	return b, mustDrawOne(t, ctx, b, "orders")
}

func TestSegmentsTailReturn(t *testing.T) {
	tests := []struct {
		name string
		// run draws from a (and from other allocators on the same store)
		// before a is closed.
		run      func(t *testing.T, ctx context.Context, a *Segments, store *fakeSegmentStore)
		wantNext int64 // first ID of a new allocator after a closed
		wantTail []bool
	}{
		{
			name: "unused tail returned",
			run: func(t *testing.T, ctx context.Context, a *Segments, store *fakeSegmentStore) {
				mustDraw(t, ctx, a, "orders", 10)
			},
			wantNext: 11,
			wantTail: []bool{true},
		},
		{
			name: "another fetch in between: tail skipped",
			run: func(t *testing.T, ctx context.Context, a *Segments, store *fakeSegmentStore) {
				mustDraw(t, ctx, a, "orders", 10)
				b, id := otherNode(t, ctx, store)
				if id != 1001 {
					t.Fatalf("other allocator: got %d, want 1001", id)
				}
				if err := b.Close(ctx); err != nil {
					t.Fatal(err)
				}
			},
			wantNext: 1002, // b returned its own tail; a's 11..1000 are never reused
			wantTail: []bool{true, false},
		},
		{
			name: "tail spans the prefetched range",
			run: func(t *testing.T, ctx context.Context, a *Segments, store *fakeSegmentStore) {
				mustDraw(t, ctx, a, "orders", 150)
				waitIdle(t, a, "orders")
				if st := stats(t, a, "orders"); st.Runway != 1850 {
					t.Fatalf("runway: got %d, want 1850", st.Runway)
				}
			},
			wantNext: 151,
			wantTail: []bool{true},
		},
		{
			name: "prefetched range not contiguous: only it is returned",
			run: func(t *testing.T, ctx context.Context, a *Segments, store *fakeSegmentStore) {
				mustDraw(t, ctx, a, "orders", 5)
				otherNode(t, ctx, store) // 1001..2000 go to it
				mustDraw(t, ctx, a, "orders", 145)
				waitIdle(t, a, "orders") // a holds 2001..3000
			},
			wantNext: 2001,
			wantTail: []bool{true},
		},
		{
			name: "range fetched, nothing drawn",
			run: func(t *testing.T, ctx context.Context, a *Segments, store *fakeSegmentStore) {
				fetchIdle(t, ctx, a, "orders")
			},
			wantNext: 1,
			wantTail: []bool{true},
		},
		{
			name: "range used up: nothing to return",
			run: func(t *testing.T, ctx context.Context, a *Segments, store *fakeSegmentStore) {
				fetchIdle(t, ctx, a, "orders")
				store.closeGate() // the prefetch never commits
				mustDraw(t, ctx, a, "orders", 1000)
			},
			wantNext: 1001,
			wantTail: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newFakeSegmentStore(Namespace{Name: "orders", Step: 1000})
			ctx := testCtx(t)
			a := mustSegments(t, store, testSettings())
			tt.run(t, ctx, a, store)
			if err := a.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			store.openGate()
			if _, err := DrawOne(ctx, a, "orders"); !errors.Is(err, ErrSegmentsClosed) {
				t.Errorf("DrawOne after Close: got %v, want ErrSegmentsClosed", err)
			}
			var got []bool
			for _, c := range store.tailCalls() {
				got = append(got, c.ok)
			}
			if !slices.Equal(got, tt.wantTail) {
				t.Errorf("tail returns (ok per call): got %v, want %v", got, tt.wantTail)
			}
			if _, id := otherNode(t, ctx, store); id != tt.wantNext {
				t.Errorf("next allocator's first ID: got %d, want %d", id, tt.wantNext)
			}
		})
	}
}

func TestSegmentsCloseWithDatabaseDown(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "orders", Step: 1000})
	ctx := testCtx(t)
	a := mustSegments(t, store, testSettings())
	mustDraw(t, ctx, a, "orders", 10)
	store.setDown(errFakeDown)
	if err := a.Close(ctx); !errors.Is(err, errFakeDown) {
		t.Fatalf("Close with the database down: got %v, want the store error", err)
	}
	if err := a.Close(ctx); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	store.setDown(nil)
	if _, id := otherNode(t, ctx, store); id != 1001 {
		t.Errorf("next allocator's first ID: got %d, want 1001 (the tail is skipped)", id)
	}
}

func TestSegmentsCloseStopsLoadsAndWaiters(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "orders", Step: 10})
	ctx := testCtx(t)
	s := mustSegments(t, store, testSettings())
	fetchIdle(t, ctx, s, "orders")
	store.closeGate()
	var b Batch
	if err := s.Draw(ctx, "orders", 10, &b); err != nil { // starts a load held at the gate
		t.Fatal(err)
	}
	waiter := make(chan error, 1)
	go func() {
		_, err := DrawOne(ctx, s, "orders")
		waiter <- err
	}()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-waiter; !errors.Is(err, ErrSegmentsClosed) {
		t.Errorf("waiter during Close: got %v, want ErrSegmentsClosed", err)
	}
	if n := store.fetchesInFlight(); n != 0 {
		t.Errorf("fetches in flight after Close: got %d, want 0", n)
	}
	for _, name := range []string{"orders", "other"} {
		if err := s.Draw(ctx, name, 2, &b); !errors.Is(err, ErrSegmentsClosed) || !errors.Is(err, ErrUnavailable) {
			t.Errorf("draw of %s after Close: got %v, want ErrSegmentsClosed wrapping ErrUnavailable", name, err)
		}
	}
}

// TestSegmentsFailedFetchNeverServed makes fetches fail, some after their
// commit (the reply is lost, or comes after the fetch timeout), and checks
// that no ID of those ranges is ever handed out.
func TestSegmentsFailedFetchNeverServed(t *testing.T) {
	errLost := errors.New("fake store: connection reset")
	tests := []struct {
		name     string
		faults   []fakeFault
		wantLost int // committed ranges whose fetch failed
	}{
		{"first fetch: reply lost", []fakeFault{{err: errLost, commit: true}}, 1},
		{"prefetch: reply lost twice", []fakeFault{{}, {err: errLost, commit: true}, {err: errLost, commit: true}}, 2},
		{"prefetch: error before commit", []fakeFault{{}, {err: errLost}}, 0},
		{"prefetch: reply after the fetch timeout", []fakeFault{{}, {delay: time.Minute}}, 1},
		{"first fetch: reply after the fetch timeout", []fakeFault{{delay: time.Minute}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newFakeSegmentStore(Namespace{Name: "orders", Step: 100})
			store.inject(tt.faults...)
			set := testSettings()
			set.FetchTimeout = 50 * time.Millisecond
			s := newTestSegments(t, store, set)
			ctx := testCtx(t)

			var served []int64
			var b Batch
			for failures := 0; len(served) < 500; {
				if err := s.Draw(ctx, "orders", 7, &b); err != nil {
					if !errors.Is(err, ErrUnavailable) || failures > 10 {
						t.Fatalf("Draw: got %v after %d failures, want success or ErrUnavailable", err, failures)
					}
					failures++
					waitIdle(t, s, "orders")
					continue
				}
				served = append(served, b.IDs...)
			}
			lost := store.lostRanges()
			if len(lost) != tt.wantLost {
				t.Fatalf("committed ranges whose fetch failed: got %d, want %d", len(lost), tt.wantLost)
			}
			for i, id := range served {
				if i > 0 && id <= served[i-1] {
					t.Fatalf("ID %d after %d", id, served[i-1])
				}
				for _, l := range lost {
					if l.First <= id && id <= l.Last {
						t.Fatalf("ID %d served from the range %d..%d whose fetch failed", id, l.First, l.Last)
					}
				}
			}
			if st := stats(t, s, "orders"); st.FetchErrors != int64(len(tt.faults)-countZero(tt.faults)) || st.LastError == nil {
				t.Errorf("stats: got %d fetch errors, last error %v, want %d and an error", st.FetchErrors, st.LastError, len(tt.faults)-countZero(tt.faults))
			}
		})
	}
}

func countZero(faults []fakeFault) int {
	n := 0
	for _, f := range faults {
		if f == (fakeFault{}) {
			n++
		}
	}
	return n
}

func TestSegmentsFallback(t *testing.T) {
	const smallest = 1 << 40 // the fake "smallest Snowflake ID now"
	const limit = smallest - 1
	tests := []struct {
		name      string
		ns        Namespace
		noSource  bool
		smallest  int64
		next      int64 // the first ID the source hands out; 0: smallest+5
		sourceErr error
		remove    bool // the namespace is deleted instead of the database failing
		wantErr   error
		wantSrc   Source
	}{
		{name: "fallback serves", ns: Namespace{Fallback: FallbackSnowflake, MaxIDLimit: limit}, smallest: smallest, wantSrc: SourceSnowflake},
		{name: "fallback none", ns: Namespace{Fallback: FallbackNone}, smallest: smallest, wantErr: ErrUnavailable},
		{name: "fallback none with a limit left from before", ns: Namespace{Fallback: FallbackNone, MaxIDLimit: limit}, smallest: smallest, wantErr: ErrUnavailable},
		{name: "strict never falls back", ns: Namespace{Fallback: FallbackSnowflake, MaxIDLimit: limit, Mode: ModeStrict}, smallest: smallest, wantErr: ErrUnavailable},
		{name: "no Snowflake source", ns: Namespace{Fallback: FallbackSnowflake, MaxIDLimit: limit}, noSource: true, smallest: smallest, wantErr: ErrUnavailable},
		{name: "no max_id_limit", ns: Namespace{Fallback: FallbackSnowflake}, smallest: smallest, wantErr: ErrUnavailable},
		{name: "Snowflake IDs of now not above the limit", ns: Namespace{Fallback: FallbackSnowflake, MaxIDLimit: smallest}, smallest: smallest, wantErr: ErrUnavailable},
		{name: "smallest Snowflake ID just above the limit", ns: Namespace{Fallback: FallbackSnowflake, MaxIDLimit: smallest - 1}, smallest: smallest, wantSrc: SourceSnowflake},
		{name: "source hands out IDs at the limit", ns: Namespace{Fallback: FallbackSnowflake, MaxIDLimit: limit}, smallest: smallest, next: limit, wantErr: ErrUnavailable},
		{name: "Snowflake source unavailable", ns: Namespace{Fallback: FallbackSnowflake, MaxIDLimit: limit}, smallest: smallest, sourceErr: fmt.Errorf("lease lost: %w", ErrUnavailable), wantErr: ErrUnavailable},
		{name: "namespace deleted: no fallback", ns: Namespace{Fallback: FallbackSnowflake, MaxIDLimit: limit}, smallest: smallest, remove: true, wantErr: ErrNamespaceNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.ns.Name, tt.ns.Step = "orders", 10
			store := newFakeSegmentStore(tt.ns)
			sf := &fakeSnowflakeSource{}
			if tt.next == 0 {
				tt.next = smallest + 5
			}
			sf.set(tt.next, tt.smallest, tt.sourceErr)
			sf.lease = LeaseToken{DatacenterID: 1, WorkerID: 2, FencingVersion: 7}
			set := testSettings()
			if !tt.noSource {
				set.Fallback = sf
			}
			s := newTestSegments(t, store, set)
			ctx := testCtx(t)

			// The first range (or strict draw) is fetched; the database then
			// fails while the rest of the range is drawn: the known max_id is 10
			// and both buffers are empty.
			mustDrawOne(t, ctx, s, "orders")
			waitIdle(t, s, "orders")
			if tt.ns.Mode == ModeStrict {
				mustDraw(t, ctx, s, "orders", 9)
			}
			if tt.remove {
				store.remove("orders")
			} else {
				store.setDown(errFakeDown)
			}
			if tt.ns.Mode != ModeStrict {
				mustDraw(t, ctx, s, "orders", 9) // starts a prefetch, which fails
			}
			if got := stats(t, s, "orders"); got.MaxID != 10 || got.Runway != 0 {
				t.Fatalf("known max_id, runway: got %d, %d, want 10, 0", got.MaxID, got.Runway)
			}

			var b Batch
			err := s.Draw(ctx, "orders", 3, &b)
			st := stats(t, s, "orders")
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Draw: got %v, want %v", err, tt.wantErr)
				}
				if len(b.IDs) != 0 || st.Fallbacks != 0 {
					t.Errorf("after a failed draw: got %d IDs, %d fallbacks, want 0, 0", len(b.IDs), st.Fallbacks)
				}
				if tt.remove && errors.Is(err, ErrUnavailable) {
					t.Errorf("Draw of a deleted namespace: got %v, which wraps ErrUnavailable", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Draw: %v", err)
			}
			want := Batch{IDs: []int64{smallest + 5, smallest + 6, smallest + 7}, Ranges: []IDRange{{smallest + 5, smallest + 7}}, Source: tt.wantSrc}
			if !slices.Equal(b.IDs, want.IDs) || !slices.Equal(b.Ranges, want.Ranges) || b.Source != want.Source {
				t.Errorf("Draw: got %+v, want %+v", b, want)
			}
			if b.Lease != sf.lease || b.Revision != 0 {
				t.Errorf("fallback Draw: lease %+v, revision %d; want the source's lease %+v and revision 0", b.Lease, b.Revision, sf.lease)
			}
			id, err := DrawOne(ctx, s, "orders")
			if err != nil || id != smallest+8 {
				t.Errorf("DrawOne: got %d, %v, want %d", id, err, smallest+8)
			}
			if st := stats(t, s, "orders"); st.Fallbacks != 2 || st.FallbackIDs != 4 || !st.Failing {
				t.Errorf("stats: got %d fallbacks, %d IDs, failing=%v, want 2, 4, true", st.Fallbacks, st.FallbackIDs, st.Failing)
			}

			// The database is back: segment IDs continue above the old max_id.
			store.setDown(nil)
			waitIdle(t, s, "orders")
			b = mustDraw(t, ctx, s, "orders", 2)
			if b.Source != SourceSegment || b.IDs[0] != 11 {
				t.Errorf("Draw after the database came back: got %v from %q, want 11, 12 from segment", b.IDs, b.Source)
			}
			if b.Lease != (LeaseToken{}) || b.Revision != 0 {
				t.Errorf("buffered Draw into a reused Batch: lease %+v, revision %d; want both zero", b.Lease, b.Revision)
			}
		})
	}
}

func TestSegmentsModeChange(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "orders", Step: 10})
	s := newTestSegments(t, store, testSettings())
	ctx := testCtx(t)

	if b := mustDraw(t, ctx, s, "orders", 5); b.Revision != 0 {
		t.Errorf("buffered draw: revision %d, want 0", b.Revision)
	}
	// The first draw's prefetch loads 11..20 while the row is still
	// buffered; let it land before the mode changes, so that which fetch
	// sees the change does not depend on the scheduler.
	waitIdle(t, s, "orders")
	store.update("orders", func(ns *Namespace) { ns.Mode = ModeStrict })
	// This draw uses up both buffered ranges (6..20); the prefetch it starts
	// returns the row in strict mode: that range (21..30) is dropped and
	// draws fetch exactly what they need.
	if b := mustDraw(t, ctx, s, "orders", 15); !slices.Equal(b.Ranges, []IDRange{{6, 20}}) {
		t.Errorf("last buffered draw: got %v, want [{6 20}]", b.Ranges)
	}
	waitIdle(t, s, "orders")
	if st := stats(t, s, "orders"); st.Mode != ModeStrict || st.Runway != 0 {
		t.Fatalf("after the switch to strict: got mode %q, runway %d, want strict, 0", st.Mode, st.Runway)
	}
	_, before, _ := store.counts()
	b := mustDraw(t, ctx, s, "orders", 3)
	if want := []IDRange{{31, 33}}; !slices.Equal(b.Ranges, want) {
		t.Errorf("strict draw: got %v, want %v", b.Ranges, want)
	}
	if row := store.row("orders"); b.Revision != row.Version || b.Revision < 1 {
		t.Errorf("strict draw: revision %d, want the row's version after the fetch, %d", b.Revision, row.Version)
	}
	if id := mustDrawOne(t, ctx, s, "orders"); id != 34 {
		t.Errorf("strict DrawOne: got %d, want 34", id)
	}
	if _, after, _ := store.counts(); after-before != 2 {
		t.Errorf("fetches for two strict draws: got %d, want 2", after-before)
	}

	store.update("orders", func(ns *Namespace) { ns.Mode = ModeBuffered })
	mustDrawOne(t, ctx, s, "orders") // a strict fetch that reads the new mode: 35
	if id := mustDrawOne(t, ctx, s, "orders"); id != 36 {
		t.Errorf("first buffered DrawOne: got %d, want 36", id)
	}
	waitIdle(t, s, "orders")
	if st := stats(t, s, "orders"); st.Mode != ModeBuffered || st.Runway != 9 {
		t.Errorf("after the switch to buffered: got mode %q, runway %d, want buffered, 9", st.Mode, st.Runway)
	}
}

func TestSegmentsStats(t *testing.T) {
	store := newFakeSegmentStore(
		Namespace{Name: "b-orders", Step: 100, MinStep: 10, MaxStep: 1000, Fallback: FallbackSnowflake},
		Namespace{Name: "a-invoices", Mode: ModeStrict, Step: 5},
	)
	s := newTestSegments(t, store, testSettings())
	ctx := testCtx(t)
	mustDraw(t, ctx, s, "b-orders", 30)
	waitIdle(t, s, "b-orders")
	mustDraw(t, ctx, s, "a-invoices", 3)

	got := s.Stats()
	if len(got) != 2 || got[0].Namespace != "a-invoices" || got[1].Namespace != "b-orders" {
		t.Fatalf("Stats: got %+v, want a-invoices then b-orders", got)
	}
	inv, ord := got[0], got[1]
	if inv.Mode != ModeStrict || inv.Runway != 0 || inv.Fetches != 1 || inv.MaxID != 3 || inv.Loading {
		t.Errorf("a-invoices: got %+v, want strict, runway 0, 1 fetch, max_id 3, not loading", inv)
	}
	if ord.Mode != ModeBuffered || ord.Fallback != FallbackSnowflake || ord.Fetches != 2 || ord.Runway != 70+200 ||
		ord.Step != 200 || ord.MaxID != 300 || ord.Loading || ord.Failing || ord.LastError != nil {
		t.Errorf("b-orders: got %+v, want buffered, snowflake, 2 fetches, runway 270, step 200, max_id 300, idle", ord)
	}
}

// TestSegmentsWarmDrawsDoNotAllocate checks the hot path: a draw from a warm
// buffer allocates nothing, a reused Batch included.
func TestSegmentsWarmDrawsDoNotAllocate(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "orders", Step: 1 << 30})
	s := newTestSegments(t, store, testSettings())
	ctx := testCtx(t)
	mustDraw(t, ctx, s, "orders", 1<<20) // past the trigger: the prefetch is done
	waitIdle(t, s, "orders")
	b := Batch{IDs: make([]int64, 0, 64), Ranges: make([]IDRange, 0, 4)}
	tests := []struct {
		name string
		fn   func()
	}{
		{"Draw of 1", func() { _ = s.Draw(ctx, "orders", 1, &b) }},
		{"Draw of 50", func() { _ = s.Draw(ctx, "orders", 50, &b) }},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(1000, tt.fn); got != 0 {
			t.Errorf("%s: got %v allocs per draw, want 0", tt.name, got)
		}
	}
}

// TestSegmentsCloseWaitsForFetchInFlight: a background fetch still running
// when Close starts is let finish, so its range is returned with the tail
// rather than committed after it and lost as a gap.
func TestSegmentsCloseWaitsForFetchInFlight(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "orders", Step: 1000})
	ctx := testCtx(t)
	a := mustSegments(t, store, testSettings())
	mustDraw(t, ctx, a, "orders", 10)
	waitIdle(t, a, "orders")
	store.closeGate()
	mustDraw(t, ctx, a, "orders", 140) // past the threshold: the prefetch starts and waits at the gate
	testkit.WaitFor(t, 10*time.Second, "the prefetch to start", func() bool { return store.fetchesInFlight() > 0 })
	closed := make(chan error, 1)
	go func() { closed <- a.Close(ctx) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a fetch was in flight and its ctx had time left", err)
	case <-time.After(50 * time.Millisecond):
	}
	store.openGate()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, id := otherNode(t, ctx, store); id != 151 {
		t.Errorf("next allocator's first ID: got %d, want 151 (the fetch in flight was returned too)", id)
	}
}

// TestSegmentsMaxWait: a draw that must wait for a range gives up after
// MaxWait even when its ctx allows more, and says it is unavailable.
func TestSegmentsMaxWait(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "orders", Step: 1000})
	store.closeGate() // no fetch commits
	settings := testSettings()
	settings.MaxWait = 50 * time.Millisecond
	settings.FetchTimeout = time.Minute
	a := newTestSegments(t, store, settings)
	t.Cleanup(store.openGate)
	ctx := testCtx(t) // far longer than MaxWait
	_, err := DrawOne(ctx, a, "orders")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "longest a draw may wait") {
		t.Fatalf("DrawOne with no range coming: got %v, want ErrUnavailable after MaxWait", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the test's ctx ended first (%v); the draw must give up on its own bound", ctx.Err())
	}
}

// TestSegmentsTopOfInt64 draws the last IDs a counter can reach: every one
// of them is handed out exactly once, in increasing order, whatever the
// step, and then the namespace answers ErrNamespaceExhausted, never a
// Snowflake fallback.
func TestSegmentsTopOfInt64(t *testing.T) {
	const top = int64(math.MaxInt64)
	tests := []struct {
		name  string
		ns    Namespace
		draws []int // counts drawn in turn; -n is a draw of n refused for asking too many
	}{
		{"buffered, one by one", Namespace{MaxID: top - 18, Step: 10}, slices.Repeat([]int{1}, 18)},
		{"buffered, a batch ending at the top", Namespace{MaxID: top - 10, Step: 10}, []int{10}},
		{"buffered, batches across the last fetch", Namespace{MaxID: top - 18, Step: 10}, []int{7, 7, -5, 4}},
		{"buffered, step larger than what is left", Namespace{MaxID: top - 3, Step: 1000}, []int{-4, 2, -2, 1}},
		{"strict", Namespace{MaxID: top - 5, Step: 10, Mode: ModeStrict}, []int{3, -3, 2}},
		{"fallback namespace", Namespace{MaxID: top - 5, Step: 10, Fallback: FallbackSnowflake}, []int{-6, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.ns.Name = "orders"
			store := newFakeSegmentStore(tt.ns)
			set := testSettings()
			sf := &fakeSnowflakeSource{}
			sf.set(1<<40, 1<<40, nil)
			set.Fallback = sf
			s := newTestSegments(t, store, set)
			ctx := testCtx(t)

			want := tt.ns.MaxID + 1
			for _, n := range tt.draws {
				var b Batch
				if n < 0 {
					if err := s.Draw(ctx, "orders", -n, &b); !errors.Is(err, ErrNamespaceExhausted) || len(b.IDs) != 0 {
						t.Fatalf("draw of %d with fewer left: got %d IDs, %v; want none and %v", -n, len(b.IDs), err, ErrNamespaceExhausted)
					}
					continue
				}
				b = mustDraw(t, ctx, s, "orders", n)
				wantLast := want + int64(n) - 1
				if len(b.IDs) != n || b.IDs[0] != want || b.IDs[n-1] != wantLast || b.Source != SourceSegment ||
					len(b.Ranges) != 1 || b.Ranges[0] != (IDRange{want, wantLast}) {
					t.Fatalf("draw of %d: got %d IDs %v, ranges %v from %q; want %d..%d in one segment range",
						n, len(b.IDs), b.IDs[:min(3, len(b.IDs))], b.Ranges, b.Source, want, wantLast)
				}
				want = wantLast + 1 // wraps to the smallest int64 after the last draw
			}
			if want != math.MinInt64 {
				t.Fatalf("the draws stopped at %d, below the largest int64", want-1)
			}
			for _, n := range []int{1, 3} {
				var b Batch
				err := s.Draw(ctx, "orders", n, &b)
				if !errors.Is(err, ErrNamespaceExhausted) || errors.Is(err, ErrUnavailable) {
					t.Errorf("Draw(%d) of an exhausted namespace: got %v, want %v (and not %v)", n, err, ErrNamespaceExhausted, ErrUnavailable)
				}
				if len(b.IDs) != 0 {
					t.Errorf("Draw(%d) of an exhausted namespace: got IDs %v with the error", n, b.IDs)
				}
			}
			if _, err := DrawOne(ctx, s, "orders"); !errors.Is(err, ErrNamespaceExhausted) {
				t.Errorf("DrawOne of an exhausted namespace: got %v, want %v", err, ErrNamespaceExhausted)
			}
			if st := stats(t, s, "orders"); st.Fallbacks != 0 || st.MaxID != top {
				t.Errorf("stats: got %d fallbacks, max_id %d; want 0 and %d", st.Fallbacks, st.MaxID, top)
			}
		})
	}
}

func TestBatchAppendRunAtTop(t *testing.T) {
	const top = int64(math.MaxInt64)
	var b Batch
	b.appendRun(top-4, 2, 1, 0)
	b.appendRun(top-2, 3, 1, 0)
	wantIDs := []int64{top - 4, top - 3, top - 2, top - 1, top}
	if !slices.Equal(b.IDs, wantIDs) || !slices.Equal(b.Ranges, []IDRange{{top - 4, top}}) {
		t.Errorf("got IDs %v, ranges %v; want %v in one range", b.IDs, b.Ranges, wantIDs)
	}
}

// TestSegmentsTopOfInt64TwoNodes has two allocators draw a namespace to its
// end. Each asks for what its last view of the row says is left; the one
// whose view is stale is refused, reads the row again and gets the rest.
// Together they hand out every ID once.
func TestSegmentsTopOfInt64TwoNodes(t *testing.T) {
	const top = int64(math.MaxInt64)
	store := newFakeSegmentStore(Namespace{Name: "orders", MaxID: top - 25, Step: 10})
	a := newTestSegments(t, store, testSettings())
	b := newTestSegments(t, store, testSettings())
	ctx := testCtx(t)

	seen := map[int64]bool{}
	add := func(who string, id int64) {
		if seen[id] {
			t.Fatalf("%s: ID %d handed out twice", who, id)
		}
		seen[id] = true
	}
	add("a", mustDrawOne(t, ctx, a, "orders")) // a: top-24..top-15, 15 left by its view
	add("b", mustDrawOne(t, ctx, b, "orders")) // b: top-14..top-5, 5 left
	for name, s := range map[string]*Segments{"a": a, "b": b} {
		for {
			id, err := DrawOne(ctx, s, "orders")
			if errors.Is(err, ErrNamespaceExhausted) {
				break
			}
			if err != nil {
				t.Fatalf("%s: DrawOne: %v", name, err)
			}
			add(name, id)
		}
	}
	if len(seen) != 25 {
		t.Errorf("got %d distinct IDs, want the 25 from %d to %d", len(seen), top-24, top)
	}
	for id := top - 24; ; id++ {
		if !seen[id] {
			t.Errorf("ID %d never handed out", id)
		}
		if id == top {
			break
		}
	}
	if sizes := store.sizes(); slices.Contains(sizes, 0) || len(sizes) > 5 {
		t.Errorf("fetch sizes %v: want at most 5 fetches, none of 0", sizes)
	}
}

// TestSegmentsFallbackNeverMeetsCounter serves Snowflake IDs while the
// database is down, then lets the counter rise when it is back: the counter
// stops at the namespace's max_id_limit, below every Snowflake ID the
// fallback can serve, and the namespace then answers ErrNamespaceExhausted,
// never the fallback, even with the database down again.
func TestSegmentsFallbackNeverMeetsCounter(t *testing.T) {
	const limit = 25
	store := newFakeSegmentStore(Namespace{Name: "orders", Step: 10, MaxStep: 10, Fallback: FallbackSnowflake, MaxIDLimit: limit})
	sf := &fakeSnowflakeSource{}
	sf.set(limit+1, limit+1, nil) // the first Snowflake ID of "now" is just above the limit
	set := testSettings()
	set.Fallback = sf
	s := newTestSegments(t, store, set)
	ctx := testCtx(t)

	segmentIDs := []int64{mustDrawOne(t, ctx, s, "orders")} // fetches 1..10
	store.setDown(errFakeDown)
	segmentIDs = append(segmentIDs, mustDraw(t, ctx, s, "orders", 9).IDs...) // 2..10; the prefetch fails
	fb := mustDraw(t, ctx, s, "orders", 3)
	if fb.Source != SourceSnowflake {
		t.Fatalf("with the database down: got %v from %q, want Snowflake IDs", fb.IDs, fb.Source)
	}

	store.setDown(nil)
	waitIdle(t, s, "orders") // the retried load succeeds
	// Draws of 2 until fewer are left, then of 1: a draw refused for
	// asking more than is left takes nothing.
	for n := 2; ; {
		var b Batch
		err := s.Draw(ctx, "orders", n, &b)
		if errors.Is(err, ErrNamespaceExhausted) {
			if n--; n > 0 {
				continue
			}
			break
		}
		if err != nil {
			t.Fatalf("Draw after the database came back: %v", err)
		}
		if b.Source != SourceSegment {
			t.Fatalf("Draw after the database came back: got %v from %q, want segment IDs", b.IDs, b.Source)
		}
		segmentIDs = append(segmentIDs, b.IDs...)
	}
	want := make([]int64, limit)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(segmentIDs, want) {
		t.Errorf("segment IDs: got %v, want 1..%d", segmentIDs, limit)
	}
	for _, id := range fb.IDs {
		if id <= limit {
			t.Errorf("fallback ID %d not above max_id_limit %d", id, limit)
		}
	}
	if got := store.row("orders").MaxID; got != limit {
		t.Errorf("max_id: got %d, want the limit %d", got, limit)
	}

	store.setDown(errFakeDown)
	for range 3 {
		var b Batch
		if err := s.Draw(ctx, "orders", 1, &b); !errors.Is(err, ErrNamespaceExhausted) || len(b.IDs) != 0 {
			t.Errorf("exhausted namespace with the database down: Draw got %v, %v; want %v and no IDs", b.IDs, err, ErrNamespaceExhausted)
		}
		if id, err := DrawOne(ctx, s, "orders"); !errors.Is(err, ErrNamespaceExhausted) {
			t.Errorf("exhausted namespace with the database down: DrawOne got %d, %v; want %v", id, err, ErrNamespaceExhausted)
		}
		// The loads that read the row again fail and retry meanwhile;
		// whatever they have reached, the answer stays the same.
		time.Sleep(5 * time.Millisecond)
	}
	if st := stats(t, s, "orders"); st.FallbackIDs != 3 {
		t.Errorf("fallback IDs: got %d, want the 3 served while the database was down", st.FallbackIDs)
	}
}

// TestSegmentsTailAfterExhausted: a node that found its namespace
// exhausted serves a tail another node gives back afterwards, since it reads
// the row again before it answers exhausted for good.
func TestSegmentsTailAfterExhausted(t *testing.T) {
	store := newFakeSegmentStore(Namespace{Name: "orders", Step: 10, MaxStep: 10, MaxIDLimit: 20})
	a := newTestSegments(t, store, testSettings())
	b := mustSegments(t, store, testSettings())
	ctx := testCtx(t)

	mustDrawOne(t, ctx, a, "orders") // a: 1..10
	if id := mustDrawOne(t, ctx, b, "orders"); id != 11 {
		t.Fatalf("b: got %d, want 11", id) // b: 11..20, the last range
	}
	waitIdle(t, b, "orders")
	for want := int64(2); want <= 10; want++ {
		if id := mustDrawOne(t, ctx, a, "orders"); id != want {
			t.Fatalf("a: got %d, want %d", id, want)
		}
	}
	waitIdle(t, a, "orders")
	if _, err := DrawOne(ctx, a, "orders"); !errors.Is(err, ErrNamespaceExhausted) {
		t.Fatalf("a after its range: got %v, want %v", err, ErrNamespaceExhausted)
	}
	if err := b.Close(ctx); err != nil { // gives back 12..20
		t.Fatal(err)
	}
	if got := store.row("orders").MaxID; got != 11 {
		t.Fatalf("max_id after b's tail return: got %d, want 11", got)
	}
	var got []int64
	for try := 0; len(got) < 9; try++ {
		id, err := DrawOne(ctx, a, "orders")
		if errors.Is(err, ErrNamespaceExhausted) && len(got) == 0 && try < 3 {
			waitIdle(t, a, "orders") // the load started by this draw reads the row again
			continue
		}
		if err != nil {
			t.Fatalf("a after b's tail return: %v (got %v so far)", err, got)
		}
		got = append(got, id)
	}
	if want := []int64{12, 13, 14, 15, 16, 17, 18, 19, 20}; !slices.Equal(got, want) {
		t.Errorf("a after b's tail return: got %v, want %v", got, want)
	}
	if _, err := DrawOne(ctx, a, "orders"); !errors.Is(err, ErrNamespaceExhausted) {
		t.Errorf("a at the limit: got %v, want %v", err, ErrNamespaceExhausted)
	}
}

// TestSegmentsDynamicStepWindows: the step's windows come from
// SegmentSettings.GrowBelow and ShrinkAbove.
func TestSegmentsDynamicStepWindows(t *testing.T) {
	set := testSettings()
	set.GrowBelow, set.ShrinkAbove = 2*time.Minute, 5*time.Minute
	sf := newStepTest(t, set)
	for i, st := range []struct {
		lasted time.Duration
		want   int64
	}{
		{time.Minute, 200},     // under 2m: doubles
		{3 * time.Minute, 200}, // between 2m and 5m: kept (the default windows would double it)
		{6 * time.Minute, 100}, // over 5m: halves (the default windows would keep it)
	} {
		sizes := sf.useUp(t, st.lasted)
		if got := sizes[len(sizes)-1]; got != st.want {
			t.Errorf("fetch %d after a range that lasted %v: got step %d, want %d (all: %v)", i+2, st.lasted, got, st.want, sizes)
		}
	}
}

func TestSegmentSettingsResolve(t *testing.T) {
	got, err := SegmentSettings{}.Resolve()
	if err != nil {
		t.Fatalf("Resolve of the zero value: %v", err)
	}
	want := SegmentSettings{Threshold: DefaultSegmentThreshold, GrowBelow: 15 * time.Minute, ShrinkAbove: 30 * time.Minute,
		FetchTimeout: DefaultSegmentFetchTimeout, RetryMin: DefaultSegmentRetryMin, RetryMax: DefaultSegmentRetryMax, MaxWait: DefaultSegmentMaxWait}
	if got != want {
		t.Errorf("Resolve of the zero value: got %+v, want the defaults %+v", got, want)
	}
	if again, err := got.Resolve(); err != nil || again != got {
		t.Errorf("Resolve of a resolved value: got %+v, %v; want it unchanged", again, err)
	}
	if got, err := (SegmentSettings{RetryMin: 5 * time.Second}).Resolve(); err != nil || got.RetryMax != 5*time.Second {
		t.Errorf("RetryMin above the default RetryMax: got RetryMax %s, %v; want it raised to 5s", got.RetryMax, err)
	}
	for _, tc := range []struct {
		name string
		s    SegmentSettings
		want string // "" when valid
	}{
		{"threshold 1", SegmentSettings{Threshold: 1}, ""},
		{"short windows", SegmentSettings{GrowBelow: time.Second, ShrinkAbove: 2 * time.Second}, ""},
		{"grow below the default shrink", SegmentSettings{GrowBelow: 29 * time.Minute}, ""},
		{"threshold above 1", SegmentSettings{Threshold: 1.01}, "invalid SegmentSettings.Threshold 1.01: want more than 0 and at most 1"},
		{"negative threshold", SegmentSettings{Threshold: -0.5}, "invalid SegmentSettings.Threshold -0.5"},
		{"NaN threshold", SegmentSettings{Threshold: math.NaN()}, "invalid SegmentSettings.Threshold NaN"},
		{"negative grow", SegmentSettings{GrowBelow: -time.Second}, "invalid SegmentSettings.GrowBelow -1s: want more than 0"},
		{"negative shrink", SegmentSettings{ShrinkAbove: -time.Second}, "invalid SegmentSettings.ShrinkAbove -1s: want more than 0"},
		{"grow at the default shrink", SegmentSettings{GrowBelow: 30 * time.Minute}, "invalid SegmentSettings.GrowBelow 30m0s: want less than SegmentSettings.ShrinkAbove 30m0s"},
		{"shrink under the default grow", SegmentSettings{ShrinkAbove: 10 * time.Minute}, "want less than SegmentSettings.ShrinkAbove 10m0s"},
		{"negative fetch timeout", SegmentSettings{FetchTimeout: -time.Second}, "invalid SegmentSettings.FetchTimeout -1s"},
		{"negative retry min", SegmentSettings{RetryMin: -time.Second}, "invalid SegmentSettings.RetryMin -1s"},
		{"retry max below retry min", SegmentSettings{RetryMin: time.Second, RetryMax: time.Millisecond},
			"invalid SegmentSettings.RetryMax 1ms: want at least SegmentSettings.RetryMin 1s"},
	} {
		_, err := tc.s.Resolve()
		CheckResolveError(t, tc.name, err, tc.want)
		// NewSegments applies the same rules: there is one defaulting.
		sg, err := NewSegments(newFakeSegmentStore(), tc.s)
		CheckResolveError(t, tc.name+" (NewSegments)", err, tc.want)
		if sg != nil {
			_ = sg.Close(context.Background())
		}
	}
}
