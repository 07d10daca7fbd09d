// Package backoff is idgen's one retry delay: capped exponential growth with
// jitter, shared by the lease keeper, the segment allocator, the SQL stores'
// transaction retries and the Go client.
//
// A Backoff starts at Min. Each call to Next returns a delay between half and
// all of the current bound ("equal jitter": never shorter than half, so a
// retry is not fired at once, and spread over the other half, so retries of
// many callers that failed together do not stay in step), then doubles the
// bound up to Max. Reset starts again from Min after a success.
//
// A Backoff is not safe for concurrent use: each retry loop owns its own.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a capped exponential delay with jitter. Build it with New.
type Backoff struct {
	min, max, cur time.Duration
	// rand returns a uniform value in [0, n]; a seam for tests.
	rand func(n int64) int64
}

// New returns a Backoff from lo up to hi. lo below 1ms is raised to 1ms, and
// hi below lo is raised to lo.
func New(lo, hi time.Duration) *Backoff {
	lo = max(lo, time.Millisecond)
	return &Backoff{min: lo, max: max(hi, lo), cur: lo, rand: func(n int64) int64 { return rand.Int64N(n + 1) }}
}

// Next returns the next delay, between half and all of the current bound,
// and doubles the bound up to the maximum.
func (b *Backoff) Next() time.Duration {
	half := b.cur / 2
	d := half + time.Duration(b.rand(int64(b.cur-half)))
	b.cur = min(b.cur*2, b.max)
	return d
}

// Reset starts the delays again from the minimum.
func (b *Backoff) Reset() { b.cur = b.min }

// Bound returns the current bound: the most the next delay can be.
func (b *Backoff) Bound() time.Duration { return b.cur }

// Wait sleeps for Next() or until ctx ends, and returns ctx.Err() in the
// latter case.
func (b *Backoff) Wait(ctx context.Context) error {
	return Sleep(ctx, b.Next())
}

// Sleep waits for d or until ctx ends, and returns ctx.Err() in the latter
// case. A d of zero or less returns at once (nil unless ctx has ended).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
