package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

// The test broker's callers: leaseOwner has the leases scope with the
// secret leaseToken, idsOnly only the ids scope with idsToken.
const (
	leaseOwner = "client-test"
	leaseToken = "client-test-lease-secret"
	idsToken   = "client-test-ids-secret"
)

// brokerTokens is the test broker's tokens file.
var brokerTokens = leaseOwner + " leases " + idgen.HashSecret(leaseToken) + "\n" +
	"ids-only ids " + idgen.HashSecret(idsToken) + "\n"

// broker is an idgen node serving the lease API (its own keeper holds
// worker 0), behind a fault injector.
type broker struct {
	URL    string
	node   *testserver.Server
	store  stores.Store
	faults *faults
}

func startBroker(t *testing.T) *broker {
	t.Helper()
	node := testserver.MustStart(t, testserver.Options{
		Tokens: brokerTokens,
		Keeper: allocator.KeeperSettings{TTL: 5 * time.Second, WorkerIDs: &WorkerRange{Min: 0, Max: 0}},
	})
	f := &faults{next: node.Handler()}
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	return &broker{URL: ts.URL, node: node, store: node.Store(), faults: f}
}

// newTestGenerator starts a generator on b, closed when the test ends.
func newTestGenerator(t *testing.T, b *broker, opts GeneratorOptions) *Generator {
	t.Helper()
	if opts.Token == "" {
		opts.Token = leaseToken
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := NewGenerator(ctx, b.URL, opts)
	if err != nil {
		t.Fatalf("NewGenerator: %v", err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	return g
}

func TestGeneratorIssuesUnderItsLease(t *testing.T) {
	b := startBroker(t)
	g := newTestGenerator(t, b, GeneratorOptions{Holder: "gen-a", Workers: &WorkerRange{Min: 3, Max: 5}, TTL: 4 * time.Second})
	if err := g.Ready(); err != nil {
		t.Fatalf("Ready after NewGenerator: %v", err)
	}
	st := g.Status()
	w := st.Lease.WorkerID
	if !st.Held || w < 3 || w > 5 || st.Lease.Holder != "api:"+leaseOwner+"/gen-a" {
		t.Fatalf("status: %+v; want a lease of worker 3-5 held by api:%s/gen-a", st, leaseOwner)
	}
	row := testserver.LeaseRow(t, b.store, 0, w)
	if row.Holder != "api:"+leaseOwner+"/gen-a" || row.Owner != leaseOwner || row.FencingVersion != st.Lease.FencingVersion {
		t.Fatalf("row: %+v; want holder api:%s/gen-a, owner %s, version %d", row, leaseOwner, leaseOwner, st.Lease.FencingVersion)
	}

	ids := make([]int64, 0, 20000)
	for range 10000 {
		id, err := g.Next()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		ids = append(ids, id)
	}
	ids, err := g.NextN(ids, 10000)
	if err != nil || len(ids) != 20000 {
		t.Fatalf("NextN: %d IDs, %v", len(ids), err)
	}
	layout := g.Layout()
	ceiling := testserver.LeaseRow(t, b.store, 0, w).CeilingMS // ceilings only rise: every ID lies at or below this one
	for i, id := range ids {
		p := layout.Decompose(snowflake.ID(id))
		if ts := p.Time.UnixMilli(); p.Worker != w || p.Datacenter != 0 || ts < st.FloorMS || ts > ceiling {
			t.Fatalf("ID %d: worker %d/%d timestamp %d; want worker 0/%d within [%d, %d]", id, p.Datacenter, p.Worker, ts, w, st.FloorMS, ceiling)
		}
		if i > 0 && id <= ids[i-1] {
			t.Fatalf("ID %d after %d: not increasing", id, ids[i-1])
		}
	}
	lastTS := layout.Decompose(snowflake.ID(ids[len(ids)-1])).Time.UnixMilli()

	if err := g.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := g.Next(); !errors.Is(err, ErrGeneratorClosed) || !errors.Is(err, ErrUnavailable) {
		t.Errorf("Next after Close: %v, want ErrGeneratorClosed and ErrUnavailable", err)
	}
	// Released with the exact last timestamp: the next holder starts
	// right above it.
	row = testserver.LeaseRow(t, b.store, 0, w)
	if row.Holder != "" || row.CeilingMS != lastTS {
		t.Errorf("row after Close: holder %q ceiling %d; want free at the last timestamp %d", row.Holder, row.CeilingMS, lastTS)
	}
}

// TestGeneratorMovesOnWhenEvicted: an evicted generator stops issuing at
// its next heartbeat, and acquires a new lease.
func TestGeneratorMovesOnWhenEvicted(t *testing.T) {
	b := startBroker(t)
	g := newTestGenerator(t, b, GeneratorOptions{Holder: "gen-e", Workers: &WorkerRange{Min: 1, Max: 2}, TTL: 3 * time.Second, Heartbeat: 100 * time.Millisecond})
	first := g.Status().Lease
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	evicted, err := b.store.Evict(context.Background(), allocator.EvictRequest{Key: first.LeaseKey, Owner: "operator", Reason: "test"})
	if err != nil {
		t.Fatalf("Evict: %v", err)
	}
	testkit.WaitFor(t, 20*time.Second, "a new lease after the eviction", func() bool {
		st := g.Status()
		return st.Held && (st.Lease.FencingVersion != first.FencingVersion || st.Lease.WorkerID != first.WorkerID)
	})
	st := g.Status()
	if st.Lost != 1 {
		t.Errorf("lost: got %d, want 1", st.Lost)
	}
	// The new lease starts above the evicted one's ceiling, which the
	// eviction kept, when it is the same worker ID.
	if st.Lease.WorkerID == first.WorkerID && st.FloorMS <= evicted.CeilingMS {
		t.Errorf("new lease of worker %d: floor %d, want above the evicted ceiling %d", st.Lease.WorkerID, st.FloorMS, evicted.CeilingMS)
	}
	testkit.WaitFor(t, 20*time.Second, "ready on the new lease", func() bool { return g.Ready() == nil })
	id, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	if p := g.Layout().Decompose(snowflake.ID(id)); p.Worker != st.Lease.WorkerID {
		t.Errorf("ID of worker %d, want %d", p.Worker, st.Lease.WorkerID)
	}
	// The broker recorded the loss with the owner.
	evs, err := b.store.ListLeaseEvents(context.Background(), allocator.LeaseEventFilter{Kind: allocator.EventLost, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Holder != "api:"+leaseOwner+"/gen-e" || evs[0].Owner != leaseOwner || evs[0].FencingVersion != first.FencingVersion {
		t.Errorf("lost events: %+v; want one of api:%s/gen-e at version %d with owner %s", evs, leaseOwner, first.FencingVersion, leaseOwner)
	}
}

// TestGeneratorStopsAtItsDeadline: with the broker unreachable, the
// generator issues until its local deadline and then refuses.
func TestGeneratorStopsAtItsDeadline(t *testing.T) {
	b := startBroker(t)
	g := newTestGenerator(t, b, GeneratorOptions{Holder: "gen-d", Workers: &WorkerRange{Min: 1, Max: 1}, TTL: 3 * time.Second})
	block := make(chan struct{})
	b.faults.blockUntil(block)
	defer close(block)
	cut := time.Now()
	var lastIssued time.Time // when the last call that returned an ID started
	testkit.WaitFor(t, 20*time.Second, "a refusal", func() bool {
		start := time.Now()
		_, err := g.Next()
		if err == nil {
			lastIssued = start
		}
		return err != nil
	})
	refusedAfter := time.Since(cut)
	_, err := g.Next()
	if !errors.Is(err, ErrLeaseExpired) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Next with the broker unreachable: %v; want ErrLeaseExpired and ErrUnavailable", err)
	}
	// The deadline counts from before the last successful heartbeat was
	// sent: at most ttl - margin (2.7 s) after the cut. Past the ttl the
	// store may already have given the worker ID to another holder, so an
	// ID issued then would be a bug. A call that started at or after
	// cut + ttl and returned an ID proves one was; a slow test goroutine
	// can only make the check more lenient, never fail it.
	t.Logf("refused %s after the broker became unreachable", refusedAfter.Round(time.Millisecond))
	if ttl := 3 * time.Second; !lastIssued.IsZero() && lastIssued.Sub(cut) >= ttl {
		t.Errorf("the generator issued an ID in a call that started %s after the cut, want none from the ttl %s on",
			lastIssued.Sub(cut), ttl)
	}
	if err := g.Ready(); !errors.Is(err, ErrLeaseExpired) {
		t.Errorf("Ready: %v, want ErrLeaseExpired", err)
	}
}

func TestNewGeneratorRefusals(t *testing.T) {
	b := startBroker(t)
	off := testserver.MustStart(t, testserver.Options{}) // no token: the lease API is off
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		url  string
		opts GeneratorOptions
		want error
	}{
		{"unknown token", b.URL, GeneratorOptions{Token: "wrong"}, ErrUnauthorized},
		{"token without the leases scope", b.URL, GeneratorOptions{Token: idsToken}, ErrForbidden},
		{"no token", b.URL, GeneratorOptions{}, ErrUnauthorized},
		{"lease API off", off.URL, GeneratorOptions{Token: leaseToken}, ErrNotFound},
		{"ttl below the server's minimum", b.URL, GeneratorOptions{Token: leaseToken, TTL: 2 * time.Second}, ErrInvalid},
		{"ttl not whole milliseconds", b.URL, GeneratorOptions{Token: leaseToken, TTL: 3*time.Second + time.Microsecond}, ErrInvalidInput},
		{"holder with a space", b.URL, GeneratorOptions{Token: leaseToken, Holder: "a b"}, ErrInvalidInput},
		{"holder too long", b.URL, GeneratorOptions{Token: leaseToken, Holder: strings.Repeat("h", MaxGeneratorHolderLen+1)}, ErrInvalidInput},
		{"pool outside the layout", b.URL, GeneratorOptions{Token: leaseToken, Workers: &WorkerRange{Min: 0, Max: 32}}, ErrInvalidInput},
		{"datacenter outside the layout", b.URL, GeneratorOptions{Token: leaseToken, Datacenter: 32}, ErrInvalidInput},
		{"bad URL", "ftp://x", GeneratorOptions{Token: leaseToken}, ErrInvalidInput},
		{"token with a newline", b.URL, GeneratorOptions{Token: "a\nb"}, ErrInvalidInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := NewGenerator(ctx, tc.url, tc.opts)
			if err == nil {
				_ = g.Close(ctx)
				t.Fatalf("NewGenerator: no error, want %v", tc.want)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("NewGenerator: %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), leaseToken) {
				t.Errorf("the error holds the token: %v", err)
			}
		})
	}
	// None of them holds a lease.
	rows, err := b.store.ListLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.WorkerID != 0 && r.Holder != "" {
			t.Errorf("worker %d held by %s after refused generators", r.WorkerID, r.Holder)
		}
	}
}

// TestNewGeneratorPoolFull: with every worker ID of its pool held,
// NewGenerator waits until ctx ends and says why it got none.
func TestNewGeneratorPoolFull(t *testing.T) {
	b := startBroker(t)
	newTestGenerator(t, b, GeneratorOptions{Holder: "first", Workers: &WorkerRange{Min: 4, Max: 4}, TTL: 3 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	g, err := NewGenerator(ctx, b.URL, GeneratorOptions{Token: leaseToken, Holder: "second", Workers: &WorkerRange{Min: 4, Max: 4}, TTL: 3 * time.Second})
	if err == nil {
		_ = g.Close(ctx)
		t.Fatal("NewGenerator on a full pool: no error")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNoWorkerAvailable) || !errors.Is(err, allocator.ErrNoWorkerAvailable) {
		t.Errorf("NewGenerator on a full pool: %v; want the deadline and no_worker_available", err)
	}
	// With NoWait it returns at once and refuses until a lease is held.
	g, err = NewGenerator(context.Background(), b.URL, GeneratorOptions{Token: leaseToken, Holder: "third", Workers: &WorkerRange{Min: 4, Max: 4}, TTL: 3 * time.Second, NoWait: true})
	if err != nil {
		t.Fatalf("NewGenerator with NoWait: %v", err)
	}
	defer g.Close(context.Background())
	if _, err := g.Next(); !errors.Is(err, ErrNoLease) || !errors.Is(err, ErrUnavailable) {
		t.Errorf("Next without a lease: %v, want ErrNoLease and ErrUnavailable", err)
	}
}

// TestLeaseStoreErrors: the lease API's answers match both the keeper's
// sentinels and this package's.
func TestLeaseStoreErrors(t *testing.T) {
	b := startBroker(t)
	s, err := NewLeaseStore(b.URL, LeaseStoreOptions{Token: leaseToken})
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseIdleConnections()
	ctx := context.Background()
	res, err := s.Claim(ctx, allocator.ClaimRequest{MinWorkerID: 9, MaxWorkerID: 9, Holder: "h", TTL: 3 * time.Second, RequestID: "req-1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Lease.WorkerID != 9 || res.Lease.Holder != "api:"+leaseOwner+"/h" || res.PrevCeilingMS != res.Lease.FloorMS-1 || res.DBNow.IsZero() {
		t.Errorf("claim: %+v", res)
	}
	_, err = s.Claim(ctx, allocator.ClaimRequest{MinWorkerID: 9, MaxWorkerID: 9, Holder: "other", TTL: 3 * time.Second})
	if !errors.Is(err, allocator.ErrNoWorkerAvailable) || !errors.Is(err, ErrNoWorkerAvailable) {
		t.Errorf("claim of a full pool: %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Status != 409 || e.RetryAfter < time.Second {
		t.Errorf("claim of a full pool: %#v, want a 409 with Retry-After", e)
	}
	// A lease this store did not acquire has no secret here: lost, without
	// a request.
	_, _, err = s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: res.Lease.LeaseKey, Holder: "h", FencingVersion: res.Lease.FencingVersion + 1, TTL: 3 * time.Second})
	if !errors.Is(err, allocator.ErrLeaseLost) || !errors.Is(err, ErrLeaseLost) {
		t.Errorf("heartbeat at another version: %v", err)
	}
	// The lease acquired is extended for the ttl asked.
	ext, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: res.Lease.LeaseKey, Holder: "h", FencingVersion: res.Lease.FencingVersion, TTL: 4 * time.Second})
	if err != nil || ext.FencingVersion != res.Lease.FencingVersion {
		t.Fatalf("heartbeat: %+v, %v", ext, err)
	}
	_, err = s.Release(ctx, allocator.ReleaseRequest{Key: res.Lease.LeaseKey, Holder: "h", FencingVersion: res.Lease.FencingVersion, LastTimestampMS: ext.CeilingMS + 1})
	if !errors.Is(err, allocator.ErrInvalidRelease) || !errors.Is(err, ErrInvalidRelease) {
		t.Errorf("release above the ceiling: %v", err)
	}
	ceiling, err := s.Release(ctx, allocator.ReleaseRequest{Key: res.Lease.LeaseKey, Holder: "h", FencingVersion: res.Lease.FencingVersion})
	if err != nil || ceiling != res.Lease.FloorMS-1 {
		t.Errorf("release having issued nothing: ceiling %d, %v; want the floor - 1 = %d", ceiling, err, res.Lease.FloorMS-1)
	}
	evs, err := b.store.ListLeaseEvents(ctx, allocator.LeaseEventFilter{Kind: allocator.EventAcquire, Owner: leaseOwner, Limit: 10})
	if err != nil || len(evs) != 1 || evs[0].RequestID != "req-1" {
		t.Errorf("acquire events: %+v, %v; want one with request ID req-1", evs, err)
	}
	// Released, the lease's secret is gone: a heartbeat of it is lost.
	_, _, err = s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: res.Lease.LeaseKey, Holder: "h", FencingVersion: res.Lease.FencingVersion, TTL: 3 * time.Second})
	if !errors.Is(err, allocator.ErrLeaseLost) {
		t.Errorf("heartbeat after the release: %v, want ErrLeaseLost", err)
	}
	// A transport failure is neither.
	again, err := s.Claim(ctx, allocator.ClaimRequest{MinWorkerID: 9, MaxWorkerID: 9, Holder: "h", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b.faults.injectDrops(1)
	_, _, err = s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: again.Lease.LeaseKey, Holder: "h", FencingVersion: again.Lease.FencingVersion, TTL: 3 * time.Second})
	if err == nil || errors.Is(err, allocator.ErrLeaseLost) {
		t.Errorf("heartbeat on a dropped connection: %v", err)
	}
}

// TestGeneratorConcurrent: IDs from many goroutines are unique.
func TestGeneratorConcurrent(t *testing.T) {
	b := startBroker(t)
	g := newTestGenerator(t, b, GeneratorOptions{Holder: "gen-c", Workers: &WorkerRange{Min: 6, Max: 6}, TTL: 5 * time.Second})
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ids := make([]int64, 0, 5000)
			for len(ids) < 5000 {
				var err error
				if ids, err = g.NextN(ids, 100); err != nil {
					t.Error(err)
					return
				}
			}
			mu.Lock()
			all = append(all, ids...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(all)
	if len(slices.Compact(all)) != 40000 {
		t.Errorf("got %d unique IDs of 40000", len(slices.Compact(all)))
	}
}

// TestLeaseStoreSpeaksConnect: every call of a LeaseStore is a call of the
// generated LeaseService client, with the token, the request ID and the
// store's User-Agent.
func TestLeaseStoreSpeaksConnect(t *testing.T) {
	b := startBroker(t)
	var (
		mu  sync.Mutex
		got []string
	)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, strings.Join([]string{r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("X-Request-ID"), r.Header.Get("User-Agent")}, " "))
		mu.Unlock()
		b.node.Handler().ServeHTTP(w, r)
	}))
	defer ts.Close()
	s, err := NewLeaseStore(ts.URL, LeaseStoreOptions{Token: leaseToken, UserAgent: "ua"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseIdleConnections()
	ctx := context.Background()
	if _, err := s.EnsureLayout(ctx, snowflake.Layout{}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Claim(ctx, allocator.ClaimRequest{MinWorkerID: 7, MaxWorkerID: 7, Holder: "h", TTL: 3 * time.Second, RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	l := res.Lease
	if _, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: l.LeaseKey, Holder: "h", FencingVersion: l.FencingVersion, TTL: 3 * time.Second, RequestID: "r2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, allocator.ReleaseRequest{Key: l.LeaseKey, Holder: "h", FencingVersion: l.FencingVersion, RequestID: "r3"}); err != nil {
		t.Fatal(err)
	}
	bearer := "Bearer " + leaseToken
	want := []string{
		"/idgen.v1.LeaseService/GetLayout " + bearer + "  ua",
		"/idgen.v1.LeaseService/AcquireLease " + bearer + " r1 ua",
		"/idgen.v1.LeaseService/HeartbeatLease " + bearer + " r2 ua",
		"/idgen.v1.LeaseService/ReleaseLease " + bearer + " r3 ua",
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Errorf("requests (path, Authorization, X-Request-ID, User-Agent):\n got %q\nwant %q", got, want)
	}
}
