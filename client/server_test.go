package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
)

// testServer is a real idgen node (internal/testserver: the app.App idgen
// serve runs, on a fresh SQLite store) behind a fault injector.
type testServer struct {
	URL    string
	node   *testserver.Server
	faults *faults
}

// startServer starts a test server. With lease false another holder holds
// the node's only worker ID, so the server answers 503 to Snowflake
// requests.
func startServer(t *testing.T, lease bool) *testServer {
	t.Helper()
	o := testserver.Options{Keeper: allocator.KeeperSettings{TTL: 5 * time.Second}}
	if !lease {
		store := testserver.OpenStore(t, "sqlite")
		testserver.HoldWorker(t, store, 0) // for the whole test
		o.Store, o.Keeper.WorkerIDs, o.NoWait = store, &allocator.WorkerRange{Min: 0, Max: 0}, true
	}
	node := testserver.MustStart(t, o)
	f := &faults{next: node.Handler()}
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close) // before the node closes
	return &testServer{URL: ts.URL, node: node, faults: f}
}

// createNamespace adds a buffered namespace whose first ID is 1.
func (s *testServer) createNamespace(t *testing.T, name string, step int64) {
	t.Helper()
	s.node.CreateNamespace(t, allocator.NamespaceSpec{Name: name, Step: new(step), MaxStep: new(step * 10)})
}

// faults wraps the server's handler and injects failures into the next
// requests: 503s with a Retry-After header, or connections closed without
// an answer. It counts every request it sees.
type faults struct {
	next http.Handler

	mu         sync.Mutex
	unavail    int    // answer this many more requests with 503
	retryAfter string // the Retry-After of injected 503s; "" for none
	drops      int    // close this many more connections without answering
	block      chan struct{}

	requests atomic.Int64
}

// inject503 makes the next n requests fail with 503 and Retry-After ra.
func (f *faults) inject503(n int, ra string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unavail, f.retryAfter = n, ra
}

// injectDrops makes the next n requests end with a closed connection.
func (f *faults) injectDrops(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drops = n
}

// blockUntil holds every request until ch is closed or the request ends.
func (f *faults) blockUntil(ch chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.block = ch
}

func (f *faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	f.mu.Lock()
	block := f.block
	drop := f.drops > 0
	if drop {
		f.drops--
	}
	unavail := !drop && f.unavail > 0
	if unavail {
		f.unavail--
	}
	ra := f.retryAfter
	f.mu.Unlock()

	if block != nil {
		select {
		case <-block:
		case <-r.Context().Done():
			return
		}
	}
	switch {
	case drop:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	case unavail:
		w.Header().Set("Content-Type", "application/problem+json")
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"type":"https://idgen.dev/problems/unavailable","title":"Service unavailable","status":503,"detail":"injected by the test","code":"unavailable"}`))
	default:
		f.next.ServeHTTP(w, r)
	}
}

// fakeClock is the client's clock in tests: Sleep records the wait and
// moves the clock on at once, so waits are measured, not spent.
type fakeClock struct{ *testkit.Manual }

func newFakeClock() *fakeClock {
	return &fakeClock{testkit.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
}

// Sleep is the client's clock's: it returns the context's error once the
// wait is recorded.
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.Manual.Sleep(d)
	return ctx.Err()
}

// newTestClient returns a client on clk, closed when the test ends.
func newTestClient(t *testing.T, url string, opts Options, clk clock) *Client {
	t.Helper()
	c, err := newClient(url, opts, clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
