package allocator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Strict draws of one namespace on one node share store fetches.
//
// At most one strict fetch per namespace is in flight on a node. A draw
// finding none fetches at once; otherwise it queues, and when the fetch
// returns the queued draws (up to maxStrictBatch IDs) form a group whose
// first member fetches the sum and splits it in queue order.
//
// Strictness holds: a group's range is gap-free, and a draw never joins a
// fetch already in flight, so a draw starting after another returned gets
// a later fetch, with higher IDs and revision.

// maxStrictBatch bounds one combined fetch; a draw that would pass it
// waits for the next.
const maxStrictBatch = MaxDrawCount

// strictWaiter is one strict draw in the queue of its namespace.
type strictWaiter struct {
	n     int64
	ready chan struct{} // closed when the waiter leads a group, or when its result is in

	// Set under strictQueue.mu before ready is closed.
	grouped bool            // taken into a group: its IDs are being fetched, it may not leave
	group   []*strictWaiter // for the group's first waiter: the group it fetches for
	seg     Segment         // its part of the group's range
	err     error
}

// strictQueue is a namespace's strict draws waiting for a fetch.
type strictQueue struct {
	mu      sync.Mutex
	busy    bool            // a strict fetch is in flight
	pending []*strictWaiter // draws waiting for the next fetch, in arrival order
}

// fetchStrict returns exactly n slots for a strict draw, its part of a
// shared fetch. ctx and MaxWait bound the wait for the fetch to start;
// after that it waits for the fetch, since leaving would open a gap.
func (ns *segNamespace) fetchStrict(ctx context.Context, n int64) (Segment, error) {
	s := ns.s
	if s.closed.Load() {
		return Segment{}, ErrSegmentsClosed
	}
	q := &ns.strict
	w := &strictWaiter{n: n, ready: make(chan struct{})}
	q.mu.Lock()
	if !q.busy {
		q.busy = true
		w.grouped = true
		q.mu.Unlock()
		return ns.fetchGroup(ctx, []*strictWaiter{w}, w)
	}
	q.pending = append(q.pending, w)
	q.mu.Unlock()

	var bound <-chan time.Time
	if s.maxWait > 0 {
		t := time.NewTimer(s.maxWait)
		defer t.Stop()
		bound = t.C
	}
	var why error
	select {
	case <-w.ready:
	case <-ctx.Done():
		why = ctx.Err()
	case <-bound:
		why = fmt.Errorf("waited %v, the longest a draw may wait", s.maxWait)
	case <-s.closing.Done():
		why = ErrSegmentsClosed
	}
	if why != nil {
		q.mu.Lock()
		if !w.grouped {
			// Still queued: leave, taking no IDs.
			q.removeLocked(w)
			q.mu.Unlock()
			if errors.Is(why, ErrSegmentsClosed) {
				return Segment{}, ErrSegmentsClosed
			}
			return Segment{}, fmt.Errorf("%w: namespace %q: waiting for a strict fetch: %w", ErrUnavailable, ns.name, why)
		}
		q.mu.Unlock()
		<-w.ready // its group's fetch is under way, bounded by the fetch timeout
	}
	if w.group != nil {
		return ns.fetchGroup(ctx, w.group, w)
	}
	return w.seg, w.err
}

// removeLocked takes w out of the queue.
func (q *strictQueue) removeLocked(w *strictWaiter) {
	for i, p := range q.pending {
		if p == w {
			q.pending = append(q.pending[:i], q.pending[i+1:]...)
			return
		}
	}
}

// fetchGroup fetches group's IDs (led by me), hands out the parts and the
// next group's turn, and returns me's. ctx's values go with the fetch, not
// its end.
func (ns *segNamespace) fetchGroup(ctx context.Context, group []*strictWaiter, me *strictWaiter) (Segment, error) {
	var total int64
	for _, w := range group {
		total += w.n
	}
	// Close waits for the fetch rather than abort it: an aborted fetch may
	// still commit, losing its IDs.
	ns.mu.Lock()
	closed := ns.closed
	if !closed {
		ns.s.wg.Add(1)
	}
	ns.mu.Unlock()
	var (
		seg Segment
		err = ErrSegmentsClosed
	)
	if !closed {
		seg, err = ns.fetchExact(ctx, total)
	}
	switch {
	case err == nil:
		first := seg.First
		for _, w := range group {
			w.seg = Segment{Namespace: seg.Namespace, First: first, Last: first + w.n - 1}
			first += w.n
		}
	case len(group) > 1 && errors.Is(err, ErrNamespaceExhausted):
		// Fewer IDs left than the group asked for: fetch one by one in
		// arrival order, refusing only draws larger than what is left.
		for _, w := range group {
			w.seg, w.err = ns.fetchExact(ctx, w.n)
		}
	default:
		for _, w := range group {
			w.err = err
		}
	}
	if !closed {
		ns.s.wg.Done()
	}
	for _, w := range group {
		if w != me {
			close(w.ready)
		}
	}
	// Wake the next leader last: the scheduler runs the goroutine woken
	// last first, so the next fetch starts sooner.
	ns.nextGroup()
	return me.seg, me.err
}

// nextGroup starts the next fetch for queued draws, or marks the queue
// idle; after Close the queued draws fail.
func (ns *segNamespace) nextGroup() {
	q := &ns.strict
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		q.busy = false
		return
	}
	if ns.s.closed.Load() {
		for _, w := range q.pending {
			w.grouped = true
			w.err = ErrSegmentsClosed
			close(w.ready)
		}
		q.pending = nil
		q.busy = false
		return
	}
	k, sum := 0, int64(0)
	for k < len(q.pending) && (k == 0 || sum+q.pending[k].n <= maxStrictBatch) {
		sum += q.pending[k].n
		k++
	}
	group := make([]*strictWaiter, k)
	copy(group, q.pending)
	q.pending = append(q.pending[:0], q.pending[k:]...)
	for _, w := range group {
		w.grouped = true
	}
	lead := group[0]
	lead.group = group
	close(lead.ready)
}

// fetchExact fetches exactly n slots, bounded by the fetch timeout and
// Close (not ctx: the fetch serves other draws), and records stats.
func (ns *segNamespace) fetchExact(ctx context.Context, n int64) (Segment, error) {
	s := ns.s
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.fetchTimeout)
	stopped := context.AfterFunc(s.stop, cancel)
	start := s.clock.Now()
	seg, err := s.store.FetchSegment(fctx, ns.name, n)
	stopped()
	cancel()
	end := s.clock.Now()

	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.fetches++
	ns.lastLatency = end.Sub(start)
	if err == nil {
		err = ns.checkLocked(seg, n, false)
	}
	if err != nil {
		ns.recordErrLocked(err, end)
		if segPermanent(err) {
			return Segment{}, fmt.Errorf("namespace %q: %w", ns.name, err)
		}
		return Segment{}, fmt.Errorf("%w: namespace %q: strict fetch: %w", ErrUnavailable, ns.name, err)
	}
	ns.lastFetchAt = end
	ns.failing = nil
	ns.applyRowLocked(seg.Namespace)
	return seg, nil
}
