package sequence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
)

// countingStore is a Store whose Reserve numbers requests from one
// counter, records the requests of each call, and blocks while gate is
// held.
type countingStore struct {
	Store   // methods the tests do not call
	gate    sync.Mutex
	entered chan struct{} // a send per call, when not nil
	mu      sync.Mutex
	next    int64
	calls   [][]Request
	fail    error
}

func (c *countingStore) Reserve(_ context.Context, name string, reqs []Request) ([]Reservation, error) {
	if c.entered != nil {
		c.entered <- struct{}{}
	}
	c.gate.Lock()
	defer c.gate.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, reqs)
	if c.fail != nil {
		return nil, c.fail
	}
	out := make([]Reservation, len(reqs))
	for i, r := range reqs {
		out[i] = Reservation{ID: r.ID, Sequence: name, First: c.next + 1, Count: r.Count, Caller: r.Caller}
		c.next += int64(r.Count)
	}
	return out, nil
}

// queued returns how many callers queue on name.
func (s *Service) queued(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.queues[name]; ok {
		return len(q.pending)
	}
	return 0
}

// TestServiceCombines holds the store's first round trip, queues five
// callers behind it in a known order, and checks that one second round
// trip serves them all, the earlier caller with the lower numbers.
func TestServiceCombines(t *testing.T) {
	store := &countingStore{entered: make(chan struct{}, 10)}
	svc := NewService(store, Settings{})
	store.gate.Lock()
	type result struct {
		r   Reservation
		err error
	}
	results := make([]chan result, 6)
	for i := range results {
		results[i] = make(chan result, 1)
		go func() {
			r, err := svc.Reserve(t.Context(), "inv", i+1, fmt.Sprintf("c%d", i), "")
			results[i] <- result{r, err}
		}()
		if i == 0 {
			<-store.entered // the first round trip is out, held
			continue
		}
		testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("caller %d to queue", i), func() bool { return svc.queued("inv") == i })
	}
	store.gate.Unlock()
	next := int64(1)
	for i, ch := range results {
		res := <-ch
		if res.err != nil {
			t.Fatalf("caller %d: %v", i, res.err)
		}
		if res.r.First != next || res.r.Count != i+1 || res.r.Caller != fmt.Sprintf("c%d", i) {
			t.Errorf("caller %d: got %d+%d for %s, want %d+%d", i, res.r.First, res.r.Count, res.r.Caller, next, i+1)
		}
		next += int64(i + 1)
	}
	if got := svc.RoundTrips(); got != 2 {
		t.Errorf("got %d round trips, want 2 (one held, one for the five queued)", got)
	}
	if len(store.calls) == 2 && len(store.calls[1]) != 5 {
		t.Errorf("second round trip: %d requests, want 5", len(store.calls[1]))
	}
	if svc.queued("inv") != 0 || len(svc.queues) != 0 {
		t.Errorf("queues left: %v", svc.queues)
	}
}

// TestServiceBatchCap splits queued callers into round trips of at most
// MaxBatch numbers, in arrival order.
func TestServiceBatchCap(t *testing.T) {
	store := &countingStore{entered: make(chan struct{}, 10)}
	svc := NewService(store, Settings{MaxCount: 10, MaxBatch: 10})
	store.gate.Lock()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = svc.Reserve(t.Context(), "s", 1, "", "") })
	<-store.entered
	for i := range 4 {
		wg.Go(func() {
			if _, err := svc.Reserve(t.Context(), "s", 6, "", ""); err != nil {
				t.Error(err)
			}
		})
		testkit.WaitFor(t, 10*time.Second, "a caller to queue", func() bool { return svc.queued("s") == i+1 })
	}
	store.gate.Unlock()
	wg.Wait()
	if got := svc.RoundTrips(); got != 5 {
		t.Errorf("got %d round trips, want 5: 6+6 passes the cap of 10", got)
	}
}

func TestServiceRefusesBadCount(t *testing.T) {
	store := &countingStore{}
	svc := NewService(store, Settings{MaxCount: 100})
	for _, n := range []int{0, -1, 101} {
		if _, err := svc.Reserve(t.Context(), "s", n, "", ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("count %d: got %v, want ErrInvalid", n, err)
		}
	}
	if len(store.calls) != 0 {
		t.Errorf("store called %d times, want 0", len(store.calls))
	}
}

func TestServiceStoreError(t *testing.T) {
	boom := errors.New("database down")
	svc := NewService(&countingStore{fail: boom}, Settings{})
	if _, err := svc.Reserve(t.Context(), "s", 1, "", ""); !errors.Is(err, boom) {
		t.Errorf("got %v, want the store's error", err)
	}
}

// TestServiceCallerLeavesQueue cancels a queued caller: it gets its
// context's error and its request never reaches the store.
func TestServiceCallerLeavesQueue(t *testing.T) {
	store := &countingStore{entered: make(chan struct{}, 10)}
	svc := NewService(store, Settings{})
	store.gate.Lock()
	done := make(chan error, 2)
	go func() { _, err := svc.Reserve(t.Context(), "s", 1, "first", ""); done <- err }()
	<-store.entered
	ctx, cancel := context.WithCancel(t.Context())
	go func() { _, err := svc.Reserve(ctx, "s", 1, "leaver", ""); done <- err }()
	testkit.WaitFor(t, 10*time.Second, "the second caller to queue", func() bool { return svc.queued("s") == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("leaver: got %v, want context.Canceled", err)
	}
	store.gate.Unlock()
	if err := <-done; err != nil {
		t.Errorf("first: %v", err)
	}
	for _, call := range store.calls {
		for _, r := range call {
			if r.Caller == "leaver" {
				t.Error("the leaver's request reached the store")
			}
		}
	}
}

// TestServiceRequestCap splits queued callers into round trips of at most
// MaxRequests callers.
func TestServiceRequestCap(t *testing.T) {
	store := &countingStore{entered: make(chan struct{}, 10)}
	svc := NewService(store, Settings{MaxRequests: 2})
	store.gate.Lock()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = svc.Reserve(t.Context(), "s", 1, "", "") })
	<-store.entered
	for i := range 5 {
		wg.Go(func() {
			if _, err := svc.Reserve(t.Context(), "s", 1, "", ""); err != nil {
				t.Error(err)
			}
		})
		testkit.WaitFor(t, 10*time.Second, "a caller to queue", func() bool { return svc.queued("s") == i+1 })
	}
	store.gate.Unlock()
	wg.Wait()
	if got := svc.RoundTrips(); got != 4 {
		t.Errorf("got %d round trips, want 4: the held one, then 2+2+1", got)
	}
	for i, call := range store.calls {
		if len(call) > 2 {
			t.Errorf("round trip %d: %d requests, want at most 2", i, len(call))
		}
	}
}
