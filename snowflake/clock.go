package snowflake

import (
	"sync/atomic"
	"time"
)

// Clock is the time source of a Generator. Tests substitute a fake clock to
// jump time backwards and forwards; the default is SystemClock.
type Clock interface {
	// Now returns the current wall-clock time. IDs carry it, so it may jump
	// when the system clock is stepped.
	Now() time.Time
	// Sleep pauses the calling goroutine for at least d.
	Sleep(d time.Duration)
}

// wallResync is how often the system clock re-reads the wall clock; in
// between it advances on the monotonic clock, which costs one clock read
// instead of two.
const wallResync = 20 * time.Millisecond

// SystemClock returns a Clock on the operating system's clocks.
//
// Now reads the monotonic clock and re-reads the wall clock every 20 ms, so
// a step of the wall clock shows within 20 ms and a reading costs one clock
// read instead of time.Now's two. Sleep never returns before its deadline
// and wakes soon after it: the Go runtime's timers round a short sleep up to
// a millisecond or more, which would make a generator at its sequence cap
// skip whole milliseconds, so on Linux Sleep ends in nanosleep(2), which
// wakes tens of microseconds late. It does not spin: a generator loses
// nothing by waking a little late, since the IDs of a millisecond take far
// less than a millisecond to issue.
func SystemClock() Clock {
	c := &systemClock{}
	c.resync()
	return c
}

type systemClock struct {
	anchor atomic.Pointer[clockAnchor]
}

// clockAnchor is a reading of both clocks: t carries the wall and the
// monotonic reading, wallNS the wall reading in Unix nanoseconds.
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

// unixNano is Now().UnixNano() without building a time.Time; the generator
// calls it directly when it runs on the system clock.
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
	// Fine part: precise sleeps aimed at the deadline, again if one ends
	// early (a signal interrupts nanosleep).
	for {
		rem := time.Until(deadline)
		if rem <= 0 {
			return
		}
		preciseSleep(rem)
	}
}

// A ShiftedClock reads another clock moved by an offset that can change at
// run time. idgen's tests use it to set a node's clock back or forward.
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
