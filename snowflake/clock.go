package snowflake

import (
	"sync/atomic"
	"time"
)

// Clock is a Generator's time source; tests substitute a fake one.
type Clock interface {
	// Now returns the wall-clock time IDs carry; it may jump.
	Now() time.Time
	// Sleep pauses the calling goroutine for at least d.
	Sleep(d time.Duration)
}

// wallResync is how often the system clock re-reads the wall clock; in
// between it advances on the monotonic clock (one read instead of two).
const wallResync = 20 * time.Millisecond

// SystemClock returns a Clock on the operating system's clocks.
//
// Now sees a wall clock step within 20 ms (wallResync). Sleep never
// returns early and wakes soon after: runtime timers round short sleeps up
// to a millisecond or more, making a capped generator skip milliseconds,
// so on Linux it ends in nanosleep(2) (tens of µs late). It does not spin.
func SystemClock() Clock {
	c := &systemClock{}
	c.resync()
	return c
}

type systemClock struct {
	anchor atomic.Pointer[clockAnchor]
}

// clockAnchor is a reading of both clocks, wallNS in Unix ns.
type clockAnchor struct {
	t      time.Time
	wallNS int64
}

func (c *systemClock) Now() time.Time {
	a := c.anchor.Load()
	d := time.Since(a.t) // monotonic only: one clock read
	if d >= 0 && d < wallResync {
		return a.t.Add(d)
	}
	return c.resync().t
}

// unixNano is Now().UnixNano() without a time.Time, for the generator.
func (c *systemClock) unixNano() int64 {
	a := c.anchor.Load()
	d := time.Since(a.t)
	if d >= 0 && d < wallResync {
		return a.wallNS + int64(d)
	}
	return c.resync().wallNS
}

func (c *systemClock) resync() *clockAnchor {
	t := time.Now()
	a := &clockAnchor{t: t, wallNS: t.UnixNano()}
	c.anchor.Store(a)
	return a
}

func (c *systemClock) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	deadline := time.Now().Add(d)
	// Coarse part: the runtime timer, which may wake a millisecond late.
	if coarse := d - 2*time.Millisecond; coarse > 0 {
		time.Sleep(coarse)
	}
	// Fine part: precise sleeps, repeated if a signal ends one early.
	for {
		rem := time.Until(deadline)
		if rem <= 0 {
			return
		}
		preciseSleep(rem)
	}
}

// A ShiftedClock reads another clock moved by a changeable offset (tests
// set a node's clock back or forward with it).
type ShiftedClock struct {
	base   Clock
	offset atomic.Int64
}

// NewShiftedClock returns base moved by offset; a nil base is SystemClock.
func NewShiftedClock(base Clock, offset time.Duration) *ShiftedClock {
	if base == nil {
		base = SystemClock()
	}
	c := &ShiftedClock{base: base}
	c.offset.Store(int64(offset))
	return c
}

// Now returns the base clock's time plus the offset.
func (c *ShiftedClock) Now() time.Time {
	return c.base.Now().Add(time.Duration(c.offset.Load()))
}

// Sleep sleeps on the base clock.
func (c *ShiftedClock) Sleep(d time.Duration) { c.base.Sleep(d) }

// Shift adds d to the offset.
func (c *ShiftedClock) Shift(d time.Duration) { c.offset.Add(int64(d)) }

// Offset returns the offset now in force.
func (c *ShiftedClock) Offset() time.Duration { return time.Duration(c.offset.Load()) }
