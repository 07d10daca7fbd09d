package snowflake

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
)

// t0 is a fixed instant well inside the default layout, on a millisecond
// boundary plus 300µs so that sleeps to the boundary are visible.
var t0 = time.Date(2026, 6, 1, 12, 0, 0, 300_000, time.UTC)

func mustGenerator(tb testing.TB, s Settings) *Generator {
	tb.Helper()
	g, err := NewGenerator(s)
	if err != nil {
		tb.Fatalf("NewGenerator: %v", err)
	}
	return g
}

func TestNextParts(t *testing.T) {
	clk := newFakeClock(t0)
	g := mustGenerator(t, Settings{DatacenterID: 3, WorkerID: 17, Clock: clk})
	for i := int64(0); i < 3; i++ {
		id, err := g.Next()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		p := g.Layout().Decompose(id)
		want := Parts{Time: t0.Truncate(time.Millisecond), Timestamp: t0.UnixMilli() - DefaultEpoch.UnixMilli(), Datacenter: 3, Worker: 17, Sequence: i}
		if p != want {
			t.Errorf("ID %d: got %+v, want %+v", i, p, want)
		}
	}
	if got, want := g.LastTimestamp(), t0.UnixMilli(); got != want {
		t.Errorf("LastTimestamp: got %d, want %d", got, want)
	}
}

func TestClockSteps(t *testing.T) {
	tests := []struct {
		name     string
		step     time.Duration // applied after the first ID
		wait     time.Duration // Settings.MaxBackwardWait
		wantErr  error
		wantTSOK bool // the next ID's timestamp is the first one's (waited out)
	}{
		{"forward", 5 * time.Millisecond, 0, nil, false},
		{"backward within wait", -5 * time.Millisecond, 0, nil, true},
		{"backward at wait", -10 * time.Millisecond, 0, nil, true},
		{"backward beyond wait", -11 * time.Millisecond, 0, ErrClockBackward, false},
		{"backward large", -2 * time.Second, 0, ErrClockBackward, false},
		{"backward with longer wait", -500 * time.Millisecond, time.Second, nil, true},
		{"no wait allowed", -1 * time.Millisecond, -1, ErrClockBackward, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock(t0)
			g := mustGenerator(t, Settings{Clock: clk, MaxBackwardWait: tt.wait})
			first, err := g.Next()
			if err != nil {
				t.Fatalf("first Next: %v", err)
			}
			clk.Advance(tt.step)
			id, err := g.Next()
			if tt.wantErr != nil {
				var re *RefusalError
				if !errors.Is(err, tt.wantErr) || !errors.As(err, &re) {
					t.Fatalf("got err %v, want %v as *RefusalError", err, tt.wantErr)
				}
				if id != 0 {
					t.Errorf("got ID %d with the error, want 0", id)
				}
				if got, want := re.RetryAfter(), -tt.step+time.Millisecond; got != want {
					t.Errorf("RetryAfter: got %v, want %v", got, want)
				}
				// Once the clock has caught up the generator issues again.
				clk.Advance(-tt.step + time.Millisecond)
				if id, err = g.Next(); err != nil || id <= first {
					t.Fatalf("after catching up: got %d, %v; want an ID above %d", id, err, first)
				}
				return
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if id <= first {
				t.Fatalf("got %d, want above %d", id, first)
			}
			sameTS := g.Layout().Decompose(id).Timestamp == g.Layout().Decompose(first).Timestamp
			if sameTS != tt.wantTSOK {
				t.Errorf("second ID reuses first timestamp: got %v, want %v", sameTS, tt.wantTSOK)
			}
		})
	}
}

func TestBackwardStepWaitedOutWhenSequenceRunsOut(t *testing.T) {
	clk := newFakeClock(t0)
	l := Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 15, SequenceBits: 2, Epoch: DefaultEpoch}
	g := mustGenerator(t, Settings{Layout: l, Clock: clk})
	ids, err := g.NextN(nil, 4) // the whole sequence of t0's millisecond
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(-5 * time.Millisecond)
	id, err := g.Next()
	if err != nil {
		t.Fatalf("Next after a 5ms step back: %v", err)
	}
	if id <= ids[3] {
		t.Errorf("got %d, want above %d", id, ids[3])
	}
	if got, want := l.Decompose(id).Timestamp, l.Decompose(ids[3]).Timestamp+1; got != want {
		t.Errorf("timestamp: got %d, want %d (the millisecond after the last one issued)", got, want)
	}
	// It slept until the clock passed the last timestamp: 5ms back plus the
	// 700µs left in the millisecond.
	if got, want := clk.Slept(), []time.Duration{5*time.Millisecond + 700*time.Microsecond}; !slices.Equal(got, want) {
		t.Errorf("sleeps: got %v, want %v", got, want)
	}
}

func TestSequenceOverflowSleepsToBoundary(t *testing.T) {
	clk := newFakeClock(t0)
	g := mustGenerator(t, Settings{Clock: clk})
	ids, err := g.NextN(nil, 4096+2)
	if err != nil {
		t.Fatal(err)
	}
	l := g.Layout()
	for i, id := range ids {
		p := l.Decompose(id)
		wantTS, wantSeq := int64(0), int64(i)
		if i >= 4096 {
			wantTS, wantSeq = 1, int64(i-4096)
		}
		if got := p.Timestamp - l.Decompose(ids[0]).Timestamp; got != wantTS || p.Sequence != wantSeq {
			t.Fatalf("ID %d: got ts +%d seq %d, want ts +%d seq %d", i, got, p.Sequence, wantTS, wantSeq)
		}
	}
	if got, want := clk.Slept(), []time.Duration{700 * time.Microsecond}; !slices.Equal(got, want) {
		t.Errorf("sleeps: got %v, want %v (one sleep to the millisecond boundary)", got, want)
	}
}

func TestFence(t *testing.T) {
	nowMS := t0.UnixMilli()
	errLease := errors.New("lease deadline passed")
	tests := []struct {
		name      string
		fence     Fence
		wantErr   error
		wantCause error
		wantTS    int64 // Unix ms of the ID issued, when no error
		wantSleep bool
	}{
		{"unbounded", Fence{}, nil, nil, nowMS, false},
		{"inside", Fence{Floor: nowMS - 10, Ceiling: nowMS + 10}, nil, nil, nowMS, false},
		{"at floor and ceiling", Fence{Floor: nowMS, Ceiling: nowMS}, nil, nil, nowMS, false},
		{"floor just ahead is waited for", Fence{Floor: nowMS + 3}, nil, nil, nowMS + 3, true},
		{"floor far ahead", Fence{Floor: nowMS + 1000}, ErrBelowFloor, nil, 0, false},
		{"above ceiling", Fence{Ceiling: nowMS - 1}, ErrAboveCeiling, nil, 0, false},
		{"check passes", Fence{Check: func() error { return nil }}, nil, nil, nowMS, false},
		{"check fails", Fence{Check: func() error { return errLease }}, ErrFenceCheck, errLease, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock(t0)
			g := mustGenerator(t, Settings{Clock: clk, Fence: tt.fence})
			id, err := g.Next()
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got err %v, want %v", err, tt.wantErr)
				}
				if tt.wantCause != nil && !errors.Is(err, tt.wantCause) {
					t.Errorf("got err %v, want it to wrap %v", err, tt.wantCause)
				}
				if g.LastTimestamp() != 0 {
					t.Errorf("a refused Next changed the state: LastTimestamp %d", g.LastTimestamp())
				}
				return
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if got := g.Layout().Decompose(id).Time.UnixMilli(); got != tt.wantTS {
				t.Errorf("timestamp: got %d, want %d", got, tt.wantTS)
			}
			if got := len(clk.Slept()) > 0; got != tt.wantSleep {
				t.Errorf("slept: got %v, want %v", got, tt.wantSleep)
			}
		})
	}
}

func TestFenceChangesAtRunTime(t *testing.T) {
	clk := newFakeClock(t0)
	valid := true
	var mu sync.Mutex
	check := func() error {
		mu.Lock()
		defer mu.Unlock()
		if !valid {
			return errors.New("revoked")
		}
		return nil
	}
	g := mustGenerator(t, Settings{Clock: clk, Fence: Fence{Ceiling: t0.UnixMilli() + 1, Check: check}})
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Millisecond)
	if _, err := g.Next(); !errors.Is(err, ErrAboveCeiling) {
		t.Fatalf("past the ceiling: got %v, want ErrAboveCeiling", err)
	}
	f := g.Fence()
	f.Ceiling += 10
	g.SetFence(f)
	if _, err := g.Next(); err != nil {
		t.Fatalf("after raising the ceiling: %v", err)
	}
	mu.Lock()
	valid = false
	mu.Unlock()
	if _, err := g.Next(); !errors.Is(err, ErrFenceCheck) {
		t.Fatalf("after revoking: got %v, want ErrFenceCheck", err)
	}
	if _, err := g.NextN(nil, 3); !errors.Is(err, ErrFenceCheck) {
		t.Fatalf("NextN after revoking: got %v, want ErrFenceCheck", err)
	}
}

func TestRandomSequenceStart(t *testing.T) {
	clk := newFakeClock(t0)
	g := mustGenerator(t, Settings{Clock: clk, RandomSequenceStart: true})
	starts := map[int64]bool{}
	var prev ID
	for i := 0; i < 64; i++ {
		id, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		if id <= prev {
			t.Fatalf("got %d after %d, want increasing", id, prev)
		}
		prev = id
		seq := g.Layout().Decompose(id).Sequence
		if seq >= 2048 {
			t.Fatalf("start sequence %d, want below 2048", seq)
		}
		starts[seq] = true
		clk.Advance(time.Millisecond)
	}
	if len(starts) < 32 {
		t.Errorf("got %d distinct starts in 64 milliseconds, want them spread", len(starts))
	}
}

func TestNewGeneratorSettings(t *testing.T) {
	tests := []struct {
		name    string
		s       Settings
		wantErr error
	}{
		{"zero value", Settings{}, nil},
		{"largest IDs", Settings{DatacenterID: 31, WorkerID: 31}, nil},
		{"datacenter too big", Settings{DatacenterID: 32}, ErrInvalidSettings},
		{"worker too big", Settings{WorkerID: 32}, ErrInvalidSettings},
		{"negative worker", Settings{WorkerID: -1}, ErrInvalidSettings},
		{"narrow layout", Settings{Layout: Layout{TimeBits: 41, SequenceBits: 12, Epoch: DefaultEpoch}}, nil},
		{"bad layout", Settings{Layout: Layout{TimeBits: 41, SequenceBits: 23, Epoch: DefaultEpoch}}, ErrInvalidLayout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewGenerator(tt.s)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestConcurrentUnique(t *testing.T) {
	const goroutines, perG = 8, 200_000
	g := mustGenerator(t, Settings{WorkerID: 5})
	got := make([][]ID, goroutines)
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]ID, 0, perG)
			for range perG {
				id, err := g.Next()
				if err != nil {
					t.Errorf("Next: %v", err)
					return
				}
				ids = append(ids, id)
			}
			got[i] = ids
		}()
	}
	wg.Wait()
	all := make([]ID, 0, goroutines*perG)
	for i, ids := range got {
		if !slices.IsSorted(ids) {
			t.Errorf("goroutine %d: IDs not increasing", i)
		}
		all = append(all, ids...)
	}
	slices.Sort(all)
	if n := len(slices.Compact(all)); n != goroutines*perG {
		t.Fatalf("got %d distinct IDs, want %d", n, goroutines*perG)
	}
}

func TestShiftedClock(t *testing.T) {
	base := newFakeClock(t0)
	c := NewShiftedClock(base, -2*time.Second)
	if got, want := c.Now(), t0.Add(-2*time.Second); !got.Equal(want) {
		t.Errorf("Now: got %v, want %v", got, want)
	}
	c.Shift(3 * time.Second)
	if got, want := c.Now(), t0.Add(time.Second); !got.Equal(want) {
		t.Errorf("Now after Shift: got %v, want %v", got, want)
	}
}

func TestSystemClock(t *testing.T) {
	c := SystemClock()
	a := c.Now()
	c.Sleep(3 * time.Millisecond)
	b := c.Now()
	if d := b.Sub(a); d < 3*time.Millisecond {
		t.Errorf("Sleep(3ms) advanced the clock by %v, want at least 3ms", d)
	}
	// Compare wall readings only (Round(0) drops the monotonic reading).
	if d := time.Now().Round(0).Sub(b.Round(0)); d < -wallResync || d > time.Second {
		t.Errorf("clock reading %v is %v off the wall clock", b, d)
	}
}

func TestStop(t *testing.T) {
	clk := newFakeClock(t0)
	g := mustGenerator(t, Settings{Clock: clk})
	if got := g.Stop(); got != 0 {
		t.Errorf("Stop before any ID: got %d, want 0", got)
	}
	if got := g.Stop(); got != 0 {
		t.Errorf("second Stop: got %d, want 0", got)
	}
	if _, err := g.Next(); !errors.Is(err, ErrStopped) {
		t.Errorf("Next after Stop: got %v, want ErrStopped", err)
	}

	g = mustGenerator(t, Settings{Clock: clk})
	if _, err := g.NextN(nil, 10); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Millisecond)
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	want := t0.Add(3 * time.Millisecond).UnixMilli()
	for i := range 2 {
		if got := g.Stop(); got != want {
			t.Errorf("Stop #%d: got %d, want %d", i+1, got, want)
		}
	}
	if got := g.LastTimestamp(); got != want {
		t.Errorf("LastTimestamp after Stop: got %d, want %d", got, want)
	}
	if _, err := g.NextN(nil, 2); !errors.Is(err, ErrStopped) {
		t.Errorf("NextN after Stop: got %v, want ErrStopped", err)
	}
}

// TestStopIsFinal stops a generator while goroutines issue: no ID may carry
// a timestamp above the one Stop returned.
func TestStopIsFinal(t *testing.T) {
	for range 20 {
		g := mustGenerator(t, Settings{})
		var wg sync.WaitGroup
		got := make([][]ID, 4)
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					id, err := g.Next()
					if err != nil {
						return
					}
					got[i] = append(got[i], id)
				}
			}()
		}
		time.Sleep(2 * time.Millisecond)
		last := g.Stop()
		wg.Wait()
		for _, ids := range got {
			for _, id := range ids {
				if ts := g.Layout().Decompose(id).Time.UnixMilli(); ts > last {
					t.Fatalf("ID %d has timestamp %d, above %d returned by Stop", id, ts, last)
				}
			}
		}
	}
}

// TestOneSleeperAtTheCap: when a millisecond's sequence is used up, one
// caller sleeps on the clock and the others wait for it, however many they
// are; every caller then gets a distinct ID in increasing order. A caller
// that loses a swap right after the cap waits for the millisecond after
// (TestLostSwapAtTheCap), so a round may issue fewer than 4 IDs when
// callers collide: the test lets rounds run until every caller is served.
func TestOneSleeperAtTheCap(t *testing.T) {
	const callers = 8
	clk := newGateClock(t0)
	l := Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 15, SequenceBits: 2, Epoch: DefaultEpoch} // 4 IDs per ms
	g := mustGenerator(t, Settings{Layout: l, Clock: clk})
	first, err := g.NextN(nil, 4) // the whole of t0's millisecond
	if err != nil {
		t.Fatal(err)
	}
	waiting := func() int {
		g.wait.mu.Lock()
		defer g.wait.mu.Unlock()
		return len(g.wait.queue)
	}

	ids := make([]ID, callers)
	errs := make([]error, callers)
	var served atomic.Int64
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			ids[i], errs[i] = g.Next()
			served.Add(1)
		})
	}
	// Each round: one sleeper, every other caller not yet served waiting
	// for it. At least 4 rounds would mean a round issued nothing.
	rounds := 0
	for ; served.Load() < callers; rounds++ {
		if rounds == callers/2+2 {
			t.Fatalf("%d rounds and %d of %d callers served", rounds, served.Load(), callers)
		}
		testkit.WaitFor(t, 10*time.Second, "one sleeper and its waiters", func() bool {
			entered, in, _ := clk.counts()
			left := callers - int(served.Load())
			return left == 0 || entered == rounds+1 && in == 1 && waiting() == left-1
		})
		if served.Load() == callers {
			break
		}
		if entered, in, _ := clk.counts(); entered != rounds+1 || in != 1 {
			t.Fatalf("round %d: got %d sleeps begun, %d under way; want %d and 1", rounds, entered, in, rounds+1)
		}
		clk.release <- struct{}{}
	}
	wg.Wait()
	if entered, _, maxIn := clk.counts(); entered != rounds || maxIn != 1 {
		t.Errorf("got %d sleeps in %d rounds, at most %d at once; want one per round, one at a time", entered, rounds, maxIn)
	}
	if rounds < 2 {
		t.Errorf("got %d rounds, want at least 2 (4 IDs per millisecond, %d callers)", rounds, callers)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	slices.Sort(ids)
	if len(slices.Compact(slices.Clone(ids))) != callers {
		t.Fatalf("got %v, want %d distinct IDs", ids, callers)
	}
	perMS := map[int64]int{}
	for _, id := range ids {
		p := l.Decompose(id)
		if p.Timestamp <= l.Decompose(first[0]).Timestamp {
			t.Errorf("ID %d: timestamp %d, want after t0's %d", id, p.Timestamp, l.Decompose(first[0]).Timestamp)
		}
		if p.Sequence != int64(perMS[p.Timestamp]) {
			t.Errorf("ID %d: sequence %d, want %d (a millisecond's IDs from 0 up)", id, p.Sequence, perMS[p.Timestamp])
		}
		perMS[p.Timestamp]++
	}
}

// TestQueuedCallersTakeTurns: callers queued behind the sleeper are given
// their turns one at a time in arrival order, each when the one before it
// leaves, so each gets a higher ID than every caller queued before it.
func TestQueuedCallersTakeTurns(t *testing.T) {
	const queued = 6
	clk := newGateClock(t0)
	l := Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 15, SequenceBits: 2, Epoch: DefaultEpoch} // 4 IDs per ms
	g := mustGenerator(t, Settings{Layout: l, Clock: clk})
	if _, err := g.NextN(nil, 4); err != nil { // the whole of t0's millisecond
		t.Fatal(err)
	}
	waiting := func() int {
		g.wait.mu.Lock()
		defer g.wait.mu.Unlock()
		return len(g.wait.queue)
	}
	ids := make([]ID, queued+1)
	errs := make([]error, queued+1)
	var wg sync.WaitGroup
	for i := range queued + 1 {
		wg.Go(func() { ids[i], errs[i] = g.Next() })
		// Caller 0 sleeps on the clock; caller i > 0 is the i-th in the queue.
		testkit.WaitFor(t, 10*time.Second, "the caller to sleep or queue", func() bool {
			_, in, _ := clk.counts()
			return in == 1 && waiting() == i
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for rounds := 0; ; rounds++ {
		select {
		case <-done:
		case clk.release <- struct{}{}:
			if rounds == queued+1 {
				t.Fatalf("%d sleeps and the callers are not served", rounds)
			}
			continue
		}
		break
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	// Caller 0 issues beside the first turn; from the first queued caller on,
	// the order of the IDs is the order of arrival.
	for i := 2; i <= queued; i++ {
		if ids[i] <= ids[i-1] {
			t.Errorf("queued caller %d got %d, want above queued caller %d's %d (turns in arrival order)", i, ids[i], i-1, ids[i-1])
		}
	}
}

// TestTurnPassedOnWhenItsHolderPanics: a caller given its turn whose fence
// check panics still passes the turn on, so the next caller queued is
// served without waiting for another sleep.
func TestTurnPassedOnWhenItsHolderPanics(t *testing.T) {
	l := Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 15, SequenceBits: 2, Epoch: DefaultEpoch}
	clk := newFakeClock(t0)
	var armed atomic.Bool // the next check panics, once
	check := func() error {
		if armed.CompareAndSwap(true, false) {
			panic("fence check")
		}
		return nil
	}
	g := mustGenerator(t, Settings{Layout: l, Clock: clk})
	if _, err := g.NextN(nil, 4); err != nil { // t0's millisecond runs out
		t.Fatal(err)
	}
	g.SetFence(Fence{Check: check})
	// A sleep under way, as a caller that found the sequence used up would
	// hold it; two callers queue behind it.
	g.wait.mu.Lock()
	g.wait.sleeping = true
	g.wait.mu.Unlock()
	recovered := make(chan any, 1)
	go func() {
		defer func() { recovered <- recover() }()
		_, _ = g.Next()
	}()
	testkit.WaitFor(t, 10*time.Second, "the first caller to queue", func() bool {
		g.wait.mu.Lock()
		defer g.wait.mu.Unlock()
		return len(g.wait.queue) == 1
	})
	second := make(chan error, 1)
	go func() {
		_, err := g.Next()
		second <- err
	}()
	testkit.WaitFor(t, 10*time.Second, "the second caller to queue", func() bool {
		g.wait.mu.Lock()
		defer g.wait.mu.Unlock()
		return len(g.wait.queue) == 2
	})
	clk.Advance(time.Millisecond)
	armed.Store(true) // the next check panics: the first caller's
	g.wait.wake()
	if r := <-recovered; r != "fence check" {
		t.Fatalf("the first caller: recovered %v, want the fence check's panic", r)
	}
	select {
	case err := <-second:
		if err != nil {
			t.Errorf("the second caller: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second caller was not given its turn after the first panicked")
	}
}

// TestStopWhileWaiting: callers waiting for the next millisecond when Stop
// is called get ErrStopped when the sleep ends, and nothing is issued above
// the timestamp Stop returned.
func TestStopWhileWaiting(t *testing.T) {
	const callers = 4
	clk := newGateClock(t0)
	l := Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 15, SequenceBits: 2, Epoch: DefaultEpoch}
	g := mustGenerator(t, Settings{Layout: l, Clock: clk})
	if _, err := g.NextN(nil, 4); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { _, errs[i] = g.Next() })
	}
	testkit.WaitFor(t, 10*time.Second, "the callers to wait", func() bool {
		g.wait.mu.Lock()
		defer g.wait.mu.Unlock()
		_, in, _ := clk.counts()
		return in == 1 && len(g.wait.queue) == callers-1
	})
	if got, want := g.Stop(), t0.UnixMilli(); got != want {
		t.Errorf("Stop: got %d, want %d", got, want)
	}
	close(clk.release)
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrStopped) {
			t.Errorf("caller %d: got %v, want ErrStopped", i, err)
		}
	}
}

// hookClock is a fake clock that runs a hook once, inside a Now call,
// after taking the reading it returns: the hook stands for a caller that
// issues between another's clock reading and its compare-and-swap.
type hookClock struct {
	*fakeClock
	mu   sync.Mutex
	hook func()
}

func (c *hookClock) Now() time.Time {
	t := c.fakeClock.Now()
	c.mu.Lock()
	h := c.hook
	c.hook = nil
	c.mu.Unlock()
	if h != nil {
		h()
	}
	return t
}

// TestLostSwapRereadsAStaleClock: a caller that lost its compare-and-swap
// to one whose timestamp lies beyond its clock reading (here by more than
// the backward wait, as after a long preemption) reads the clock again
// instead of taking the winner's ID for a backward step.
func TestLostSwapRereadsAStaleClock(t *testing.T) {
	clk := &hookClock{fakeClock: newFakeClock(t0)}
	g := mustGenerator(t, Settings{Clock: clk})
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	var winner ID
	clk.hook = func() {
		clk.Advance(50 * time.Millisecond)
		var err error
		if winner, err = g.Next(); err != nil {
			t.Errorf("the winner's Next: %v", err)
		}
	}
	id, err := g.Next() // reads t0, loses to the winner at t0+50ms
	if err != nil {
		t.Fatalf("Next after losing the swap: %v", err)
	}
	if id <= winner {
		t.Fatalf("got %d, want above the winner's %d", id, winner)
	}
	if got, want := g.Layout().Decompose(id).Time, t0.Add(50*time.Millisecond).Truncate(time.Millisecond); !got.Equal(want) {
		t.Errorf("timestamp %v, want %v (the clock read again)", got, want)
	}
}

// TestLostSwapAtTheCap: a caller of Next that loses its compare-and-swap
// right after a millisecond whose sequence ran out waits for the next
// millisecond (one sleep, to its boundary) instead of contending again;
// outside that regime, and for batches, the loser retries at once.
func TestLostSwapAtTheCap(t *testing.T) {
	l := Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 15, SequenceBits: 2, Epoch: DefaultEpoch} // 4 IDs per ms
	ms := func(id ID) int64 { return l.Decompose(id).Time.UnixMilli() - t0.UnixMilli() }
	tests := []struct {
		name string
		// before is how many IDs are issued first, in one NextN from t0:
		// 5 runs t0's millisecond out (one sleep of 700µs) and takes the
		// first ID of the next.
		before int
		batch  int // 1: the loser calls Next, else NextN
		// what the loser gets: timestamp (ms after t0's) and sequence of
		// its first ID, and the sleeps the clock saw after the first.
		wantMS, wantSeq int64
		wantSleeps      []time.Duration
	}{
		{name: "at the cap, Next waits for the next millisecond", before: 5, batch: 1,
			wantMS: 2, wantSeq: 0, wantSleeps: []time.Duration{time.Millisecond}},
		{name: "at the cap, NextN retries at once", before: 5, batch: 2,
			wantMS: 1, wantSeq: 2, wantSleeps: nil},
		{name: "below the cap, Next retries at once", before: 1, batch: 1,
			wantMS: 0, wantSeq: 2, wantSleeps: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &hookClock{fakeClock: newFakeClock(t0)}
			g := mustGenerator(t, Settings{Layout: l, Clock: clk})
			before, err := g.NextN(nil, tc.before)
			if err != nil {
				t.Fatal(err)
			}
			sleptBefore := len(clk.Slept())
			var winner ID
			clk.hook = func() {
				var err error
				if winner, err = g.Next(); err != nil {
					t.Errorf("the winner's Next: %v", err)
				}
			}
			// The loser loads the state, reads the clock (the winner issues
			// in between) and loses its compare-and-swap.
			var got ID
			if tc.batch == 1 {
				got, err = g.Next()
			} else {
				var ids []ID
				ids, err = g.NextN(nil, tc.batch)
				if len(ids) > 0 {
					got = ids[0]
				}
			}
			if err != nil {
				t.Fatalf("the loser: %v", err)
			}
			if last := before[len(before)-1]; winner <= last || got <= winner {
				t.Fatalf("got %d after the winner's %d after %d, want increasing", got, winner, last)
			}
			if ms(got) != tc.wantMS || l.Decompose(got).Sequence != tc.wantSeq {
				t.Errorf("loser's ID: got ms +%d seq %d, want ms +%d seq %d", ms(got), l.Decompose(got).Sequence, tc.wantMS, tc.wantSeq)
			}
			if sleeps := clk.Slept()[sleptBefore:]; !slices.Equal(sleeps, tc.wantSleeps) {
				t.Errorf("sleeps after the first IDs: got %v, want %v", sleeps, tc.wantSleeps)
			}
		})
	}
}

// TestLosersAtTheCapShareOneSleep: callers of Next that lose their swaps
// at the cap join the one sleeper like callers that found the sequence
// used up; with a sleep under way they start no sleep of their own.
func TestLosersAtTheCapShareOneSleep(t *testing.T) {
	l := Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 15, SequenceBits: 2, Epoch: DefaultEpoch}
	clk := &hookClock{fakeClock: newFakeClock(t0)}
	g := mustGenerator(t, Settings{Layout: l, Clock: clk})
	if _, err := g.NextN(nil, 5); err != nil { // t0's millisecond runs out
		t.Fatal(err)
	}
	// Hold a sleep under way, as a caller that found the sequence used up
	// would, while the loser arrives.
	g.wait.mu.Lock()
	g.wait.sleeping = true
	g.wait.mu.Unlock()
	var winner ID
	clk.hook = func() {
		var err error
		if winner, err = g.Next(); err != nil {
			t.Errorf("the winner's Next: %v", err)
		}
	}
	done := make(chan ID, 1)
	go func() {
		id, err := g.Next()
		if err != nil {
			t.Errorf("the loser: %v", err)
		}
		done <- id
	}()
	testkit.WaitFor(t, 10*time.Second, "the loser to wait for the sleeper", func() bool {
		g.wait.mu.Lock()
		defer g.wait.mu.Unlock()
		return len(g.wait.queue) == 1
	})
	clk.Advance(time.Millisecond) // the held sleep "ends" at the next boundary
	g.wait.wake()
	id := <-done
	if id <= winner {
		t.Errorf("got %d, want above the winner's %d", id, winner)
	}
	if got, want := l.Decompose(id).Time.UnixMilli(), t0.UnixMilli()+2; got != want {
		t.Errorf("timestamp: got %d, want %d", got, want)
	}
	if got := clk.Slept(); len(got) != 1 {
		t.Errorf("sleeps on the clock: got %v, want only the first (the loser joined the sleep under way)", got)
	}
}

// TestAppendInt64sIsNextN: AppendInt64s appends, to what dst holds, the IDs
// NextN would, across a millisecond's end.
func TestAppendInt64sIsNextN(t *testing.T) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	l := DefaultLayout()
	n := int(l.MaxSequence()) + 10 // runs into the next millisecond
	a := mustGenerator(t, Settings{Layout: l, WorkerID: 3, Clock: newFakeClock(at)})
	b := mustGenerator(t, Settings{Layout: l, WorkerID: 3, Clock: newFakeClock(at)})
	// The fake clocks' Sleep moves them to the next millisecond.
	want, err := a.NextN(nil, n)
	got, err2 := b.AppendInt64s([]int64{-1}, n)
	if err != nil {
		t.Fatalf("NextN: %v", err)
	}
	if err := err2; err != nil {
		t.Fatalf("AppendInt64s: %v", err)
	}
	if len(got) != n+1 || got[0] != -1 {
		t.Fatalf("AppendInt64s: got %d values starting %d, want %d after the -1 already there", len(got), got[0], n)
	}
	for i, id := range want {
		if got[i+1] != int64(id) {
			t.Fatalf("ID %d: got %d, want %d", i, got[i+1], id)
		}
	}
}
