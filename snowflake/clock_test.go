package snowflake

import (
	"sync"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
)

// fakeClock is a Clock that moves only when told to (Advance), or by
// Sleep, which it records (Slept).
type fakeClock = testkit.Manual

func newFakeClock(t time.Time) *fakeClock { return testkit.NewManual(t) }

// gateClock is a fake clock whose Sleep blocks until the test lets it
// return; it counts the sleeps and how many were under way at once.
type gateClock struct {
	*fakeClock
	release chan struct{}

	gmu     sync.Mutex
	in      int // sleeps under way
	maxIn   int
	entered int
}

func newGateClock(t time.Time) *gateClock {
	return &gateClock{fakeClock: newFakeClock(t), release: make(chan struct{})}
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
