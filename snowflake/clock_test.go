package snowflake

import (
	"sync"
	"time"
)

// fakeClock is a Clock that moves only when told to, or by Sleep.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	if d > 0 {
		c.t = c.t.Add(d)
	}
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// gateClock is a fake clock whose Sleep blocks until the test lets it
// return; it counts the sleeps and how many were under way at once.
type gateClock struct {
	fakeClock
	release chan struct{}

	gmu     sync.Mutex
	in      int // sleeps under way
	maxIn   int
	entered int
}

func newGateClock(t time.Time) *gateClock {
	return &gateClock{fakeClock: fakeClock{t: t}, release: make(chan struct{})}
}

func (c *gateClock) Sleep(d time.Duration) {
	c.gmu.Lock()
	c.in++
	c.entered++
	c.maxIn = max(c.maxIn, c.in)
	c.gmu.Unlock()
	<-c.release
	c.fakeClock.Sleep(d)
	c.gmu.Lock()
	c.in--
	c.gmu.Unlock()
}

// counts returns how many sleeps began, how many are under way and the
// most that were under way at once.
func (c *gateClock) counts() (entered, in, maxIn int) {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	return c.entered, c.in, c.maxIn
}
