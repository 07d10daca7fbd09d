// Time: WaitFor waits, bounded, for something another goroutine or process
// does (a keeper to take a lease, a node to count a reload, a generator's
// callers to queue at the sequence cap); Manual is a fake clock that moves
// only when told to; and ProcessCPU reads the CPU time the test process has
// used, from which the benchmarks report CPU-ns/op and CPU%wall.

package testkit

import (
	"syscall"
	"testing"
	"time"
)

// maxPoll is the longest pause between two looks at a WaitFor condition.
// The first looks come sooner (from 100µs on, doubling), so that a
// condition that holds at once costs the test next to nothing, and a long
// wait, whose condition may be an HTTP request to a child process, does not
// keep a core busy.
const maxPoll = 10 * time.Millisecond

// WaitFor polls cond until it holds and fails tb, naming what it waited
// for, if cond still does not hold after within. The bound only keeps a
// broken build from hanging: it is far above what the condition needs.
func WaitFor(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	pause := 100 * time.Microsecond
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPoll)
	}
}

// ProcessCPU returns the CPU time (user + system) the test process has
// used, every thread included (the Go runtime's too), from getrusage(2):
// Linux derives it from the scheduler's exact run time, not from ticks.
func ProcessCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
