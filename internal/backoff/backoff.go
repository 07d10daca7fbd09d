// Package backoff is idgen's one retry delay: capped exponential growth
// with equal jitter (each delay between half and all of the bound, which
// doubles up to the maximum). Each retry loop owns its Backoff.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a capped exponential delay with jitter. Build it with New.
type Backoff struct {
	min, max, cur time.Duration
	rand          func(n int64) int64 // uniform in [0, n]; a seam for tests
}

// New returns a Backoff from lo up to hi; lo is at least 1ms, hi at least lo.
func New(lo, hi time.Duration) *Backoff {
	lo = max(lo, time.Millisecond)
	return &Backoff{min: lo, max: max(hi, lo), cur: lo, rand: func(n int64) int64 { return rand.Int64N(n + 1) }}
}

// Next returns the next delay and doubles the bound, up to the maximum.
func (b *Backoff) Next() time.Duration {
	half := b.cur / 2
	d := half + time.Duration(b.rand(int64(b.cur-half)))
	b.cur = min(b.cur*2, b.max)
	return d
}

// Reset starts again from the minimum, after a success.
func (b *Backoff) Reset() { b.cur = b.min }

// Bound returns the most the next delay can be.
func (b *Backoff) Bound() time.Duration { return b.cur }

// Wait sleeps for Next(), or until ctx ends (returning ctx.Err()).
func (b *Backoff) Wait(ctx context.Context) error { return Sleep(ctx, b.Next()) }

// Sleep waits for d, or until ctx ends (returning ctx.Err()).
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
