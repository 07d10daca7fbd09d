package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
)

func TestSchedule(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newSchedule(start, 4000) // one request every 250µs
	for i, want := range []time.Duration{0, 250 * time.Microsecond, 500 * time.Microsecond, time.Second} {
		k := []int64{0, 1, 2, 4000}[i]
		if got := s.due(k).Sub(start); got != want {
			t.Errorf("due(%d) = start+%v, want start+%v", k, got, want)
		}
	}
	for _, tt := range []struct {
		at   time.Duration
		want int64
	}{{-time.Millisecond, 0}, {0, 1}, {249 * time.Microsecond, 1}, {250 * time.Microsecond, 2}, {time.Second, 4001}} {
		if got := s.dueBy(start.Add(tt.at)); got != tt.want {
			t.Errorf("dueBy(start%+v) = %d, want %d", tt.at, got, tt.want)
		}
	}
}

// TestPacerKeepsTheSchedule: the pacer hands requests out in order, never
// before they are due, and when the connections stall it neither drops nor
// reschedules the requests that fell due meanwhile: they go out at once,
// late, with their due times unchanged (which is what makes their latency
// count the stall).
func TestPacerKeepsTheSchedule(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testkit.NewManual(start)   // the pacer's goroutine and the test use it at once
	sched := newSchedule(start, 1000) // one request a millisecond
	p := newPacer(sched, clk, 20)
	var wg sync.WaitGroup
	wg.Go(func() { p.run(context.Background()) })

	type receipt struct {
		i  int64
		at time.Time
	}
	var got []receipt
	take := func() {
		i, ok := <-p.out
		if !ok {
			t.Fatalf("pacer closed after %d requests, want 20", len(got))
		}
		got = append(got, receipt{i, clk.Now()})
	}
	take()                             // request 0, due at once
	clk.Advance(10 * time.Millisecond) // the connections stall for 10 ms
	for range 19 {
		take()
	}
	if _, ok := <-p.out; ok {
		t.Fatal("pacer handed out more than 20 requests")
	}
	wg.Wait()

	for k, r := range got {
		if r.i != int64(k) {
			t.Fatalf("request %d handed out as number %d: want them in order", k, r.i)
		}
		if due := sched.due(r.i); r.at.Before(due) {
			t.Errorf("request %d handed out at start+%v, before it was due (start+%v)", r.i, r.at.Sub(start), due.Sub(start))
		}
	}
	// Requests 1 to 10 fell due during the stall: all go out as soon as it
	// ends, at the same instant, none dropped.
	for k := 2; k <= 10; k++ {
		if !got[k].at.Equal(got[1].at) {
			t.Errorf("request %d handed out at start+%v, want start+%v with the other overdue ones", k, got[k].at.Sub(start), got[1].at.Sub(start))
		}
	}
	if lag := got[1].at.Sub(sched.due(1)); lag < 9*time.Millisecond {
		t.Errorf("request 1 went out %v after it was due, want the stall (9 ms or more) counted", lag)
	}
	// After the backlog it is back on the schedule: the last request goes
	// out exactly when due (the fake clock only moves by the pacer's sleeps).
	if last := got[19]; !last.at.Equal(sched.due(19)) {
		t.Errorf("request 19 handed out at start+%v, want start+%v", last.at.Sub(start), sched.due(19).Sub(start))
	}
}

// slowServer answers GET /ids with one ID after holding every request for
// delay, one request at a time.
type slowServer struct {
	delay time.Duration
	mu    sync.Mutex
	next  atomic.Int64
	hits  atomic.Int64
}

func (s *slowServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	time.Sleep(s.delay)
	s.mu.Unlock()
	s.hits.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ids":["` + strconv.FormatInt(s.next.Add(1), 10) + `"],"source":"snowflake"}`))
}

// TestOpenLoopCountsQueueing: against a server that takes 20 ms a request,
// one at a time, 12 requests due every 5 ms queue up. Measured from their
// intended send times their latencies grow with the queue (request k is
// answered no earlier than 20(k+1) ms after the start but was due at 5k
// ms), while the service time of each stays about 20 ms: a closed loop
// would have reported only the latter. The bounds are lower bounds that a
// slower machine only makes larger.
func TestOpenLoopCountsQueueing(t *testing.T) {
	const delay = 20 * time.Millisecond
	srv := &slowServer{delay: delay}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	res, err := run(context.Background(), config{Target: ts.URL, Conns: 1, Count: 1, Rate: 200, Requests: 12, CheckUnique: true})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Mode != "open" || res.Requests != 12 || res.Scheduled != 12 || res.Unsent != 0 || res.Errors != 0 || srv.hits.Load() != 12 {
		t.Fatalf("result: mode %s, requests %d, scheduled %d, unsent %d, errors %d, server saw %d; want open, 12, 12, 0, 0, 12",
			res.Mode, res.Requests, res.Scheduled, res.Unsent, res.Errors, srv.hits.Load())
	}
	if res.Service == nil || res.SendLag == nil {
		t.Fatalf("result lacks the service time and the send lag: %+v", res)
	}
	// The last request: answered at 240 ms or later, due at 55 ms.
	if got, want := res.Latency.Max, 185.0; got < want {
		t.Errorf("max latency %.1f ms, want at least %.0f ms: the queue is not counted", got, want)
	}
	if got, want := res.Service.P50, ms(delay); got < want {
		t.Errorf("service time p50 %.1f ms, want at least the server's %.0f ms", got, want)
	}
	if res.Latency.P50 < 2*ms(delay) {
		t.Errorf("latency p50 %.1f ms, want over twice the service time (%.0f ms): the queue is not counted", res.Latency.P50, ms(delay))
	}
	if res.SendLag.Max < 100 {
		t.Errorf("send lag max %.1f ms, want at least 100 ms (the wait for the one connection)", res.SendLag.Max)
	}
}

// TestOpenLoopSchedule: the schedule decides how many requests go out (the
// warm-up's too) and the run cannot end before the last is due.
func TestOpenLoopSchedule(t *testing.T) {
	tests := []struct {
		name        string
		cfg         config
		wantMeasure int64
		wantSent    int64
		minDuration time.Duration // the schedule's span: a lower bound only
	}{
		{"requests", config{Rate: 2000, Requests: 100, Conns: 4}, 100, 100, 49500 * time.Microsecond},
		{"duration", config{Rate: 1000, Duration: 50 * time.Millisecond, Conns: 2}, 50, 50, 49 * time.Millisecond},
		{"warm-up", config{Rate: 1000, Requests: 30, Warmup: 20 * time.Millisecond, Conns: 2}, 30, 50, 29 * time.Millisecond},
		{"requests before duration", config{Rate: 1000, Requests: 10, Duration: time.Hour, Conns: 1}, 10, 10, 9 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &idServer{}
			cfg := tt.cfg
			cfg.Target, cfg.Count, cfg.CheckUnique = startIDServer(t, srv), 3, true
			res, err := run(context.Background(), cfg)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if res.Requests != tt.wantMeasure || res.Scheduled != tt.wantMeasure || res.Unsent != 0 {
				t.Errorf("measured %d of %d scheduled (%d unsent), want %d, none unsent", res.Requests, res.Scheduled, res.Unsent, tt.wantMeasure)
			}
			if got := srv.hits.Load(); got != tt.wantSent {
				t.Errorf("server saw %d requests, want %d", got, tt.wantSent)
			}
			if res.IDs != 3*tt.wantMeasure || res.Distinct != 3*tt.wantSent || res.Duplicates != 0 {
				t.Errorf("ids %d, distinct %d, duplicates %d; want %d, %d, 0", res.IDs, res.Distinct, res.Duplicates, 3*tt.wantMeasure, 3*tt.wantSent)
			}
			if got := time.Duration(res.DurationS * float64(time.Second)); got < tt.minDuration {
				t.Errorf("run took %v, less than the schedule's %v: requests went out early", got, tt.minDuration)
			}
		})
	}
}

// TestOpenLoopUnsent: requests still waiting for a connection when the
// drain after the schedule runs out are reported as unsent, not dropped
// silently.
func TestOpenLoopUnsent(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers; the client times out
	}))
	t.Cleanup(ts.Close)
	res, err := run(context.Background(), config{Target: ts.URL, Conns: 1, Count: 1, Rate: 100, Requests: 5, Timeout: 200 * time.Millisecond})
	if err == nil {
		t.Fatal("run: want an error, every request failed")
	}
	if res == nil || res.Unsent == 0 || res.Requests+res.Unsent != 5 || res.ErrorKinds["timeout"] != int(res.Requests) {
		t.Fatalf("result %+v: want timeouts and unsent requests adding up to the 5 scheduled", res)
	}
	if !strings.Contains(summary(res), "unsent") {
		t.Errorf("summary %q does not mention the unsent requests", summary(res))
	}
}

func TestOpenLoopProgressAndSummary(t *testing.T) {
	cfg := config{Conns: 2, Count: 1, Rate: 500, Duration: 300 * time.Millisecond, CheckUnique: true}
	res, out := runWithProgress(t, cfg, 50*time.Millisecond)
	for _, want := range []string{" req/s ", "p50 ", "p99 ", "p99.9 ", "send lag p99 ", "backlog "} {
		if !strings.Contains(out, want) {
			t.Errorf("progress %q lacks %q", out, want)
		}
	}
	sum := summary(res)
	for _, want := range []string{"open loop at 500 req/s", "from the intended send times", "service p99", "send lag p99"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary %q lacks %q", sum, want)
		}
	}
}
