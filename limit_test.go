package idgen

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stepClock is a clock that moves only when the test moves it.
type stepClock struct{ t time.Time }

func (c *stepClock) now() time.Time { return c.t }

func newStepClock() *stepClock {
	return &stepClock{t: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}
}

// TestLimiter checks the per-caller limit: a caller may take Burst IDs at
// once and Rate a second after that; the call past them is refused with
// TooMany and the delay until its bucket holds what it asked, takes
// nothing, and leaves other callers alone.
func TestLimiter(t *testing.T) {
	type step struct {
		advance time.Duration // move the clock first
		caller  Caller
		n       int
		wait    time.Duration // 0: served
	}
	addr := func(a string) Caller { return Caller{Address: a} }
	named := func(n string) Caller { return Caller{Name: n, Address: "192.0.2.1:1"} }
	a1 := addr("192.0.2.1:1234")
	for _, tc := range []struct {
		name     string
		limit    RateLimit
		maxCount int
		steps    []step
	}{
		{
			name:  "by address: a burst of 3 IDs at 2/s",
			limit: RateLimit{Rate: 2, Burst: 3}, maxCount: 3,
			steps: []step{
				{caller: a1, n: 1}, {caller: a1, n: 2},
				// Empty: one ID comes back in 0.5 s, two in 1 s.
				{caller: a1, n: 1, wait: 500 * time.Millisecond},
				{caller: a1, n: 2, wait: time.Second},
				// Refused calls take nothing from the bucket.
				{caller: a1, n: 1, wait: 500 * time.Millisecond},
				{caller: addr("192.0.2.2:1234"), n: 3},
				{advance: 499 * time.Millisecond, caller: a1, n: 1, wait: time.Millisecond},
				{advance: time.Millisecond, caller: a1, n: 1},
				{caller: a1, n: 1, wait: 500 * time.Millisecond},
				// A quiet spell fills the bucket again, and no more than it.
				{advance: time.Hour, caller: a1, n: 3},
				{caller: a1, n: 1, wait: 500 * time.Millisecond},
			},
		},
		{
			name:  "one a minute",
			limit: RateLimit{Rate: 1.0 / 60, Burst: 1}, maxCount: 1,
			steps: []step{
				{caller: a1, n: 1},
				{caller: a1, n: 1, wait: time.Minute},
				{advance: 45 * time.Second, caller: a1, n: 1, wait: 15 * time.Second},
				{advance: 15 * time.Second, caller: a1, n: 1},
			},
		},
		{
			name:  "a call that takes no IDs is charged one",
			limit: RateLimit{Rate: 1, Burst: 2}, maxCount: 2,
			steps: []step{
				{caller: a1, n: 0}, {caller: a1, n: 0},
				{caller: a1, n: 0, wait: time.Second},
			},
		},
		{
			name:  "an IPv6 client by its /64",
			limit: RateLimit{Rate: 1, Burst: 1}, maxCount: 1,
			steps: []step{
				{caller: addr("[2001:db8:1:2::1]:4000"), n: 1},
				{caller: addr("[2001:db8:1:2:ffff::9]:4001"), n: 1, wait: time.Second},
				{caller: addr("[2001:db8:1:3::1]:4000"), n: 1},
				{caller: addr("192.0.2.7:1"), n: 1},
				{caller: addr("[::ffff:192.0.2.7]:2"), n: 1, wait: time.Second},
				{caller: addr("192.0.2.7"), n: 1, wait: time.Second},
			},
		},
		{
			name:  "by name, whatever the address",
			limit: RateLimit{Rate: 1, Burst: 2}, maxCount: 2,
			steps: []step{
				{caller: named("orders"), n: 1},
				{caller: Caller{Name: "orders", Address: "198.51.100.1:1"}, n: 1},
				{caller: Caller{Name: "orders", Address: "198.51.100.2:1"}, n: 1, wait: time.Second},
				// Another caller from the same address has its own bucket.
				{caller: named("billing"), n: 2},
				// So has the address itself.
				{caller: addr("192.0.2.1:1"), n: 2},
			},
		},
		{
			name:  "the default burst is the largest count",
			limit: RateLimit{Rate: 1}, maxCount: 50,
			steps: []step{
				{caller: a1, n: 50},
				{caller: a1, n: 1, wait: time.Second},
			},
		},
		{
			name:  "the default burst is the rate when that is larger",
			limit: RateLimit{Rate: 100.5}, maxCount: 50,
			steps: []step{
				{caller: a1, n: 50}, {caller: a1, n: 50}, {caller: a1, n: 1},
				{caller: a1, n: 1, wait: 9950248 * time.Nanosecond}, // 1 s / 100.5,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.limit.Validate(tc.maxCount); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			clock := newStepClock()
			l := newLimiter(tc.limit, tc.maxCount, clock.now)
			for i, s := range tc.steps {
				clock.t = clock.t.Add(s.advance)
				err := l.Take(s.caller, s.n)
				if s.wait == 0 {
					if err != nil {
						t.Fatalf("step %d: Take(%+v, %d): got %v, want nil", i, s.caller, s.n, err)
					}
					continue
				}
				var e *Error
				if !errors.As(err, &e) || e.Code != TooMany {
					t.Fatalf("step %d: Take(%+v, %d): got %v, want a TooMany *Error", i, s.caller, s.n, err)
				}
				if d := e.RetryAfter - s.wait; d < -time.Microsecond || d > time.Microsecond {
					t.Errorf("step %d: RetryAfter: got %v, want %v", i, e.RetryAfter, s.wait)
				}
				if !strings.Contains(e.Detail, "rate limit") {
					t.Errorf("step %d: detail %q does not name the rate limit", i, e.Detail)
				}
			}
		})
	}
}

// TestLimiterRefused checks the counts of refused calls by kind of
// caller, and that a nil limiter limits nothing and counts nothing.
func TestLimiterRefused(t *testing.T) {
	var none *Limiter
	if err := none.Take(Caller{}, 1<<20); err != nil {
		t.Errorf("nil limiter: got %v, want nil", err)
	}
	if tok, addr := none.Refused(); tok != 0 || addr != 0 || none.Size() != 0 {
		t.Errorf("nil limiter: got refused %d, %d and size %d, want 0s", tok, addr, none.Size())
	}
	if newLimiter(RateLimit{}, 10, nil) != nil {
		t.Error("newLimiter of the zero RateLimit: got a limiter, want nil")
	}

	l := newLimiter(RateLimit{Rate: 1, Burst: 1}, 1, newStepClock().now)
	for range 3 {
		_ = l.Take(Caller{Name: "orders"}, 1) // two of three refused, counted below
	}
	for range 2 {
		_ = l.Take(Caller{Address: "192.0.2.1:1"}, 1)
	}
	if tok, addr := l.Refused(); tok != 2 || addr != 1 {
		t.Errorf("Refused: got %d by token, %d by address; want 2 and 1", tok, addr)
	}
	if got := l.Size(); got != 2 {
		t.Errorf("Size: got %d buckets, want 2", got)
	}
}

// TestLimiterAddressesBounded checks that the per-address buckets stay
// within RateLimit.MaxAddresses however many clients call, and that a
// client whose bucket was dropped while full is limited as before.
func TestLimiterAddressesBounded(t *testing.T) {
	const bound = 64
	clock := newStepClock()
	l := newLimiter(RateLimit{Rate: 1, Burst: 1, MaxAddresses: bound}, 1, clock.now)
	// 1,000 clients, each with an empty bucket: arbitrary ones must go.
	for i := range 1000 {
		c := Caller{Address: "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":5"}
		if err := l.Take(c, 1); err != nil {
			t.Fatalf("client %d: got %v, want nil", i, err)
		}
		if got := l.Size(); got > bound {
			t.Fatalf("after %d clients: got %d buckets, want at most %d", i+1, got, bound)
		}
	}
	// Once full again, the buckets are dropped when a new client comes, a
	// minute after the last sweep: a full bucket is the same as none, and
	// its client is limited as before.
	clock.t = clock.t.Add(time.Minute)
	if err := l.Take(Caller{Address: "10.9.9.9:1"}, 1); err != nil {
		t.Fatalf("a new client: got %v, want nil", err)
	}
	if got := l.Size(); got != 1 {
		t.Errorf("after a quiet minute and one new client: got %d buckets, want 1", got)
	}
	if err := l.Take(Caller{Address: "10.9.9.9:2"}, 1); err == nil {
		t.Error("the new client again at once: got nil, want TooMany")
	}
	if err := l.Take(Caller{Address: "10.0.0.1:5"}, 1); err != nil {
		t.Errorf("a client whose full bucket was dropped: got %v, want nil", err)
	}
	if err := l.Take(Caller{Address: "10.0.0.1:6"}, 1); err == nil {
		t.Error("that client again at once: got nil, want TooMany")
	}
}

// TestRateLimitValidate checks the settings refused, for a node whose
// largest count is 100.
func TestRateLimitValidate(t *testing.T) {
	for _, tc := range []struct {
		limit RateLimit
		want  string // "" for valid
	}{
		{RateLimit{}, ""},
		{RateLimit{Rate: 50}, ""},
		{RateLimit{Rate: 50, Burst: 100}, ""},
		{RateLimit{Rate: 1e9, MaxAddresses: 10}, ""},
		{RateLimit{Rate: -1}, "invalid RateLimit.Rate -1: want IDs per second, 0 (no limit) up to 1e9"},
		{RateLimit{Rate: 1e-9}, "want at least one ID in 1e6 seconds"},
		{RateLimit{Rate: 1, Burst: -1}, "invalid RateLimit.Burst -1: want 0"},
		{RateLimit{Rate: 1, Burst: 99}, "invalid RateLimit.Burst 99: below the largest count 100"},
		{RateLimit{Rate: 1, MaxAddresses: -5}, "invalid RateLimit.MaxAddresses -5"},
		{RateLimit{Rate: 2e9}, "invalid RateLimit.Rate 2e+09: want IDs per second"},
		{RateLimit{Rate: math.Inf(1)}, "invalid RateLimit.Rate +Inf"},
		{RateLimit{Rate: math.NaN()}, "invalid RateLimit.Rate NaN"},
		{RateLimit{Rate: 1e-5, Burst: 1e6}, "invalid RateLimit.Burst 1000000 at RateLimit.Rate 1e-05: an empty bucket would take over 1e9 seconds"},
	} {
		err := tc.limit.Validate(100)
		if tc.want == "" {
			if err != nil {
				t.Errorf("Validate(%+v): got %v, want nil", tc.limit, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v): got %v, want an error containing %q", tc.limit, err, tc.want)
		}
	}
}

// benchLimiter returns a limiter whose rate no benchmark reaches, and
// reports the benchmark's allocations.
func benchLimiter(b *testing.B) *Limiter {
	b.Helper()
	b.ReportAllocs()
	return newLimiter(RateLimit{Rate: 1e9}, DefaultMaxCount, nil)
}

// BenchmarkLimiterAddress is the limiter's own cost per call by client
// address, below its rate.
func BenchmarkLimiterAddress(b *testing.B) {
	l := benchLimiter(b)
	c := Caller{Address: "192.0.2.1:1234"}
	for b.Loop() {
		if l.Take(c, 1) != nil {
			b.Fatal("limited")
		}
	}
}

// BenchmarkLimiterToken is the limiter's own cost per call by token.
func BenchmarkLimiterToken(b *testing.B) {
	l := benchLimiter(b)
	c := Caller{Name: "orders-api"}
	for b.Loop() {
		if l.Take(c, 1) != nil {
			b.Fatal("limited")
		}
	}
}
