package testkit

import (
	"sync"
	"time"
)

// Manual is a fake clock that moves only when the test advances it, or
// when the code under test sleeps on it: Sleep records the wait and moves
// the clock on at once, so that waits are measured, not spent. The tests
// of the snowflake generator, the client and idgen-loadtest's pacer give
// one to the code under test in place of the system clock. It is safe for
// concurrent use.
type Manual struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

// NewManual returns a Manual clock that reads t until it is moved.
func NewManual(t time.Time) *Manual { return &Manual{now: t} }

// Now returns the clock's time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d, backward for a negative d (a clock step
// the test makes).
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Sleep records a wait of d and moves the clock d on; like a real sleep, a
// wait of d <= 0 does not move it.
func (c *Manual) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	if d > 0 {
		c.now = c.now.Add(d)
	}
}

// Slept returns the waits Sleep recorded, in order.
func (c *Manual) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}
