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

// Segments hands out dense, sequential IDs per namespace from ranges of the
// namespace's counter in the segments table (see docs/architecture.md,
// "Segment IDs").
//
// For a namespace in buffered mode a node holds up to two ranges: the one it
// draws from and the next one, fetched in the background once the current
// range is consumed past SegmentSettings.Threshold. A draw from a warm range
// is one atomic add and a bounds check; callers wait for the database only
// when both ranges are empty. For a namespace in strict mode the IDs are
// fetched when drawn, exactly as many as asked for, so IDs are gap-free and
// increase across every node. Strict draws that wait at the same time on
// one node share one fetch of the sum of their counts, split in arrival
// order (segment_strict.go): a fetch serves every draw that arrived while
// the previous one was in flight.
//
// An ID is handed out only from a range whose fetch returned without error.
// A fetch that fails, even one whose commit may have happened before the
// reply was lost, throws its range away and is tried again with a new fetch:
// a range whose outcome is unknown is never used.
//
// A Segments is safe for concurrent use. Close stops it.
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

	// spaces maps a namespace name to its state. It is copied on write
	// (under mu) so the hot path reads it with one atomic load and no lock.
	spaces atomic.Pointer[map[string]*segNamespace]
	mu     sync.Mutex // serialises writers of spaces and Close
	closed atomic.Bool

	// closing is cancelled when Close starts: no new fetch begins and
	// backoff sleeps end. stop is cancelled once Close's ctx ends (or after
	// the loads finished): it aborts fetches still in flight. Letting them
	// finish first matters: an aborted UPDATE may still commit, after the
	// tail was returned, and leave a gap.
	closing     context.Context
	closingFunc context.CancelFunc
	stop        context.Context
	stopFunc    context.CancelFunc
	// wg counts the background goroutines (first lookups and range loads);
	// Close waits for them.
	wg sync.WaitGroup
}

// Defaults for a zero SegmentSettings.
const (
	DefaultSegmentThreshold    = 0.1
	DefaultSegmentFetchTimeout = 5 * time.Second
	DefaultSegmentRetryMin     = 50 * time.Millisecond
	DefaultSegmentRetryMax     = 2 * time.Second
	DefaultSegmentMaxWait      = 10 * time.Second
	// The dynamic step: a range that lasted less than GrowBelow doubles
	// the next step, one that lasted more than ShrinkAbove halves it.
	DefaultSegmentGrowBelow   = 15 * time.Minute
	DefaultSegmentShrinkAbove = 30 * time.Minute
)

// MaxDrawCount is the largest number of IDs one draw may ask for.
const MaxDrawCount = 1 << 24

// segClosedCursor is swapped into a range's cursor to stop draws from it at
// once: every later reservation lands past the end of the range.
const segClosedCursor = int64(1) << 62

var (
	// ErrInvalidCount is returned by the draw methods for a count below 1 or
	// above MaxDrawCount.
	ErrInvalidCount = errors.New("invalid count")

	// ErrSegmentsClosed is returned by every draw after Segments.Close. It
	// wraps ErrUnavailable.
	ErrSegmentsClosed = fmt.Errorf("%w: segment allocator closed", ErrUnavailable)
)

// SegmentSettings configures a Segments. The zero value means the defaults;
// Resolve fills them in and checks the rules given with each field.
type SegmentSettings struct {
	// Threshold is the fraction of the current range consumed before the
	// next range is loaded in the background, in (0, 1]. Zero means
	// DefaultSegmentThreshold.
	Threshold float64
	// GrowBelow and ShrinkAbove are the windows of the dynamic step: a
	// range that lasted less than GrowBelow doubles the next step (up to
	// the namespace's max_step), one that lasted more than ShrinkAbove
	// halves it (down to min_step). Zero means DefaultSegmentGrowBelow and
	// DefaultSegmentShrinkAbove; GrowBelow must stay below ShrinkAbove.
	GrowBelow   time.Duration
	ShrinkAbove time.Duration
	// FetchTimeout bounds each fetch from the store. Zero means
	// DefaultSegmentFetchTimeout.
	FetchTimeout time.Duration
	// RetryMin and RetryMax bound the backoff between failed background
	// fetches (internal/backoff: the bound doubles, each delay lies
	// between half and all of it); RetryMax is at least RetryMin. Zero
	// means DefaultSegmentRetryMin, and DefaultSegmentRetryMax or RetryMin
	// if that is larger.
	RetryMin time.Duration
	RetryMax time.Duration
	// MaxWait bounds how long one draw waits for a range when both buffers
	// are empty (it also ends with the draw's ctx). It costs nothing on a
	// draw that does not wait, unlike a deadline on every call's ctx. Zero
	// means DefaultSegmentMaxWait; negative means no bound but ctx.
	MaxWait time.Duration
	// Clock measures how long ranges last (for the dynamic step) and fetch
	// latencies. Nil means the system clock.
	Clock snowflake.Clock
	// Logger receives fetch failures, fallbacks and tail returns. Nil
	// discards them.
	Logger *slog.Logger
	// Fallback serves Snowflake IDs for namespaces whose fallback is
	// "snowflake" while their database is unreachable. Nil means no
	// fallback is possible.
	Fallback SnowflakeSource
}

// Resolve returns s with the defaults filled in, or an error wrapping
// snowflake.ErrInvalidSettings that names the field whose rule s breaks.
// Clock and Logger are left for NewSegments to fill in. Resolve of a
// resolved value returns it unchanged.
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

// SnowflakeSource is what the segment allocator needs of the Snowflake side
// to serve a fallback; the lease keeper implements it. The fallback serves
// only IDs above the namespace's max_id_limit (see FallbackLimit).
type SnowflakeSource interface {
	// NextSnowflakesFenced appends n Snowflake IDs, in increasing order,
	// to dst and returns the extended slice with the token of the lease
	// that made them (one lease for all), or an error wrapping
	// ErrUnavailable when the node cannot prove its lease.
	NextSnowflakesFenced(dst []int64, n int) ([]int64, LeaseToken, error)
	// SmallestIDNow returns the smallest Snowflake ID of the current
	// millisecond: every ID issued from now on is at least this. The
	// fallback checks it against max_id_limit before it takes any ID, and
	// the admin paths derive a new namespace's max_id_limit from it.
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

// Batch receives the result of a draw. It is owned by the caller, who may
// reuse it: every draw truncates IDs and Ranges and appends to them, so a
// reused Batch costs no allocation once its slices have grown.
type Batch struct {
	IDs    []int64   // the IDs in the order they were handed out
	Ranges []IDRange // the contiguous runs IDs form, in the same order
	Source Source    // SourceSegment, or SourceSnowflake when the fallback served
	// Revision is, for a strict namespace, the namespace's revision after
	// the fetch that took the IDs: the version the store's fetch left on
	// the namespace's row (Segment.Namespace.Version), which grows with
	// every fetch from any node and is never given to two fetches (see
	// SegmentStore.FetchSegment). Draws that waited together on one node
	// and shared a fetch share its revision; a draw that starts after
	// another returned always gets a later fetch. So a caller that saw
	// revision r before it asked can refuse an answer whose revision is
	// not above r: a stale or replayed answer. 0 for a buffered namespace
	// and for the fallback.
	Revision int64
	// Lease is, when the fallback served (Source is SourceSnowflake), the
	// worker lease that made the IDs.
	Lease LeaseToken
}

func (b *Batch) reset() {
	b.IDs = b.IDs[:0]
	b.Ranges = b.Ranges[:0]
	b.Source = ""
	b.Revision = 0
	b.Lease = LeaseToken{}
}

// appendRun appends the IDs of the n slots first..first+n-1 of a
// namespace with stride k and offset r (Namespace.IDOf; k < 1 reads as the
// default 1, offset 0), merging them into the last range when they
// continue it. With a stride above 1 the IDs are not consecutive, so each
// is a range of its own.
func (b *Batch) appendRun(first, n, k, r int64) {
	if k > 1 {
		for i := range n {
			id := (first+i)*k + r
			b.IDs = append(b.IDs, id)
			b.Ranges = append(b.Ranges, IDRange{First: id, Last: id})
		}
		return
	}
	// Count rather than compare with first+n, which overflows for a run
	// that ends at the largest int64.
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
// the error of SegmentSettings.Resolve. Namespaces are looked up on first
// use; none is ever created by it.
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

// Draw hands out n IDs of namespace name into out (see Batch). Segment IDs
// come in increasing order (with the namespace's stride between them, see
// Namespace.IDOf) as contiguous ranges, spanning a switch of
// ranges when needed; Snowflake fallback IDs are marked SourceSnowflake.
// On error out holds no IDs. ctx bounds only waiting: a draw served from
// memory never looks at it. A draw of more IDs than the namespace has left
// up to its limit is refused and takes none (unless draws racing for the
// last IDs took some of its range first).
//
// Errors wrap ErrInvalidCount, ErrInvalidNamespace (malformed name),
// ErrNamespaceNotFound, ErrNamespaceExhausted (never answered by the
// fallback) or ErrUnavailable (neither a range nor the fallback can serve;
// after Close, ErrSegmentsClosed).
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

// SegmentStats describes one namespace as this node sees it, for metrics
// and the status page.
type SegmentStats struct {
	Namespace string
	Mode      Mode
	Fallback  Fallback
	// Step is the number of IDs the next background fetch asks for.
	Step int64
	// MaxID is the highest max_id this node has seen for the namespace.
	MaxID int64
	// Runway is the number of IDs left in both buffers.
	Runway int64
	// Fetches and FetchErrors count fetches from the store (background and
	// strict ones), and those of them that failed.
	Fetches     int64
	FetchErrors int64
	// LastFetchLatency is how long the last fetch took; LastFetchAt when it
	// returned.
	LastFetchLatency time.Duration
	LastFetchAt      time.Time
	// Fallbacks counts draws served by the Snowflake fallback, FallbackIDs
	// the IDs they served.
	Fallbacks   int64
	FallbackIDs int64
	// StrictQueued is the number of strict draws waiting for the next
	// fetch, which they will share, while one is in flight.
	StrictQueued int
	// Loading is true while a background fetch is in flight.
	Loading bool
	// Failing is true from a failed fetch until the next successful one.
	Failing bool
	// LastError is the last fetch error, LastErrorAt when it happened.
	LastError   error
	LastErrorAt time.Time
}

// Stats returns the state of every namespace this node has used, ordered
// by name.
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

// NamespaceStats returns the state of one namespace, and false if this node
// has not used it.
func (s *Segments) NamespaceStats(name string) (SegmentStats, bool) {
	ns := (*s.spaces.Load())[name]
	if ns == nil {
		return SegmentStats{}, false
	}
	return ns.stats()
}

// Close stops background fetches and waits for them, makes every later draw
// fail with ErrSegmentsClosed, and returns the unused tail of each
// namespace's most recent range to the store (compare-and-set on max_id and
// version, bounded by ctx), so the next start continues right after the
// last ID used. A tail whose compare-and-set fails (another node fetched
// since) is skipped and never reused. Close returns the store errors of
// the tail returns, joined; a second Close returns nil.
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
	// Let fetches in flight finish (their ranges become tails to return),
	// for as long as ctx allows.
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

// segTail is a ReturnTail call: set max_id to newMax if it is still
// expectMax at version expectVersion.
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

// namespace returns the state of name, creating it (and starting its first
// lookup) if this node has not used it, and waits until the store has said
// whether it exists.
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

// forget removes ns from spaces (after its lookup failed), so the next use
// of the name looks it up again.
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

// stopTimer stops *t if a waitChange created it.
func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
	}
}

// waitChange waits until ch closes. It gives up when ctx ends or, for the
// draw's first wait onward, when MaxWait has passed; *timer holds that bound
// and is created on the first wait only, so draws that never wait allocate
// nothing. The caller stops *timer.
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
