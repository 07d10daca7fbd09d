package httpapi_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/snowflake"
)

// limitedServer builds a second server on e's keeper, segments and store,
// with the rate limit r, the admin token and, when tokens is not empty,
// those tokens.
func (e *env) limitedServer(r httpapi.RateLimit, tokens string) http.Handler {
	e.tb.Helper()
	cfg := e.config()
	cfg.RateLimit, cfg.AdminToken = r, testToken
	if tokens != "" {
		set, err := httpapi.ParseTokens("tokens", []byte(tokens))
		if err != nil {
			e.tb.Fatal(err)
		}
		cfg.Tokens = set
	}
	return e.handler(cfg)
}

// call sends GET (or method) target from remote with the headers given as
// pairs, to h.
func call(h http.Handler, method, target, remote string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	req.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestRateLimit checks the per-caller limit: each caller (a token's name
// with tokens, a client address without) may send Burst requests at once
// and Rate per second after that; the request past them gets 429 with a
// Retry-After of the whole seconds until its bucket refills, and other
// callers are not affected. The limiter's clock is the test's, and stands
// still unless the test moves it.
func TestRateLimit(t *testing.T) {
	e := newEnv(t, envOptions{})
	type step struct {
		advance    time.Duration // move the clock first
		method     string        // "" is GET
		target     string        // "" is /ids
		remote     string        // "" is 192.0.2.1:1234
		secret     string        // bearer token, "" for none
		want       int
		retryAfter string // with 429
	}
	for _, tc := range []struct {
		name   string
		limit  httpapi.RateLimit
		tokens bool
		steps  []step
	}{
		{
			name:  "by address: a burst of 3 at 2/s",
			limit: httpapi.RateLimit{Rate: 2, Burst: 3},
			steps: []step{
				{want: 200}, {want: 200}, {want: 200},
				// Empty: one request comes back in 0.5 s, rounded up.
				{want: 429, retryAfter: "1"},
				// Refused requests take nothing from the bucket.
				{want: 429, retryAfter: "1"},
				{remote: "192.0.2.2:1234", want: 200},
				{target: "/ids/123", remote: "192.0.2.2:99", want: 200},
				{advance: 499 * time.Millisecond, want: 429, retryAfter: "1"},
				{advance: time.Millisecond, want: 200},
				{want: 429, retryAfter: "1"},
				// A quiet spell fills the bucket again, and no more than it.
				{advance: time.Hour, want: 200}, {want: 200}, {want: 200},
				{want: 429, retryAfter: "1"},
			},
		},
		{
			name:  "one per minute: Retry-After counts the minute",
			limit: httpapi.RateLimit{Rate: 1.0 / 60},
			steps: []step{
				{want: 200},
				{want: 429, retryAfter: "60"},
				{advance: 45 * time.Second, want: 429, retryAfter: "15"},
				{advance: 15 * time.Second, want: 200},
			},
		},
		{
			name:  "an IPv6 client by its /64",
			limit: httpapi.RateLimit{Rate: 1, Burst: 1},
			steps: []step{
				{remote: "[2001:db8:1:2::1]:4000", want: 200},
				{remote: "[2001:db8:1:2:ffff::9]:4001", want: 429, retryAfter: "1"},
				{remote: "[2001:db8:1:3::1]:4000", want: 200},
				{remote: "192.0.2.7:1", want: 200},
				{remote: "[::ffff:192.0.2.7]:2", want: 429, retryAfter: "1"},
			},
		},
		{
			name:   "by token, whatever the address",
			limit:  httpapi.RateLimit{Rate: 1, Burst: 2},
			tokens: true,
			steps: []step{
				{secret: secretIDs, want: 200},
				{secret: secretIDs, remote: "198.51.100.1:1", want: 200},
				{secret: secretIDs, remote: "198.51.100.2:1", want: 429, retryAfter: "1"},
				// Another caller from the same address has its own bucket.
				{secret: secretAll, want: 200},
				// A request refused before the limit (401, 403) takes nothing.
				{secret: secretNobody, want: 401},
				{secret: secretLeases, want: 403},
				// The admin API: by the caller's token too.
				{target: "/admin/namespaces", secret: secretAdmin, want: 200},
				{target: "/admin/namespaces", secret: secretAdmin, want: 200},
				{target: "/admin/namespaces", secret: secretAdmin, want: 429, retryAfter: "1"},
				{target: "/admin/namespaces", secret: testToken, want: 200},
				// The probes, the metrics and the status page are not limited.
				{target: "/healthz", secret: secretIDs, want: 200},
				{target: "/metrics", want: 200},
				{advance: time.Second, secret: secretIDs, want: 200},
				{secret: secretIDs, want: 429, retryAfter: "1"},
			},
		},
		{
			name:  "the compatibility routes share the caller's bucket",
			limit: httpapi.RateLimit{Rate: 1, Burst: 2},
			steps: []step{
				{target: "/api/snowflake/get/orders", want: 200},
				{target: "/api/v1/ids?count=2", want: 200},
				{target: "/tinyid/id/nextIdSimple?bizType=orders&batchSize=1", want: 429, retryAfter: "1"},
				{target: "/api/segment/get/orders", want: 429, retryAfter: "1"},
				{method: "POST", target: "/api/v1/id", want: 429, retryAfter: "1"},
			},
		},
		{
			name:   "tinyid's token parameter names the caller",
			limit:  httpapi.RateLimit{Rate: 1, Burst: 1},
			tokens: true,
			steps: []step{
				{target: "/tinyid/id/nextIdSimple?bizType=nope&token=" + secretNobody, want: 401},
				{target: "/api/snowflake/get/x", secret: secretIDs, want: 200},
				{target: "/tinyid/id/nextIdSimple?bizType=nope&token=" + secretIDs, want: 429, retryAfter: "1"},
			},
		},
		{
			name:  "the admin API without tokens: the admin token is the caller",
			limit: httpapi.RateLimit{Rate: 1, Burst: 1},
			steps: []step{
				{target: "/admin/leases", secret: testToken, want: 200},
				{target: "/admin/leases", secret: testToken, remote: "192.0.2.9:1", want: 429, retryAfter: "1"},
				// /ids, by address, is a bucket of its own.
				{want: 200},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := snowflake.NewShiftedClock(fixedClock{time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}, 0)
			tc.limit.Clock = clock
			tokens := ""
			if tc.tokens {
				tokens = testTokens
			}
			h := e.limitedServer(tc.limit, tokens)
			for i, s := range tc.steps {
				clock.Shift(s.advance)
				method, target, remote := s.method, s.target, s.remote
				if method == "" {
					method = "GET"
				}
				if target == "" {
					target = "/ids"
				}
				if remote == "" {
					remote = "192.0.2.1:1234"
				}
				var header []string
				if s.secret != "" {
					header = bearer(s.secret)
				}
				rec := call(h, method, target, remote, header...)
				if rec.Code != s.want {
					t.Fatalf("step %d: %s %s from %s: got status %d, want %d; body %s", i, method, target, remote, rec.Code, s.want, rec.Body.String())
				}
				if s.want == http.StatusTooManyRequests {
					wantStatus(t, rec, http.StatusTooManyRequests)
					if got := rec.Header().Get("Retry-After"); got != s.retryAfter {
						t.Errorf("step %d: Retry-After: got %q, want %q", i, got, s.retryAfter)
					}
					p := checkProblem(t, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes())
					if p.Code != "too_many" || !strings.Contains(p.Detail, "rate limit") {
						t.Errorf("step %d: problem: got %+v, want code too_many and a detail naming the rate limit", i, p)
					}
				}
			}
		})
	}
}

// TestRateLimitMetrics checks the counters of refused requests by kind of
// caller, and that both families exist at 0 on a node without a limit.
func TestRateLimitMetrics(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, series := range []string{
		`idgen_http_rate_limited_total{caller_kind="token"}`,
		`idgen_http_rate_limited_total{caller_kind="address"}`,
		`idgen_http_rate_limit_buckets`,
	} {
		if v, ok := e.scrape()[series]; !ok || v != 0 {
			t.Errorf("without a limit: %s: got %v (listed %v), want 0", series, v, ok)
		}
	}

	clock := snowflake.NewShiftedClock(fixedClock{time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}, 0)
	h := e.limitedServer(httpapi.RateLimit{Rate: 1, Burst: 1, Clock: clock}, testTokens)
	for range 3 {
		call(h, "GET", "/ids", "192.0.2.1:1", bearer(secretIDs)...)
	}
	for range 2 {
		call(h, "GET", "/ids", "192.0.2.1:1", bearer(secretAll)...)
	}
	metrics := call(h, "GET", "/metrics", "192.0.2.1:1")
	body := metrics.Body.String()
	for _, want := range []string{
		`idgen_http_rate_limited_total{caller_kind="token"} 3`,
		`idgen_http_rate_limited_total{caller_kind="address"} 0`,
		`idgen_http_rate_limit_buckets 2`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics: want a line %q; got\n%s", want, grepLines(body, "rate_limit"))
		}
	}
}

// TestRateLimitAddressesBounded checks that the per-address buckets stay
// within RateLimit.MaxAddresses however many clients call, and that a
// client whose bucket was dropped while full is limited as before.
func TestRateLimitAddressesBounded(t *testing.T) {
	e := newEnv(t, envOptions{})
	clock := snowflake.NewShiftedClock(fixedClock{time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}, 0)
	const bound = 64
	cfg := e.config()
	cfg.RateLimit = httpapi.RateLimit{Rate: 1, Burst: 1, MaxAddresses: bound, Clock: clock}
	srv, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	buckets := func() float64 {
		rec := call(h, "GET", "/metrics", "127.0.0.1:1")
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if v, ok := strings.CutPrefix(line, "idgen_http_rate_limit_buckets "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return f
			}
		}
		t.Fatal("no idgen_http_rate_limit_buckets")
		return 0
	}
	// 1,000 clients, each with an empty bucket: arbitrary ones must go.
	for i := range 1000 {
		remote := "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":5"
		if rec := call(h, "GET", "/ids", remote); rec.Code != 200 {
			t.Fatalf("client %d: got %d, want 200", i, rec.Code)
		}
		if got := buckets(); got > bound {
			t.Fatalf("after %d clients: got %v buckets, want at most %d", i+1, got, bound)
		}
	}
	// Once full again, the buckets are dropped as soon as a new client
	// comes: a full bucket is the same as none.
	clock.Shift(time.Minute)
	call(h, "GET", "/ids", "10.9.9.9:1")
	if got := buckets(); got != 1 {
		t.Errorf("after a quiet minute and one new client: got %v buckets, want 1", got)
	}
	if rec := call(h, "GET", "/ids", "10.9.9.9:2"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("the new client again at once: got %d, want 429", rec.Code)
	}
}

// TestRateLimitInvalid checks that New refuses rate limits out of range.
func TestRateLimitInvalid(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, tc := range []struct {
		limit httpapi.RateLimit
		want  string
	}{
		{httpapi.RateLimit{Rate: -1}, "httpapi: rate limit: rate -1: want requests per second, 0 (no limit) up to 1e9"},
		{httpapi.RateLimit{Rate: 1e-9}, "want at least one request in 1e6 seconds"},
		{httpapi.RateLimit{Rate: 1, Burst: -1}, "rate limit: burst -1: want 0"},
		{httpapi.RateLimit{Rate: 1, MaxAddresses: -5}, "rate limit: max addresses -5"},
		{httpapi.RateLimit{Rate: 2e9}, "rate 2e+09: want requests per second, 0 (no limit) up to 1e9"},
		{httpapi.RateLimit{Rate: math.Inf(1)}, "rate +Inf"},
		{httpapi.RateLimit{Rate: math.NaN()}, "rate NaN"},
		{httpapi.RateLimit{Rate: 1e-5, Burst: 1e6}, "burst 1000000 at rate 1e-05: an empty bucket would take over 1e9 seconds"},
	} {
		cfg := e.config()
		cfg.RateLimit = tc.limit
		_, err := httpapi.New(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with %+v: got %v, want an error containing %q", tc.limit, err, tc.want)
		}
	}
}

// BenchmarkIDsCount1RateLimit is BenchmarkIDsCount1 with a rate limit by
// client address that the benchmark never reaches.
func BenchmarkIDsCount1RateLimit(b *testing.B) {
	e := newEnv(b, envOptions{})
	h := e.limitedServer(httpapi.RateLimit{Rate: 1e9}, "")
	benchHandler(b, h, "/ids")
}

// BenchmarkIDsCount1TokensRateLimit is BenchmarkIDsCount1Tokens with a
// rate limit by token that the benchmark never reaches.
func BenchmarkIDsCount1TokensRateLimit(b *testing.B) {
	e := newEnv(b, envOptions{})
	h := e.limitedServer(httpapi.RateLimit{Rate: 1e9}, testTokens)
	benchHandler(b, h, "/ids", "Authorization", "Bearer "+secretAll)
}

// grepLines returns the lines of text that contain sub.
func grepLines(text, sub string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
