package statuspage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// stepClock is a clock that moves only when the test steps it.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func newStepClock() *stepClock {
	return &stepClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) Sleep(d time.Duration) { c.Step(d) }

func (c *stepClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// counterSource is what a test History reads: counters the test sets.
type counterSource struct {
	mu sync.Mutex
	s  sample
}

func (c *counterSource) set(f func(*sample)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.s)
}

func (c *counterSource) read(at time.Time) sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.s
	s.at = at
	return s
}

func testHistory(t *testing.T, interval, window time.Duration) (*History, *stepClock, *counterSource) {
	t.Helper()
	clock, src := newStepClock(), &counterSource{}
	st, err := Config{HistoryInterval: interval, HistoryWindow: window, Clock: clock}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	return newHistory(st, src.read), clock, src
}

func TestHistoryRingWraps(t *testing.T) {
	h, clock, src := testHistory(t, time.Second, 4*time.Second)
	t0 := clock.Now()
	for i := range 12 {
		src.set(func(s *sample) { s.snowflake = int64(i) })
		h.Sample()
		clock.Step(time.Second)
		if got, want := h.Len(), min(i+1, 5); got != want {
			t.Fatalf("after %d samples: Len got %d, want %d", i+1, got, want)
		}
	}
	ss := h.samples()
	if len(ss) != 5 {
		t.Fatalf("samples: got %d, want 5 (a 4 s window at 1 s holds 5)", len(ss))
	}
	for i, s := range ss {
		wantN, wantAt := int64(7+i), t0.Add(time.Duration(7+i)*time.Second)
		if s.snowflake != wantN || !s.at.Equal(wantAt) {
			t.Errorf("sample %d: got counter %d at %s, want %d at %s (oldest first)", i, s.snowflake, s.at, wantN, wantAt)
		}
	}
}

// at builds samples of one counter at the given seconds after t0.
func at(t0 time.Time, pairs ...float64) []sample {
	var out []sample
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, sample{at: t0.Add(time.Duration(pairs[i] * float64(time.Second))), snowflake: int64(pairs[i+1])})
	}
	return out
}

func runsText(t0 time.Time, runs [][]point) string {
	var parts []string
	for _, run := range runs {
		var ps []string
		for _, p := range run {
			ps = append(ps, fmt.Sprintf("%g@%g", p.v, p.at.Sub(t0).Seconds()))
		}
		parts = append(parts, strings.Join(ps, " "))
	}
	return strings.Join(parts, " | ")
}

func TestRateRuns(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	gap := 2500 * time.Millisecond // 1 s interval
	get := func(s sample) int64 { return s.snowflake }
	tests := []struct {
		name string
		ss   []sample
		want string // rate@seconds, runs split by |
	}{
		{"none", nil, ""},
		{"one sample has no rate", at(t0, 0, 5), ""},
		{"steady", at(t0, 0, 0, 1, 10, 2, 20, 3, 30), "10@1 10@2 10@3"},
		{"uneven intervals", at(t0, 0, 0, 2, 10, 2.5, 20), "5@2 20@2.5"},
		{"one missed tick is bridged", at(t0, 0, 0, 1, 10, 3, 30), "10@1 10@3"},
		// The process restarted between 2 s and 3 s: the counter started
		// again from 0 and counted 20 since.
		{"counter reset", at(t0, 0, 100, 1, 150, 2, 200, 3, 20, 4, 70), "50@1 50@2 20@3 50@4"},
		{"reset to zero", at(t0, 0, 100, 1, 0, 2, 0), "0@1 0@2"},
		{"gap: node down", at(t0, 0, 0, 1, 10, 2, 20, 10, 0, 11, 5, 12, 10), "10@1 10@2 | 5@11 5@12"},
		{"clock stepped back", at(t0, 0, 0, 1, 10, 0.5, 20, 1.5, 30), "10@1 | 10@1.5"},
		{"same instant twice", at(t0, 0, 0, 1, 10, 1, 20, 2, 30), "10@1 | 10@2"},
	}
	for _, tt := range tests {
		runs := rateRuns(tt.ss, gap, get)
		if got := runsText(t0, runs); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
		for _, run := range runs {
			for _, p := range run {
				if math.IsNaN(p.v) || math.IsInf(p.v, 0) || p.v < 0 {
					t.Errorf("%s: rate %v, want finite and not negative", tt.name, p.v)
				}
			}
		}
	}
}

// TestHistoryRatesOnSteppedClock samples a node whose counter the test
// moves while it steps the clock, restarting it half way, and reads the
// rates back.
func TestHistoryRatesOnSteppedClock(t *testing.T) {
	h, clock, src := testHistory(t, 5*time.Second, time.Minute)
	t0 := clock.Now()
	n := int64(0)
	for i := range 8 {
		if i == 4 {
			n = 0 // restart: the counter begins again
		}
		n += 500 // 100 IDs/s over 5 s
		src.set(func(s *sample) { s.segment = n })
		h.Sample()
		clock.Step(5 * time.Second)
	}
	runs := rateRuns(h.samples(), h.gapAfter(), func(s sample) int64 { return s.segment })
	want := "100@5 100@10 100@15 100@20 100@25 100@30 100@35"
	if got := runsText(t0, runs); got != want {
		t.Errorf("rates: got %q, want %q", got, want)
	}
}

func TestDeltaBarsAndGauges(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	gap := 2500 * time.Millisecond
	ss := at(t0, 0, 3, 1, 5, 2, 5, 9, 6, 10, 1)
	bars := deltaBars(ss, gap, func(s sample) int64 { return s.snowflake })
	var got []string
	for _, b := range bars {
		got = append(got, fmt.Sprintf("%g..%g:%g", b.from.Sub(t0).Seconds(), b.to.Sub(t0).Seconds(), b.v))
	}
	if g, want := strings.Join(got, " "), "0..1:2 1..2:0 9..10:1"; g != want {
		t.Errorf("deltaBars: got %q, want %q", g, want)
	}
	// A gauge with no value at 1 s breaks the run as a gap does.
	runs := gaugeRuns(ss, gap, func(s sample) (float64, bool) { return float64(s.snowflake), s.at.Sub(t0) != time.Second })
	if g, want := runsText(t0, runs), "3@0 | 5@2 | 6@9 1@10"; g != want {
		t.Errorf("gaugeRuns: got %q, want %q", g, want)
	}
}

func TestGaps(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	gap := 2500 * time.Millisecond
	start, end := t0, t0.Add(30*time.Second)
	text := func(spans []span) string {
		var out []string
		for _, s := range spans {
			out = append(out, fmt.Sprintf("%g-%g", s.from.Sub(t0).Seconds(), s.to.Sub(t0).Seconds()))
		}
		return strings.Join(out, " ")
	}
	tests := []struct {
		name string
		ss   []sample
		want string
	}{
		{"no samples: all of it", nil, "0-30"},
		{"started late, sampled since", at(t0, 10, 0, 11, 0, 12, 0, 13, 0, 14, 0, 15, 0, 16, 0, 17, 0, 18, 0, 19, 0, 20, 0, 21, 0, 22, 0, 23, 0, 24, 0, 25, 0, 26, 0, 27, 0, 28, 0, 29, 0), "0-10"},
		{"down in the middle and since", at(t0, 0, 0, 1, 0, 2, 0, 20, 0, 21, 0), "2-20 21-30"},
		{"older samples clipped to the window", at(t0, -5, 0, 29, 0), "0-29"},
	}
	for _, tt := range tests {
		if got := text(gaps(tt.ss, gap, start, end)); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestHistoryRecent(t *testing.T) {
	h, clock, src := testHistory(t, time.Second, 10*time.Second)
	for i := range 20 {
		src.set(func(s *sample) {
			if i == 3 || i == 15 {
				s.heartbeatFails++
			}
			if i == 16 {
				s.lost++
			}
		})
		h.Sample()
		clock.Step(time.Second)
	}
	// The window reaches back 10 s from the last sample: the failure at
	// 3 s is out of it.
	fails, lost := h.recent(clock.Now().Add(-time.Second))
	if fails != 1 || lost != 1 {
		t.Errorf("recent: got %d heartbeat failures, %d lost; want 1, 1", fails, lost)
	}
}

func TestHistoryStartClose(t *testing.T) {
	h, _, _ := testHistory(t, time.Millisecond, time.Second)
	if err := h.Close(context.Background()); err != nil {
		t.Fatalf("Close before Start: got %v, want nil", err)
	}
	h.Start() // after Close: does nothing
	if h.running() || h.Len() != 0 {
		t.Fatalf("Start after Close: running %v with %d samples, want neither", h.running(), h.Len())
	}

	h, _, _ = testHistory(t, time.Millisecond, time.Second)
	h.Start()
	h.Start() // again: no second goroutine
	deadline := time.Now().Add(10 * time.Second)
	for h.Len() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("history took %d samples in 10 s, want 3", h.Len())
		}
		time.Sleep(time.Millisecond)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-h.loop.Done():
	default:
		t.Fatal("Close returned before the sampling goroutine did")
	}
	if err := h.Close(context.Background()); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}

	// Close is bounded by its context when a sample hangs.
	block := make(chan struct{})
	clock := newStepClock()
	st, _ := Config{HistoryInterval: time.Millisecond, HistoryWindow: time.Second, Clock: clock}.resolve()
	entered := make(chan struct{}, 1)
	h = newHistory(st, func(at time.Time) sample {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-block
		return sample{at: at}
	})
	h.Start()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := h.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close while a sample hangs: got %v, want context.DeadlineExceeded", err)
	}
	close(block)
	<-h.loop.Done()
}

func TestConfigResolve(t *testing.T) {
	st, err := Config{}.resolve()
	if err != nil || st.HistoryInterval != DefaultHistoryInterval || st.HistoryWindow != DefaultHistoryWindow || st.Clock == nil {
		t.Fatalf("zero settings: got %+v, %v; want the defaults", st, err)
	}
	for _, bad := range []Config{
		{HistoryInterval: -time.Second},
		{HistoryInterval: time.Minute, HistoryWindow: time.Second},
		{HistoryInterval: time.Millisecond, HistoryWindow: time.Hour},
		{LeaseTTL: -time.Second},
		{MaxClockOffset: -time.Second},
	} {
		if _, err := bad.resolve(); err == nil {
			t.Errorf("%+v: got no error", bad)
		}
	}
}
