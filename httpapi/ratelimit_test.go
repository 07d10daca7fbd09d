package httpapi_test

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
)

// limitedServer builds a second server on e's keeper, segments and store,
// with a service of the rate limit r and the largest count maxCount, the
// admin token and, when tokens is not empty, those tokens.
func (e *env) limitedServer(r idgen.RateLimit, maxCount int, tokens string) http.Handler {
	e.tb.Helper()
	cfg := e.config()
	cfg.Service = e.service(idgen.Settings{MaxCount: maxCount, RateLimit: r})
	var set *idgen.TokenSet
	if tokens != "" {
		var err error
		if set, err = idgen.ParseTokens("tokens", []byte(tokens)); err != nil {
			e.tb.Fatal(err)
		}
	}
	cfg.Auth = idgen.NewAuthorizer(testToken, set)
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

// TestRateLimit checks which routes charge the caller's rate limit
// (idgen.Limiter, whose arithmetic the core's tests check) and how: GET
// /ids and the compatibility routes the IDs they take, GET /ids/{id} and
// the admin API one; the probes, the metrics and the status page nothing;
// a refusal is 429 with a Retry-After of the whole seconds the core asks
// for. One ID an hour: nothing refills while the test runs.
func TestRateLimit(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.createNamespace(allocator.Namespace{Name: "orders"})
	type step struct {
		method     string // "" is GET
		target     string // "" is /ids
		remote     string // "" is 192.0.2.1:1234
		secret     string // bearer token, "" for none
		want       int
		retryAfter string // with 429
	}
	const hour = 1.0 / 3600
	for _, tc := range []struct {
		name   string
		tokens bool
		steps  []step
	}{
		{
			name: "by address: a burst of 3 IDs",
			steps: []step{
				{target: "/ids?count=2", want: 200}, {want: 200},
				{want: 429, retryAfter: "3600"},
				{target: "/ids?count=2", want: 429, retryAfter: "7200"},
				// Refused requests take nothing; a count past the largest
				// is refused before the limit.
				{want: 429, retryAfter: "3600"},
				{target: "/ids?count=4", want: 400},
				{target: "/ids/123", want: 429, retryAfter: "3600"},
				{target: "/ids/123", remote: "192.0.2.2:99", want: 200},
				{target: "/ids?namespace=orders&count=2", remote: "192.0.2.2:99", want: 200},
				{remote: "192.0.2.2:1", want: 429, retryAfter: "3600"},
				// The probes, the metrics and the status page are not limited.
				{target: "/healthz", want: 200},
				{target: "/readyz", want: 200},
				{target: "/metrics", want: 200},
				{target: "/", want: 200},
			},
		},
		{
			name: "the compatibility routes share the caller's bucket",
			steps: []step{
				{target: "/api/snowflake/get/orders", want: 200},
				{target: "/api/v1/ids?count=2", want: 200},
				{target: "/tinyid/id/nextIdSimple?bizType=orders&batchSize=1", want: 429, retryAfter: "3600"},
				{target: "/api/segment/get/orders", want: 429, retryAfter: "3600"},
				{method: "POST", target: "/api/v1/id", want: 429, retryAfter: "3600"},
			},
		},
		{
			name:   "by token, whatever the address",
			tokens: true,
			steps: []step{
				{target: "/ids?count=2", secret: secretIDs, want: 200},
				{secret: secretIDs, remote: "198.51.100.1:1", want: 200},
				{secret: secretIDs, remote: "198.51.100.2:1", want: 429, retryAfter: "3600"},
				{target: "/tinyid/id/nextIdSimple?bizType=orders&token=" + secretIDs, want: 429, retryAfter: "3600"},
				// Another caller from the same address has its own bucket.
				{target: "/ids?count=3", secret: secretAll, want: 200},
				// A request refused before the limit (401, 403) takes nothing.
				{secret: secretNobody, want: 401},
				{secret: secretLeases, want: 403},
				// The admin API: one ID a call, by the caller's token too.
				{target: "/admin/namespaces", secret: secretAdmin, want: 200},
				{target: "/admin/namespaces", secret: secretAdmin, want: 200},
				{target: "/admin/namespaces", secret: secretAdmin, want: 200},
				{target: "/admin/namespaces", secret: secretAdmin, want: 429, retryAfter: "3600"},
				{target: "/admin/namespaces", secret: testToken, want: 200},
			},
		},
		{
			name: "the admin API without tokens: the admin token is the caller",
			steps: []step{
				{target: "/admin/leases", secret: testToken, want: 200},
				{target: "/admin/leases", secret: testToken, want: 200},
				{target: "/admin/leases", secret: testToken, remote: "192.0.2.9:1", want: 200},
				{target: "/admin/leases", secret: testToken, remote: "192.0.2.9:1", want: 429, retryAfter: "3600"},
				// /ids, by address, is a bucket of its own.
				{target: "/ids?count=3", want: 200},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tokens := ""
			if tc.tokens {
				tokens = testTokens
			}
			h := e.limitedServer(idgen.RateLimit{Rate: hour, Burst: 3}, 3, tokens)
			for i, s := range tc.steps {
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

	h := e.limitedServer(idgen.RateLimit{Rate: 1.0 / 3600, Burst: 1}, 1, testTokens)
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

// BenchmarkIDsCount1RateLimit is BenchmarkIDsCount1 with a rate limit by
// client address that the benchmark never reaches.
func BenchmarkIDsCount1RateLimit(b *testing.B) {
	e := newEnv(b, envOptions{})
	h := e.limitedServer(idgen.RateLimit{Rate: 1e9}, 0, "")
	benchHandler(b, h, "/ids")
}

// BenchmarkIDsCount1TokensRateLimit is BenchmarkIDsCount1Tokens with a
// rate limit by token that the benchmark never reaches.
func BenchmarkIDsCount1TokensRateLimit(b *testing.B) {
	e := newEnv(b, envOptions{})
	h := e.limitedServer(idgen.RateLimit{Rate: 1e9}, 0, testTokens)
	benchHandler(b, h, "/ids", "Authorization", "Bearer "+secretAll)
}

// scrape returns the samples of GET /metrics, keyed by the series as
// written (name and labels).
func (e *env) scrape() map[string]float64 {
	e.tb.Helper()
	rec := e.do("GET", "/metrics", "")
	if rec.Code != 200 {
		e.tb.Fatalf("GET /metrics: got %d, want 200", rec.Code)
	}
	samples := map[string]float64{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			e.tb.Fatalf("metrics line %q: %v", line, err)
		}
		samples[line[:i]] = v
	}
	return samples
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
