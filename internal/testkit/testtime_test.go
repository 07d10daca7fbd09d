package testkit

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	var looks atomic.Int32
	WaitFor(t, 10*time.Second, "the third look", func() bool { return looks.Add(1) >= 3 })
	if got := looks.Load(); got != 3 {
		t.Errorf("got %d looks, want 3", got)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, as testing.T's does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestWaitForFailsAfterTheBound(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		WaitFor(rec, 20*time.Millisecond, "never", func() bool { return false })
	}()
	<-done
	if want := "never: not within 20ms"; rec.msg != want {
		t.Errorf("got failure %q, want %q", rec.msg, want)
	}
}

func TestProcessCPUGrows(t *testing.T) {
	before := ProcessCPU(t)
	for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
	}
	if after := ProcessCPU(t); after <= before {
		t.Errorf("CPU time after 20ms of spinning: got %v, not above %v", after, before)
	}
}

func TestManual(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := NewManual(t0)
	c.Advance(time.Second)
	c.Sleep(2 * time.Second)
	c.Sleep(-time.Second) // recorded, but the clock does not go back
	c.Advance(-500 * time.Millisecond)
	if got, want := c.Now(), t0.Add(2500*time.Millisecond); !got.Equal(want) {
		t.Errorf("Now: got %v, want %v", got, want)
	}
	if got := c.Slept(); !slices.Equal(got, []time.Duration{2 * time.Second, -time.Second}) {
		t.Errorf("Slept: got %v, want [2s -1s]", got)
	}
}
