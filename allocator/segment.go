package allocator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen-project/idgen/snowflake"
)

// Segments hands out dense, sequential IDs per namespace from ranges of its
// counter in the segments table (docs/architecture.md, "Segment IDs").
//
// Buffered namespaces hold two ranges, the next fetched in the background
// past SegmentSettings.Threshold, so a warm draw is one atomic add. Strict
// namespaces fetch exactly what is drawn, gap-free across nodes; draws
// waiting together on one node share one fetch (segment_strict.go).
//
// Only ranges whose fetch returned without error are used: a range whose
// commit is unknown is thrown away. A Segments is safe for concurrent use.
type Segments struct {
	store        SegmentStore
	threshold    float64
	fetchTimeout time.Duration
	maxWait      time.Duration // < 0: no bound
	retryMin     time.Duration
	retryMax     time.Duration
	growBelow    time.Duration
	shrinkAbove  time.Duration
	clock        snowflake.Clock
	log          *slog.Logger
	fallback     SnowflakeSource

	// spaces is copied on write (under mu) so the hot path reads it with one
	// atomic load.
	spaces atomic.Pointer[map[string]*segNamespace]
	mu     sync.Mutex // serialises writers of spaces and Close
	closed atomic.Bool

	// closing is cancelled when Close starts (no new fetch, backoffs end);
	// stop once Close's ctx ends, aborting fetches in flight. Letting them
	// finish first matters: an aborted UPDATE may still commit after the tail
	// was returned and leave a gap.
	closing     context.Context
	closingFunc context.CancelFunc
	stop        context.Context
	stopFunc    context.CancelFunc
	// wg counts background goroutines; Close waits for them.
	wg sync.WaitGroup
}

// Defaults for a zero SegmentSettings.
const (
	DefaultSegmentThreshold    = 0.1
	DefaultSegmentFetchTimeout = 5 * time.Second
	DefaultSegmentRetryMin     = 50 * time.Millisecond
	DefaultSegmentRetryMax     = 2 * time.Second
	DefaultSegmentMaxWait      = 10 * time.Second
	// Dynamic step: ranges lasting under GrowBelow double it, over
	// ShrinkAbove halve it.
	DefaultSegmentGrowBelow   = 15 * time.Minute
	DefaultSegmentShrinkAbove = 30 * time.Minute
)

// MaxDrawCount is the largest number of IDs one draw may ask for.
const MaxDrawCount = 1 << 24

// segClosedCursor, swapped into a cursor, puts every later reservation
// past the range's end.
const segClosedCursor = int64(1) << 62

var (
	// ErrInvalidCount: a draw count below 1 or above MaxDrawCount.
	ErrInvalidCount = errors.New("invalid count")

	// ErrSegmentsClosed: every draw after Close; wraps ErrUnavailable.
	ErrSegmentsClosed = fmt.Errorf("%w: segment allocator closed", ErrUnavailable)
)

// SegmentSettings configures a Segments; zero fields mean the defaults.
type SegmentSettings struct {
	// Threshold is the fraction of a range consumed before the next is
	// loaded, in (0, 1].
	Threshold float64
	// GrowBelow and ShrinkAbove are the dynamic step's windows (between
	// min_step and max_step); GrowBelow < ShrinkAbove.
	GrowBelow   time.Duration
	ShrinkAbove time.Duration
	// FetchTimeout bounds each fetch from the store.
	FetchTimeout time.Duration
	// RetryMin and RetryMax bound the backoff between failed background
	// fetches (internal/backoff); RetryMax ≥ RetryMin.
	RetryMin time.Duration
	RetryMax time.Duration
	// MaxWait bounds one draw's wait for a range (cheaper than a deadline
	// on every ctx); negative means only ctx.
	MaxWait time.Duration
	// Clock measures range lifetimes and fetch latencies; nil: system clock.
	Clock snowflake.Clock
	// Logger receives fetch failures, fallbacks and tail returns.
	Logger *slog.Logger
	// Fallback serves Snowflake IDs for "snowflake" namespaces while the
	// database is unreachable; nil means none.
	Fallback SnowflakeSource
}

// Resolve returns s with defaults filled in (not Clock or Logger), or an
// error wrapping snowflake.ErrInvalidSettings naming the field.
func (s SegmentSettings) Resolve() (SegmentSettings, error) {
	switch {
	case s.Threshold != s.Threshold || s.Threshold < 0 || s.Threshold > 1:
		return SegmentSettings{}, invalidSettings("invalid SegmentSettings.Threshold %v: want more than 0 and at most 1", s.Threshold)
	case s.GrowBelow < 0:
		return SegmentSettings{}, invalidSettings("invalid SegmentSettings.GrowBelow %s: want more than 0", s.GrowBelow)
	case s.ShrinkAbove < 0:
		return SegmentSettings{}, invalidSettings("invalid SegmentSettings.ShrinkAbove %s: want more than 0", s.ShrinkAbove)
	case s.FetchTimeout < 0:
		return SegmentSettings{}, invalidSettings("invalid SegmentSettings.FetchTimeout %s: want 0 (the default) or more", s.FetchTimeout)
	case s.RetryMin < 0:
		return SegmentSettings{}, invalidSettings("invalid SegmentSettings.RetryMin %s: want 0 (the default) or more", s.RetryMin)
	case s.RetryMax < 0:
		return SegmentSettings{}, invalidSettings("invalid SegmentSettings.RetryMax %s: want 0 (the default) or more", s.RetryMax)
	}
	s.Threshold = cmp.Or(s.Threshold, DefaultSegmentThreshold)
	s.FetchTimeout = cmp.Or(s.FetchTimeout, DefaultSegmentFetchTimeout)
	s.MaxWait = cmp.Or(s.MaxWait, DefaultSegmentMaxWait)
	s.RetryMin = cmp.Or(s.RetryMin, DefaultSegmentRetryMin)
	s.RetryMax = cmp.Or(s.RetryMax, max(DefaultSegmentRetryMax, s.RetryMin))
	if s.RetryMax < s.RetryMin {
		return SegmentSettings{}, invalidSettings("invalid SegmentSettings.RetryMax %s: want at least SegmentSettings.RetryMin %s", s.RetryMax, s.RetryMin)
	}
	s.GrowBelow = cmp.Or(s.GrowBelow, DefaultSegmentGrowBelow)
	s.ShrinkAbove = cmp.Or(s.ShrinkAbove, DefaultSegmentShrinkAbove)
	if s.ShrinkAbove <= s.GrowBelow {
		return SegmentSettings{}, invalidSettings("invalid SegmentSettings.GrowBelow %s: want less than SegmentSettings.ShrinkAbove %s", s.GrowBelow, s.ShrinkAbove)
	}
	return s, nil
}

// SnowflakeSource is the Snowflake side of a fallback (the lease keeper).
// The fallback serves only IDs above max_id_limit (FallbackLimit).
type SnowflakeSource interface {
	// NextSnowflakesFenced appends n increasing IDs from one lease to dst,
	// with its token, or an error wrapping ErrUnavailable.
	NextSnowflakesFenced(dst []int64, n int) ([]int64, LeaseToken, error)
	// SmallestIDNow returns the smallest ID of this millisecond: the
	// fallback checks it against max_id_limit, and new limits come from it.
	SmallestIDNow() int64
}

// Source says where the IDs of a Batch come from.
type Source string

const (
	SourceSegment   Source = "segment"   // a range of the namespace's counter
	SourceSnowflake Source = "snowflake" // the Snowflake fallback
)

// IDRange is a run of consecutive IDs First..Last (inclusive).
type IDRange struct {
	First int64
	Last  int64
}

// Batch receives a draw's result. Draws truncate and append to its slices,
// so a reused Batch costs no allocation.
type Batch struct {
	IDs    []int64   // the IDs in the order they were handed out
	Ranges []IDRange // the contiguous runs IDs form, in the same order
	Source Source    // SourceSegment, or SourceSnowflake when the fallback served
	// Revision is, for a strict namespace, the version its store fetch left
	// (SegmentStore.FetchSegment): never given to two fetches, and a draw
	// starting after another returned gets a later one, so a caller can
	// refuse a stale or replayed answer. 0 for buffered and fallback.
	Revision int64
	// Lease is the worker lease that made fallback IDs.
	Lease LeaseToken
}

func (b *Batch) reset() {
	b.IDs = b.IDs[:0]
	b.Ranges = b.Ranges[:0]
	b.Source = ""
	b.Revision = 0
	b.Lease = LeaseToken{}
}

// appendRun appends slots first..first+n-1 as IDs (Namespace.IDOf),
// merging into the last range when they continue it; with a stride above
// 1 each ID is its own range.
func (b *Batch) appendRun(first, n, k, r int64) {
	if k > 1 {
		for i := range n {
			id := (first+i)*k + r
			b.IDs = append(b.IDs, id)
			b.Ranges = append(b.Ranges, IDRange{First: id, Last: id})
		}
		return
	}
	// Count rather than compare with first+n, which may overflow.
	for i := range n {
		b.IDs = append(b.IDs, first+i)
	}
	last := first + n - 1
	if k := len(b.Ranges); k > 0 && b.Ranges[k-1].Last+1 == first {
		b.Ranges[k-1].Last = last
		return
	}
	b.Ranges = append(b.Ranges, IDRange{First: first, Last: last})
}

// NewSegments returns a segment allocator drawing ranges from store, or
// Resolve's error. It never creates namespaces.
func NewSegments(store SegmentStore, s SegmentSettings) (*Segments, error) {
	s, err := s.Resolve()
	if err != nil {
		return nil, err
	}
	if s.Clock == nil {
		s.Clock = snowflake.SystemClock()
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	sg := &Segments{
		store:        store,
		threshold:    s.Threshold,
		fetchTimeout: s.FetchTimeout,
		maxWait:      s.MaxWait,
		retryMin:     s.RetryMin,
		retryMax:     s.RetryMax,
		growBelow:    s.GrowBelow,
		shrinkAbove:  s.ShrinkAbove,
		clock:        s.Clock,
		log:          s.Logger,
		fallback:     s.Fallback,
	}
	empty := map[string]*segNamespace{}
	sg.spaces.Store(&empty)
	sg.stop, sg.stopFunc = context.WithCancel(context.Background())
	sg.closing, sg.closingFunc = context.WithCancel(context.Background())
	return sg, nil
}

// Draw hands out n IDs of namespace name into out, in increasing order as
// ranges; fallback IDs are marked SourceSnowflake. On error out holds
// none. ctx bounds only waiting. A draw of more than the namespace has
// left is refused and takes none.
//
// Errors wrap ErrInvalidCount, ErrInvalidNamespace, ErrNamespaceNotFound,
// ErrNamespaceExhausted or ErrUnavailable (ErrSegmentsClosed after Close).
func (s *Segments) Draw(ctx context.Context, name string, n int, out *Batch) error {
	out.reset()
	if n < 1 || n > MaxDrawCount {
		return fmt.Errorf("%w: %d IDs asked for, 1 to %d allowed", ErrInvalidCount, n, MaxDrawCount)
	}
	ns := (*s.spaces.Load())[name]
	if ns == nil {
		var err error
		if ns, err = s.namespace(ctx, name); err != nil {
			return err
		}
	}
	return ns.draw(ctx, int64(n), out)
}

// SegmentStats describes one namespace as this node sees it.
type SegmentStats struct {
	Namespace string
	Mode      Mode
	Fallback  Fallback
	// Step is what the next background fetch asks for.
	Step int64
	// MaxID is the highest max_id this node has seen.
	MaxID int64
	// Runway is the number of IDs left in both buffers.
	Runway int64
	// Fetches and FetchErrors count store fetches and failed ones.
	Fetches          int64
	FetchErrors      int64
	LastFetchLatency time.Duration // of the last fetch
	LastFetchAt      time.Time     // when the last fetch returned
	Fallbacks        int64         // draws the Snowflake fallback served
	FallbackIDs      int64         // IDs it served
	// StrictQueued counts strict draws waiting to share the next fetch.
	StrictQueued int
	Loading      bool // a background fetch is in flight
	// Failing is true from a failed fetch until a successful one.
	Failing     bool
	LastError   error     // the last fetch error
	LastErrorAt time.Time // when it happened
}

// Stats returns every namespace this node has used, by name.
func (s *Segments) Stats() []SegmentStats {
	m := *s.spaces.Load()
	out := make([]SegmentStats, 0, len(m))
	for _, ns := range m {
		st, ok := ns.stats()
		if ok {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

// NamespaceStats returns one namespace's state, false if unused here.
func (s *Segments) NamespaceStats(name string) (SegmentStats, bool) {
	ns := (*s.spaces.Load())[name]
	if ns == nil {
		return SegmentStats{}, false
	}
	return ns.stats()
}

// Close stops background fetches, fails later draws with
// ErrSegmentsClosed, and returns each namespace's unused tail to the store
// (compare-and-set, bounded by ctx); a tail whose CAS fails is skipped and
// never reused. It returns the joined store errors; a second Close nil.
func (s *Segments) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil
	}
	s.closed.Store(true)
	spaces := *s.spaces.Load()
	s.mu.Unlock()

	s.closingFunc()
	for _, ns := range spaces {
		ns.markClosed()
	}
	// Let fetches in flight finish, as long as ctx allows.
	loadsDone := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(loadsDone)
	}()
	select {
	case <-loadsDone:
	case <-ctx.Done():
		s.stopFunc()
		<-loadsDone
	}
	s.stopFunc()

	names := make([]string, 0, len(spaces))
	for name := range spaces {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		t, ok := spaces[name].stopDraws()
		if !ok {
			continue
		}
		if err := s.returnTail(ctx, name, t); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// segTail is a ReturnTail call.
type segTail struct {
	expectMax, expectVersion, newMax int64
}

func (s *Segments) returnTail(ctx context.Context, name string, t segTail) error {
	ctx, cancel := context.WithTimeout(ctx, s.fetchTimeout)
	defer cancel()
	ok, err := s.store.ReturnTail(ctx, name, t.expectMax, t.expectVersion, t.newMax)
	if err != nil {
		s.log.Warn("segment tail not returned", "namespace", name, "from", t.newMax+1, "to", t.expectMax, "err", err)
		return fmt.Errorf("return tail of namespace %q: %w", name, err)
	}
	if ok {
		s.log.Info("segment tail returned", "namespace", name, "from", t.newMax+1, "to", t.expectMax)
	} else {
		s.log.Info("segment tail skipped: the namespace was fetched from since", "namespace", name, "from", t.newMax+1, "to", t.expectMax)
	}
	return nil
}

// namespace returns name's state, creating it and starting its lookup on
// first use, and waits for the lookup.
func (s *Segments) namespace(ctx context.Context, name string) (*segNamespace, error) {
	ns := (*s.spaces.Load())[name]
	if ns == nil {
		if err := ValidNamespace(name); err != nil {
			return nil, err
		}
		s.mu.Lock()
		if s.closed.Load() {
			s.mu.Unlock()
			return nil, ErrSegmentsClosed
		}
		old := *s.spaces.Load()
		if ns = old[name]; ns == nil {
			ns = newSegNamespace(s, name)
			m := make(map[string]*segNamespace, len(old)+1)
			for k, v := range old {
				m[k] = v
			}
			m[name] = ns
			s.spaces.Store(&m)
			s.wg.Add(1)
			go ns.run(true)
		}
		s.mu.Unlock()
	}
	if err := ns.waitKnown(ctx); err != nil {
		return nil, err
	}
	return ns, nil
}

// forget removes ns after a failed lookup, so the next use retries.
func (s *Segments) forget(ns *segNamespace) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.spaces.Load()
	if old[ns.name] != ns {
		return
	}
	m := make(map[string]*segNamespace, len(old))
	for k, v := range old {
		if k != ns.name {
			m[k] = v
		}
	}
	s.spaces.Store(&m)
}

func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
	}
}

// waitChange waits until ch closes, ctx ends or (from the draw's first
// wait) MaxWait passes. *timer is created on the first wait only, so
// draws that never wait allocate nothing; the caller stops it.
func (s *Segments) waitChange(ctx context.Context, ch <-chan struct{}, timer **time.Timer) error {
	if *timer == nil && s.maxWait > 0 {
		*timer = time.NewTimer(s.maxWait)
	}
	var bound <-chan time.Time
	if *timer != nil {
		bound = (*timer).C
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-bound:
		return fmt.Errorf("waited %v, the longest a draw may wait", s.maxWait)
	}
}
