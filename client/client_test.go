package client

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

var bg = context.Background()

func TestNextAndNextN(t *testing.T) {
	srv := startServer(t, true)
	c := newTestClient(t, srv.URL, Options{MaxCount: 1000}, newFakeClock())

	id, err := c.Next(bg)
	if err != nil {
		t.Fatal(err)
	}
	if id <= 0 {
		t.Fatalf("Next: got %d, want a positive ID", id)
	}

	for _, tc := range []struct {
		n, wantRequests int
	}{
		{1, 1},
		{1000, 1},
		{2500, 3}, // split at MaxCount
	} {
		before := srv.faults.requests.Load()
		ids, err := c.NextN(bg, tc.n)
		if err != nil {
			t.Fatalf("NextN(%d): %v", tc.n, err)
		}
		if len(ids) != tc.n {
			t.Fatalf("NextN(%d): got %d IDs", tc.n, len(ids))
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("NextN(%d): ids[%d]=%d not above ids[%d]=%d", tc.n, i, ids[i], i-1, ids[i-1])
			}
		}
		if ids[0] <= id {
			t.Errorf("NextN(%d): first ID %d not above the previous %d", tc.n, ids[0], id)
		}
		id = ids[len(ids)-1]
		if got := srv.faults.requests.Load() - before; got != int64(tc.wantRequests) {
			t.Errorf("NextN(%d): got %d requests, want %d", tc.n, got, tc.wantRequests)
		}
	}

	for _, n := range []int{0, -1} {
		before := srv.faults.requests.Load()
		if _, err := c.NextN(bg, n); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("NextN(%d): got %v, want ErrInvalidInput", n, err)
		}
		if srv.faults.requests.Load() != before {
			t.Errorf("NextN(%d) sent a request", n)
		}
	}
}

func TestDrawNamespace(t *testing.T) {
	srv := startServer(t, true)
	srv.createNamespace(t, "orders", 100)
	c := newTestClient(t, srv.URL, Options{}, newFakeClock())

	d, err := c.DrawNamespace(bg, "orders", 5)
	if err != nil {
		t.Fatal(err)
	}
	want := Draw{Namespace: "orders", IDs: []int64{1, 2, 3, 4, 5}, Source: SourceSegment,
		Ranges: []Range{{First: 1, Last: 5, Source: SourceSegment}}}
	if d.Namespace != want.Namespace || !slices.Equal(d.IDs, want.IDs) || d.Source != want.Source || !slices.Equal(d.Ranges, want.Ranges) {
		t.Errorf("DrawNamespace: got %+v, want %+v", d, want)
	}
	id, err := c.NextInNamespace(bg, "orders")
	if err != nil || id != 6 {
		t.Errorf("NextInNamespace: got %d, %v, want 6", id, err)
	}

	t.Run("unknown namespace", func(t *testing.T) {
		_, err := c.DrawNamespace(bg, "nope", 1)
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("got %T, want *Error", err)
		}
		if e.Status != 404 || e.Code != "not_found" || e.Type != "https://idgen.dev/problems/not_found" || e.Title == "" || e.Detail == "" {
			t.Errorf("got %+v, want the server's problem fields", e)
		}
		if e.Temporary() || errors.Is(err, ErrUnavailable) {
			t.Errorf("a 404 reported as temporary or unavailable: %+v", e)
		}
	})

	t.Run("bad names are refused locally", func(t *testing.T) {
		before := srv.faults.requests.Load()
		for _, ns := range []string{"", "Orders", "-x", "a b", strings.Repeat("a", 65)} {
			// The core's rule decides (allocator.ValidNamespace).
			if _, err := c.DrawNamespace(bg, ns, 1); !errors.Is(err, ErrInvalidInput) || !errors.Is(err, allocator.ErrInvalidNamespace) {
				t.Errorf("DrawNamespace(%q): got %v, want ErrInvalidInput and allocator.ErrInvalidNamespace", ns, err)
			}
		}
		if _, err := c.DrawNamespace(bg, "orders", 0); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("DrawNamespace(n=0): got %v, want ErrInvalidInput", err)
		}
		if got := srv.faults.requests.Load(); got != before {
			t.Errorf("got %d requests for invalid input, want 0", got-before)
		}
	})
}

func TestParse(t *testing.T) {
	srv := startServer(t, true)
	c := newTestClient(t, srv.URL, Options{}, newFakeClock())
	id, err := c.Next(bg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Parse(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	local := snowflake.DefaultLayout().Decompose(snowflake.ID(id))
	want := Parts{ID: id, Time: local.Time, TimestampMS: local.Time.UnixMilli(),
		Datacenter: local.Datacenter, Worker: local.Worker, Sequence: local.Sequence}
	if p != want {
		t.Errorf("Parse(%d): got %+v, want %+v", id, p, want)
	}
	if _, err := c.Parse(bg, -1); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("Parse(-1): got %v, want ErrInvalidInput", err)
	}
}

// TestRetryAfterHonoured: injected 503s are retried, and every retry waits
// at least what Retry-After advised, measured on the fake clock.
func TestRetryAfterHonoured(t *testing.T) {
	clk := newFakeClock()
	for _, tc := range []struct {
		name       string
		failures   int
		retryAfter string
		wantWait   time.Duration
	}{
		{"seconds", 2, "2", 2 * time.Second},
		// A date is a moment: after the first wait it has passed, so one
		// failure only.
		{"HTTP date", 1, clk.Now().Add(3 * time.Second).Format(http.TimeFormat), 3 * time.Second},
		{"no header: backoff", 2, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, clk, c := startClient(t, true, Options{})
			srv.faults.inject503(tc.failures, tc.retryAfter)

			if _, err := c.Next(bg); err != nil {
				t.Fatalf("Next after %d 503s: %v", tc.failures, err)
			}
			if got := srv.faults.requests.Load(); got != int64(tc.failures+1) {
				t.Errorf("got %d requests, want %d (the 503s, then success)", got, tc.failures+1)
			}
			slept := clk.Slept()
			if len(slept) != tc.failures {
				t.Fatalf("got waits %v, want %d", slept, tc.failures)
			}
			for i, d := range slept {
				if d < tc.wantWait {
					t.Errorf("wait %d: got %v, want at least the Retry-After %v", i, d, tc.wantWait)
				}
				// Exponential backoff bounds (defaults 50ms base): the
				// n-th retry waits at least base·2^(n-1)/2.
				if least := DefaultBackoffBase << i / 2; d < least {
					t.Errorf("wait %d: got %v, want at least the backoff %v", i, d, least)
				}
				if tc.wantWait == 0 && d > DefaultBackoffBase<<i {
					t.Errorf("wait %d: got %v, want at most the backoff %v", i, d, DefaultBackoffBase<<i)
				}
			}
		})
	}
}

// wantNoRetry checks that the client sent one request and never waited.
func wantNoRetry(t *testing.T, srv *testServer, clk *fakeClock) {
	t.Helper()
	if got := srv.faults.requests.Load(); got != 1 || len(clk.Slept()) != 0 {
		t.Errorf("got %d requests and waits %v, want 1 and none", got, clk.Slept())
	}
}

// startClient starts a test server, holding a lease or not, and a client
// of it on a fake clock.
func startClient(t *testing.T, lease bool, opts Options) (*testServer, *fakeClock, *Client) {
	t.Helper()
	srv := startServer(t, lease)
	clk := newFakeClock()
	return srv, clk, newTestClient(t, srv.URL, opts, clk)
}

func TestRetryLimits(t *testing.T) {
	t.Run("Retry-After above MaxRetryAfter returns at once", func(t *testing.T) {
		srv, clk, c := startClient(t, true, Options{MaxRetryAfter: 10 * time.Second})
		srv.faults.inject503(1, "60")
		_, err := c.Next(bg)
		var e *Error
		if !errors.As(err, &e) || e.Status != 503 || e.RetryAfter != 60*time.Second || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("got %v, want *Error 503 with RetryAfter 60s", err)
		}
		wantNoRetry(t, srv, clk)
	})

	t.Run("context deadline before Retry-After returns at once", func(t *testing.T) {
		srv, clk, c := startClient(t, true, Options{})
		srv.faults.inject503(1, "5")
		ctx, cancel := context.WithTimeout(bg, 2*time.Second)
		defer cancel()
		_, err := c.Next(ctx)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("got %v, want the server's 503", err)
		}
		wantNoRetry(t, srv, clk)
	})

	t.Run("gives up after MaxAttempts", func(t *testing.T) {
		srv, clk, c := startClient(t, true, Options{MaxAttempts: 3, Breaker: BreakerOptions{Threshold: -1}})
		srv.faults.inject503(10, "1")
		_, err := c.Next(bg)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
		if got := srv.faults.requests.Load(); got != 3 {
			t.Errorf("got %d requests, want 3", got)
		}
		if got := len(clk.Slept()); got != 2 {
			t.Errorf("got %d waits, want 2", got)
		}
		const want = "idgen client: GET /ids?count=1: after 3 attempts: idgen: 503 unavailable: injected by the test"
		if err.Error() != want {
			t.Errorf("got error text %q, want %q", err, want)
		}
	})

	t.Run("network errors are retried", func(t *testing.T) {
		srv, _, c := startClient(t, true, Options{})
		srv.faults.injectDrops(2)
		if _, err := c.Next(bg); err != nil {
			t.Fatalf("Next after two dropped connections: %v", err)
		}
		if got := srv.faults.requests.Load(); got != 3 {
			t.Errorf("got %d requests, want 3", got)
		}
	})

	t.Run("client errors are not retried", func(t *testing.T) {
		srv, clk, c := startClient(t, true, Options{})
		_, err := c.DrawNamespace(bg, "missing", 1)
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
		wantNoRetry(t, srv, clk)
	})

	t.Run("a real server without a lease", func(t *testing.T) {
		_, clk, c := startClient(t, false, Options{MaxAttempts: 2})
		_, err := c.Next(bg)
		var e *Error
		if !errors.As(err, &e) || e.Status != 503 || e.Code != "unavailable" || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("got %v, want the server's 503 unavailable problem", err)
		}
		if e.RetryAfter < time.Second {
			t.Errorf("Retry-After %v, want at least 1s", e.RetryAfter)
		}
		if slept := clk.Slept(); len(slept) != 1 || slept[0] < e.RetryAfter {
			t.Errorf("waits %v, want one of at least %v", slept, e.RetryAfter)
		}
	})
}

// TestCircuitBreaker: the breaker opens after Threshold failed attempts,
// refuses calls without sending them, lets one probe through after the
// cooldown (half-open), re-opens when the probe fails and closes when it
// succeeds.
func TestCircuitBreaker(t *testing.T) {
	srv := startServer(t, true)
	srv.createNamespace(t, "orders", 100)
	clk := newFakeClock()
	const cooldown = 10 * time.Second
	c := newTestClient(t, srv.URL, Options{MaxAttempts: 1, Breaker: BreakerOptions{Threshold: 3, Cooldown: cooldown}}, clk)
	srv.faults.inject503(1000, "1")

	call := func(step string, wantErr error, wantState BreakerState, wantRequests int64) {
		t.Helper()
		_, err := c.Next(bg)
		switch {
		case wantErr == nil && err != nil:
			t.Fatalf("%s: got %v, want success", step, err)
		case wantErr != nil && !errors.Is(err, wantErr):
			t.Fatalf("%s: got %v, want %v", step, err, wantErr)
		}
		if got := c.BreakerState(); got != wantState {
			t.Fatalf("%s: breaker %s, want %s", step, got, wantState)
		}
		if got := srv.faults.requests.Load(); got != wantRequests {
			t.Fatalf("%s: %d requests so far, want %d", step, got, wantRequests)
		}
	}
	call("failure 1", ErrUnavailable, BreakerClosed, 1)
	call("failure 2", ErrUnavailable, BreakerClosed, 2)
	call("failure 3 opens", ErrUnavailable, BreakerOpen, 3)
	call("open: refused unsent", ErrCircuitOpen, BreakerOpen, 3)
	clk.Advance(cooldown - time.Millisecond)
	call("still open just before the cooldown", ErrCircuitOpen, BreakerOpen, 3)
	clk.Advance(time.Millisecond)
	if got := c.BreakerState(); got != BreakerHalfOpen {
		t.Fatalf("after the cooldown: breaker %s, want half-open", got)
	}
	call("half-open probe fails: open again", ErrUnavailable, BreakerOpen, 4)
	call("open again: refused unsent", ErrCircuitOpen, BreakerOpen, 4)

	srv.faults.inject503(0, "")
	clk.Advance(cooldown)
	call("half-open probe succeeds: closed", nil, BreakerClosed, 5)
	call("closed", nil, BreakerClosed, 6)

	// Answers that say the service is healthy, 404s included, never open it.
	for i := 0; i < 5; i++ {
		if _, err := c.DrawNamespace(bg, "missing", 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	}
	if got := c.BreakerState(); got != BreakerClosed {
		t.Errorf("after 404s: breaker %s, want closed", got)
	}
}

func TestBreakerHalfOpenAdmitsOneProbe(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newBreaker(2, time.Second, func() time.Time { return now })
	for i := 0; i < 2; i++ {
		if !b.allow() {
			t.Fatalf("closed breaker refused attempt %d", i)
		}
		b.done(outcomeFailure)
	}
	if b.allow() {
		t.Fatal("open breaker admitted an attempt")
	}
	now = now.Add(time.Second)
	if !b.allow() {
		t.Fatal("half-open breaker refused the probe")
	}
	if b.allow() {
		t.Fatal("half-open breaker admitted a second attempt while the probe is in flight")
	}
	b.done(outcomeNeutral) // the caller gave up: the next attempt may probe
	if !b.allow() {
		t.Fatal("half-open breaker refused a probe after a neutral outcome")
	}
	b.done(outcomeSuccess)
	if got := b.State(); got != BreakerClosed {
		t.Fatalf("after a successful probe: %s, want closed", got)
	}
}

// TestBlockCache: with the cache on, 8 goroutines get unique IDs, each in
// increasing order, and the client asks the server for a block at a time.
func TestBlockCache(t *testing.T) {
	const (
		goroutines = 8
		perG       = 500
		block      = 100
	)
	for _, tc := range []struct {
		name string
		ns   string
	}{
		{"snowflake", ""},
		{"namespace", "orders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, true)
			opts := Options{Cache: CacheOptions{Snowflake: block}}
			if tc.ns != "" {
				srv.createNamespace(t, tc.ns, 1000)
				opts = Options{Cache: CacheOptions{Namespaces: map[string]int{tc.ns: block}}}
			}
			c := newTestClient(t, srv.URL, opts, newFakeClock())

			got := make([][]int64, goroutines)
			errs := make([]error, goroutines)
			var wg sync.WaitGroup
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < perG; i++ {
						var id int64
						var err error
						if tc.ns == "" {
							id, err = c.Next(bg)
						} else {
							id, err = c.NextInNamespace(bg, tc.ns)
						}
						if err != nil {
							errs[g] = err
							return
						}
						got[g] = append(got[g], id)
					}
				}()
			}
			wg.Wait()

			seen := make(map[int64]int, goroutines*perG)
			for g, ids := range got {
				if errs[g] != nil {
					t.Fatalf("goroutine %d: %v", g, errs[g])
				}
				for i, id := range ids {
					if prev, dup := seen[id]; dup {
						t.Fatalf("ID %d handed to goroutines %d and %d", id, prev, g)
					}
					seen[id] = g
					if i > 0 && id <= ids[i-1] {
						t.Errorf("goroutine %d: ID %d after %d, want increasing", g, id, ids[i-1])
					}
				}
			}
			if len(seen) != goroutines*perG {
				t.Errorf("got %d unique IDs, want %d", len(seen), goroutines*perG)
			}
			// One refill at a time, each of a block, started only when
			// fewer than a quarter of a block is left: at most
			// (total + block/4) / block + 1 requests.
			maxReq := int64((goroutines*perG+block/4)/block + 1)
			if n := srv.faults.requests.Load(); n < goroutines*perG/block || n > maxReq {
				t.Errorf("got %d requests, want %d to %d", n, goroutines*perG/block, maxReq)
			}
		})
	}
}

func TestBlockCacheLargeCountsBypass(t *testing.T) {
	srv := startServer(t, true)
	srv.createNamespace(t, "orders", 1000)
	c := newTestClient(t, srv.URL, Options{Cache: CacheOptions{Snowflake: 10, Namespaces: map[string]int{"orders": 10}}}, newFakeClock())
	ids, err := c.NextN(bg, 50)
	if err != nil || len(ids) != 50 {
		t.Fatalf("NextN(50): %d IDs, %v", len(ids), err)
	}
	d, err := c.DrawNamespace(bg, "orders", 50)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Range{{First: 1, Last: 50, Source: SourceSegment}}; !slices.Equal(d.Ranges, want) {
		t.Errorf("DrawNamespace(50) with a block of 10: got ranges %v, want %v", d.Ranges, want)
	}
	if got := srv.faults.requests.Load(); got != 2 {
		t.Errorf("got %d requests, want 2 (one per call, no cache)", got)
	}
}

func TestBlockCacheRefillFailure(t *testing.T) {
	srv, _, c := startClient(t, true, Options{MaxAttempts: 1, Cache: CacheOptions{Snowflake: 10}})
	srv.faults.inject503(1, "1")
	if _, err := c.Next(bg); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Next with a failing refill: got %v, want ErrUnavailable", err)
	}
	// The next call starts a new refill, which succeeds.
	if _, err := c.Next(bg); err != nil {
		t.Fatalf("Next after the failure: %v", err)
	}
}

func TestCachedIDsAreNotHandedOutAfterClose(t *testing.T) {
	_, _, c := startClient(t, true, Options{Cache: CacheOptions{Snowflake: 100}})
	if _, err := c.Next(bg); err != nil { // fills the cache
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(bg); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close with IDs cached: got %v, want ErrClosed", err)
	}
	// Uncached calls keep working.
	if _, err := c.Parse(bg, 1); err != nil {
		t.Errorf("Parse after Close: %v", err)
	}
}

func TestCloseStopsRefills(t *testing.T) {
	srv, _, c := startClient(t, true, Options{Cache: CacheOptions{Snowflake: 10}})
	release := make(chan struct{})
	defer close(release)
	srv.faults.blockUntil(release)

	done := make(chan error, 1)
	go func() {
		_, err := c.Next(bg)
		done <- err
	}()
	for srv.faults.requests.Load() == 0 { // the refill reached the server
		time.Sleep(time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("Next during Close: got %v, want ErrClosed", err)
	}
	if _, err := c.Next(bg); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: got %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestWaitingForCacheHonoursContext(t *testing.T) {
	srv := startServer(t, true)
	c := newTestClient(t, srv.URL, Options{Cache: CacheOptions{Snowflake: 10}}, newFakeClock())
	release := make(chan struct{})
	defer close(release)
	srv.faults.blockUntil(release)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := c.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  string
		opts Options
	}{
		{"not http", "ftp://idgen:8080", Options{}},
		{"no host", "http://", Options{}},
		{"query", "http://idgen:8080/?x=1", Options{}},
		{"credentials", "http://user:secret@idgen:8080", Options{}},
		{"negative attempts", "http://idgen:8080", Options{MaxAttempts: -1}},
		{"low water 1", "http://idgen:8080", Options{Cache: CacheOptions{LowWater: 1}}},
		{"block above max count", "http://idgen:8080", Options{Cache: CacheOptions{Snowflake: 20000}}},
		{"bad namespace", "http://idgen:8080", Options{Cache: CacheOptions{Namespaces: map[string]int{"Bad": 10}}}},
		{"namespace block above max count", "http://idgen:8080", Options{MaxCount: 100, Cache: CacheOptions{Namespaces: map[string]int{"a": 101}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.url, tc.opts)
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("got %v, %v, want ErrInvalidInput", c, err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
	c, err := New("http://idgen:8080/prefix/", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.BaseURL() != "http://idgen:8080/prefix" || c.maxAttempts != DefaultMaxAttempts || c.breaker.threshold != DefaultBreakerThreshold {
		t.Errorf("zero Options: got base %q attempts %d threshold %d", c.BaseURL(), c.maxAttempts, c.breaker.threshold)
	}
}

func TestNewError(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		status    int
		header    string
		body      string
		wantCode  string
		wantIs    error
		wantRetry time.Duration
		wantTemp  bool
	}{
		{"problem 503", 503, "3", `{"type":"https://idgen.dev/problems/unavailable","title":"Service unavailable","status":503,"detail":"no lease","code":"unavailable"}`,
			"unavailable", ErrUnavailable, 3 * time.Second, true},
		{"problem 400", 400, "", `{"type":"https://idgen.dev/problems/invalid","title":"Invalid request","status":400,"detail":"count","code":"invalid"}`,
			"invalid", ErrInvalid, 0, false},
		{"proxy 502 page", 502, "", `<html>bad gateway</html>`, "unavailable", ErrUnavailable, 0, true},
		{"429", 429, "bogus", ``, "too_many", ErrTooMany, 0, true},
		{"500", 500, "", `{"code":"internal","status":500,"title":"Internal error"}`, "internal", ErrInternal, 0, false},
		{"past date", 503, now.Add(-time.Minute).Format(http.TimeFormat), ``, "unavailable", ErrUnavailable, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set("Retry-After", tc.header)
			}
			e := newError(tc.status, h, []byte(tc.body), now)
			if e.Code != tc.wantCode || e.RetryAfter != tc.wantRetry || e.Temporary() != tc.wantTemp || e.Status != tc.status {
				t.Errorf("got code %q retry %v temporary %v status %d, want %q %v %v %d",
					e.Code, e.RetryAfter, e.Temporary(), e.Status, tc.wantCode, tc.wantRetry, tc.wantTemp, tc.status)
			}
			if !errors.Is(e, tc.wantIs) {
				t.Errorf("errors.Is(%v, %v) is false", e, tc.wantIs)
			}
			if e.Title == "" || !strings.Contains(e.Error(), tc.wantCode) {
				t.Errorf("Error() %q, Title %q: want the code and a title", e.Error(), e.Title)
			}
		})
	}
}
