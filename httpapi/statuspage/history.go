package statuspage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/internal/periodic"
	"github.com/idgen-project/idgen/snowflake"
)

// Defaults and limits of the history.
const (
	DefaultHistoryInterval = 5 * time.Second
	DefaultHistoryWindow   = 15 * time.Minute
	// MaxHistorySamples bounds HistoryWindow / HistoryInterval.
	MaxHistorySamples = 4096
)

// resolve fills in the defaults, or says which setting is out of range.
func (c Config) resolve() (Config, error) {
	if c.HistoryInterval == 0 {
		c.HistoryInterval = DefaultHistoryInterval
	}
	if c.HistoryWindow == 0 {
		c.HistoryWindow = DefaultHistoryWindow
	}
	switch {
	case c.HistoryInterval < 0:
		return c, fmt.Errorf("history interval %s: want more than 0", c.HistoryInterval)
	case c.HistoryWindow < c.HistoryInterval:
		return c, fmt.Errorf("history window %s: want at least the interval %s", c.HistoryWindow, c.HistoryInterval)
	case c.HistoryWindow/c.HistoryInterval > MaxHistorySamples:
		return c, fmt.Errorf("history window %s at one sample per %s: want at most %d samples",
			c.HistoryWindow, c.HistoryInterval, MaxHistorySamples)
	case c.LeaseTTL < 0 || c.MaxClockOffset < 0:
		return c, errors.New("lease TTL and max clock offset: want 0 (the default) or more")
	}
	if c.Clock == nil {
		c.Clock = snowflake.SystemClock()
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	return c, nil
}

// sample is the node's counts since start, and its lease, at one moment.
type sample struct {
	at time.Time // by the history's clock

	snowflake, segment, fallback int64 // IDs handed out over every transport, by source
	fetches, fetchErrors         int64 // range fetches of all namespaces, and the failed ones
	claims, lost, heartbeatFails int64 // the keeper's counters

	held, ready bool
	fencing     int64         // fencing version of the lease held
	ceilingLead time.Duration // committed ceiling minus at, when held
	offset      time.Duration // database time minus node time, last measured
	heartbeat   time.Time     // last successful heartbeat, database time; zero when none
}

// History samples the node's existing counters every interval into a ring
// covering the window, costing requests nothing. Its owner calls Start and
// Close.
type History struct {
	interval, window time.Duration
	clock            snowflake.Clock
	read             func(at time.Time) sample

	mu   sync.Mutex // guards the ring: ring[next] is written next, n slots are full
	ring []sample
	next int
	n    int

	life   sync.Mutex // guards loop (set by Start) and closed (set by Close)
	loop   *periodic.Loop
	closed bool
}

// newHistory returns c's History; the ring has one slot more than the
// window's intervals, so a full one spans it.
func newHistory(c Config, read func(at time.Time) sample) *History {
	size := int(c.HistoryWindow/c.HistoryInterval) + 1
	return &History{interval: c.HistoryInterval, window: c.HistoryWindow, clock: c.Clock, read: read, ring: make([]sample, size)}
}

// Interval returns how often the history samples.
func (h *History) Interval() time.Duration { return h.interval }

// Window returns how far back the history reaches.
func (h *History) Window() time.Duration { return h.window }

// Start samples now, then every interval until Close; once only.
func (h *History) Start() {
	h.life.Lock()
	defer h.life.Unlock()
	if h.loop != nil || h.closed {
		return
	}
	h.loop = periodic.Start(0, h.interval, func(context.Context) { h.Sample() })
}

// Close stops sampling and waits, bounded by ctx; later calls return nil.
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

func (h *History) running() bool {
	h.life.Lock()
	defer h.life.Unlock()
	return h.loop != nil && !h.closed
}

// Sample takes one sample now (tests stepping a clock call it).
func (h *History) Sample() {
	s := h.read(h.clock.Now())
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring[h.next] = s
	h.next = (h.next + 1) % len(h.ring)
	h.n = min(h.n+1, len(h.ring))
}

// Len returns the number of samples held.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// samples returns the samples, oldest first.
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

// gapAfter is the longest interval drawn as continuous: one missed tick is
// bridged, more is a gap.
func (h *History) gapAfter() time.Duration { return h.interval * 5 / 2 }

type point struct {
	at time.Time
	v  float64
}

type span struct{ from, to time.Time }

// bar is a count over the interval (from, to].
type bar struct {
	from, to time.Time
	v        float64
}

// continuous reports whether b follows a by more than 0 and at most gap.
func continuous(a, b sample, gap time.Duration) bool {
	d := b.at.Sub(a.at)
	return d > 0 && d <= gap
}

// counterDelta returns a counter's growth from a to b; a drop means a
// reset, as Prometheus's rate() assumes.
func counterDelta(a, b int64) int64 {
	if b < a {
		return b
	}
	return b - a
}

// rateRuns returns get's per-second rates, in continuous runs.
func rateRuns(ss []sample, gap time.Duration, get func(sample) int64) [][]point {
	return splitRuns(ss, gap, func(i int) (float64, bool) {
		if i == 0 || !continuous(ss[i-1], ss[i], gap) {
			return 0, false
		}
		return float64(counterDelta(get(ss[i-1]), get(ss[i]))) / ss[i].at.Sub(ss[i-1].at).Seconds(), true
	})
}

// deltaBars returns the growth of get over each continuous interval.
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

// gaugeRuns returns the values get reads, in runs of continuous samples.
func gaugeRuns(ss []sample, gap time.Duration, get func(sample) (float64, bool)) [][]point {
	return splitRuns(ss, gap, func(i int) (float64, bool) { return get(ss[i]) })
}

// splitRuns returns get's values, split at missing or discontinuous ones.
func splitRuns(ss []sample, gap time.Duration, get func(i int) (v float64, ok bool)) [][]point {
	var out [][]point
	var run []point
	for i, s := range ss {
		v, ok := get(i)
		if len(run) > 0 && (!ok || !continuous(ss[i-1], s, gap)) {
			out = append(out, run)
			run = nil
		}
		if ok {
			run = append(run, point{at: s.at, v: v})
		}
	}
	if len(run) > 0 {
		out = append(out, run)
	}
	return out
}

// gaps returns the stretches of [start, end] no continuous pair covers,
// including after a last sample older than gap.
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

// recent returns the heartbeat failures and lost leases in the window.
func (h *History) recent(now time.Time) (heartbeatFails, lost int64) {
	ss := h.samples()
	for len(ss) > 0 && ss[len(ss)-1].at.After(now) {
		ss = ss[:len(ss)-1]
	}
	start := now.Add(-h.window)
	return deltaInWindow(ss, start, func(s sample) int64 { return s.heartbeatFails }),
		deltaInWindow(ss, start, func(s sample) int64 { return s.lost })
}

func (p *Page) readSample(at time.Time) sample {
	st := p.cfg.Lease.Status()
	svc := p.cfg.Service
	out := sample{
		at:             at,
		snowflake:      svc.Issued(idgen.SourceSnowflake),
		segment:        svc.Issued(idgen.SourceSegment),
		fallback:       svc.Issued(idgen.SourceFallback),
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
	for _, ns := range p.cfg.Segments.Stats() {
		out.fetches += ns.Fetches
		out.fetchErrors += ns.FetchErrors
	}
	return out
}
