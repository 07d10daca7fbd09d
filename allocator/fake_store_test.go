package allocator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// fakeSegmentStore is an in-memory SegmentStore for the segment allocator's
// tests. It keeps the contract (exact fetches up to the namespace's limit,
// compare-and-set tail returns) and injects faults: a latency on every
// fetch reply, a gate that holds fetches before they commit, queued faults
// (an error before the commit, or after it: "committed but reply lost")
// and a switch that makes every call fail as if the database were
// unreachable.
type fakeSegmentStore struct {
	mu   sync.Mutex
	rows map[string]Namespace

	latency time.Duration // every FetchSegment waits this long after committing
	gate    chan struct{} // when set, FetchSegment waits for it before committing
	faults  []fakeFault   // consumed one per FetchSegment, in order
	down    error         // when set, every call fails with it
	clock   func() time.Time

	gets        int
	fetches     int     // FetchSegment calls
	fetchSizes  []int64 // n of every FetchSegment call
	inFlight    int
	maxInFlight int
	committed   []Segment // every range committed, in commit order
	replied     []Segment // the committed ranges whose fetch returned without error
	tails       []fakeTailCall
}

// fakeFault is one injected FetchSegment failure. The zero fakeFault lets
// its fetch through unharmed.
type fakeFault struct {
	err    error
	commit bool          // advance max_id first: the commit happened, the reply is lost
	delay  time.Duration // after the commit, reply this late (or not at all if ctx ends first)
}

type fakeTailCall struct {
	name                         string
	expectMax, expectVer, newMax int64
	ok                           bool
}

var errFakeDown = errors.New("fake store: connection refused")

func newFakeSegmentStore(rows ...Namespace) *fakeSegmentStore {
	f := &fakeSegmentStore{rows: map[string]Namespace{}, clock: time.Now}
	for _, ns := range rows {
		f.add(ns)
	}
	return f
}

// add inserts ns with the defaults of a new namespace filled in.
func (f *fakeSegmentStore) add(ns Namespace) {
	if ns.Step == 0 {
		ns.Step = 1000
	}
	if ns.MinStep == 0 {
		ns.MinStep = ns.Step
	}
	if ns.MaxStep == 0 {
		ns.MaxStep = ns.Step
	}
	if ns.Mode == "" {
		ns.Mode = ModeBuffered
	}
	if ns.Fallback == "" {
		ns.Fallback = FallbackNone
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ns.CreatedAt = f.clock()
	ns.UpdatedAt = ns.CreatedAt
	f.rows[ns.Name] = ns
}

func (f *fakeSegmentStore) setDown(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = err
}

func (f *fakeSegmentStore) setLatency(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latency = d
}

// closeGate holds every later fetch until openGate.
func (f *fakeSegmentStore) closeGate() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate = make(chan struct{})
}

func (f *fakeSegmentStore) openGate() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate != nil {
		close(f.gate)
		f.gate = nil
	}
}

func (f *fakeSegmentStore) inject(faults ...fakeFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, faults...)
}

func (f *fakeSegmentStore) remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rows, name)
}

func (f *fakeSegmentStore) update(name string, fn func(*Namespace)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ns := f.rows[name]
	fn(&ns)
	f.rows[name] = ns
}

func (f *fakeSegmentStore) row(name string) Namespace {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rows[name]
}

func (f *fakeSegmentStore) counts() (gets, fetches, maxInFlight int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets, f.fetches, f.maxInFlight
}

func (f *fakeSegmentStore) sizes() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.fetchSizes...)
}

func (f *fakeSegmentStore) commits() []Segment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Segment(nil), f.committed...)
}

func (f *fakeSegmentStore) tailCalls() []fakeTailCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeTailCall(nil), f.tails...)
}

func (f *fakeSegmentStore) GetNamespace(ctx context.Context, name string) (Namespace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.down != nil {
		return Namespace{}, f.down
	}
	ns, ok := f.rows[name]
	if !ok {
		return Namespace{}, fmt.Errorf("fake store: %q: %w", name, ErrNamespaceNotFound)
	}
	return ns, nil
}

func (f *fakeSegmentStore) FetchSegment(ctx context.Context, name string, n int64) (Segment, error) {
	f.mu.Lock()
	f.fetches++
	f.fetchSizes = append(f.fetchSizes, n)
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	gate, latency := f.gate, f.latency
	var fault *fakeFault
	if len(f.faults) > 0 {
		fault = &f.faults[0]
		f.faults = f.faults[1:]
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()

	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return Segment{}, fmt.Errorf("fake store: fetch %q: %w", name, ctx.Err())
		}
	}

	f.mu.Lock()
	if f.down != nil {
		err := f.down
		f.mu.Unlock()
		return Segment{}, err
	}
	if fault != nil && fault.err != nil && !fault.commit {
		f.mu.Unlock()
		return Segment{}, fault.err
	}
	if n < 1 {
		f.mu.Unlock()
		return Segment{}, fmt.Errorf("fake store: fetch of %d IDs: %w", n, ErrInvalidNamespace)
	}
	ns, ok := f.rows[name]
	if !ok {
		f.mu.Unlock()
		return Segment{}, fmt.Errorf("fake store: %q: %w", name, ErrNamespaceNotFound)
	}
	if n > ns.Remaining() {
		f.mu.Unlock()
		return Segment{}, fmt.Errorf("fake store: fetch of %q: %w", name, ns.ExhaustedError(n))
	}
	ns.MaxID += n
	ns.Version++
	ns.UpdatedAt = f.clock()
	f.rows[name] = ns
	seg := Segment{Namespace: ns, First: ns.MaxID - n + 1, Last: ns.MaxID}
	f.committed = append(f.committed, seg)
	f.mu.Unlock()

	if fault != nil && fault.err != nil {
		return Segment{}, fault.err // committed, reply lost
	}
	if fault != nil && fault.delay > 0 {
		latency = fault.delay
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			// The commit happened but the caller gave up: the outcome is
			// unknown to it.
			return Segment{}, fmt.Errorf("fake store: fetch %q: %w", name, ctx.Err())
		}
	}
	f.mu.Lock()
	f.replied = append(f.replied, seg)
	f.mu.Unlock()
	return seg, nil
}

// lostRanges returns the committed ranges whose fetch did not return them.
func (f *fakeSegmentStore) lostRanges() []Segment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lost []Segment
	for _, c := range f.committed {
		if !slices.ContainsFunc(f.replied, func(r Segment) bool { return r.First == c.First }) {
			lost = append(lost, c)
		}
	}
	return lost
}

func (f *fakeSegmentStore) fetchesInFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inFlight
}

func (f *fakeSegmentStore) ReturnTail(ctx context.Context, name string, expectMaxID, expectVersion, newMaxID int64) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != nil {
		return false, f.down
	}
	ns, ok := f.rows[name]
	if !ok {
		return false, fmt.Errorf("fake store: %q: %w", name, ErrNamespaceNotFound)
	}
	did := ns.MaxID == expectMaxID && ns.Version == expectVersion && newMaxID <= expectMaxID
	if did {
		ns.MaxID = newMaxID
		ns.Version++
		f.rows[name] = ns
	}
	f.tails = append(f.tails, fakeTailCall{name: name, expectMax: expectMaxID, expectVer: expectVersion, newMax: newMaxID, ok: did})
	return did, nil
}

// fakeSnowflakeSource hands out consecutive "Snowflake" IDs from next and
// claims smallest as the smallest ID of the current millisecond.
type fakeSnowflakeSource struct {
	mu       sync.Mutex
	next     int64
	smallest int64
	err      error
	calls    int
	lease    LeaseToken // the token returned with the IDs
}

func (f *fakeSnowflakeSource) NextSnowflakesFenced(dst []int64, n int) ([]int64, LeaseToken, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return dst, LeaseToken{}, f.err
	}
	for range n {
		dst = append(dst, f.next)
		f.next++
	}
	return dst, f.lease, nil
}

func (f *fakeSnowflakeSource) SmallestIDNow() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.smallest
}

func (f *fakeSnowflakeSource) set(next, smallest int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next, f.smallest, f.err = next, smallest, err
}
