package httpapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idgen-project/idgen/internal/periodic"
	"github.com/idgen-project/idgen/snowflake"
)

// Defaults and limits of StatusSettings.
const (
	DefaultHistoryInterval = 5 * time.Second
	DefaultHistoryWindow   = 15 * time.Minute
	// MaxHistorySamples bounds the samples the history keeps:
	// HistoryWindow / HistoryInterval may not exceed it.
	MaxHistorySamples = 4096
)

// StatusSettings configure the status page and the history behind its
// charts. The zero value means the defaults.
type StatusSettings struct {
	// HistoryInterval is how often the history samples the node's
	// counters; default DefaultHistoryInterval.
	HistoryInterval time.Duration
	// HistoryWindow is how far back the history and the charts reach;
	// default DefaultHistoryWindow. It holds at most MaxHistorySamples
	// intervals.
	HistoryWindow time.Duration
	// Clock stamps the samples and the page; nil means
	// snowflake.SystemClock(). Tests step a clock of their own.
	Clock snowflake.Clock
	// LeaseTTL and MaxClockOffset are the lease keeper's settings of the
	// same names; zero means the keeper's defaults. The page warns when the
	// lease held has less than half its TTL left (a heartbeat is overdue),
	// and when the clock offset from database time passes half the limit.
	LeaseTTL       time.Duration
	MaxClockOffset time.Duration
	// Policy is the node's clock, lease and segment policy, shown as a
	// table on the status page in this order; nil leaves the table out.
	Policy []PolicySetting
}

// PolicySetting is one row of the status page's Policy table: a setting's
// name, its value in force, and the flag of idgen serve that sets it
// (without the dashes; empty when none does).
type PolicySetting struct {
	Name, Value, Flag string
}

// resolve fills in the defaults, or says which setting is out of range.
func (s StatusSettings) resolve() (StatusSettings, error) {
	if s.HistoryInterval == 0 {
		s.HistoryInterval = DefaultHistoryInterval
	}
	if s.HistoryWindow == 0 {
		s.HistoryWindow = DefaultHistoryWindow
	}
	switch {
	case s.HistoryInterval < 0:
		return s, fmt.Errorf("history interval %s: want more than 0", s.HistoryInterval)
	case s.HistoryWindow < s.HistoryInterval:
		return s, fmt.Errorf("history window %s: want at least the interval %s", s.HistoryWindow, s.HistoryInterval)
	case s.HistoryWindow/s.HistoryInterval > MaxHistorySamples:
		return s, fmt.Errorf("history window %s at one sample per %s: want at most %d samples",
			s.HistoryWindow, s.HistoryInterval, MaxHistorySamples)
	case s.LeaseTTL < 0 || s.MaxClockOffset < 0:
		return s, errors.New("lease TTL and max clock offset: want 0 (the default) or more")
	}
	if s.Clock == nil {
		s.Clock = snowflake.SystemClock()
	}
	return s, nil
}

// sample is what the node had counted, and the state of its lease, at one
// moment. The counters are cumulative since the node started.
type sample struct {
	at time.Time // by the history's clock

	// IDs handed out over HTTP, by source: the idgen_ids_issued_total
	// counters.
	snowflake, segment, fallback int64
	// Range fetches of every namespace this node draws from, and those
	// that failed.
	fetches, fetchErrors int64
	// The keeper's counters.
	claims, lost, heartbeatFails int64

	held, ready bool
	fencing     int64         // fencing version of the lease held
	ceilingLead time.Duration // committed ceiling minus at, when held
	offset      time.Duration // database time minus node time, last measured
	heartbeat   time.Time     // last successful heartbeat, database time; zero when none
}

// History samples what the node counts, every interval, into a ring
// buffer that covers the last window: the status page draws its charts
// from it. Sampling reads counters the node keeps anyway (atomic counters
// and the metrics' own), so it costs the request path nothing.
//
// A History is owned by whoever starts it: Start starts its goroutine, and
// Close stops it and waits for it.
type History struct {
	interval, window time.Duration
	clock            snowflake.Clock
	read             func(at time.Time) sample

	// mu guards the ring: ring[next] is the slot written next, and n
	// slots hold samples.
	mu   sync.Mutex
	ring []sample
	next int
	n    int

	// life guards loop, set by Start, and closed, set by Close.
	life   sync.Mutex
	loop   *periodic.Loop
	closed bool
}

// newHistory returns a History of s (resolved) that reads the node's
// counters with read.
func newHistory(s StatusSettings, read func(at time.Time) sample) *History {
	// One slot more than the window holds intervals: a full ring spans the
	// whole window.
	size := int(s.HistoryWindow/s.HistoryInterval) + 1
	return &History{
		interval: s.HistoryInterval,
		window:   s.HistoryWindow,
		clock:    s.Clock,
		read:     read,
		ring:     make([]sample, size),
	}
}

// Interval returns how often the history samples.
func (h *History) Interval() time.Duration { return h.interval }

// Window returns how far back the history reaches.
func (h *History) Window() time.Duration { return h.window }

// Start starts sampling: one sample at once, then one every interval
// until Close. Calling it again, or after Close, does nothing.
func (h *History) Start() {
	h.life.Lock()
	defer h.life.Unlock()
	if h.loop != nil || h.closed {
		return
	}
	h.loop = periodic.Start(0, h.interval, func(context.Context) { h.Sample() })
}

// Close stops sampling and waits, bounded by ctx, for the goroutine Start
// started. It returns ctx's error if the wait was cut short; calling it
// again returns nil.
func (h *History) Close(ctx context.Context) error {
	h.life.Lock()
	if h.closed {
		h.life.Unlock()
		return nil
	}
	h.closed = true
	loop := h.loop
	h.life.Unlock()
	if loop == nil {
		return nil
	}
	if err := loop.StopWithin(ctx); err != nil {
		return fmt.Errorf("history sampler still running: %w", err)
	}
	return nil
}

// Sample takes one sample now, by the history's clock. The goroutine
// Start starts calls it every interval; tests that step a clock call it
// themselves.
func (h *History) Sample() {
	h.add(h.read(h.clock.Now()))
}

// Len returns the number of samples held: at most one more than the window
// holds intervals.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// add appends s to the ring, overwriting the oldest sample when it is full.
func (h *History) add(s sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring[h.next] = s
	h.next = (h.next + 1) % len(h.ring)
	h.n = min(h.n+1, len(h.ring))
}

// samples returns the samples held, oldest first.
func (h *History) samples() []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]sample, 0, h.n)
	start := (h.next - h.n + len(h.ring)) % len(h.ring)
	for i := range h.n {
		out = append(out, h.ring[(start+i)%len(h.ring)])
	}
	return out
}

// gapAfter is the longest time between two samples that are drawn as
// continuous: one missed tick is bridged (a rate over the longer interval
// is still the true average), more is a gap in the charts.
func (h *History) gapAfter() time.Duration { return h.interval * 5 / 2 }

// point is one value of a series at one time.
type point struct {
	at time.Time
	v  float64
}

// span is a stretch of time.
type span struct{ from, to time.Time }

// bar is a count over the interval (from, to].
type bar struct {
	from, to time.Time
	v        float64
}

// continuous reports whether b follows a closely enough to be joined to it
// in a chart: b is later, and by at most gap. A clock stepped back, a node
// that was stopped or paused, or a sampler that fell behind breaks the
// series there.
func continuous(a, b sample, gap time.Duration) bool {
	d := b.at.Sub(a.at)
	return d > 0 && d <= gap
}

// counterDelta returns how much a counter grew from a to b. A counter that
// went backwards was reset (the process restarted, or the thing counted
// went away): it counted b since, as Prometheus's rate() assumes.
func counterDelta(a, b int64) int64 {
	if b < a {
		return b
	}
	return b - a
}

// rateRuns returns the per-second rate of the counter get between
// consecutive samples, placed at the later sample, split into runs of
// continuous samples.
func rateRuns(ss []sample, gap time.Duration, get func(sample) int64) [][]point {
	var runs [][]point
	var run []point
	for i := 1; i < len(ss); i++ {
		a, b := ss[i-1], ss[i]
		if !continuous(a, b, gap) {
			if len(run) > 0 {
				runs = append(runs, run)
			}
			run = nil
			continue
		}
		d := counterDelta(get(a), get(b))
		run = append(run, point{at: b.at, v: float64(d) / b.at.Sub(a.at).Seconds()})
	}
	if len(run) > 0 {
		runs = append(runs, run)
	}
	return runs
}

// deltaBars returns how much the counter get grew over each continuous
// interval between samples.
func deltaBars(ss []sample, gap time.Duration, get func(sample) int64) []bar {
	var out []bar
	for i := 1; i < len(ss); i++ {
		a, b := ss[i-1], ss[i]
		if continuous(a, b, gap) {
			out = append(out, bar{from: a.at, to: b.at, v: float64(counterDelta(get(a), get(b)))})
		}
	}
	return out
}

// gaugeRuns returns the value get reads from each sample, split into runs
// where samples are continuous and get has a value (ok).
func gaugeRuns(ss []sample, gap time.Duration, get func(sample) (float64, bool)) [][]point {
	var runs [][]point
	var run []point
	for i, s := range ss {
		v, ok := get(s)
		if len(run) > 0 && (!ok || !continuous(ss[i-1], s, gap)) {
			runs = append(runs, run)
			run = nil
		}
		if ok {
			run = append(run, point{at: s.at, v: v})
		}
	}
	if len(run) > 0 {
		runs = append(runs, run)
	}
	return runs
}

// gaps returns the stretches of [start, end] that no continuous pair of
// samples covers: before the first sample, between samples too far apart,
// and after the last one when it is older than gap.
func gaps(ss []sample, gap time.Duration, start, end time.Time) []span {
	var out []span
	add := func(from, to time.Time) {
		from, to = maxTime(from, start), minTime(to, end)
		if to.After(from) {
			out = append(out, span{from, to})
		}
	}
	if len(ss) == 0 {
		add(start, end)
		return out
	}
	add(start, ss[0].at)
	for i := 1; i < len(ss); i++ {
		if !continuous(ss[i-1], ss[i], gap) {
			add(ss[i-1].at, ss[i].at)
		}
	}
	if last := ss[len(ss)-1].at; end.Sub(last) > gap {
		add(last, end)
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// recent returns how many heartbeats failed and how many leases were lost
// over the window that ends at now, as far as the samples tell.
func (h *History) recent(now time.Time) (heartbeatFails, lost int64) {
	ss := h.samples()
	for len(ss) > 0 && ss[len(ss)-1].at.After(now) {
		ss = ss[:len(ss)-1]
	}
	start := now.Add(-h.window)
	return deltaInWindow(ss, start, func(s sample) int64 { return s.heartbeatFails }),
		deltaInWindow(ss, start, func(s sample) int64 { return s.lost })
}

// readSample reads what the node has counted, and its lease, at at.
func (s *Server) readSample(at time.Time) sample {
	st := s.lease.Status()
	out := sample{
		at:             at,
		snowflake:      counterValue(s.metrics.issuedSnowflake),
		segment:        counterValue(s.metrics.issuedSegment),
		fallback:       counterValue(s.metrics.issuedFallback),
		claims:         st.Claims,
		lost:           st.Lost,
		heartbeatFails: st.HeartbeatFails,
		held:           st.Held,
		ready:          st.Ready,
		offset:         st.ClockOffset,
	}
	if st.Held {
		out.fencing = st.Lease.FencingVersion
		out.ceilingLead = time.UnixMilli(st.CeilingMS).Sub(at)
		out.heartbeat = st.LastHeartbeat
	}
	for _, ns := range s.segments.Stats() {
		out.fetches += ns.Fetches
		out.fetchErrors += ns.FetchErrors
	}
	return out
}
