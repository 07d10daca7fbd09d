package allocator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	// Named retry here: the keeper's file declares a function backoff.
	retry "github.com/idgen-project/idgen/internal/backoff"
)

// segRange is one fetched range first..first+size-1. Draws reserve by
// adding to used; past size is a miss. Immutable fields after publishing
// except used.
type segRange struct {
	used    atomic.Int64 // offsets below used are handed out (used may run past size)
	first   int64
	size    int64
	trigger int64 // the draw that takes this offset starts the background load of the next range
	version int64 // the namespace's version after the fetch, for ReturnTail
	// stride and offset map slots to IDs; first, size and the cursor count slots.
	stride, offset int64
}

func (r *segRange) last() int64 { return r.first + r.size - 1 }

func (r *segRange) remaining() int64 {
	if u := r.used.Load(); u < r.size {
		return r.size - u
	}
	return 0
}

// stop makes later reservations miss and returns how many were reserved.
func (r *segRange) stop() int64 {
	return min(r.used.Swap(segClosedCursor), r.size)
}

// segNamespace is a node's state for one namespace. Draws read cur without
// a lock; mu guards the rest.
type segNamespace struct {
	s    *Segments
	name string

	cur atomic.Pointer[segRange] // the range draws come from; switched only under mu

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever a waiter may proceed
	next    *segRange     // the range loaded in the background, nil if none
	known   bool          // the store's row has been read
	lookErr error         // the first lookup failed; the state is being forgotten
	closed  bool          // the Segments is closing
	loading bool          // a goroutine is fetching (or looking up) for this namespace
	// failing is the last fetch's error until one succeeds.
	failing error
	hint    int64 // the largest number of IDs a waiter needs, for the next fetch

	row         Namespace // the last row read or fetched
	rowStep     int64     // row.Step when the step was last reset to it
	mode        Mode
	step        int64
	maxKnown    int64 // the highest max_id seen
	highest     int64 // the last ID of the highest range fetched in buffered mode
	lastFetchAt time.Time

	fetches     int64
	fetchErrors int64
	lastLatency time.Duration
	lastErr     error
	lastErrAt   time.Time
	fallbacks   atomic.Int64
	fallbackIDs atomic.Int64
	fallingBack bool // a fallback was logged since the last successful fetch

	strict strictQueue // strict draws waiting to share a fetch (segment_strict.go)
}

func newSegNamespace(s *Segments, name string) *segNamespace {
	return &segNamespace{
		s:       s,
		name:    name,
		changed: make(chan struct{}),
		loading: true, // run(true) is started with it
	}
}

func (ns *segNamespace) broadcastLocked() {
	close(ns.changed)
	ns.changed = make(chan struct{})
}

// take reserves up to n IDs of r, returning the first and the count (0 if
// used up). Crossing the trigger starts loading the next range.
func (ns *segNamespace) take(r *segRange, n int64) (first, got int64) {
	end := r.used.Add(n)
	off := end - n
	if off >= r.size {
		return 0, 0
	}
	if off <= r.trigger && r.trigger < end {
		ns.prefetch()
	}
	return r.first + off, min(n, r.size-off)
}

func (ns *segNamespace) prefetch() {
	ns.mu.Lock()
	if ns.next == nil && ns.mode != ModeStrict {
		ns.startLoadLocked(0)
	}
	ns.mu.Unlock()
}

// startLoadLocked starts a background load unless one is in flight; need is
// what a waiter needs (0 for a prefetch).
func (ns *segNamespace) startLoadLocked(need int64) {
	if need > ns.hint {
		ns.hint = need
	}
	if ns.loading || ns.closed || !ns.known {
		return
	}
	ns.loading = true
	ns.s.wg.Add(1)
	go ns.run(false)
}

// markClosed wakes every waiter and stops new loads; called by Close.
func (ns *segNamespace) markClosed() {
	ns.mu.Lock()
	ns.closed = true
	ns.broadcastLocked()
	ns.mu.Unlock()
}

func (ns *segNamespace) waitKnown(ctx context.Context) error {
	var timer *time.Timer // waitChange's bound, created by the first wait
	defer stopTimer(&timer)
	ns.mu.Lock()
	for {
		switch {
		case ns.s.closed.Load():
			ns.mu.Unlock()
			return ErrSegmentsClosed
		case ns.known:
			ns.mu.Unlock()
			return nil
		case ns.lookErr != nil:
			err := ns.lookErr
			ns.mu.Unlock()
			return err
		}
		ch := ns.changed
		ns.mu.Unlock()
		if err := ns.s.waitChange(ctx, ch, &timer); err != nil {
			return fmt.Errorf("%w: namespace %q: waiting for the database: %w", ErrUnavailable, ns.name, err)
		}
		ns.mu.Lock()
	}
}

// run is a namespace's background goroutine: the first lookup if asked,
// then one range load, retried until success, a permanent error or Close.
func (ns *segNamespace) run(lookup bool) {
	defer ns.s.wg.Done()
	if lookup && !ns.lookup() {
		return
	}
	ns.load()
}

// lookup reads the row and reports whether a range should be loaded next.
func (ns *segNamespace) lookup() bool {
	s := ns.s
	ctx, cancel := context.WithTimeout(s.stop, s.fetchTimeout)
	row, err := s.store.GetNamespace(ctx, ns.name)
	cancel()
	if err != nil {
		// Forget first, so a retry after the error looks the name up afresh.
		s.forget(ns)
	}
	ns.mu.Lock()
	if err != nil {
		if segPermanent(err) {
			ns.lookErr = fmt.Errorf("namespace %q: %w", ns.name, err)
		} else {
			ns.lookErr = fmt.Errorf("%w: namespace %q: %w", ErrUnavailable, ns.name, err)
		}
		ns.loading = false
		ns.broadcastLocked()
		ns.mu.Unlock()
		return false
	}
	ns.known = true
	ns.applyRowLocked(row)
	ns.broadcastLocked()
	if ns.mode == ModeStrict || ns.closed {
		ns.loading = false
		ns.mu.Unlock()
		return false
	}
	ns.mu.Unlock()
	return true
}

// load fetches and publishes the next range, retrying with capped backoff;
// a failed fetch's range is thrown away.
//
// It asks for the step (or a waiter's need) but never more than Remaining
// by the last row seen, so the last IDs are fetched too. Stores never
// shorten a fetch, so ErrNamespaceExhausted, or a row showing nothing
// left, means reading the row again; once the fresh row shows nothing
// left, the load fails for good.
func (ns *segNamespace) load() {
	s := ns.s
	ns.mu.Lock()
	step := ns.nextStepLocked(s.clock.Now())
	ns.mu.Unlock()
	delays := retry.New(s.retryMin, s.retryMax)
	for {
		ns.mu.Lock()
		if ns.closed || s.closing.Err() != nil {
			ns.loading = false
			ns.broadcastLocked()
			ns.mu.Unlock()
			return
		}
		want := max(step, ns.hint)
		n := min(want, ns.row.Remaining())
		ns.mu.Unlock()

		ctx, cancel := context.WithTimeout(s.stop, s.fetchTimeout)
		start := s.clock.Now()
		var (
			seg Segment
			row Namespace
			err error
		)
		reread := n == 0
		if !reread {
			seg, err = s.store.FetchSegment(ctx, ns.name, n)
			reread = errors.Is(err, ErrNamespaceExhausted)
		}
		if reread {
			row, err = s.store.GetNamespace(ctx, ns.name)
		}
		cancel()
		end := s.clock.Now()

		ns.mu.Lock()
		if n > 0 {
			ns.fetches++
			ns.lastLatency = end.Sub(start)
		}
		if reread && err == nil {
			ns.applyRowLocked(row)
			switch left := row.Remaining(); {
			case left == 0:
				err = row.ExhaustedError(want)
			case n == 0 || left < n:
				// Nothing was fetched: try again at once with what is left.
				ns.mu.Unlock()
				continue
			default:
				// The row allows it after all (a tail came back): retry after backoff.
				err = fmt.Errorf("fetch of %d refused, but the row read next has %d IDs left", n, left)
			}
		}
		if err == nil {
			err = ns.checkLocked(seg, n, true)
		}
		if err == nil {
			ns.installLocked(seg, end)
			ns.mu.Unlock()
			return
		}
		ns.recordErrLocked(err, end)
		stop := segPermanent(err) || ns.closed || s.closing.Err() != nil
		if stop {
			ns.loading = false
		}
		ns.broadcastLocked()
		ns.mu.Unlock()
		if stop {
			return
		}
		wait := delays.Next()
		s.log.Warn("segment fetch failed; its range is discarded", "namespace", ns.name, "step", n, "retry_in", wait, "err", err)
		if retry.Sleep(s.closing, wait) != nil {
			ns.mu.Lock()
			ns.loading = false
			ns.broadcastLocked()
			ns.mu.Unlock()
			return
		}
	}
}

// checkLocked refuses a range not as asked or, when buffered, not above
// every earlier range: the store would be handing out IDs again.
func (ns *segNamespace) checkLocked(seg Segment, n int64, buffered bool) error {
	if seg.Last-seg.First+1 != n || seg.Namespace.MaxID != seg.Last {
		return fmt.Errorf("store returned IDs %d..%d (max_id %d) for a fetch of %d; range discarded",
			seg.First, seg.Last, seg.Namespace.MaxID, n)
	}
	if buffered && seg.First <= ns.highest {
		return fmt.Errorf("store returned IDs %d..%d below IDs already fetched (up to %d); range discarded",
			seg.First, seg.Last, ns.highest)
	}
	return nil
}

func (ns *segNamespace) recordErrLocked(err error, at time.Time) {
	ns.fetchErrors++
	ns.lastErr = err
	ns.lastErrAt = at
	ns.failing = err
}

// installLocked publishes a range as current if that is used up, else as next.
func (ns *segNamespace) installLocked(seg Segment, at time.Time) {
	ns.lastFetchAt = at
	ns.failing = nil
	ns.fallingBack = false
	ns.hint = 0
	ns.loading = false
	ns.highest = max(ns.highest, seg.Last)
	ns.applyRowLocked(seg.Namespace)
	defer ns.broadcastLocked()
	if ns.mode == ModeStrict {
		// The namespace turned strict: skip this range's IDs.
		return
	}
	r := &segRange{
		first:   seg.First,
		size:    seg.Last - seg.First + 1,
		version: seg.Namespace.Version,
		stride:  seg.Namespace.Stride,
		offset:  seg.Namespace.Offset,
	}
	r.trigger = min(int64(float64(r.size)*ns.s.threshold), r.size-1)
	if cur := ns.cur.Load(); cur == nil || cur.remaining() == 0 {
		ns.cur.Store(r)
		return
	}
	ns.next = r
}

// applyRowLocked takes the settings of a row read or fetched from the store.
func (ns *segNamespace) applyRowLocked(row Namespace) {
	ns.row = row
	ns.maxKnown = max(ns.maxKnown, row.MaxID)
	if row.Step != ns.rowStep {
		// First sight of the row, or an operator changed the step.
		ns.rowStep = row.Step
		ns.step = row.Step
	}
	mode := row.Mode
	if mode != ModeStrict {
		mode = ModeBuffered
	}
	if mode == ModeStrict && ns.mode != ModeStrict {
		// Stop serving buffered ranges so strict draws are gap-free from here.
		if cur := ns.cur.Load(); cur != nil {
			cur.stop()
		}
		ns.next = nil
	}
	ns.mode = mode
}

// stepBoundsLocked returns the row's min_step and max_step, made sane.
func (ns *segNamespace) stepBoundsLocked() (lo, hi int64) {
	lo, hi = ns.row.MinStep, ns.row.MaxStep
	if lo < 1 {
		lo = 1
	}
	if hi < lo {
		hi = max(lo, ns.row.Step)
	}
	return lo, hi
}

// nextStepLocked returns the next fetch size: doubled when the previous
// range lasted under GrowBelow, halved over ShrinkAbove, within the row's
// bounds. The time since the previous fetch returned measures a range's
// lifetime, since fetches start at the same point of each range.
func (ns *segNamespace) nextStepLocked(now time.Time) int64 {
	lo, hi := ns.stepBoundsLocked()
	step := ns.step
	if !ns.lastFetchAt.IsZero() {
		switch lasted := now.Sub(ns.lastFetchAt); {
		case lasted < ns.s.growBelow:
			if step > hi/2 {
				step = hi
			} else {
				step *= 2
			}
		case lasted > ns.s.shrinkAbove:
			step /= 2
		}
	}
	step = min(max(step, lo), hi)
	if step != ns.step && ns.step != 0 {
		ns.s.log.Debug("segment step changed", "namespace", ns.name, "from", ns.step, "to", step)
	}
	ns.step = step
	return step
}

// segRefill says what a draw that found the current range used up does next.
type segRefill int

const (
	segRetry    segRefill = iota // draw from the current range again
	segStrict                    // the namespace is strict: fetch exactly the IDs needed
	segFallback                  // serve from the Snowflake fallback
	segFail                      // return the error
)

// refill is a draw's slow path once seen (or nil) is used up: switch to
// next, or load and wait (bounded by ctx), or decide on the fallback, in
// which case it returns max_id_limit and the store's error.
func (ns *segNamespace) refill(ctx context.Context, seen *segRange, need int64) (segRefill, int64, error) {
	var timer *time.Timer // waitChange's bound, created by the first wait
	defer stopTimer(&timer)
	ns.mu.Lock()
	for {
		if ns.closed || ns.s.closed.Load() {
			ns.mu.Unlock()
			return segFail, 0, ErrSegmentsClosed
		}
		if ns.lookErr != nil {
			err := ns.lookErr
			ns.mu.Unlock()
			return segFail, 0, err
		}
		if ns.known {
			if ns.cur.Load() != seen {
				ns.mu.Unlock()
				return segRetry, 0, nil
			}
			if ns.mode == ModeStrict {
				ns.mu.Unlock()
				return segStrict, 0, nil
			}
			if ns.next != nil {
				ns.cur.Store(ns.next)
				ns.next = nil
				ns.mu.Unlock()
				return segRetry, 0, nil
			}
			ns.startLoadLocked(need)
			if err := ns.failing; err != nil {
				// Both buffers empty and the store failing: fallback or fail now.
				if segPermanent(err) {
					ns.mu.Unlock()
					return segFail, 0, fmt.Errorf("namespace %q: %w", ns.name, err)
				}
				if ns.row.Remaining() == 0 {
					// Exhausted by the last row seen: a failing database does not
					// change that, so no fallback.
					err := ns.row.ExhaustedError(need)
					ns.mu.Unlock()
					return segFail, 0, fmt.Errorf("namespace %q: %w", ns.name, err)
				}
				if ns.s.fallback != nil && ns.row.Fallback == FallbackSnowflake {
					// Fallback IDs must lie above the ID of the counter's limit.
					limit := ns.row.MaxIDLimit
					if limit > 0 {
						limit = ns.row.IDOf(min(limit, ns.row.StrideCap()))
					}
					if !ns.fallingBack {
						ns.fallingBack = true
						ns.s.log.Warn("segment database failing; serving Snowflake IDs", "namespace", ns.name, "max_id_limit", limit, "err", err)
					}
					ns.mu.Unlock()
					return segFallback, limit, err
				}
				ns.mu.Unlock()
				return segFail, 0, fmt.Errorf("%w: namespace %q: %w", ErrUnavailable, ns.name, err)
			}
		}
		ch := ns.changed
		ns.mu.Unlock()
		if err := ns.s.waitChange(ctx, ch, &timer); err != nil {
			return segFail, 0, fmt.Errorf("%w: namespace %q: waiting for a range: %w", ErrUnavailable, ns.name, err)
		}
		ns.mu.Lock()
	}
}

// draw hands out n IDs into out (already reset).
func (ns *segNamespace) draw(ctx context.Context, n int64, out *Batch) error {
	if cur := ns.cur.Load(); cur == nil || cur.remaining() < n {
		// Refuse before reserving if the namespace cannot give n IDs any
		// more, so the last IDs remain for smaller draws.
		if err := ns.checkLeft(n); err != nil {
			return err
		}
	}
	for rem := n; rem > 0; {
		cur := ns.cur.Load()
		if cur != nil {
			if first, got := ns.take(cur, rem); got > 0 {
				out.appendRun(first, got, cur.stride, cur.offset)
				rem -= got
				continue
			}
		}
		act, limit, err := ns.refill(ctx, cur, rem)
		switch act {
		case segRetry:
		case segStrict:
			seg, err := ns.fetchStrict(ctx, rem)
			if err != nil {
				out.reset()
				return err
			}
			out.appendRun(seg.First, rem, seg.Namespace.Stride, seg.Namespace.Offset)
			out.Revision = seg.Namespace.Version
			rem = 0
		case segFallback:
			// Segment IDs reserved so far are skipped: one batch, one source.
			out.reset()
			ids, lease, err := ns.serveFallback(out.IDs, n, limit, err)
			if err != nil {
				out.reset()
				return err
			}
			out.IDs = ids
			out.Lease = lease
			for _, id := range ids {
				if k := len(out.Ranges); k > 0 && out.Ranges[k-1].Last+1 == id {
					out.Ranges[k-1].Last = id
				} else {
					out.Ranges = append(out.Ranges, IDRange{First: id, Last: id})
				}
			}
			out.Source = SourceSnowflake
			return nil
		default:
			out.reset()
			return err
		}
	}
	out.Source = SourceSegment
	return nil
}

// checkLeft returns ErrNamespaceExhausted when a buffered namespace has
// fewer than n IDs left in its ranges and by the last row seen. That view
// may lag, so a refusal also starts a load; racing draws may still fail
// after reserving some.
func (ns *segNamespace) checkLeft(n int64) error {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if !ns.known || ns.mode == ModeStrict {
		return nil
	}
	left := ns.row.Remaining()
	if left >= n {
		return nil
	}
	if cur := ns.cur.Load(); cur != nil {
		left += cur.remaining()
	}
	if ns.next != nil {
		left += ns.next.size
	}
	if left >= n {
		return nil
	}
	ns.startLoadLocked(0)
	return fmt.Errorf("namespace %q: %w: %d IDs left, %d asked for", ns.name, ErrNamespaceExhausted, left, n)
}

// serveFallback appends n Snowflake IDs to dst, provided all lie above
// limit, the ID of the namespace's max_id_limit, which the counter never
// passes, so the two ID spaces cannot meet. It returns the lease's token.
func (ns *segNamespace) serveFallback(dst []int64, n, limit int64, storeErr error) ([]int64, LeaseToken, error) {
	src := ns.s.fallback
	if limit <= 0 {
		// No limit: a CHECK refuses that row in the store; never guess one.
		return dst, LeaseToken{}, fmt.Errorf("%w: namespace %q: database failing and the namespace has no max_id_limit, so no fallback: %w",
			ErrUnavailable, ns.name, storeErr)
	}
	if smallest := src.SmallestIDNow(); smallest <= limit {
		return dst, LeaseToken{}, fmt.Errorf("%w: namespace %q: database failing and the Snowflake IDs of now (from %d) are not above its max_id_limit %d, so no fallback: %w",
			ErrUnavailable, ns.name, smallest, limit, storeErr)
	}
	k := len(dst)
	ids, lease, err := src.NextSnowflakesFenced(dst, int(n))
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return dst[:k], LeaseToken{}, fmt.Errorf("namespace %q: database failing and Snowflake fallback failed: %w", ns.name, err)
	}
	// IDs come in increasing order: the first is the smallest.
	if int64(len(ids)-k) != n || ids[k] <= limit {
		return dst[:k], LeaseToken{}, fmt.Errorf("%w: namespace %q: Snowflake fallback returned %d IDs for %d, or IDs not above max_id_limit %d",
			ErrUnavailable, ns.name, len(ids)-k, n, limit)
	}
	ns.fallbacks.Add(1)
	ns.fallbackIDs.Add(n)
	return ids, lease, nil
}

// stopDraws stops every draw at once and returns the tail to give back:
// after the last ID used to the end of the latest range, if the unused
// ranges follow on contiguously. Close calls it after the loads stopped.
func (ns *segNamespace) stopDraws() (segTail, bool) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.closed = true
	cur, next := ns.cur.Load(), ns.next
	ns.next = nil
	var used int64
	if cur != nil {
		used = cur.stop()
	}
	switch {
	case next != nil && cur != nil && cur.last()+1 == next.first:
		// The unused end of cur and all of next: nobody fetched in between.
		return segTail{expectMax: next.last(), expectVersion: next.version, newMax: cur.first + used - 1}, true
	case next != nil:
		return segTail{expectMax: next.last(), expectVersion: next.version, newMax: next.first - 1}, true
	case cur != nil && used < cur.size:
		return segTail{expectMax: cur.last(), expectVersion: cur.version, newMax: cur.first + used - 1}, true
	}
	return segTail{}, false
}

func (ns *segNamespace) stats() (SegmentStats, bool) {
	ns.strict.mu.Lock()
	queued := len(ns.strict.pending)
	ns.strict.mu.Unlock()
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if !ns.known {
		return SegmentStats{}, false
	}
	var runway int64
	if cur := ns.cur.Load(); cur != nil {
		runway += cur.remaining()
	}
	if ns.next != nil {
		runway += ns.next.size
	}
	fb := ns.row.Fallback
	if fb != FallbackSnowflake {
		fb = FallbackNone
	}
	return SegmentStats{
		Namespace:        ns.name,
		Mode:             ns.mode,
		Fallback:         fb,
		Step:             ns.step,
		MaxID:            ns.maxKnown,
		Runway:           runway,
		Fetches:          ns.fetches,
		FetchErrors:      ns.fetchErrors,
		LastFetchLatency: ns.lastLatency,
		LastFetchAt:      ns.lastFetchAt,
		Fallbacks:        ns.fallbacks.Load(),
		FallbackIDs:      ns.fallbackIDs.Load(),
		StrictQueued:     queued,
		Loading:          ns.loading,
		Failing:          ns.failing != nil,
		LastError:        ns.lastErr,
		LastErrorAt:      ns.lastErrAt,
	}, true
}

// segPermanent reports errors retrying cannot cure (gone, exhausted,
// malformed); these are never answered by the fallback.
func segPermanent(err error) bool {
	return errors.Is(err, ErrNamespaceNotFound) || errors.Is(err, ErrInvalidNamespace) ||
		errors.Is(err, ErrNamespaceExhausted)
}
