package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testserver"
)

// idServer is a stand-in for idgen's GET /ids: it hands out consecutive IDs
// from a counter, and can be told to misbehave.
type idServer struct {
	next      atomic.Int64
	hits      atomic.Int64
	dupEvery  int64 // every dupEvery-th request repeats IDs from 1
	failEvery int64 // every failEvery-th request gets a 503
	short     bool  // answer one ID fewer than asked

	mu         sync.Mutex
	namespaces map[string]int
}

func (s *idServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	count, err := strconv.Atoi(q.Get("count"))
	if err != nil || count < 1 {
		count = 1
	}
	s.mu.Lock()
	if s.namespaces == nil {
		s.namespaces = map[string]int{}
	}
	s.namespaces[q.Get("namespace")]++
	s.mu.Unlock()
	n := s.hits.Add(1)
	if s.failEvery > 0 && n%s.failEvery == 0 {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":503,"code":"unavailable"}`))
		return
	}
	if s.short {
		count--
	}
	first := s.next.Add(int64(count)) - int64(count) + 1
	if s.dupEvery > 0 && n%s.dupEvery == 0 {
		first = 1
	}
	b := []byte(`{"ids":[`)
	for i := range int64(count) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, first+i, 10)
		b = append(b, '"')
	}
	b = append(b, `],"source":"snowflake"}`...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b) // above 2 KiB net/http answers chunked
}

func startIDServer(t *testing.T, s *idServer) string {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts.URL
}

// runWant is what a test expects of one run: its IDs, its errors, of them
// so many of each kind named, whether the IDs repeat, and whether every
// request failed (run then reports an error).
type runWant struct {
	ids   int64
	errs  int64
	kinds map[string]int
	dups  bool
	fail  bool
}

// runCase is a case of the tests of run against a stand-in server of type
// S: the server, the run's settings and what to expect.
type runCase[S any] struct {
	name string
	srv  S
	cfg  config
	want runWant
}

// runChecked runs cfg with the unique check on and reports where the
// result's counts differ from cfg's requests and from want. It returns the
// result for the caller's own checks.
func runChecked(t *testing.T, cfg config, want runWant) *result {
	t.Helper()
	cfg.CheckUnique = true
	res, err := run(context.Background(), cfg)
	if (err != nil) != want.fail || res == nil {
		t.Fatalf("run: %v, want error %v and a result", err, want.fail)
	}
	if res.Requests != cfg.Requests {
		t.Errorf("requests = %d, want %d", res.Requests, cfg.Requests)
	}
	if res.IDs != want.ids {
		t.Errorf("ids = %d, want %d", res.IDs, want.ids)
	}
	if res.Errors != want.errs {
		t.Errorf("errors = %d (%v), want %d", res.Errors, res.ErrorKinds, want.errs)
	}
	for k, n := range want.kinds {
		if got := res.ErrorKinds[k]; got != n {
			t.Errorf("error kind %s = %d, want %d", k, got, n)
		}
	}
	if got := res.Duplicates > 0; got != want.dups {
		t.Errorf("duplicates = %d, want duplicates %v", res.Duplicates, want.dups)
	}
	if !want.dups && res.Distinct != res.IDs {
		t.Errorf("distinct = %d, want %d", res.Distinct, res.IDs)
	}
	return res
}

func TestRun(t *testing.T) {
	tests := []runCase[*idServer]{
		{name: "count 1", srv: &idServer{}, cfg: config{Conns: 4, Count: 1, Requests: 500}, want: runWant{ids: 500}},
		{name: "count 300 chunked", srv: &idServer{}, cfg: config{Conns: 2, Count: 300, Requests: 40}, want: runWant{ids: 12000}},
		{name: "namespace", srv: &idServer{}, cfg: config{Conns: 3, Count: 10, Namespace: "orders", Requests: 90}, want: runWant{ids: 900}},
		{name: "duplicates", srv: &idServer{dupEvery: 10}, cfg: config{Conns: 2, Count: 5, Requests: 100}, want: runWant{ids: 500, dups: true}},
		{name: "503s", srv: &idServer{failEvery: 4}, cfg: config{Conns: 4, Count: 1, Requests: 200}, want: runWant{ids: 150, errs: 50, kinds: map[string]int{"status_503": 50}}},
		{name: "short answers", srv: &idServer{short: true}, cfg: config{Conns: 1, Count: 3, Requests: 20}, want: runWant{ids: 40, errs: 20, kinds: map[string]int{"short": 20}, fail: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Target = startIDServer(t, tt.srv)
			res := runChecked(t, cfg, tt.want)
			if got := tt.srv.hits.Load(); got != cfg.Requests {
				t.Errorf("server saw %d requests, want %d", got, cfg.Requests)
			}
			if got := tt.srv.namespaces[cfg.Namespace]; got != int(cfg.Requests) {
				t.Errorf("server saw namespace %q %d times, want %d", cfg.Namespace, got, cfg.Requests)
			}
			if res.Latency.P50 <= 0 || res.Latency.P50 > res.Latency.P99 || res.Latency.P99 > res.Latency.Max {
				t.Errorf("latency p50 %v p99 %v max %v: want 0 < p50 ≤ p99 ≤ max", res.Latency.P50, res.Latency.P99, res.Latency.Max)
			}
			if res.RequestsPS <= 0 || res.IDsPS < 0 {
				t.Errorf("rates %v req/s %v ids/s, want positive", res.RequestsPS, res.IDsPS)
			}
		})
	}
}

// runWithProgress runs cfg against an idServer of its own, with progress
// lines every progressEvery, and returns the result and those lines.
func runWithProgress(t *testing.T, cfg config, progressEvery time.Duration) (*result, string) {
	t.Helper()
	var progress testserver.LogBuffer
	cfg.Target, cfg.Progress, cfg.ProgressEvery = startIDServer(t, &idServer{}), &progress, progressEvery
	res, err := run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res, progress.String()
}

func TestRunDurationAndProgress(t *testing.T) {
	cfg := config{Conns: 2, Count: 1, Duration: 300 * time.Millisecond, CheckUnique: true}
	res, out := runWithProgress(t, cfg, 10*time.Millisecond)
	if res.DurationS < cfg.Duration.Seconds() {
		t.Errorf("duration = %.3fs, want at least %v", res.DurationS, cfg.Duration)
	}
	if res.Requests == 0 || res.Duplicates != 0 || res.Errors != 0 {
		t.Errorf("requests %d, duplicates %d, errors %d: want some requests, no duplicates, no errors", res.Requests, res.Duplicates, res.Errors)
	}
	if !strings.Contains(out, " req/s ") || !strings.Contains(out, " ids/s ") || !strings.Contains(out, "p99 ") {
		t.Errorf("progress = %q, want lines with req/s, ids/s and p99", out)
	}
}

func TestRunWarmupNotMeasured(t *testing.T) {
	srv := &idServer{}
	cfg := config{Target: startIDServer(t, srv), Conns: 1, Count: 1, Requests: 50, Warmup: 50 * time.Millisecond, CheckUnique: true}
	res, err := run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Requests != 50 {
		t.Errorf("measured requests = %d, want 50", res.Requests)
	}
	if hits := srv.hits.Load(); hits <= 50 {
		t.Errorf("server saw %d requests, want more than the 50 measured (the warm-up's)", hits)
	}
	// The warm-up's IDs are checked for duplicates too.
	if res.Distinct != srv.next.Load() {
		t.Errorf("distinct = %d, want every ID the server issued (%d)", res.Distinct, srv.next.Load())
	}
}

func TestRunServerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	res, err := run(context.Background(), config{Target: "http://" + addr, Conns: 2, Count: 1, Requests: 10, Timeout: time.Second})
	if err == nil {
		t.Fatal("run against a closed port: want an error")
	}
	if res == nil || res.Errors != res.Requests || res.ErrorKinds["transport"] == 0 {
		t.Errorf("result = %+v, want every request failed as transport errors", res)
	}
}

func TestRunCanceled(t *testing.T) {
	srv := &idServer{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := run(ctx, config{Target: startIDServer(t, srv), Conns: 2, Count: 1, Duration: time.Hour})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Errors != 0 {
		t.Errorf("errors = %d, want 0: requests cut short by the end of the run are not errors", res.Errors)
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  config
	}{
		{"no connections", config{Target: "http://127.0.0.1:1", Conns: 0, Count: 1, Requests: 1}},
		{"unbounded", config{Target: "http://127.0.0.1:1", Conns: 1, Count: 1}},
		{"count 0", config{Target: "http://127.0.0.1:1", Conns: 1, Count: 0, Requests: 1}},
		{"remote", config{Target: "http://192.0.2.1:8080", Conns: 1, Count: 1, Requests: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if res, err := run(context.Background(), tt.cfg); err == nil {
				t.Errorf("run(%+v) = %+v, want an error", tt.cfg, res)
			}
		})
	}
}

func TestResolveTarget(t *testing.T) {
	tests := []struct {
		name     string
		cfg      config
		wantDial string
		wantHost string
		wantPath string
		wantErr  error // nil: no error; errAny: some error
	}{
		{name: "ipv4", cfg: config{Target: "http://127.0.0.1:8080", Count: 1}, wantDial: "127.0.0.1:8080", wantHost: "127.0.0.1:8080", wantPath: "/ids?count=1"},
		{name: "ipv6", cfg: config{Target: "http://[::1]:9000/", Count: 1000}, wantDial: "[::1]:9000", wantHost: "[::1]:9000", wantPath: "/ids?count=1000"},
		{name: "localhost", cfg: config{Target: "http://localhost:8080", Count: 1}, wantHost: "localhost:8080", wantPath: "/ids?count=1"},
		{name: "namespace and base path", cfg: config{Target: "http://127.0.0.1:80/idgen/", Count: 5, Namespace: "orders"}, wantDial: "127.0.0.1:80", wantHost: "127.0.0.1:80", wantPath: "/idgen/ids?count=5&namespace=orders"},
		{name: "default port", cfg: config{Target: "http://127.0.0.1", Count: 1}, wantDial: "127.0.0.1:80", wantHost: "127.0.0.1", wantPath: "/ids?count=1"},
		{name: "explicit path", cfg: config{Target: "http://127.0.0.1:1", Path: "/healthz"}, wantDial: "127.0.0.1:1", wantHost: "127.0.0.1:1", wantPath: "/healthz"},
		{name: "remote refused", cfg: config{Target: "http://192.0.2.1:8080", Count: 1}, wantErr: errNotLoopback},
		{name: "remote allowed", cfg: config{Target: "http://192.0.2.1:8080", Count: 1, AllowRemote: true}, wantDial: "192.0.2.1:8080", wantHost: "192.0.2.1:8080", wantPath: "/ids?count=1"},
		{name: "unspecified address refused", cfg: config{Target: "http://0.0.0.0:8080", Count: 1}, wantErr: errNotLoopback},
		{name: "https", cfg: config{Target: "https://127.0.0.1:8443", Count: 1}, wantErr: errAny},
		{name: "no host", cfg: config{Target: "http:///ids", Count: 1}, wantErr: errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveTarget(context.Background(), tt.cfg)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("resolveTarget(%q): %v", tt.cfg.Target, err)
			case tt.wantErr != nil && err == nil:
				t.Fatalf("resolveTarget(%q) = %+v, want an error", tt.cfg.Target, got)
			case tt.wantErr != nil && !errors.Is(tt.wantErr, errAny) && !errors.Is(err, tt.wantErr):
				t.Fatalf("resolveTarget(%q) error = %v, want %v", tt.cfg.Target, err, tt.wantErr)
			case err != nil:
				return
			}
			if tt.wantDial != "" && got.dial != tt.wantDial {
				t.Errorf("dial = %q, want %q", got.dial, tt.wantDial)
			}
			if got.host != tt.wantHost || got.path != tt.wantPath {
				t.Errorf("host, path = %q, %q; want %q, %q", got.host, got.path, tt.wantHost, tt.wantPath)
			}
		})
	}
}

var errAny = errors.New("any error")

func TestFmtDur(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{250 * time.Microsecond, "250µs"},
		{1500 * time.Microsecond, "1.5ms"},
		{12345 * time.Microsecond, "12.3ms"},
		{2 * time.Second, "2s"},
	}
	for _, tt := range tests {
		if got := fmtDur(tt.d); got != tt.want {
			t.Errorf("fmtDur(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
