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

// Store time.
//
// etcd has no now(): leases expire on the leader's monotonic clock, and no
// request returns a wall-clock time. The keeper still needs a time that is
// not its own node's: it measures its clock's offset against it, and every
// ceiling it proposes is bounded by it. The etcd store's time is the etcd
// members' wall clocks, read from the Date header of their HTTP /version
// endpoint and combined so that no single member, and no single idgen
// node, can move it far:
//
//   - Each reading says that the member's clock showed some instant of
//     [Date, Date+1s) while the request was out, so at the moment the
//     response arrived it lies in [Date, Date+1s+round trip). The interval is
//     kept relative to the node's monotonic clock and ages with it.
//   - The members agree on the instants that lie in the intervals of a
//     majority of the members the DSN names (Marzullo's intersection): one
//     member whose clock is wrong cannot move it; when no majority agrees,
//     store time is unavailable and lease calls fail.
//   - Store time is the node's clock clamped into that window: a node whose
//     clock is within the window (about one second wide) sees its own time,
//     one whose clock is off sees the edge of the window, and its offset is
//     reported by the keeper as the distance to it.
//
// Readings are refreshed at most every timeRefresh (at the next call when
// they do not agree) and used for at most timeMaxAge.
const (
	timeRefresh     = 5 * time.Second
	timeMaxAge      = 60 * time.Second
	timeReadTimeout = 2 * time.Second
	dateResolution  = time.Second
)

// ErrNoStoreTime is returned by lease calls when the etcd members' clocks
// cannot be read or do not agree: without a time reference the store cannot
// bound ceilings nor let the keeper check its clock.
var ErrNoStoreTime = errors.New("no store time: the etcd members' clocks could not be read or disagree")

// interval is what one reading says of a member's wall clock: at the
// node's monotonic instant zero (timeSource.monoBase) it showed a time in
// [lo, hi].
type interval struct{ lo, hi time.Time }

// reading is one member's last interval and when it was taken.
type reading struct {
	iv interval
	at time.Duration // node monotonic time of the response
}

// timeSource reads and combines the members' clocks. It is safe for
// concurrent use; mu serialises refreshes so that concurrent calls share one.
type timeSource struct {
	urls []string
	need int // members whose intervals must agree: a majority of urls
	// read returns the Date a member's URL answered with; a seam for tests.
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

// cachedWindow is window without a refresh: it never waits for the members,
// and reports false when the readings it has are too few, too old or
// disagree.
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

// freshLocked returns the intervals of the readings no older than
// timeMaxAge at now (mono time), in no particular order.
func (ts *timeSource) freshLocked(now time.Duration) []interval {
	var ivs []interval
	for _, r := range ts.readings {
		if now-r.at <= timeMaxAge {
			ivs = append(ivs, r.iv)
		}
	}
	return ivs
}

// refreshLocked reads every member's clock, concurrently, until the fresh
// readings of a majority agree (or every member answered, or
// timeReadTimeout passed): a member that does not answer, paused or cut
// off, holds up no lease call once the others have. Failed or unfinished
// reads keep the member's previous reading until it is too old. Readers
// still out when it returns are cancelled; close waits for them.
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
			// The member's clock showed [date, date+1s) at some instant of
			// [sent, got]; at got it lies in [date, date+1s+(got-sent)].
			// Shift both to monotonic instant zero.
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

// close waits for the readers that refreshLocked left behind, all of them
// cancelled already.
func (ts *timeSource) close() { ts.readers.Wait() }

// agree returns the span of instants that lie in at least need of the
// intervals (from the first such instant to the last), and false when no
// instant does. With need a majority of the members, an instant in the span
// lies within the interval of a member that agrees with a majority: a
// minority of wrong clocks can widen the span only up to the intervals of
// the members that are right.
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

// clamp returns t moved into [lo, hi].
func clamp(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if t.After(hi) {
		return hi
	}
	return t
}
