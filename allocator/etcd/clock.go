package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Store time. etcd has no now(), but the keeper needs a reference to
// measure its clock against and to bound ceilings. Store time is the
// members' wall clocks, read from the Date header of their /version:
//
//   - A reading puts the member's clock in [Date, Date+1s+round trip) at
//     the response, kept relative to the node's monotonic clock.
//   - The window is the instants a majority of the DSN's members agree on
//     (Marzullo's intersection); without a majority lease calls fail.
//   - Store time is the node's clock clamped into the window.
//
// Readings are refreshed at most every timeRefresh and used for at most
// timeMaxAge.
const (
	timeRefresh     = 5 * time.Second
	timeMaxAge      = 60 * time.Second
	timeReadTimeout = 2 * time.Second
	dateResolution  = time.Second
)

// ErrNoStoreTime is returned by lease calls when the members' clocks cannot
// be read or disagree.
var ErrNoStoreTime = errors.New("no store time: the etcd members' clocks could not be read or disagree")

// interval says a member's clock showed a time in [lo, hi] at the node's
// monotonic instant zero.
type interval struct{ lo, hi time.Time }

// reading is one member's last interval and when it was taken.
type reading struct {
	iv interval
	at time.Duration // node monotonic time of the response
}

// timeSource reads and combines the members' clocks; mu serializes
// refreshes so concurrent calls share one.
type timeSource struct {
	urls []string
	need int // members whose intervals must agree: a majority of urls
	// read returns a member's Date (a seam for tests).
	read func(ctx context.Context, url string) (time.Time, error)
	mono func() time.Duration // node monotonic time since monoBase; a seam for tests

	readers sync.WaitGroup // member reads still out

	mu        sync.Mutex
	readings  map[string]reading
	refreshed time.Duration // mono time of the last refresh; -1 before the first
	lastErr   error
}

// newTimeSource reads member time from urls with client.
func newTimeSource(urls []string, client *http.Client) *timeSource {
	base := time.Now()
	return &timeSource{
		urls:      urls,
		need:      len(urls)/2 + 1,
		read:      func(ctx context.Context, url string) (time.Time, error) { return readDate(ctx, client, url) },
		mono:      func() time.Duration { return time.Since(base) },
		readings:  map[string]reading{},
		refreshed: -1,
	}
}

// readDate returns the Date header of a GET of url.
func readDate(ctx context.Context, client *http.Client, url string) (time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return time.Time{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return time.Time{}, err
	}
	_ = resp.Body.Close()
	d := resp.Header.Get("Date")
	if d == "" {
		return time.Time{}, fmt.Errorf("%s: no Date header", url)
	}
	return http.ParseTime(d)
}

// window returns the instants the members agree their clocks show now.
func (ts *timeSource) window(ctx context.Context) (lo, hi time.Time, err error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	now := ts.mono()
	if ts.refreshed < 0 || now-ts.refreshed >= timeRefresh {
		ts.refreshLocked(ctx)
		now = ts.mono()
	}
	ivs := ts.freshLocked(now)
	l, h, ok := agree(ivs, ts.need)
	if !ok {
		ts.refreshed = -1 // read again at the next call
		cause := ts.lastErr
		if cause == nil {
			cause = fmt.Errorf("%d of %d readings, no %d agree", len(ivs), len(ts.urls), ts.need)
		}
		return time.Time{}, time.Time{}, fmt.Errorf("%w (%v)", ErrNoStoreTime, cause) //nolint:errorlint // the cause is detail: callers match ErrNoStoreTime, not the reading's error
	}
	return l.Add(now), h.Add(now), nil
}

// cachedWindow is window without a refresh; false when the readings are
// too few, too old or disagree.
func (ts *timeSource) cachedWindow() (lo, hi time.Time, ok bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	now := ts.mono()
	l, h, ok := agree(ts.freshLocked(now), ts.need)
	if !ok {
		return time.Time{}, time.Time{}, false
	}
	return l.Add(now), h.Add(now), true
}

// freshLocked returns the readings no older than timeMaxAge at now (mono).
func (ts *timeSource) freshLocked(now time.Duration) []interval {
	var ivs []interval
	for _, r := range ts.readings {
		if now-r.at <= timeMaxAge {
			ivs = append(ivs, r.iv)
		}
	}
	return ivs
}

// refreshLocked reads every member's clock concurrently until a majority's
// fresh readings agree, all answered, or timeReadTimeout passed, so one
// stalled member holds up nothing. Failed reads keep the previous reading;
// readers still out are cancelled, and close waits for them.
func (ts *timeSource) refreshLocked(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, timeReadTimeout)
	defer cancel()
	type result struct {
		url string
		r   reading
		err error
	}
	results := make(chan result, len(ts.urls))
	for _, u := range ts.urls {
		ts.readers.Add(1)
		go func() {
			defer ts.readers.Done()
			sent := ts.mono()
			date, err := ts.read(ctx, u)
			got := ts.mono()
			// [date, date+1s) at some instant of [sent, got], at mono instant zero.
			iv := interval{lo: date.Add(-got), hi: date.Add(dateResolution + (got - sent) - got)}
			results <- result{u, reading{iv: iv, at: got}, err}
		}()
	}
	ts.lastErr = nil
	var (
		failed []error
		fresh  []interval
	)
	for range ts.urls {
		res := <-results
		if res.err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", res.url, res.err))
			continue
		}
		ts.readings[res.url] = res.r
		if fresh = append(fresh, res.r.iv); len(fresh) >= ts.need {
			if _, _, ok := agree(fresh, ts.need); ok {
				break
			}
		}
	}
	if len(failed) > 0 {
		ts.lastErr = errors.Join(failed...)
	}
	ts.refreshed = ts.mono()
}

// close waits for the cancelled readers refreshLocked left behind.
func (ts *timeSource) close() { ts.readers.Wait() }

// agree returns the span of instants in at least need intervals, false if
// none. With need a majority, wrong clocks in a minority can widen the span
// only up to the right members' intervals.
func agree(ivs []interval, need int) (lo, hi time.Time, ok bool) {
	if need < 1 || len(ivs) < need {
		return time.Time{}, time.Time{}, false
	}
	type edge struct {
		t     time.Time
		delta int // +1 an interval opens, -1 one closes
	}
	edges := make([]edge, 0, 2*len(ivs))
	for _, iv := range ivs {
		edges = append(edges, edge{iv.lo, +1}, edge{iv.hi, -1})
	}
	// Closed intervals: at equal instants, openings come first.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.t.Compare(b.t); c != 0 {
			return c
		}
		return b.delta - a.delta
	})
	n := 0
	for _, e := range edges {
		if e.delta < 0 && n >= need {
			hi = e.t
		}
		n += e.delta
		if e.delta > 0 && n >= need && !ok {
			lo, ok = e.t, true
		}
	}
	return lo, hi, ok
}

func clamp(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if t.After(hi) {
		return hi
	}
	return t
}
