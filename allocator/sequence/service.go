package sequence

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Settings.
const (
	// DefaultMaxCount is the default Settings.MaxCount.
	DefaultMaxCount = 1000
	// DefaultMaxBatch is the default Settings.MaxBatch.
	DefaultMaxBatch = 10000
	// DefaultMaxRequests is the default Settings.MaxRequests.
	DefaultMaxRequests = 100
	// DefaultStoreTimeout is the default Settings.StoreTimeout.
	DefaultStoreTimeout = 10 * time.Second
)

// Settings configure a Service; zero fields mean the defaults.
type Settings struct {
	// MaxCount is the cap of one reservation's count.
	MaxCount int
	// MaxBatch is the most numbers per store round trip; at least MaxCount.
	MaxBatch int
	// MaxRequests is the most reservations per round trip.
	MaxRequests int
	// StoreTimeout bounds one round trip, which runs on for the callers it
	// combines even if its sender gives up.
	StoreTimeout time.Duration
	// NewID makes reservation IDs; nil is crypto/rand.Text.
	NewID func() string
}

// Service validates reservations and combines a sequence's concurrent ones
// into one store round trip, in arrival order. It starts no goroutine: each
// round trip's first caller runs it. Safe for concurrent use.
type Service struct {
	store      Store
	maxCount   int
	maxBatch   int
	maxReqs    int
	timeout    time.Duration
	newID      func() string
	roundTrips atomic.Int64

	mu     sync.Mutex
	queues map[string]*queue // sequences with a round trip out
}

// queue is one sequence's callers waiting for a round trip.
type queue struct {
	pending []*waiter
}

// waiter is one caller's reservation on its way.
type waiter struct {
	req  Request
	res  Reservation
	err  error
	done chan struct{} // closed when res or err is set
	lead chan struct{} // closed when the waiter is to run the next round trip
}

// NewService returns a Service over store.
func NewService(store Store, s Settings) *Service {
	svc := &Service{store: store, maxCount: s.MaxCount, maxBatch: s.MaxBatch, timeout: s.StoreTimeout, newID: s.NewID, queues: map[string]*queue{}}
	if svc.maxCount <= 0 {
		svc.maxCount = DefaultMaxCount
	}
	svc.maxBatch = max(svc.maxBatch, svc.maxCount)
	if s.MaxBatch <= 0 {
		svc.maxBatch = max(DefaultMaxBatch, svc.maxCount)
	}
	if svc.maxReqs = s.MaxRequests; svc.maxReqs <= 0 {
		svc.maxReqs = DefaultMaxRequests
	}
	if svc.timeout <= 0 {
		svc.timeout = DefaultStoreTimeout
	}
	if svc.newID == nil {
		svc.newID = rand.Text
	}
	return svc
}

// Store returns the store the service runs over.
func (s *Service) Store() Store { return s.store }

// MaxCount returns the cap of one reservation's count.
func (s *Service) MaxCount() int { return s.maxCount }

// RoundTrips returns how many store round trips Reserve has made.
func (s *Service) RoundTrips() int64 { return s.roundTrips.Load() }

// Reserve reserves count numbers of sequence name for caller. If ctx ends
// while queued nothing is reserved; once sent, Reserve waits for the result.
func (s *Service) Reserve(ctx context.Context, name string, count int, caller, requestID string) (Reservation, error) {
	if count < 1 || count > s.maxCount {
		return Reservation{}, fmt.Errorf("%w: count %d: want 1 to %d", ErrInvalid, count, s.maxCount)
	}
	w := &waiter{
		req:  Request{ID: s.newID(), Count: count, Caller: caller, RequestID: requestID},
		done: make(chan struct{}),
		lead: make(chan struct{}),
	}
	s.mu.Lock()
	q, running := s.queues[name]
	if !running {
		q = &queue{}
		s.queues[name] = q
	}
	q.pending = append(q.pending, w)
	s.mu.Unlock()
	if running {
		select {
		case <-w.done:
			return w.res, w.err
		case <-w.lead:
		case <-ctx.Done():
			if s.leave(q, w) {
				return Reservation{}, fmt.Errorf("reserve on sequence %q: %w", name, ctx.Err())
			}
			select { // out in a round trip, or handed the next one
			case <-w.done:
				return w.res, w.err
			case <-w.lead:
			}
		}
	}
	s.roundTrip(ctx, name, q)
	<-w.done
	return w.res, w.err
}

// leave takes w out of q if still queued and not handed the next round
// trip, and reports whether it did.
func (s *Service) leave(q *queue, w *waiter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.lead:
		return false
	default:
	}
	i := slices.Index(q.pending, w)
	if i < 0 {
		return false
	}
	q.pending = slices.Delete(q.pending, i, i+1)
	return true
}

// roundTrip reserves q's queued callers, up to maxBatch numbers and
// maxReqs callers, in one store call, then hands on the next round trip.
func (s *Service) roundTrip(ctx context.Context, name string, q *queue) {
	s.mu.Lock()
	n, total := 0, 0
	for n < len(q.pending) && n < s.maxReqs && (n == 0 || total+q.pending[n].req.Count <= s.maxBatch) {
		total += q.pending[n].req.Count
		n++
	}
	batch := slices.Clone(q.pending[:n])
	q.pending = slices.Delete(q.pending, 0, n)
	s.mu.Unlock()

	reqs := make([]Request, len(batch))
	for i, w := range batch {
		reqs[i] = w.req
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	res, err := s.store.Reserve(sctx, name, reqs)
	cancel()
	s.roundTrips.Add(1)
	if err == nil && len(res) != len(reqs) {
		err = fmt.Errorf("reserve on sequence %q: the store answered %d reservations for %d", name, len(res), len(reqs))
	}
	for i, w := range batch {
		if err != nil {
			w.err = err
		} else {
			w.res = res[i]
		}
		close(w.done)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if len(q.pending) > 0 {
		close(q.pending[0].lead)
		return
	}
	delete(s.queues, name)
}

// Create validates and creates seq.
func (s *Service) Create(ctx context.Context, seq Sequence) (Sequence, error) {
	if _, err := seq.Compile(); err != nil {
		return Sequence{}, err
	}
	return s.store.CreateSequence(ctx, seq)
}

// Confirm confirms reservation id of sequence name for caller.
func (s *Service) Confirm(ctx context.Context, name, id, caller string) (Reservation, error) {
	return s.store.Settle(ctx, name, id, caller, Confirmed)
}

// Void voids reservation id of sequence name for caller.
func (s *Service) Void(ctx context.Context, name, id, caller string) (Reservation, error) {
	return s.store.Settle(ctx, name, id, caller, Voided)
}

// ExpireDue marks Expired the overdue reservations of every sequence and
// returns how many; nodes run it in the background. Errors are joined.
func (s *Service) ExpireDue(ctx context.Context) (int64, error) {
	seqs, err := s.store.ListSequences(ctx)
	if err != nil {
		return 0, fmt.Errorf("expire reservations: %w", err)
	}
	var (
		total int64
		errs  []error
	)
	for _, seq := range seqs {
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("expire reservations: %w", ctx.Err()))
			break
		}
		n, err := s.store.ExpireReservations(ctx, seq.Name)
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("expire reservations of sequence %q: %w", seq.Name, err))
		}
	}
	return total, errors.Join(errs...)
}
